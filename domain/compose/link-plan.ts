import { randomBytes } from 'node:crypto';
import { QuoteType, Tokenizer as HtmlTokenizer } from 'htmlparser2';
import { TokenKind, type TagToken } from 'liquidjs';
import { liquidTokens } from '../rendering/render';
import { clickHref, openPixel, trackableUrl, type LinkConfig } from '../tracking/links';
import type { HtmlNode } from '../rendering/fast-output';
import { appendSegment, segmentOf, type HtmlSegments, type StaticText } from '../mail/wire-writer';

/**
 * Click and open tracking without tokenizing every recipient's HTML.
 *
 * applyTracking (tracking/links.ts) finds the links of a rendered message with htmlparser2's tokenizer: about a
 * quarter of the per-recipient time. For most templates the links are where the template's own markup puts them,
 * whatever the data: HTML-escaped Liquid output cannot open a tag, close a quote or start a comment. So the body is
 * analysed once per content (planLinks): each `href` of `<a>`/`<area>` and the last `</body>` get an inert marker in
 * the Liquid source, and after rendering, finishTracking finds them with indexOf, signs the links and drops the
 * markers. The result is byte for byte what applyTracking gives on the same rendered HTML (test/unit/compose.test.ts
 * compares both on a corpus).
 *
 * The same markers shorten the plain-text part's input: html-to-text reads only a few attributes (TEXT_ATTRIBUTES,
 * and `style` for the hidden-element selectors), so the others (MJML's long inline styles, widths, roles) are cut
 * from the HTML it parses. Attributes do not change htmlparser2's tree, so the text is the same, for less parsing.
 *
 * A template qualifies only when that holds by construction; anything else keeps the tokenizing path:
 * - Liquid outputs appear only in text, quoted attribute values, comments and raw-text elements (`script`, `style`,
 *   `title`, `textarea`, `xmp`), and Liquid tags only in text, judged by tokenizing the template with every Liquid
 *   token masked. Control flow (`{% if %}`, `{% for %}`) then only removes or repeats whole HTML tokens.
 * - no output ends in `raw` (unescaped markup could add links), and only tags that emit no markup of their own
 *   (ALLOWED_TAGS: no `capture`, which could move markers into escaped text, no `cycle`, `tablerow`, `liquid`);
 * - no `{{-`/`{%-` trims the blanks after a `<` (the `<` could then open a tag);
 * - no Liquid after the last `</body>` (the pixel goes before the last one in the output).
 */

/** Markers: a private-use character and a per-process random nonce, so no template or data can forge one. */
const MARK = `\uE000${randomBytes(9).toString('base64url')}`;
const SLOT_END = '\uE001';
const LINK = 'L';
const END = 'E';
const PIXEL = 'P';
const CUT = 'C';
const UNCUT = 'U';
const MARKERS = new RegExp(`${MARK}(?:${LINK}\\d+${SLOT_END}|[${END}${PIXEL}${CUT}${UNCUT}])`, 'g');

/**
 * Attributes html-to-text reads with our options (render.ts): links, images, ordered lists, data tables. `style` is
 * kept when the hidden-element selectors could match it (see keepsStyle).
 */
const TEXT_ATTRIBUTES = new Set(['href', 'src', 'alt', 'start', 'type', 'colspan', 'rowspan', 'class', 'id']);

/** Tags that only select, repeat or assign: what they output is the template's own markup. */
const ALLOWED_TAGS = new Set([
  'if', 'elsif', 'else', 'endif', 'unless', 'endunless', 'case', 'when', 'endcase', 'for', 'endfor', 'break', 'continue',
  'assign', 'increment', 'decrement', 'echo', 'comment', 'endcomment', 'raw', 'endraw', '#',
]);
/** Elements whose content htmlparser2 reads as text up to the matching end tag. */
const RAW_TEXT = new Set(['script', 'style', 'title', 'textarea', 'xmp']);

const enum Region {
  Structure = 0,
  Text = 1,
  RawText = 2,
  QuotedValue = 3,
  Comment = 4,
}

