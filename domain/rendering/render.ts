import { createHash } from 'node:crypto';
import { Context, filters, Liquid, Tokenizer, toValueSync, type LiquidOptions, type Template, type TopLevelToken } from 'liquidjs';
import { accelerate, PieceEmitter, renderTemplatesSynchronously, type HtmlNode } from './fast-output';
import { compile as compileHtmlToText } from 'html-to-text';
import { Parser } from 'htmlparser2';
import { AppError } from '../errors';
import { expandDefaults } from './defaults-sugar';
import { LruCache } from '../cache/lru';
import { mjmlToHtml, type MjmlOutput } from './mjml-compile';

/**
 * Template rendering shared by /v1/send, campaigns and workflows: Liquid over the contact's variables, MJML bodies
 * compiled to HTML first, and a plain-text part derived from the HTML.
 *
 * - Unknown variables render empty; `{{ x ?? Fallback }}` is sugar for `{{ x | default: "Fallback" }}`.
 * - include/render/layout cannot read files: templates are user input.
 * - HTML bodies escape every `{{ }}` output (`& < > " '`), so contact data cannot inject markup; `| raw` as the last
 *   filter opts out. Subjects and plain text are not escaped (they are not HTML).
 * - Every failure (syntax, unknown filter, limits, bad MJML) is a TemplateError: 422 VALIDATION_ERROR naming the field.
 */

/** Bytes of one template source (subject or body). */
export const MAX_TEMPLATE_BYTES = 512 * 1024;
/** Characters of one rendered body; beyond this a loop or a huge variable went wrong. */
export const MAX_RENDERED_CHARS = 5 * 1024 * 1024;
/** Wall-clock budget of one render (liquidjs renderLimit). */
const RENDER_LIMIT_MS = 1_000;
/** Allocation budget of one render (liquidjs memoryLimit: ranges, string building, arrays). */
const MEMORY_LIMIT = 64 * 1024 * 1024;

export type TemplateErrorCode = 'invalid_template' | 'template_too_large' | 'template_limit_exceeded' | 'invalid_mjml';

/** A template that cannot be compiled or rendered; the API answers 422 VALIDATION_ERROR with one field error. */
export class TemplateError extends AppError {
  constructor(
    readonly field: string,
    readonly reason: TemplateErrorCode,
    detail: string,
  ) {
    super(422, 'VALIDATION_ERROR', `The ${field} template cannot be used: ${detail}`, { errors: [{ field, code: reason, message: detail }] });
    this.name = 'TemplateError';
  }
}

const NO_FILES = 'include, render and layout are not available in templates';

const baseOptions: LiquidOptions = {
  strictVariables: false,
  strictFilters: true,
  ownPropertyOnly: true,
  // Parsed templates are cached below (by content hash); liquidjs' own cache only covers file lookups.
  cache: false,
  // MJML output is several times its source; the source itself is capped at MAX_TEMPLATE_BYTES.
  parseLimit: 8 * 1024 * 1024,
  renderLimit: RENDER_LIMIT_MS,
  memoryLimit: MEMORY_LIMIT,
  relativeReference: false,
  fs: {
    readFileSync: () => {
      throw new Error(NO_FILES);
    },
    readFile: async () => {
      throw new Error(NO_FILES);
    },
    existsSync: () => false,
    exists: async () => false,
    contains: async () => false,
    resolve: (_root, file) => file,
    sep: '/',
  },
};

/** Subjects and plain text: output as is. */
const plainEngine = new Liquid(baseOptions);
/** HTML bodies: every output is HTML-escaped unless its last filter is `raw`. */
const htmlEngine = new Liquid({ ...baseOptions, outputEscape: 'escape' });
// Templates written for plain Liquid often escape by hand; marking these filters raw keeps them from escaping twice.
for (const name of ['escape', 'escape_once', 'xml_escape'] as const) {
  const impl = filters[name];
  htmlEngine.registerFilter(name, { handler: typeof impl === 'function' ? impl : impl.handler, raw: true });
}

// Refused when parsed, so a template that uses them is rejected when it is saved, not when it is first sent.
for (const engine of [plainEngine, htmlEngine]) {
  for (const tag of ['include', 'render', 'layout']) {
    engine.registerTag(tag, {
      parse() {
        throw new Error(NO_FILES);
      },
      render() {
        return '';
      },
    });
  }
}

