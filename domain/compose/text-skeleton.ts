import { randomBytes } from 'node:crypto';
import { Parser } from 'htmlparser2';
import { TokenKind, type TagToken, type Template } from 'liquidjs';
import { compileTextSkeleton, htmlToText, liquidTokens, outputFilters, renderTextSkeleton } from '../rendering/render';

/**
 * The plain-text part without running html-to-text for every recipient (issue 13).
 *
 * Once per content: every Liquid tag and output of the (`??`-expanded) body becomes a placeholder word, html-to-text
 * converts that HTML once, and the Liquid goes back where the placeholders landed: outputs as `{{ expr | mw_text }}`
 * (the value as html-to-text reads it back from the escaped HTML), tags as they were. Per recipient the composer
 * renders that text template with the body's variables (renderTextSkeleton) and tidies the blanks a tag leaves.
 *
 * What differs from converting each rendered body: html-to-text wraps lines at 80 columns by the length of the
 * placeholder, not of the value, so a line holding a value breaks elsewhere (or not at all); the words, their order,
 * paragraphs, links (`text [url]`) and headings are the same. A text part's line breaks are presentation (mail
 * clients reflow plain text), and converting 16-25 KB of MJML markup per recipient was the largest part of a campaign's
 * per-recipient CPU (BENCHMARKS.md › Text-part skeleton).
 *
 * A body gets no skeleton (null: the composer converts each rendered body, as before) unless it is safe by
 * construction:
 * - only tags that select, repeat or assign (no raw, comment, capture, cycle, echo, increment...), no `| raw` output;
 * - Liquid only in text (not in script, style or pre) and in attribute values html-to-text does not read, or in a
 *   link's href; never in a tag or attribute name;
 * - each if/unless/case/for opens and closes (and branches) at the same element nesting, so the HTML it keeps or
 *   repeats is whole elements;
 * - after html-to-text every tag placeholder is there exactly once, no output's twice (an output may vanish: it was in
 *   content html-to-text leaves out, such as the head or a hidden preview, and an escaped output is pure), no
 *   placeholder of a link is out of its place, and the result parses.
 */

export interface TextSkeleton {
  /** @internal the parsed text template; null for a body without Liquid, whose text is `fixed` */
  readonly templates: Template[] | null;
  /** @internal the text of a body without Liquid (the same for every recipient) */
  readonly fixed: string;
  /** @internal tags may leave blanks to tidy (not done with `<pre>` in the body: its blanks are content) */
  readonly tidy: boolean;
}

/** Tags that only select, repeat or assign: they print nothing, so a placeholder standing for them can go. */
const SKELETON_TAGS = new Set(['if', 'elsif', 'else', 'endif', 'unless', 'endunless', 'case', 'when', 'endcase', 'for', 'endfor', 'break', 'continue', 'assign']);
const OPENERS = new Set(['if', 'unless', 'case', 'for']);
const BRANCHES = new Set(['elsif', 'else', 'when']);
const CLOSERS = new Set(['endif', 'endunless', 'endcase', 'endfor']);
/** Attributes html-to-text reads with our options (besides a link's href, handled apart): a value there changes the layout. */
const READ_ATTRIBUTES = new Set(['style', 'start', 'type', 'colspan', 'rowspan', 'value']);
/** Elements whose text html-to-text does not print as words: skipped (script, style) or kept with its blanks (pre). */
const NO_PLACEHOLDER = new Set(['script', 'style', 'pre']);
/**
 * Raw text htmlparser2 does not decode: an escaped value would print as entities. Fine in the head (html-to-text reads
 * only the body), so an output there is refused only if it reaches the text.
 */
const UNDECODED = new Set(['title', 'textarea', 'xmp']);

/** Lowercase letters only, so a placeholder html-to-text uppercased (a heading) is told apart. */
const NONCE = Array.from(randomBytes(6), (b) => String.fromCharCode(97 + (b % 26))).join('');
const PREFIX = `zq${NONCE}`;
/** `zq<nonce>` + kind + number + `q`: kinds '' (Liquid token), s/e (link text start/end), h/g (href start/end). */
const PLACEHOLDER = new RegExp(`${PREFIX}([sehg]?)(\\d+)q`, 'gi');