interface LinkSlot {
  readonly quote: QuoteType;
  /** The href with entities decoded, when it has no Liquid (then its trackable URL is known once per message). */
  readonly staticHref?: string;
  /**
   * An href with Liquid: its source before the first Liquid token, up to its first `&` or blank (so its characters
   * are the rendered href's first ones, entities and trimmed blanks aside). See prefixVerdict.
   */
  readonly prefix?: string;
}

export interface LinkPlan {
  /** The (`??`-expanded) body with the markers in it: the Liquid source to parse. */
  readonly marked: string;
  readonly slots: readonly LinkSlot[];
  /** A pixel marker stands before the last `</body>`; without one the pixel goes at the end, as in applyTracking. */
  readonly pixelMarked: boolean;
  /** Attribute runs marked to leave out of the text part's input. */
  readonly cuts: number;
}

/** The links of an expanded HTML body, marked; null when the body does not qualify (see above). */
export function planLinks(expanded: string): LinkPlan | null {
  const liquid: { begin: number; end: number; tag: boolean }[] = [];
  for (const token of liquidTokens(expanded)) {
    if (token.kind === TokenKind.HTML) continue;
    // Tags and outputs are both delimited tokens (liquidjs exports only the tag's class).
    const delimited = token as Pick<TagToken, 'begin' | 'end' | 'content' | 'trimLeft'>;
    const tag = token.kind === TokenKind.Tag;
    const name = tag ? (token as TagToken).name : '';
    if (tag && !ALLOWED_TAGS.has(name)) return null;
    if ((!tag || name === 'echo') && /\braw\b/.test(delimited.content)) return null;
    if (delimited.trimLeft && afterLessThan(expanded, delimited.begin)) return null;
    liquid.push({ begin: delimited.begin, end: delimited.end, tag });
  }

  let masked = '';
  let pos = 0;
  /** liquidBefore[i]: how many characters before i are Liquid, so "any Liquid in [a, b)" is one subtraction. */
  const liquidBefore = new Int32Array(expanded.length + 1);
  for (const r of liquid) {
    masked += expanded.slice(pos, r.begin) + 'x'.repeat(r.end - r.begin);
    pos = r.end;
  }
  masked += expanded.slice(pos);
  for (let i = 0, r = 0; i < expanded.length; i++) {
    while (r < liquid.length && liquid[r]!.end <= i) r++;
    const inside = r < liquid.length && liquid[r]!.begin <= i ? 1 : 0;
    liquidBefore[i + 1] = liquidBefore[i]! + inside;
  }
  const hasLiquid = (from: number, to: number) => liquidBefore[to]! - liquidBefore[from]! > 0;

  const regions = new Uint8Array(masked.length);
  const hrefs: { start: number; end: number; quote: QuoteType }[] = [];
  let tag = '';
  let rawText = '';
  let bodyClose = -1;
  let isHref = false;
  let attrNameEnd = 0;
  let attrName = '';
  let valueParts: [number, number][] = [];
  /** The current tag's attributes as spans from the end of what precedes them (so a cut takes its blank too). */
  let attributes: { name: string; from: number; to: number; keep: boolean }[] = [];
  let attributesEnd = 0;
  const cuts: { from: number; to: number }[] = [];
  const endOfTag = () => {
    const names = attributes.map((a) => a.name);
    // A repeated name: htmlparser2 keeps one of them, so cutting could change which one the text part sees.
    if (new Set(names).size === names.length) {
      for (const a of attributes) {
        if (a.keep) continue;
        const last = cuts[cuts.length - 1];
        if (last && last.to === a.from) last.to = a.to;
        else cuts.push({ from: a.from, to: a.to });
      }
    }
    attributes = [];
  };
  const noop = () => undefined;
  const tokenizer = new HtmlTokenizer(
    { decodeEntities: true },
    {
      ontext(start, end) {
        regions.fill(rawText ? Region.RawText : Region.Text, start, end);
      },
      oncomment(start, end) {
        regions.fill(Region.Comment, start, end);
      },
      onopentagname(start, end) {
        tag = masked.slice(start, end).toLowerCase();
        attributes = [];
        attributesEnd = end;
      },
      onopentagend() {
        endOfTag();
        if (RAW_TEXT.has(tag)) rawText = tag;
      },
      onselfclosingtag() {
        endOfTag();
        rawText = '';
      },
      onclosetag(start, end) {
        const name = masked.slice(start, end).toLowerCase();
        if (name === rawText) rawText = '';
        if (name === 'body') bodyClose = masked.lastIndexOf('<', start);
      },
      onattribname(start, end) {
        attrName = masked.slice(start, end).toLowerCase();
        isHref = (tag === 'a' || tag === 'area') && attrName === 'href';
        attrNameEnd = end;
        valueParts = [];
      },
      onattribdata(start, end) {
        valueParts.push([start, end]);
      },
      onattribend(quote, end) {
        const quoted = quote === QuoteType.Double || quote === QuoteType.Single;
        if (quoted) for (const [s, e] of valueParts) regions.fill(Region.QuotedValue, s, e);
        // A valueless attribute "ends" where the next one starts: kept (it is short) rather than measured.
        const keep =
          quote === QuoteType.NoValue ||
          TEXT_ATTRIBUTES.has(attrName) ||
          (attrName === 'style' && keepsStyle(expanded.slice(attributesEnd, end), hasLiquid(attributesEnd, end)));
        attributes.push({ name: attrName, from: attributesEnd, to: end, keep });
        attributesEnd = end;
        if (!isHref || quote === QuoteType.NoValue) return;
        isHref = false;
        if (quoted) {
          hrefs.push({ start: masked.indexOf(quote === QuoteType.Double ? '"' : "'", attrNameEnd) + 1, end: end - 1, quote });
        } else {
          let start = masked.indexOf('=', attrNameEnd) + 1;
          while (/\s/.test(masked[start] ?? '')) start++;
          hrefs.push({ start, end, quote });
        }
      },
      onattribentity: noop,
      ontextentity: noop,
      oncdata: noop,
      ondeclaration: noop,
      onprocessinginstruction: noop,
      onend: noop,
    },
  );
  tokenizer.write(masked);
  tokenizer.end();

  for (const r of liquid) {
    for (let i = r.begin; i < r.end; i++) {
      const region = regions[i];
      if (region === Region.Text) continue;
      if (r.tag || region === Region.Structure) return null;
    }
    if (bodyClose >= 0 && r.begin > bodyClose) return null;
  }

  const inserts: { at: number; text: string }[] = [];
  const slots: LinkSlot[] = hrefs.map((h, i) => {
    inserts.push({ at: h.start, text: `${MARK}${LINK}${i}${SLOT_END}` }, { at: h.end, text: `${MARK}${END}` });
    if (!hasLiquid(h.start, h.end)) return { quote: h.quote, staticHref: decodeHref(expanded.slice(h.start, h.end), h.quote) };
    const first = liquid.find((r) => r.begin >= h.start)!;
    return { quote: h.quote, prefix: expanded.slice(h.start, first.begin).split(/[&\s]/, 1)[0]! };
  });
  if (bodyClose >= 0) inserts.push({ at: bodyClose, text: `${MARK}${PIXEL}` });
  for (const c of cuts) inserts.push({ at: c.from, text: `${MARK}${CUT}` }, { at: c.to, text: `${MARK}${UNCUT}` });
  inserts.sort((a, b) => a.at - b.at);
  let marked = '';
  pos = 0;
  for (const { at, text } of inserts) {
    marked += expanded.slice(pos, at) + text;
    pos = at;
  }
  return { marked: marked + expanded.slice(pos), slots, pixelMarked: bodyClose >= 0, cuts: cuts.length };
}