/**
 * The composer's text-part skeletons (domain/compose/text-skeleton.ts): plain output, the same limits, and filters that
 * turn an output's value into what html-to-text would have printed for it. Its own engine, so these filters are not
 * available to the templates users write.
 */
const skeletonEngine = new Liquid(baseOptions);
for (const tag of ['include', 'render', 'layout']) {
  skeletonEngine.registerTag(tag, {
    parse() {
      throw new Error(NO_FILES);
    },
    render() {
      return '';
    },
  });
}
/** html-to-text's whitespace characters (its default `whitespaceCharacters`), collapsed to one space in text. */
const TEXT_WHITESPACE = /[ \t\r\n\f\u200b]+/g;
const NEEDS_COLLAPSE = /[\t\r\n\f\u200b]| {2}/;
const collapse = (s: string) => (NEEDS_COLLAPSE.test(s) ? s.replace(TEXT_WHITESPACE, ' ') : s);
// An escaped output (the HTML engine's default) reads back as its value: html-to-text decodes what escape encoded.
skeletonEngine.registerFilter('mw_text', (v: unknown) => (typeof v === 'string' ? collapse(v) : v));
// In an attribute (a link's href) the value is taken as is: attributes are decoded, not whitespace-collapsed.
skeletonEngine.registerFilter('mw_attr', (v: unknown) => v);
// An output whose last filter opted out of escaping (escape, escape_once, xml_escape) is an HTML fragment without tags.
skeletonEngine.registerFilter('mw_html', (v: unknown, attribute?: boolean) => {
  const s = typeof v === 'string' ? v : String(v ?? '');
  if (!s.includes('&') && !s.includes('<')) return attribute ? s : collapse(s);
  const decoded = decodeFragment(s);
  return attribute ? decoded : collapse(decoded);
});
/** html-to-text's anchor rule (`formatAnchor`) for a link whose href or text is only known per recipient. */
skeletonEngine.registerFilter('mw_link', (href: unknown, text: unknown) => {
  let url = typeof href === 'string' ? href : String(href ?? '');
  if (!url) return '';
  if (url.startsWith('mailto:')) url = url.slice(7);
  if (!url || url[0] === '#') return '';
  // html-to-text compares the href with the link's words joined without their separators. The text may be an assigned
  // value, not yet printed: stringified as Liquid prints it (arrays joined, nil empty).
  const printed = Array.isArray(text) ? text.join('') : text === null || text === undefined ? '' : String(text);
  const words = compareWords(printed, url);
  if (words === WORDS_ARE_URL) return '';
  return words === NO_WORDS ? url : ` [${url}]`;
});

const NO_WORDS = 0;
const WORDS_ARE_URL = 1;
const OTHER_WORDS = 2;
/** html-to-text's whitespace characters (TEXT_WHITESPACE) by code. */
const isTextWhitespace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0d || c === 0x0a || c === 0x0c || c === 0x200b;

/**
 * What `text` without its whitespace (TEXT_WHITESPACE) is: nothing, exactly `url`, or other words; by one pass that
 * stops at the first character that differs from the URL, without the string the removal would make.
 */
function compareWords(text: string, url: string): typeof NO_WORDS | typeof WORDS_ARE_URL | typeof OTHER_WORDS {
  let matched = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (isTextWhitespace(c)) continue;
    if (matched >= url.length || url.charCodeAt(matched) !== c) return OTHER_WORDS;
    matched++;
  }
  return matched === 0 ? NO_WORDS : matched === url.length ? WORDS_ARE_URL : OTHER_WORDS;
}

// Every render here is synchronous (renderSync): template lists render without a generator each (fast-output.ts).
for (const engine of [plainEngine, htmlEngine, skeletonEngine]) renderTemplatesSynchronously(engine);

/** A text-part skeleton parsed once (null when it does not parse: the composer then converts each rendered body). */
export function compileTextSkeleton(source: string): Template[] | null {
  counters.liquidParses++;
  try {
    return accelerate(skeletonEngine.parse(source));
  } catch {
    return null;
  }
}

/** What Liquid#renderSync passes on (`{ ...renderOptions, sync: true }` without options): made once. */
const SYNC_RENDER = Object.freeze({ sync: true });

/**
 * `engine.renderSync(templates, variables)`, the same steps (a Context for the variables, the template list rendered
 * synchronously to its string) without the object renderSync spreads its options into on every call: a spread with a
 * property after it takes V8's slow path, about a microsecond a render here (BENCHMARKS.md › Issue 28, nineteenth stop).
 */
