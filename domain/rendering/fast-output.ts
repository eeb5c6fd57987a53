import { AssignTag, CaptureTag, Context as LiquidContext, filters as builtinFilters, ForTag, IfTag, Liquid as LiquidEngine, isFalsy, isTruthy, LiquidError, RenderError, TokenKind, UnlessTag, toValue, toValueSync, type Context, type Emitter, type Liquid, type Template } from 'liquidjs';

/**
 * Synchronous renderers for a parsed template's plain HTML and its simple outputs, installed on the parsed nodes.
 *
 * liquidjs renders through generators so one code path serves sync and async rendering: an output such as
 * `{{ r.title | truncate: 60 }}` creates about ten generator objects per render (the output, its value, the
 * expression, each token, each property, each filter), and driving them was most of Liquid's time in a campaign
 * message (BENCHMARKS.md › Campaign send). The outputs that need nothing asynchronous, which are nearly all of them
 * (a variable path or a literal, then filters whose arguments are literals or variable paths), are evaluated here with
 * the same steps liquidjs takes, in the same order: the scope lookup (`findScope`, then `readProperty` along the path),
 * each filter's handler called with the same `this` and arguments, `toValue` of the result, the write to the emitter.
 * Anything else (operators, ranges, grouped expressions) keeps liquidjs' own renderer, and so does any render that
 * throws here: the output is evaluated again by liquidjs, which reports the error as it always has.
 */

type Evaluate = (ctx: Context) => unknown;

interface TokenLike {
  kind?: number;
  content?: unknown;
  variable?: unknown;
  props?: TokenLike[];
}

interface FilterLike {
  handler: (this: unknown, ...args: unknown[]) => unknown;
  token: unknown;
  liquid: unknown;
  args: (TokenLike | [string, TokenLike])[];
}

interface OutputLike {
  token: { kind: number };
  value: { initial: { postfix: TokenLike[] }; filters: FilterLike[] };
  render(ctx: Context, emitter: Emitter): unknown;
}

const isIterator = (v: unknown): boolean =>
  typeof v === 'object' && v !== null && typeof (v as Iterator<unknown>).next === 'function' && typeof (v as Iterator<unknown>).throw === 'function' && typeof (v as Iterator<unknown>).return === 'function';

/** What liquidjs' sync driver makes of a yielded value: an iterator is run to its value, anything else is the value. */
const settle = (v: unknown): unknown => (isIterator(v) ? toValueSync(v as Generator<unknown>) : v);

/** readPlain's answer for what it leaves to liquidjs' `readProperty`. */
const NOT_PLAIN = Symbol('not plain');

/**
 * liquidjs' `readProperty(obj, key)` (with `ownPropertyOnly`) for what a template reads nearly always: a key other
 * than `size`, `first` and `last` of a plain data object (an Object, or a scope made without a prototype: never a Drop
 * nor an array) without a `toLiquid` method. Its own property, else undefined; NOT_PLAIN for anything else, and for a
 * value that is a function (liquidjs calls it). Without liquidjs' general steps for these (toLiquid, toValue, the
 * array test by `Object.prototype.toString`, the Drop tests, the function test, the special keys), composing a
 * campaign message took 4-5% less in process (BENCHMARKS.md › Issue 28, eighteenth stop).
 */
function readPlain(obj: unknown, key: string): unknown {
  if (typeof obj !== 'object' || obj === null) return NOT_PLAIN;
  const proto: unknown = Object.getPrototypeOf(obj);
  if (proto !== Object.prototype && proto !== null) return NOT_PLAIN;
  if (typeof (obj as { toLiquid?: unknown }).toLiquid === 'function') return NOT_PLAIN;
  if (!Object.prototype.hasOwnProperty.call(obj, key)) return undefined;
  const value = (obj as Record<string, unknown>)[key];
  return typeof value === 'function' ? NOT_PLAIN : value;
}