/**
 * Whether a `style` attribute must stay for the text part: it may match `[style*="display:none"]` (render.ts), or
 * could once rendered (Liquid in it) or decoded (an entity could spell `display`).
 */
function keepsStyle(attribute: string, dynamic: boolean): boolean {
  return dynamic || /display|&/i.test(attribute);
}

/** True when only blanks stand between a `<` and `at`: trimming them could make the `<` open a tag. */
function afterLessThan(source: string, at: number): boolean {
  let i = at - 1;
  while (i >= 0 && ' \t\r\n\v\f'.includes(source[i]!)) i--;
  return source[i] === '<';
}

/** An `&` that does not start `&amp;`. */
const AMP_OTHER = /&(?!amp;)/;

/** An href value as htmlparser2 reads it (entities decoded in attribute mode), given how it was quoted. */
function decodeHref(value: string, quote: QuoteType): string {
  if (!value.includes('&')) return value;
  // Every `&` starts `&amp;` (a URL's query written as HTML asks): each decodes to `&` and nothing else does.
  if (!AMP_OTHER.test(value)) return value.replaceAll('&amp;', '&');
  let decoded = '';
  const noop = () => undefined;
  const q = quote === QuoteType.Single ? "'" : quote === QuoteType.Double ? '"' : '';
  const html = `<a href=${q}${value}${q}>`;
  const tokenizer = new HtmlTokenizer(
    { decodeEntities: true },
    {
      onattribdata(start, end) {
        decoded += html.slice(start, end);
      },
      onattribentity(codepoint) {
        decoded += String.fromCodePoint(codepoint);
      },
      onattribend: noop,
      onattribname: noop,
      oncdata: noop,
      onclosetag: noop,
      oncomment: noop,
      ondeclaration: noop,
      onend: noop,
      onopentagend: noop,
      onopentagname: noop,
      onprocessinginstruction: noop,
      onselfclosingtag: noop,
      ontext: noop,
      ontextentity: noop,
    },
  );
  tokenizer.write(html);
  tokenizer.end();
  return decoded;
}