function renderSync(engine: Liquid, templates: Template[], variables: Record<string, unknown>): unknown {
  return toValueSync(engine._render(templates, variables, SYNC_RENDER));
}

/** Renders a text-part skeleton for one recipient (the body's variables); a failure is the body's TemplateError. */
export function renderTextSkeleton(templates: Template[], variables: Record<string, unknown>): string {
  try {
    return renderSync(skeletonEngine, templates, variables) as string;
  } catch (err) {
    throw liquidFailure(err, 'body');
  }
}

/**
 * An output of an HTML body as the HTML engine parses it: its own filters' names, and whether the engine escapes its
 * value (false when the last filter is one that opts out: raw, escape, escape_once, xml_escape). Null if it does not
 * parse.
 */
export function outputFilters(content: string): { names: string[]; escaped: boolean } | null {
  let output: { value?: { filters?: { name: string }[] } } | undefined;
  try {
    [output] = htmlEngine.parse(`{{${content}}}`) as unknown as (typeof output)[];
  } catch {
    return null;
  }
  const filters = output?.value?.filters;
  if (!filters) return null;
  // liquidjs appends the engine's escape filter to the output's own, named after its option (see Output in liquidjs).
  const appended = filters.length > 0 && filters[filters.length - 1]!.name === Object.prototype.toString.call(htmlEngine.options.outputEscape);
  return { names: filters.slice(0, appended ? -1 : undefined).map((f) => f.name), escaped: appended };
}

type Mode = 'plain' | 'html';
const engines: Record<Mode, Liquid> = { plain: plainEngine, html: htmlEngine };

/** Parsed Liquid by mode and content hash, so rendering one template for many recipients parses it once. */
const parsedCache = new LruCache<Template[]>({ maxEntries: 500, maxWeight: 32 * 1024 * 1024 });
/** Compiled MJML (a promise, so concurrent compiles of one source share the work) by content hash. */
const mjmlCache = new LruCache<Promise<string>>({ maxEntries: 200, maxWeight: 64 * 1024 * 1024 });

/** How often the recipient-independent work actually ran (cache misses): tests check that many recipients cost one. */
const counters = { liquidParses: 0, mjmlCompiles: 0 };

/** Read-only copies of the work counters: Liquid parses and MJML compiles since the process started. */
export function renderCounters(): { liquidParses: number; mjmlCompiles: number } {
  return { ...counters };
}

const hashOf = (mode: string, source: string) => createHash('sha256').update(mode).update('\0').update(source).digest('base64url');

function assertSize(source: string, field: string): void {
  // Cheap bound first: UTF-8 needs at most 3 bytes per UTF-16 unit.
  if (source.length * 3 > MAX_TEMPLATE_BYTES && Buffer.byteLength(source, 'utf8') > MAX_TEMPLATE_BYTES) {
    throw new TemplateError(field, 'template_too_large', `the template is larger than ${MAX_TEMPLATE_BYTES / 1024} KB`);
  }
}

function liquidFailure(err: unknown, field: string): TemplateError {
  const message = err instanceof Error ? err.message : String(err);
  const limit = /render limit exceeded|memory alloc limit exceeded|parse length limit exceeded/.test(message);
  return new TemplateError(field, limit ? 'template_limit_exceeded' : 'invalid_template', message);
}

/**
 * Whether a render failed only on its wall-clock budget (RENDER_LIMIT_MS). On a machine short of CPU a render that
 * normally takes a millisecond can wait that long for a core, so a campaign retries such a recipient in a later pass
 * instead of failing them for good; a template that is slow for everyone still fails once the retries are spent.
 */
export function isRenderTimeout(err: unknown): boolean {
  return err instanceof TemplateError && err.reason === 'template_limit_exceeded' && /render limit exceeded/.test(err.message);
}

function parse(source: string, mode: Mode, field: string): Template[] {
  const key = hashOf(mode, source);
  const hit = parsedCache.get(key);
  if (hit) return hit;
  assertSize(source, field);
  const parsed = parseExpanded(expandDefaults(source), mode, field);
  parsedCache.set(key, parsed, source.length);
  return parsed;
}

/** Parses Liquid whose `??` sugar is already expanded, uncached (the caller keeps the result). */
function parseExpanded(source: string, mode: Mode, field: string): Template[] {
  counters.liquidParses++;
  try {
    return accelerate(engines[mode].parse(source));
  } catch (err) {
    throw liquidFailure(err, field);
  }
}