/** A token's value as liquidjs' `evalToken` computes it, or null when it is not one this handles. */
function tokenEvaluator(token: TokenLike | undefined): Evaluate | null {
  if (!token) return () => undefined;
  if ('content' in token) {
    const content = token.content;
    return () => content;
  }
  if (token.kind !== TokenKind.PropertyAccess || token.variable || !token.props?.length) return null;
  type Scoped = { findScope(k: unknown): unknown; readProperty(o: unknown, k: unknown): unknown; ownPropertyOnly?: boolean };
  // A path of literal keys (`r.title`, `items[0]`, nearly every path in a template): each key's value is its content
  // (`toValue` of a string or number is itself), so the path is known here and not evaluated per render.
  if (token.props.every((p) => 'content' in p)) {
    const path = token.props.map((p) => p.content);
    const first = path[0];
    // Keys a plain object's property is read by as it is (readPlain): liquidjs answers `size`, `first` and `last` itself.
    const plainKeys = path.map((k) => typeof k === 'string' && k !== 'size' && k !== 'first' && k !== 'last');
    return (ctx) => {
      const scoped = ctx as unknown as Scoped;
      const ownOnly = scoped.ownPropertyOnly === true;
      let scope: unknown = scoped.findScope(first);
      for (let i = 0; i < path.length; i++) {
        const read = ownOnly && plainKeys[i] ? readPlain(scope, path[i] as string) : NOT_PLAIN;
        scope = settle(read === NOT_PLAIN ? scoped.readProperty(scope, path[i]) : read);
      }
      return scope;
    };
  }
  const props = token.props.map(tokenEvaluator);
  if (props.some((p) => p === null)) return null;
  const keys = props as Evaluate[];
  return (ctx) => {
    // evalPropertyAccessToken: each property's value (`evalTokenValue`), then `_get`: the scope of the first, and
    // `readProperty` along every key from there.
    const scoped = ctx as unknown as Scoped;
    const path = keys.map((k) => settle(toValue(k(ctx))));
    let scope: unknown = scoped.findScope(path[0]);
    for (const key of path) scope = settle(scoped.readProperty(scope, key));
    return scope;
  };
}

/** A fast render for an output, or null when liquidjs' own is needed. */
function outputRenderer(output: OutputLike): ((ctx: Context, emitter: Emitter) => void) | null {
  // An output with operators keeps liquidjs' renderer; tags' values are the ones evaluated with operators here.
  if (output.value.initial.postfix.length !== 1) return null;
  const value = valueEvaluator(output.value);
  if (!value) return null;
  return (ctx, emitter) => {
    emitter.write(settle(toValue(value(ctx))));
  };
}

interface ValueLike {
  initial: { postfix: (TokenLike & { operator?: string })[] };
  filters: FilterLike[];
}

/** liquidjs' operators (defaultOperators): `not` takes one operand, the others two. */
const BINARY_OPERATORS = new Set(['==', '!=', '>', '<', '>=', '<=', 'contains', 'and', 'or']);

/**
 * A tag's value (an `if` condition, an `assign`'s right side) as liquidjs' `Value.value` computes it, or null when a
 * token is not one this handles: the expression's postfix evaluated in order (operands as `evalToken`, each operator
 * through the engine's own operator, whose generator is run to its value), then each filter's handler.
 */
function valueEvaluator(value: ValueLike): Evaluate | null {
  const steps: (Evaluate | string)[] = [];
  for (const token of value.initial.postfix) {
    if (token.kind === TokenKind.Operator) {
      const op = token.operator ?? '';
      if (op !== 'not' && !BINARY_OPERATORS.has(op)) return null;
      steps.push(op);
      continue;
    }
    const operand = tokenEvaluator(token);
    if (!operand) return null;
    steps.push(operand);
  }
  if (steps.length === 0) return null;
  const filters = filterSteps(value.filters);
  if (!filters) return null;
  const single = steps.length === 1 && typeof steps[0] === 'function' ? steps[0] : null;
  return (ctx) => {
    let result: unknown;
    if (single) result = single(ctx);
    else {
      const operators = (ctx as unknown as { opts: { operators: Record<string, (...args: unknown[]) => unknown> } }).opts.operators;
      const operands: unknown[] = [];
      for (const step of steps) {
        if (typeof step === 'function') {
          operands.push(step(ctx));
          continue;
        }
        const r = operands.pop();
        operands.push(settle(step === 'not' ? operators[step]!(r, ctx) : operators[step]!(operands.pop(), r, ctx)));
      }
      result = operands[0];
    }
    return applyFilters(filters, result, ctx);
  };
}