/** What one message (one sender, one LinkConfig) knows about a plan's links before any recipient. */
export interface SlotTargets {
  /** Per slot: the URL to sign for a static href (null: not tracked), undefined for an href with Liquid. */
  readonly urls: readonly (string | null | undefined)[];
  /** Per slot with Liquid: what its static start decides (prefixVerdict), null when it decides nothing. */
  readonly verdicts: readonly (PrefixVerdict | null)[];
  readonly own: readonly string[];
}

export function slotTargets(plan: LinkPlan, own: string[]): SlotTargets {
  return {
    urls: plan.slots.map((s) => (s.staticHref === undefined ? undefined : trackableUrl(s.staticHref, own))),
    verdicts: plan.slots.map((s) => (s.prefix === undefined ? null : prefixVerdict(s.prefix, own))),
    own,
  };
}

interface PrefixVerdict {
  /** What the rendered href must start with for the verdict to hold. */
  readonly prefix: string;
  /** Every such href is tracked (its URL is the href, decoded and trimmed); false: none is. */
  readonly tracked: boolean;
}

/** `http(s)://`, a host (and port, user) of characters that are neither blanks nor controls, and what ends it. */
// eslint-disable-next-line no-control-regex -- control characters are what it refuses
const WHOLE_AUTHORITY = /^https?:\/\/[^\s\x00-\x1f\x7f/?#\\]+[/?#]/i;

/**
 * What trackableUrl answers for every href that starts with `prefix` (a Liquid href's static start, without `&` or
 * blanks, so its characters decode to themselves): when it holds the whole authority (`https://shop.example/`), the
 * URL parser has read the host before any recipient's value, and after it (path, query, fragment) nothing makes a URL
 * unparsable, so URL.canParse is the prefix's own answer; and when it differs from each of our own link prefixes
 * before either ends, no href starting with it is one of ours (one that starts with an own prefix is never tracked).
 * Null when the prefix decides neither (`{{ url }}`, `https://{{ host }}/`, a start of one of ours). A campaign
 * message's dynamic links then cost no URL parse and no own-link search each (BENCHMARKS.md › Issue 28, nineteenth stop).
 */
function prefixVerdict(prefix: string, own: readonly string[]): PrefixVerdict | null {
  const authority = WHOLE_AUTHORITY.exec(prefix);
  if (!authority) return null;
  const lower = prefix.toLowerCase();
  for (const p of own) {
    if (lower.startsWith(p)) return { prefix, tracked: false };
    if (p.startsWith(lower)) return null;
  }
  return { prefix, tracked: URL.canParse(authority[0]) };
}

/**
 * One recipient's rendered (marked) body: `html` with the tracking applied, and `text`, the HTML the plain-text part
 * is made from (without tracking, and without the attributes html-to-text does not read), both without markers. Null
 * if the markers are not where the plan put them, which the plan's rules exclude; the caller then strips them
 * (stripMarkers) and tokenizes.
 */
export function finishTracking(
  rendered: string,
  plan: LinkPlan,
  targets: SlotTargets,
  opts: { emailId: string; opens: boolean; clicks: boolean },
  cfg: LinkConfig,
): { html: string; text: string; plainLength: number } | null {
  let html = '';
  let text = '';
  /** The length of the rendered body without markers (what the size limit applies to). */
  let plainLength = 0;
  let pos = 0;
  let pixels = 0;
  let cut = false;
  for (let at = rendered.indexOf(MARK); at >= 0; at = rendered.indexOf(MARK, pos)) {
    const piece = rendered.slice(pos, at);
    html += piece;
    plainLength += piece.length;
    if (!cut) text += piece;
    const kind = rendered[at + MARK.length];
    pos = at + MARK.length + 1;
    if (kind === CUT || kind === UNCUT) {
      if (cut === (kind === CUT)) return null;
      cut = kind === CUT;
      continue;
    }
    if (cut) return null;
    if (kind === PIXEL) {
      if (opts.opens) html += openPixel(opts.emailId, cfg);
      pixels++;
      continue;
    }
    if (kind !== LINK) return null;
    const slotEnd = rendered.indexOf(SLOT_END, at);
    const index = Number(rendered.slice(at + MARK.length + 1, slotEnd));
    const slot = plan.slots[index];
    const end = rendered.indexOf(MARK, slotEnd);
    if (!slot || slotEnd < 0 || end < 0 || rendered[end + MARK.length] !== END) return null;
    const value = rendered.slice(slotEnd + 1, end);
    text += value;
    plainLength += value.length;
    html += slotHref(value, index, slot, targets, opts, cfg);
    pos = end + MARK.length + 1;
  }
  if (cut || pixels !== (plan.pixelMarked ? 1 : 0)) return null;
  const rest = rendered.slice(pos);
  html += rest;
  text += rest;
  plainLength += rest.length;
  if (opts.opens && !plan.pixelMarked) html += openPixel(opts.emailId, cfg);
  return { html, text, plainLength };
}

/** A marker of a marked body's HTML: a link slot's start (its index), its end, the pixel, a cut's start or end. */
type Marker = { kind: typeof LINK; slot: number } | { kind: typeof END | typeof PIXEL | typeof CUT | typeof UNCUT };

/** A run of HTML: prepared for the wire, or a string where a surrogate pair could straddle its edge (segmentOf). */
type HtmlItem = StaticText | string | Marker;

const ITEMS = Symbol('mailwright.htmlItems');

/**
 * A marked body's HTML node split at its markers, its runs prepared for the wire (segmentOf); computed once per node
 * (a render thread keeps the parsed body of a send).
 */
function htmlItems(node: HtmlNode): HtmlItem[] {
  const cached = (node as { [ITEMS]?: HtmlItem[] })[ITEMS];
  if (cached) return cached;
  const items: HtmlItem[] = [];
  const run = (text: string) => {
    if (text) items.push(segmentOf(text));
  };
  let pos = 0;
  for (const m of node.str.matchAll(MARKERS)) {
    run(node.str.slice(pos, m.index));
    const kind = m[0][MARK.length]!;
    items.push(kind === LINK ? { kind, slot: Number(m[0].slice(MARK.length + 1, -SLOT_END.length)) } : ({ kind } as Marker));
    pos = m.index + m[0].length;
  }
  run(node.str.slice(pos));
  Object.defineProperty(node, ITEMS, { value: items });
  return items;
}

/**
 * finishTracking's HTML from a render's pieces (render.ts `renderPieces`) instead of its string: the segments of the
 * HTML part with the tracking applied, the template's own runs as prepared once (wire-writer.ts), and the length
 * without markers. The segments join to finishTracking's `html` (test/unit/compose.test.ts); null where finishTracking
 * would give null, and when a written string carries a marker character (then the caller joins the pieces and takes
 * the string way).
 */
export function trackPieces(
  pieces: readonly (HtmlNode | string)[],
  plan: LinkPlan,
  targets: SlotTargets,
  opts: { emailId: string; opens: boolean; clicks: boolean },
  cfg: LinkConfig,
): { segments: HtmlSegments; plainLength: number } | null {
  const out: (StaticText | string)[] = [];
  let plainLength = 0;
  let slot = -1;
  let value = '';
  let cut = false;
  let pixels = 0;
  for (const piece of pieces) {
    if (typeof piece === 'string') {
      if (piece.includes(MARK[0]!)) return null;
      plainLength += piece.length;
      if (slot >= 0) value += piece;
      else appendSegment(out, piece);
      continue;
    }
    for (const item of htmlItems(piece)) {
      if (typeof item === 'string' || 'text' in item) {
        const text = typeof item === 'string' ? item : item.text;
        plainLength += text.length;
        if (slot >= 0) value += text;
        else if (typeof item === 'string') appendSegment(out, item);
        else out.push(item);
        continue;
      }
      const kind = item.kind;
      if (kind === CUT || kind === UNCUT) {
        if (cut === (kind === CUT) || slot >= 0) return null;
        cut = kind === CUT;
        continue;
      }
      if (cut) return null;
      if (kind === PIXEL) {
        if (slot >= 0) return null;
        if (opts.opens) appendSegment(out, openPixel(opts.emailId, cfg));
        pixels++;
        continue;
      }
      if (kind === LINK) {
        if (slot >= 0 || !plan.slots[item.slot]) return null;
        slot = item.slot;
        value = '';
        continue;
      }
      if (slot < 0) return null;
      appendSegment(out, slotHref(value, slot, plan.slots[slot]!, targets, opts, cfg));
      slot = -1;
    }
  }
  if (slot >= 0 || cut || pixels !== (plan.pixelMarked ? 1 : 0)) return null;
  if (opts.opens && !plan.pixelMarked) appendSegment(out, openPixel(opts.emailId, cfg));
  return { segments: out, plainLength };
}

/** What a link slot's value (its href as rendered) becomes: the click redirect when it is tracked, else itself. */
function slotHref(value: string, index: number, slot: LinkSlot, targets: SlotTargets, opts: { emailId: string; clicks: boolean }, cfg: LinkConfig): string {
  let url: string | null = null;
  if (opts.clicks) {
    const known = targets.urls[index];
    const verdict = targets.verdicts[index];
    if (known !== undefined) url = known;
    // The plan puts only outputs in an href, so its static start is rendered as it is: checked, not assumed.
    else if (verdict && value.startsWith(verdict.prefix)) url = verdict.tracked ? decodeHref(value, slot.quote).trim() : null;
    else url = trackableUrl(decodeHref(value, slot.quote), targets.own as string[]);
  }
  if (!url) return value;
  const target = clickHref(opts.emailId, url, cfg);
  return slot.quote === QuoteType.Unquoted ? `"${target}"` : target;
}

/** The rendered body without markers (what the template renders to without a plan). */
export function stripMarkers(rendered: string): string {
  return rendered.replace(MARKERS, '');
}