function render(templates: Template[], variables: Record<string, unknown>, mode: Mode, field: string, checkSize = true): string {
  let out: string;
  try {
    out = renderSync(engines[mode], templates, variables) as string;
  } catch (err) {
    throw liquidFailure(err, field);
  }
  if (checkSize) assertRenderedSize(out.length, field);
  return out;
}

/** The 422 of a rendered body or subject over MAX_RENDERED_CHARS (the composer checks marked bodies without their markers). */
export function assertRenderedSize(length: number, field: string): void {
  if (length > MAX_RENDERED_CHARS) {
    throw new TemplateError(field, 'template_limit_exceeded', `the rendered ${field} is larger than ${MAX_RENDERED_CHARS / 1024 / 1024} MB`);
  }
}

const hasLiquid = (source: string) => source.includes('{{') || source.includes('{%');

export interface RenderOptions {
  /** HTML-escape every output (bodies). Compiled bodies are always HTML. */
  html?: boolean;
  /** Keep the result on one line (subjects): see toSingleLine. */
  subject?: boolean;
  /** The field named in a TemplateError (default: `subject`, `body` or `template`). */
  field?: string;
}

/**
 * Renders one template for one recipient. A string source is plain Liquid (no escaping) unless `html`; a
 * CompiledBody (see compileBody) renders as HTML. Throws TemplateError (422) naming the field.
 */
export function renderTemplate(source: string | CompiledBody, variables: Record<string, unknown>, options: RenderOptions = {}): string {
  if (typeof source !== 'string') return render(source.templates, variables, 'html', options.field ?? 'body', !source.marked);
  const field = options.field ?? (options.subject ? 'subject' : options.html ? 'body' : 'template');
  const mode: Mode = options.html ? 'html' : 'plain';
  let out: string;
  if (hasLiquid(source)) out = render(parse(source, mode, field), variables, mode, field);
  else {
    assertSize(source, field);
    out = source;
  }
  return options.subject ? toSingleLine(out) : out;
}

/** Null when `source` parses as a Liquid template (size cap and `??` sugar included), else the reason (for a 422 on create). */
export function checkTemplateSyntax(source: string): string | null {
  try {
    parse(source, 'plain', 'template');
    return null;
  } catch (err) {
    return err instanceof TemplateError ? (err.options.errors?.[0]?.message ?? err.message) : (err as Error).message;
  }
}

/** A subject rendered and kept on one line: line breaks (and the blanks around them) become one space. */
export function renderSubject(source: string, variables: Record<string, unknown>, field = 'subject'): string {
  return renderTemplate(source, variables, { subject: true, field });
}

/** A subject ready to render for many recipients: parsed once (or kept as is when it has no Liquid). */
export interface CompiledSubject {
  readonly source: string;
  readonly field: string;
  /** @internal parsed Liquid; null for a subject without Liquid */
  readonly templates: Template[] | null;
}

/** Parses a subject once (size cap, `??` sugar, Liquid); throws TemplateError (422) naming `field`. */
export function compileSubject(source: string, field = 'subject'): CompiledSubject {
  if (!hasLiquid(source)) {
    assertSize(source, field);
    return { source, field, templates: null };
  }
  return { source, field, templates: parse(source, 'plain', field) };
}

/** Renders a compiled subject for one recipient, on one line (the same result as renderSubject). */
export function renderCompiledSubject(subject: CompiledSubject, variables: Record<string, unknown>): string {
  return toSingleLine(subject.templates ? render(subject.templates, variables, 'plain', subject.field) : subject.source);
}

/**
 * The top-level Liquid tokens of an HTML body (after the `??` sugar is expanded), as the HTML engine's parser sees
 * them: HTML runs, `{{ }}` outputs and `{% %}` tags, with their offsets and whitespace control.
 */
export function liquidTokens(expandedSource: string): TopLevelToken[] {
  return new Tokenizer(expandedSource, htmlEngine.options.operators).readTopLevelTokens(htmlEngine.options);
}

/**
 * A CompiledBody for HTML that has gone through expandDefaults already and was then rewritten by the caller (the
 * composer marks the links to track in it; its output's size is checked without the markers, see
 * assertRenderedSize). Uncached: the caller caches what it builds from it.
 */
export function compileExpandedHtml(expandedHtml: string, mjml: boolean, field = 'body'): CompiledBody {
  return { mjml, marked: true, html: expandedHtml, templates: parseExpanded(expandedHtml, 'html', field) };
}