type FilterStep = { filter: FilterLike; args: (Evaluate | [string, Evaluate])[]; memo: FilterMemo | null; escape: boolean };

/** What liquidjs' `escape` writes for each character it replaces. */
const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&#34;', "'": '&#39;' };
const ESCAPED = /[&<>"']/;
const ESCAPED_ALL = /[&<>"']/g;
const escapeOne = (c: string) => ESCAPES[c]!;

/**
 * liquidjs' `escape` of a string (the HTML engine's output escape, appended to nearly every output of a body): the
 * same result, but a value with nothing to escape (most are) is returned after one search instead of a replace that
 * copies it, and the alternation liquidjs matches is a character class.
 */
export const escapeHtml = (s: string): string => (ESCAPED.test(s) ? s.replace(ESCAPED_ALL, escapeOne) : s);

/** Results of one pure filter with the same literal arguments, by input string (see MEMOIZED). */
interface FilterMemo {
  readonly results: Map<string, unknown>;
  /** What the filter charges to the render's memory limit for an input (charged again on a hit, as a call would). */
  readonly cost: (input: string) => number;
}

const builtin = (name: keyof typeof builtinFilters) => {
  const impl = builtinFilters[name] as unknown;
  return typeof impl === 'function' ? impl : (impl as { handler: unknown }).handler;
};
/** liquidjs' `escape`: also the HTML engine's output escape (its `outputEscape: 'escape'`). */
const builtinEscape = builtin('escape');

/**
 * liquidjs' own filters whose result depends only on the input string and their literal arguments, and costly enough
 * to remember: a campaign's catalogue text (an article's blurb, a product's title) goes through the same
 * `strip_html | truncatewords` for every recipient who gets it, and once for the HTML and once for the text part of
 * each. Each `cost` is what the filter itself charges the memory limit (`memoryLimit.use`), so a remembered result
 * counts as the call did. A render thread keeps at most MEMO_ENTRIES results per filter and arguments, for at most
 * MEMO_ARGUMENTS argument lists per filter.
 */
const MEMOIZED = new Map<unknown, (args: unknown[]) => (input: string) => number>([
  [builtin('strip_html'), () => (input) => input.length],
  [builtin('truncate'), (args) => (input) => input.length + stringify(args[1] ?? '...').length],
  [builtin('truncatewords'), (args) => (input) => input.length + stringify(args[1] ?? '...').length],
]);
const MEMO_ENTRIES = 2048;
const MEMO_ARGUMENTS = 64;
/** Memos by filter, then by its literal arguments. */
const memos = new Map<unknown, Map<string, FilterMemo>>();

/** The memo for a filter whose every argument is a literal (positional), or null. */
function memoFor(filter: FilterLike): FilterMemo | null {
  const costOf = MEMOIZED.get(filter.handler);
  if (!costOf) return null;
  const args: unknown[] = [];
  for (const arg of filter.args) {
    if (Array.isArray(arg) || !('content' in arg)) return null;
    args.push(arg.content);
  }
  const key = JSON.stringify(args);
  let byArgs = memos.get(filter.handler);
  if (!byArgs) memos.set(filter.handler, (byArgs = new Map()));
  let memo = byArgs.get(key);
  if (!memo) {
    // Templates with many different arguments (a `truncate` length per output) remember only their first few.
    if (byArgs.size >= MEMO_ARGUMENTS) return null;
    byArgs.set(key, (memo = { results: new Map(), cost: costOf(args) }));
  }
  return memo;
}

/** Each filter with its arguments' evaluators, or null when an argument is not a token this handles. */
function filterSteps(list: FilterLike[]): FilterStep[] | null {
  const steps: FilterStep[] = [];
  for (const filter of list) {
    const args: (Evaluate | [string, Evaluate])[] = [];
    for (const arg of filter.args) {
      const value = tokenEvaluator(Array.isArray(arg) ? arg[1] : arg);
      if (!value) return null;
      args.push(Array.isArray(arg) ? [arg[0], value] : value);
    }
    steps.push({ filter, args, memo: memoFor(filter), escape: filter.handler === builtinEscape && args.length === 0 });
  }
  return steps;
}

/** `Filter.render` of each in turn: the arguments evaluated, the handler called with liquidjs' `this`. */
function applyFilters(steps: FilterStep[], value: unknown, ctx: Context): unknown {
  for (const { filter, args, memo, escape } of steps) {
    if (escape && typeof value === 'string') {
      // What liquidjs' escape does with a string: charge its length, then replace.
      (ctx as unknown as { memoryLimit: { use(n: number): void } }).memoryLimit.use(value.length);
      value = escapeHtml(value);
      continue;
    }
    if (memo && typeof value === 'string') {
      const known = memo.results.get(value);
      if (known !== undefined || memo.results.has(value)) {
        (ctx as unknown as { memoryLimit: { use(n: number): void } }).memoryLimit.use(memo.cost(value));
        value = known;
        continue;
      }
      const input = value;
      value = callFilter(filter, args, value, ctx);
      if (memo.results.size >= MEMO_ENTRIES) memo.results.clear();
      memo.results.set(input, value);
      continue;
    }
    value = callFilter(filter, args, value, ctx);
  }
  return value;
}

const argument = (a: Evaluate | [string, Evaluate], ctx: Context) => (Array.isArray(a) ? [a[0], a[1](ctx)] : a(ctx));

/** The handler called as liquidjs' Filter.render calls it (`this`, the value, then the arguments), without an array for the usual one or two arguments. */
function callFilter(filter: FilterLike, args: (Evaluate | [string, Evaluate])[], value: unknown, ctx: Context): unknown {
  const self = { context: ctx, token: filter.token, liquid: filter.liquid };
  const h = filter.handler;
  if (args.length === 0) return settle(h.call(self, value));
  if (args.length === 1) return settle(h.call(self, value, argument(args[0]!, ctx)));
  if (args.length === 2) return settle(h.call(self, value, argument(args[0]!, ctx), argument(args[1]!, ctx)));
  return settle(h.apply(self, [value, ...args.map((a) => argument(a, ctx))]));
}

type Render = (ctx: Context, emitter: Emitter) => unknown;

interface TagLike {
  token: { kind: number };
  liquid: { renderer: { renderTemplates: RenderTemplates } };
  render: Render;
  /** if, unless */
  branches?: { value: ValueLike; templates: Template[]; test?: unknown }[];
  elseTemplates?: Template[];
  /** assign */
  key?: string;
  value?: ValueLike;
  /** capture; for: the loop variable */
  variable?: string;
  templates?: Template[];
  /** for */
  collection?: TokenLike & { getText(): string };
  hash?: { hash: Record<string, TokenLike | undefined> };
}

/** `instanceof` without narrowing (the tag is typed by the fields read here, not by liquidjs' classes). */
const is = (value: unknown, type: abstract new (...args: never[]) => unknown): boolean => value instanceof type;

const bottom = (ctx: Context) => (ctx as unknown as { bottom(): Record<string, unknown> }).bottom();

/** ForTag's modifiers, in the order it applies them (unless `orderedFilterParameters`). */
const LOOP_MODIFIERS = ['offset', 'limit', 'reversed'];

/** liquidjs' `createScope`: a scope object without a prototype. */
const createScope = (from: object): object => Object.assign(Object.create(null) as object, from);

/** liquidjs' `toEnumerable`: what a `for` iterates over. */
function toEnumerable(value: unknown): unknown[] {
  const v = toValue(value);
  if (Array.isArray(v)) return v;
  if (typeof v === 'string') return v.length > 0 ? [v] : [];
  const object = v !== null && (typeof v === 'object' || typeof v === 'function');
  if (object && Symbol.iterator in v) return Array.from(v as Iterable<unknown>);
  if (object) return Object.keys(v).map((key) => [key, (v as Record<string, unknown>)[key]]);
  return [];
}

let forloopClass: (new (length: number, collection: string, variable: string) => unknown) | undefined;
/** liquidjs' ForloopDrop (not exported): the class of the `forloop` a loop of its own puts in scope, taken once. */
function forloopDrop(): new (length: number, collection: string, variable: string) => unknown {
  if (!forloopClass) {
    const ctx = new LiquidContext({ a: [0] });
    const engine = new LiquidEngine();
    engine.renderSync(engine.parse('{% for x in a %}{% assign f = forloop %}{% endfor %}'), ctx);
    forloopClass = (bottom(ctx).f as object).constructor as unknown as typeof forloopClass;
  }
  return forloopClass!;
}

/**
 * Synchronous renders of the tags a campaign template repeats per recipient and per loop iteration: `if`, `unless`,
 * `assign`, `capture` and `for`. Each takes liquidjs' steps in its order (IfTag, UnlessTag, AssignTag, CaptureTag, ForTag) without
 * a generator per render and per value. The tag's own values are evaluated first; if that throws, the tag is rendered
 * by liquidjs instead (nothing was written yet), so an error reads as it always has. Null for any other tag, and for
 * a value this does not handle.
 */
function tagRenderer(tag: TagLike, original: Render): Render | null {
  const renderer = tag.liquid.renderer;
  const isSync = (ctx: Context) => (ctx as unknown as { sync: boolean }).sync;
  // The renderer's list render is liquidjs' generator outside synchronous renders (renderTemplatesSynchronously).
  const renderList = (templates: Template[], ctx: Context, emitter?: Emitter) => settle(renderer.renderTemplates(templates, ctx, emitter));
  if ((is(tag, IfTag) || is(tag, UnlessTag)) && tag.branches) {
    // UnlessTag's first branch tests isFalsy, its elsif branches isTruthy; IfTag's every branch isTruthy.
    const branches = tag.branches.map((b) => ({ test: valueEvaluator(b.value), falsy: b.test === isFalsy, templates: b.templates }));
    if (branches.some((b) => !b.test) || (is(tag, UnlessTag) && tag.branches.some((b) => b.test !== isFalsy && b.test !== isTruthy))) return null;
    const elseTemplates = tag.elseTemplates;
    return function renderBranch(ctx, emitter) {
      if (!isSync(ctx)) return original.call(tag, ctx, emitter);
      let chosen: Template[] | undefined;
      try {
        for (const b of branches) {
          const v = settle(toValue(b.test!(ctx)));
          if (b.falsy ? isFalsy(v, ctx) : isTruthy(v, ctx)) {
            chosen = b.templates;
            break;
          }
        }
      } catch {
        return original.call(tag, ctx, emitter);
      }
      renderList(chosen ?? elseTemplates ?? [], ctx, emitter);
    };
  }
  if (is(tag, AssignTag) && tag.key !== undefined && tag.value) {
    const value = valueEvaluator(tag.value);
    const key = tag.key;
    if (!value) return null;
    return function renderAssign(ctx, emitter) {
      if (!isSync(ctx)) return original.call(tag, ctx, emitter);
      let v: unknown;
      try {
        v = value(ctx);
      } catch {
        return original.call(tag, ctx, emitter);
      }
      bottom(ctx)[key] = v;
    };
  }
  if (is(tag, CaptureTag) && tag.variable !== undefined && tag.templates) {
    const { variable, templates } = tag;
    return function renderCapture(ctx, emitter) {
      if (!isSync(ctx)) return original.call(tag, ctx, emitter);
      bottom(ctx)[variable] = renderList(templates, ctx);
    };
  }
  if (is(tag, ForTag) && tag.collection && tag.hash && tag.templates && tag.variable !== undefined) {
    const collection = tokenEvaluator(tag.collection);
    if (!collection) return null;
    // Each modifier's value; null for one written without a value (`reversed`), which liquidjs' Hash makes `true`.
    const hashed: { key: string; value: Evaluate | null }[] = [];
    for (const [key, token] of Object.entries(tag.hash.hash)) {
      const value = token === undefined ? null : tokenEvaluator(token);
      if (token !== undefined && !value) return null;
      hashed.push({ key, value });
    }
    const Forloop = forloopDrop();
    const { templates, variable } = tag;
    const elseTemplates = tag.elseTemplates ?? [];
    const collectionText = tag.collection.getText();
    const continueKey = `continue-${variable}-${collectionText}`;
    const ordered = (tag.liquid as unknown as { options: { orderedFilterParameters?: boolean } }).options.orderedFilterParameters;
    type LoopContext = Context & { push(scope: object): void; pop(): void; getRegister(key: string, d?: unknown): unknown; setRegister(key: string, v: unknown): void; breakCalled: boolean; continueCalled: boolean };
    return function renderFor(context, emitter) {
      if (!isSync(context)) return original.call(tag, context, emitter);
      const ctx = context as LoopContext;
      let items: unknown[];
      const hash: Record<string, unknown> = {};
      try {
        items = toEnumerable(collection(ctx));
        if (items.length) {
          ctx.push(createScope({ continue: ctx.getRegister(continueKey, {}) }));
          try {
            for (const h of hashed) hash[h.key] = h.value === null ? true : h.value(ctx);
          } finally {
            ctx.pop();
          }
        }
      } catch {
        return original.call(tag, context, emitter);
      }
      if (!items.length) {
        renderList(elseTemplates, ctx, emitter);
        return;
      }
      const modifiers = ordered ? Object.keys(hash).filter((k) => LOOP_MODIFIERS.includes(k)) : LOOP_MODIFIERS.filter((k) => hash[k] !== undefined);
      for (const m of modifiers) items = m === 'offset' ? items.slice(hash.offset as number) : m === 'limit' ? items.slice(0, hash.limit as number) : [...items].reverse();
      ctx.setRegister(continueKey, ((hash.offset as number) || 0) + items.length);
      const forloop = new Forloop(items.length, collectionText, variable) as { next(): void };
      const scope = createScope({ forloop }) as Record<string, unknown>;
      ctx.push(scope);
      for (const item of items) {
        scope[variable] = item;
        ctx.continueCalled = ctx.breakCalled = false;
        renderList(templates, ctx, emitter);
        if (ctx.breakCalled) break;
        forloop.next();
      }
      ctx.continueCalled = ctx.breakCalled = false;
      ctx.pop();
    };
  }
  return null;
}

/** Marks a node whose render is one of the synchronous ones above: it writes to the emitter and returns nothing. */
const SYNC = Symbol('mailwright.syncRender');

function accelerateOne(tpl: Template): void {
  const node = tpl as unknown as OutputLike & { str?: string; templates?: Template[]; elseTemplates?: Template[]; branches?: { templates?: Template[] }[]; [SYNC]?: true };
  const kind = node.token?.kind;
  if (kind === TokenKind.HTML && typeof node.str === 'string') {
    node.render = function renderHtml(this: { str: string }, _ctx: Context, emitter: Emitter) {
      const pieces = (emitter as Partial<PieceEmitter>).pieces;
      if (pieces) pieces.push(this as unknown as HtmlNode);
      else emitter.write(this.str);
    };
    node[SYNC] = true;
    return;
  }
  if (kind === TokenKind.Output && node.value?.initial?.postfix) {
    const fast = outputRenderer(node);
    if (fast) {
      const original = node.render;
      node.render = function renderOutput(this: OutputLike, ctx: Context, emitter: Emitter) {
        try {
          return fast(ctx, emitter);
        } catch {
          return original.call(this, ctx, emitter);
        }
      };
    }
    return;
  }
  // Tags: if, unless, assign and capture render synchronously; the bodies of every block tag are accelerated.
  if (kind === TokenKind.Tag) {
    const tag = node as unknown as TagLike;
    const fast = tagRenderer(tag, tag.render);
    if (fast) tag.render = fast;
  }
  accelerate(node.templates);
  accelerate(node.elseTemplates);
  for (const branch of node.branches ?? []) accelerate(branch.templates);
}

/** Installs the fast renderers on a parsed template, in place; returns it. */
export function accelerate<T extends Template[] | undefined>(templates: T): T {
  if (Array.isArray(templates)) for (const tpl of templates) accelerateOne(tpl);
  return templates;
}

/** A parsed template's run of its own HTML (liquidjs' HTML node), as a PieceEmitter keeps it. */
export interface HtmlNode {
  readonly str: string;
}

/**
 * An emitter that keeps a render's output as pieces instead of one string: the template's own HTML as its nodes (the
 * same objects for every recipient, so what is prepared for one serves all), everything else as the strings written.
 * A campaign message is written to the wire from these (compose/link-plan.ts `trackPieces`).
 */
export class PieceEmitter {
  readonly pieces: (HtmlNode | string)[] = [];
  buffer = '';
  write(html: unknown): void {
    const s = stringify(html);
    if (s) this.pieces.push(s);
  }
}

/** liquidjs' `stringify`, which its emitter writes with: a Drop's value, nil as nothing, arrays joined. */
function stringify(value: unknown): string {
  const v = toValue(value);
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) return v.map(stringify).join('');
  return String(v);
}

type RenderTemplates = (templates: Template[], ctx: Context, emitter?: Emitter) => unknown;

/**
 * The render-time limit reads the clock at one check in CLOCK_EVERY: `performance.now()` at every tag and list was
 * 1.4% of a render thread's CPU (a campaign digest checks about a hundred times). A render still stops within
 * CLOCK_EVERY steps of its deadline (a step is a tag or a list, such as a loop's iteration), and no step can run long
 * unchecked that liquidjs' own checks would have stopped, as they too come only between steps.
 */
const CLOCK_EVERY = 16;
let untilClock = 0;

function checkRenderLimit(limit: { check(now: number): void }): void {
  if (--untilClock > 0) return;
  untilClock = CLOCK_EVERY;
  limit.check(performance.now());
}

/**
 * Replaces an engine's `renderTemplates` (a generator: one per template list rendered, which is one per iteration of
 * every `for` loop) with a plain function for synchronous renders, the only kind these engines run. It takes liquidjs'
 * steps in its order: the render-time limit checked on entry and before each tag (the clock read at one check in
 * CLOCK_EVERY), every node rendered into the same emitter (a returned generator run to its value, a returned string
 * written), a `break` or `continue` ending the list, an error wrapped as a RenderError naming its node. What it saves
 * is driving a generator per list and a yield per node. Asynchronous renders, `catchAllErrors` and `keepOutputType`
 * keep liquidjs' own.
 */
export function renderTemplatesSynchronously(engine: Liquid): void {
  const renderer = engine.renderer as unknown as { renderTemplates: RenderTemplates };
  const original = renderer.renderTemplates.bind(renderer);
  renderer.renderTemplates = function renderTemplates(templates, ctx, given) {
    const c = ctx as unknown as { sync: boolean; opts: { catchAllErrors?: boolean; keepOutputType?: boolean }; renderLimit: { check(now: number): void }; breakCalled: boolean; continueCalled: boolean };
    if (!c.sync || c.opts.catchAllErrors || c.opts.keepOutputType) return original(templates, ctx, given);
    const emitter = given ?? { buffer: '', write(html: unknown) { this.buffer += stringify(html); } };
    checkRenderLimit(c.renderLimit);
    for (const tpl of templates) {
      if ((tpl as { [SYNC]?: true })[SYNC]) {
        tpl.render(ctx, emitter);
        continue;
      }
      checkRenderLimit(c.renderLimit);
      try {
        const html = settle(tpl.render(ctx, emitter));
        if (html) emitter.write(html);
        if (c.breakCalled || c.continueCalled) break;
      } catch (e) {
        throw LiquidError.is(e) ? e : new RenderError(e as Error, tpl);
      }
    }
    return (emitter as unknown as { buffer: string }).buffer;
  };
}