interface Piece {
  readonly tag: boolean;
  /** An output in raw text htmlparser2 does not decode (see UNDECODED); set by markLinks. */
  undecoded?: boolean;
  readonly content: string;
  /** Tags: the tag name. */
  readonly name: string;
  /** Outputs: the HTML engine does not escape it (its last filter is escape, escape_once...): an HTML fragment. */
  readonly html: boolean;
}

/** The text-part skeleton of an expanded HTML body, or null when it does not qualify (see above). */
export function textSkeletonOf(expanded: string): TextSkeleton | null {
  if (expanded.toLowerCase().includes(PREFIX)) return null;
  const pieces: Piece[] = [];
  let html = '';
  for (const token of liquidTokens(expanded)) {
    if (token.kind === TokenKind.HTML) {
      // getContent() is the HTML as Liquid emits it: blanks trimmed by `{{-`/`-%}}` are gone here too.
      html += (token as unknown as { getContent(): string }).getContent();
      continue;
    }
    const delimited = token as TagToken;
    if (token.kind === TokenKind.Tag) {
      if (!SKELETON_TAGS.has(delimited.name)) return null;
      pieces.push({ tag: true, content: delimited.content, name: delimited.name, html: false });
    } else {
      const filters = outputFilters(delimited.content);
      // `| raw` prints markup from the data: it could add links, blocks or hide the rest.
      if (!filters || filters.names.includes('raw')) return null;
      pieces.push({ tag: false, content: delimited.content, name: '', html: !filters.escaped });
    }
    html += `${PREFIX}${pieces.length - 1}q`;
  }
  if (pieces.length === 0) return { templates: null, fixed: htmlToText(html), tidy: false };
  const marked = markLinks(html, pieces);
  if (marked === null) return null;
  const source = restore(htmlToText(marked), pieces);
  if (source === null) return null;
  const templates = compileTextSkeleton(source);
  if (!templates) return null;
  return { templates, fixed: '', tidy: pieces.some((p) => p.tag) && !/<pre[\s>]/i.test(html) };
}

/**
 * Checks where the placeholders stand in the HTML and marks the links html-to-text formats with a value (Liquid in
 * href or text): their text and href get start/end placeholders, so restore can hand both to `mw_link`. Null if a
 * placeholder stands somewhere this cannot follow.
 */