/** Header-safe text: each run of line breaks (CR/LF and other separators) becomes one space; other control characters are dropped. */
export function toSingleLine(text: string): string {
  return text
    .replace(/[ \t]*(?:(?:\r\n|[\r\n\v\f\u0085\u2028\u2029])[ \t]*)+/g, ' ')
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u0008\u000e-\u001f\u007f]/g, '')
    .trim();
}

const MJML_START = /^\uFEFF?\s*<mjml[\s>]/i;

/** True when the body is MJML (starts with `<mjml`, after whitespace). */
export function isMjml(body: string): boolean {
  return MJML_START.test(body);
}

/** A body ready to render for many recipients: MJML already compiled, Liquid already parsed. */
export interface CompiledBody {
  readonly mjml: boolean;
  /** The HTML carries the composer's markers: its output is size-checked without them, by the composer. */
  readonly marked?: boolean;
  /** The HTML Liquid template (MJML output for MJML bodies). */
  readonly html: string;
  /** @internal parsed Liquid */
  readonly templates: Template[];
}

/**
 * Compiles a body once per content (MJML to HTML, then the Liquid parse), cached by hash in bounded LRUs. Throws
 * TemplateError (422) on invalid MJML or Liquid, so it also validates a body (e.g. when a template is saved).
 */
export async function compileBody(body: string, field = 'body'): Promise<CompiledBody> {
  assertSize(body, field);
  const mjml = isMjml(body);
  const html = mjml ? await compileMjml(body, field) : body;
  return { mjml, html, templates: parse(html, 'html', field) };
}

/**
 * Renders a marked body (compileExpandedHtml) for one recipient as pieces (see PieceEmitter): the template's own HTML
 * as its parsed nodes, the rest as strings. Joined, the pieces are what renderTemplate gives (the markers included,
 * the size unchecked: the caller checks it without them). Throws TemplateError as renderTemplate does.
 */
export function renderPieces(compiled: CompiledBody, variables: Record<string, unknown>, field = 'body'): (HtmlNode | string)[] {
  const emitter = new PieceEmitter();
  try {
    // What Liquid#renderSync does, with this emitter (the engine's renderTemplates is synchronous here: fast-output.ts).
    const ctx = new Context(variables, htmlEngine.options, { sync: true }, { liquid: htmlEngine });
    (htmlEngine.renderer as unknown as { renderTemplates(t: Template[], c: Context, e: PieceEmitter): unknown }).renderTemplates(compiled.templates, ctx, emitter);
  } catch (err) {
    throw liquidFailure(err, field);
  }
  return emitter.pieces;
}

/** Renders a compiled body for one recipient: the HTML (variables escaped) and its plain-text part. */
export function renderBody(compiled: CompiledBody, variables: Record<string, unknown>, field = 'body'): { html: string; text: string } {
  const html = renderTemplate(compiled, variables, { field });
  return { html, text: htmlToText(html) };
}

export interface RenderedEmail {
  subject: string;
  html: string;
  text: string;
}

/** Subject and body of one recipient. Bodies are compiled once per content (see compileBody), so repeats are cheap. */
export async function renderEmail(input: { subject: string; body: string; variables: Record<string, unknown> }): Promise<RenderedEmail> {
  const compiled = await compileBody(input.body);
  const subject = renderSubject(input.subject, input.variables);
  return { subject, ...renderBody(compiled, input.variables) };
}

// The composer leaves attributes out of this converter's input unless they are in TEXT_ATTRIBUTES (or a `style` that
// could match the selectors below): a selector or option that reads another attribute must be added there
// (domain/compose/link-plan.ts), or the composer's text parts would differ from htmlToText's.
const toText = compileHtmlToText({
  wordwrap: 80,
  selectors: [
    { selector: 'img', format: 'skip' },
    { selector: 'a', options: { linkBrackets: ['[', ']'], hideLinkHrefIfSameAsText: true } },
    // Hidden content (MJML's preview text, tracking pixels) is not part of the message text.
    { selector: '[style*="display:none"]', format: 'skip' },
    { selector: '[style*="display: none"]', format: 'skip' },
  ],
});

/**
 * The plain-text part of an HTML message: links as `text [url]`, images and hidden elements skipped. A body with a
 * "word" of megabytes (no whitespace in it) overflows the regex stack inside html-to-text; such a body gets a plain
 * text part from its text nodes instead of failing the send.
 */
export function htmlToText(html: string): string {
  try {
    return toText(html);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    return textNodesOf(html);
  }
}

/** The text of an HTML fragment, entities decoded and tags dropped, whitespace kept. */
function decodeFragment(html: string): string {
  const parts: string[] = [];
  const parser = new Parser({ ontext: (text) => void parts.push(text) }, { decodeEntities: true });
  parser.end(html);
  return parts.join('');
}

/** The text nodes of HTML (script and style left out), whitespace collapsed: the fallback text part. */
function textNodesOf(html: string): string {
  const parts: string[] = [];
  let skipping = 0;
  const parser = new Parser({
    onopentagname: (name) => void (name === 'script' || name === 'style' ? skipping++ : undefined),
    onclosetag: (name) => void (name === 'script' || name === 'style' ? (skipping = Math.max(0, skipping - 1)) : undefined),
    ontext: (text) => void (skipping === 0 ? parts.push(text) : undefined),
  }, { decodeEntities: true });
  parser.end(html);
  return parts.join('').replace(/[ \t]+/g, ' ').replace(/\s*\n\s*/g, '\n').trim();
}

/**
 * An MJML body's HTML, compiled (or taken from the cache) here. A campaign send compiles its MJML once on the worker's
 * main thread and hands the HTML to its render threads (primeMjml), which then never load MJML: compiling it cold
 * cost each thread about 0.7 s of CPU a campaign, and its modules a share of each thread's memory (BENCHMARKS.md ›
 * Issue 28, sixth stop). Throws TemplateError as compileBody does.
 */
export function compiledMjml(source: string, field = 'body'): Promise<string> {
  return compileMjml(source, field);
}

/** Takes `html` as what `source` (MJML) compiles to (compiledMjml, in another thread of this worker). */
export function primeMjml(source: string, html: string): void {
  const key = hashOf('mjml', source);
  if (!mjmlCache.get(key)) mjmlCache.set(key, Promise.resolve(html), source.length + html.length);
}

function compileMjml(source: string, field: string): Promise<string> {
  const key = hashOf('mjml', source);
  const hit = mjmlCache.get(key);
  if (hit) return hit;
  counters.mjmlCompiles++;
  const pending = runMjml(source, field);
  mjmlCache.set(key, pending, source.length);
  pending.then(
    (html) => mjmlCache.reweigh(key, pending, source.length + html.length),
    () => mjmlCache.delete(key, pending), // a failure is not cached: the next call reports it again
  );
  return pending;
}

/**
 * How MJML is compiled: in process unless the process chose otherwise (the worker compiles in a thread of its own,
 * mjml-thread.ts).
 */
let mjmlCompiler: (source: string) => Promise<MjmlOutput> = mjmlToHtml;

/** Compiles MJML with `compiler` from now on (temporal/worker.ts: createMjmlThread). */
export function compileMjmlWith(compiler: (source: string) => Promise<MjmlOutput>): void {
  mjmlCompiler = compiler;
}

async function runMjml(source: string, field: string): Promise<string> {
  let result: MjmlOutput;
  try {
    result = await mjmlCompiler(source);
  } catch (err) {
    throw new TemplateError(field, 'invalid_mjml', (err as Error).message);
  }
  // Liquid in a typed attribute (`color="{{ brand }}"`) fails MJML's type check but is valid once rendered.
  const issues = result.errors.filter((e) => !/\{\{|\{%/.test(e.message));
  if (issues.length > 0) {
    const detail = issues
      .slice(0, 10)
      .map((e) => `line ${e.line ?? '?'}${e.tagName ? ` (${e.tagName})` : ''}: ${e.message.trim()}`)
      .join('; ');
    throw new TemplateError(field, 'invalid_mjml', detail);
  }
  return withoutIndentation(result.html);
}

/** Elements whose whitespace is content, left as they are. */
const PREFORMATTED = /(<(pre|textarea)\b[\s\S]*?<\/\2\s*>)/i;

/**
 * MJML's output without its indentation and blank lines: about a quarter of a typical newsletter's bytes, which every
 * message of a campaign would otherwise carry through MIME assembly, SMTP and the receiver. Outside `<pre>` and
 * `<textarea>` a line break with or without spaces after it is the same whitespace to HTML and CSS, so the message
 * renders the same.
 */
function withoutIndentation(html: string): string {
  return html
    .split(PREFORMATTED)
    .map((part, i) => (i % 3 === 0 ? part.replace(/^[ \t]+/gm, '').replace(/\n{2,}/g, '\n') : i % 3 === 1 ? part : ''))
    .join('');
}