function markLinks(html: string, pieces: Piece[]): string | null {
  const has = (s: string) => s.toLowerCase().includes(PREFIX);
  const stack: string[] = [];
  /** Per tag placeholder: the element nesting it stands at. */
  const nesting = new Map<number, string>();
  const inserts: { at: number; text: string }[] = [];
  let link: { openEnd: number; hrefStart: number; hrefEnd: number; dynamicHref: boolean } | null = null;
  let links = 0;
  let bad = false;
  const note = (text: string, where: string) => {
    for (const m of text.matchAll(PLACEHOLDER)) {
      const piece = pieces[Number(m[2])];
      if (piece?.tag) nesting.set(Number(m[2]), where);
    }
  };
  const parser: Parser = new Parser(
    {
      onopentag(name, attribs) {
        const start = parser.startIndex;
        const end = parser.endIndex;
        if (has(name)) bad = true;
        for (const [attribute, value] of Object.entries(attribs)) {
          if (has(attribute)) bad = true;
          if (!has(value)) continue;
          if (READ_ATTRIBUTES.has(attribute)) bad = true;
          // Tags in another attribute vanish with it, which the count after html-to-text refuses.
          note(value, `@${start}`);
        }
        if (name === 'a') {
          if (link) bad = true;
          const href = attribs.href;
          if (href) {
            const tagText = html.slice(start, end + 1);
            const m = /[\s"'/]href\s*=\s*(["'])/i.exec(tagText);
            const hrefStart = m ? start + m.index + m[0].length : -1;
            // Unquoted: no place for the href's start and end placeholders, which a value in href or text needs.
            link = { openEnd: end + 1, hrefStart, hrefEnd: m ? html.indexOf(m[1]!, hrefStart) : -1, dynamicHref: has(href) };
          }
        }
        stack.push(name);
      },
      onclosetag(name, implied) {
        if (name === 'a' && link) {
          const closeStart = parser.startIndex;
          if (link.dynamicHref || has(html.slice(link.openEnd, closeStart))) {
            if (implied || link.hrefStart < 0) bad = true;
            const k = links++;
            inserts.push(
              { at: link.hrefStart, text: `${PREFIX}h${k}q` },
              { at: link.hrefEnd, text: `${PREFIX}g${k}q` },
              { at: link.openEnd, text: `${PREFIX}s${k}q` },
              { at: closeStart, text: `${PREFIX}e${k}q` },
            );
          }
          link = null;
        }
        const at = stack.lastIndexOf(name);
        if (at >= 0) stack.length = at;
      },
      ontext(text) {
        if (!has(text)) return;
        if (stack.some((n) => NO_PLACEHOLDER.has(n))) bad = true;
        if (stack.some((n) => UNDECODED.has(n))) for (const m of text.matchAll(PLACEHOLDER)) if (pieces[Number(m[2])]) pieces[Number(m[2])]!.undecoded = true;
        note(text, stack.join('>'));
      },
    },
    { decodeEntities: true },
  );
  parser.end(html);
  if (bad) return null;

  // Each if/unless/case/for keeps or repeats whole elements: all its parts stand at one nesting.
  const open: string[] = [];
  for (const [i, piece] of pieces.entries()) {
    if (!piece.tag) continue;
    const where = nesting.get(i);
    if (where === undefined) return null;
    if (OPENERS.has(piece.name)) open.push(where);
    else if (BRANCHES.has(piece.name) || CLOSERS.has(piece.name)) {
      if (open[open.length - 1] !== where) return null;
      if (CLOSERS.has(piece.name)) open.pop();
    }
  }
  if (open.length > 0) return null;

  inserts.sort((a, b) => a.at - b.at);
  let marked = '';
  let pos = 0;
  for (const { at, text } of inserts) {
    marked += html.slice(pos, at) + text;
    pos = at;
  }
  return marked + html.slice(pos);
}

/** The text template: html-to-text's output with the Liquid back in place of its placeholders; null if one is off. */
function restore(text: string, pieces: readonly Piece[]): string | null {
  // A line holding only tags goes, and the blank lines around it merge as html-to-text merges block breaks.
  const tagOnly = new RegExp(`(^|\\n+)[ \\t]*((?:${PREFIX}\\d+q[ \\t]*)+)(?:\\n+|$)`, 'gi');
  text = text.replace(tagOnly, (all: string, before: string, tags: string, offset: number) => {
    if (![...tags.matchAll(PLACEHOLDER)].every((m) => pieces[Number(m[2])]?.tag)) return all;
    const after = all.length - all.trimEnd().length;
    // At the very start html-to-text prints no break; at the end the trailing breaks are trimmed per recipient.
    return (offset === 0 ? '' : '\n'.repeat(Math.max(before.length, after))) + tags.replace(/[ \t]+/g, '');
  });
  const seen = new Array<number>(pieces.length).fill(0);
  let out = '';
  let pos = 0;
  /** The link being restored (its placeholders come as s, e, h, g, one link at a time), and whether in its href. */
  let inLink = -1;
  let inHref = -1;
  /** Where the current link's text or href starts in `out`, and how mw_link gets the link's text. */
  let linkStart = 0;
  let linkArgument = '';
  const linkState = new Map<number, 's' | 'e' | 'h' | 'g'>();
  const staticText = (s: string) => (s.includes('{{') || s.includes('{%') ? null : s);
  for (const m of text.matchAll(PLACEHOLDER)) {
    const between = staticText(text.slice(pos, m.index));
    if (between === null) return null;
    pos = m.index + m[0].length;
    const kind = m[1]!.toLowerCase();
    const n = Number(m[2]);
    const upper = m[0] !== m[0].toLowerCase();
    if (kind === '') {
      const piece = pieces[n];
      if (!piece || ++seen[n]! > 1 || piece.undecoded) return null;
      if (piece.tag) {
        // A tag prints nothing: the blank it stood between is one, not two.
        if (/ $/.test(out + between) && text[pos] === ' ') pos++;
        out += `${between}{% ${piece.content} %}`;
        continue;
      }
      if (inHref >= 0 && upper) return null;
      const filter = piece.html ? (inHref >= 0 ? 'mw_html: true' : 'mw_html') : inHref >= 0 ? 'mw_attr' : 'mw_text';
      out += `${between}{{ ${piece.content} | ${filter}${upper ? ' | upcase' : ''} }}`;
      continue;
    }
    if (upper) return null;
    const state = linkState.get(n);
    if (kind !== 's' && inLink !== n) return null;
    if (kind === 's' && state === undefined && inLink < 0) {
      inLink = n;
      out += between;
      linkStart = out.length;
    } else if (kind === 'e' && state === 's') {
      const [print, argument] = linkText(out.slice(linkStart) + between, n);
      out = out.slice(0, linkStart) + print;
      linkArgument = argument;
    } else if (kind === 'h' && state === 'e' && /^\s*\[$/.test(between)) {
      linkStart = out.length;
      inHref = n;
    } else if (kind === 'g' && state === 'h' && text[pos] === ']') {
      out = out.slice(0, linkStart) + linkSuffix(out.slice(linkStart) + between, linkArgument, n);
      pos++;
      inHref = -1;
      inLink = -1;
    } else return null;
    linkState.set(n, kind as 's' | 'e' | 'h' | 'g');
  }
  if ([...linkState.values()].some((s) => s !== 'g')) return null;
  if (pieces.some((p, i) => p.tag && seen[i] !== 1)) return null;
  const rest = staticText(text.slice(pos));
  if (rest === null) return null;
  return out + rest;
}

/** A Liquid string literal for `text`, or null when it holds both quotes (liquidjs strings have no escapes). */
function literal(text: string): string | null {
  // A delimiter in a string would end the tag or output early.
  if (text.includes('}}') || text.includes('%}')) return null;
  if (!text.includes('"')) return `"${text}"`;
  return text.includes("'") ? null : `'${text}'`;
}

/** The one output `{{ expr }}` that is all of `segment` but static text around it, or null. */
function soleOutput(segment: string): { before: string; expr: string; after: string } | null {
  const open = segment.indexOf('{{');
  if (open < 0 || segment.indexOf('{{', open + 2) >= 0 || segment.includes('{%')) return null;
  const close = segment.lastIndexOf('}}');
  return { before: segment.slice(0, open), expr: segment.slice(open + 2, close).trim(), after: segment.slice(close + 2) };
}

/** `| prepend: ... | append: ...` for the static text around a sole output; null if one cannot be a literal. */
function aroundFilters(sole: { before: string; after: string }): string | null {
  const before = sole.before ? literal(sole.before) : '';
  const after = sole.after ? literal(sole.after) : '';
  if (before === null || after === null) return null;
  return `${before ? ` | prepend: ${before}` : ''}${after ? ` | append: ${after}` : ''}`;
}

/**
 * A link's restored text: what prints it, and the mw_link argument that names it. A static text is a literal, one
 * output is assigned once, anything else is captured (the slow way: liquidjs' capture renders into a new buffer).
 */
function linkText(segment: string, n: number): [print: string, argument: string] {
  const name = `${PREFIX}t${n}`;
  const quoted = segment.includes('{{') || segment.includes('{%') ? null : literal(segment);
  if (quoted) return [segment, quoted];
  const sole = soleOutput(segment);
  const around = sole && aroundFilters(sole);
  if (sole && around !== null) return [`{% assign ${name} = ${sole.expr}${around} %}{{ ${name} }}`, name];
  return [`{% capture ${name} %}${segment}{% endcapture %}{{ ${name} }}`, name];
}

/** A link's ` [href]` (or nothing, or the bare href) per recipient: html-to-text's rule (mw_link) on the restored href. */
function linkSuffix(segment: string, text: string, n: number): string {
  const quoted = segment.includes('{{') || segment.includes('{%') ? null : literal(segment);
  if (quoted) return `{{ ${quoted} | mw_link: ${text} }}`;
  const sole = soleOutput(segment);
  const around = sole && aroundFilters(sole);
  if (sole && around !== null) return `{{ ${sole.expr}${around} | mw_link: ${text} }}`;
  const name = `${PREFIX}u${n}`;
  return `{% capture ${name} %}${segment}{% endcapture %}{{ ${name} | mw_link: ${text} }}`;
}

/** One recipient's text part from a skeleton: rendered, then the blanks left where tags printed nothing tidied. */
export function renderTextPart(skeleton: TextSkeleton, variables: Record<string, unknown>): string {
  if (!skeleton.templates) return skeleton.fixed;
  const text = renderTextSkeleton(skeleton.templates, variables);
  if (!skeleton.tidy) return trimNewlines(text);
  return tidyText(text);
}

/**
 * html-to-text never ends a line with blanks nor puts two between words; a tag that printed nothing can leave them.
 * The same as `s.replace(/[ \t]+$/gm, '').replace(/(\S) {2,}(?=\S)/g, '$1 ').replace(/^\n+|\n+$/g, '')` (unit test).
 */
export function tidyText(s: string): string {
  return trimNewlines(collapseBlankRuns(trimLineEnds(s)));
}

/**
 * `s.replace(/[ \t]+$/gm, '')`: blanks before each line end and at the end go. A text of spaces and line feeds only
 * (html-to-text's) is done with a native search for each ` \n`, where the regular expression tries every blank of the
 * text (the largest part of tidying a campaign message's text part); anything else by the regular expression.
 */
function trimLineEnds(s: string): string {
  if (s.includes('\t') || s.includes('\r') || s.includes('\u2028') || s.includes('\u2029')) return s.replace(/[ \t]+$/gm, '');
  let out = '';
  let kept = 0;
  // Each line feed, then the blank before it: a search for ` \n` stops at every space of the text (most characters).
  for (let nl = s.indexOf('\n'); nl >= 0; nl = s.indexOf('\n', nl + 1)) {
    if (nl === 0 || s.charCodeAt(nl - 1) !== 32) continue;
    let from = nl - 1;
    while (from > kept && s.charCodeAt(from - 1) === 32) from--;
    out += s.slice(kept, from);
    kept = nl;
  }
  let end = s.length;
  while (end > kept && s.charCodeAt(end - 1) === 32) end--;
  return kept === 0 && end === s.length ? s : out + s.slice(kept, end);
}

const SPACE = /\s/;
const nonSpace = (s: string, i: number) => i >= 0 && i < s.length && !SPACE.test(s[i]!);

/** Runs of two or more spaces (a regular expression finds them faster than a search for two spaces, which stops at every space). */
const SPACE_RUNS = / {2,}/g;

/** `s.replace(/(\S) {2,}(?=\S)/g, '$1 ')`: a run of two or more spaces between two non-blanks becomes one. */
function collapseBlankRuns(s: string): string {
  let out = '';
  let kept = 0;
  SPACE_RUNS.lastIndex = 0;
  for (let run = SPACE_RUNS.exec(s); run !== null; run = SPACE_RUNS.exec(s)) {
    // A whole run, from its first space (the search resumes after it).
    const at = run.index;
    const end = at + run[0].length;
    if (nonSpace(s, at - 1) && nonSpace(s, end)) {
      out += s.slice(kept, at + 1);
      kept = end;
    }
  }
  return kept === 0 ? s : out + s.slice(kept);
}

/** `s.replace(/^\n+|\n+$/g, '')`, without the regular expression's pass when neither end is a line feed. */
const trimNewlines = (s: string): string => (s.charCodeAt(0) === 10 || s.charCodeAt(s.length - 1) === 10 ? s.replace(/^\n+|\n+$/g, '') : s);
