import { filters as liquidFilters, Liquid, type Template } from 'liquidjs';
import { accelerate, escapeHtml, renderTemplatesSynchronously } from '../../domain/rendering/fast-output';
import { renderTemplate } from '../../domain/rendering/render';

/**
 * The fast output renderers (domain/rendering/fast-output.ts) against liquidjs' own, template by template: the same
 * output for the same data, or the same error. Both sides parse with one engine (the options of render.ts that change
 * what an output does: escaping, own properties only, limits); only the installed renderers differ.
 */
const options = { strictVariables: false, strictFilters: true, ownPropertyOnly: true, renderLimit: 1_000, memoryLimit: 64 * 1024 * 1024 };
const html = new Liquid({ ...options, outputEscape: 'escape' });
const plain = new Liquid(options);
// The same engines with template lists rendered without generators (renderTemplatesSynchronously), as render.ts has them.
const htmlSync = new Liquid({ ...options, outputEscape: 'escape' });
const plainSync = new Liquid(options);
renderTemplatesSynchronously(htmlSync);
renderTemplatesSynchronously(plainSync);
for (const engine of [html, plain, htmlSync, plainSync]) {
  // A filter that reads its context, as the composer's text-part filters and liquidjs' `default` do.
  engine.registerFilter('scoped', function (this: { context: { getSync(p: string[]): unknown } }, v: unknown, key: string) {
    return `${String(v)}:${String(this.context.getSync([key]))}`;
  });
  engine.registerFilter('explode', (v: unknown) => {
    if (v === 'boom') throw new Error('exploded');
    return v;
  });
}

const TEMPLATES = [
  'Hi {{ name }}, {{ missing }}|{{ missing.deep.path }}|{{ name | upcase | append: "!" }}',
  '{{ first_name | default: "there" }} {{ flag | default: "x", allow_false: true }} {{ zero | default: 5 }}',
  '{{ items.size }} {{ items.first.title }} {{ items.last.title }} {{ items[0].title }} {{ items[idx].title }} {{ map["a key"] }} {{ map[keyName] }}',
  '{{ text }} {{ text | escape }} {{ text | escape_once }} {{ text | raw }} {{ text | strip_html | truncatewords: 3 }}',
  '{% for r in items limit: 2 %}<li>{{ forloop.index }}/{{ forloop.length }} {{ r.title | truncate: 8 }} {{ r.price | times: 1.2 | round: 2 }}</li>{% else %}none{% endfor %}',
  '{% if items.size > 1 %}{{ items.size }} items{% elsif name %}{{ name }}{% else %}{{ "none" }}{% endif %}{% unless flag %}{{ flag }}{% endunless %}',
  '{% assign x = name | downcase %}{% capture y %}{{ x }}-{{ idx }}{% endcapture %}{{ y }} {{ x | size }}',
  '{% case plan %}{% when "pro", "team" %}{{ plan | capitalize }}{% else %}{{ plan }}{% endcase %}{% increment n %}{{ n }}{% cycle "a", "b" %}{% cycle "a", "b" %}',
  '{{ -3 | abs }} {{ 2.5 | ceil }} {{ "a,b,c" | split: "," | join: "+" }} {{ nil }}|{{ empty }}|{{ blank }}|{{ true }} {{ (1..3) | join: "," }} {{ idx == 1 }}',
  '{{ constructor }}|{{ map.constructor }}|{{ __proto__ }}|{{ items.length }}|{{ map.hasOwnProperty }}',
  // Plain objects read as they are, and what is not read that way: size, first and last of an object, a toLiquid
  // method, a property that is a function, a null-prototype object, an inherited value.
  '{{ map.size }}|{{ map.first }}|{{ map.last }}|{{ lq.title }}|{{ lq.size }}|{{ fn.run }}|{{ fn.name }}|{{ bare.k }}|{{ bare.size }}|{{ child.k }}|{{ child.own }}',
  '{{ name | scoped: "plan" }} {{ price | plus: extra | minus: 1 }} {{ url | url_encode }} {{ created | date: "%Y-%m-%d" }}',
  '{{ name | explode }}',
  '{{ 10 | divided_by: zero }}',
  '{% raw %}{{ not rendered }}{% endraw %}{{ name | json }} {{ items | map: "title" | join: ", " }} {{ items | where: "price", 3 | size }}',
  // Outputs inside loops and the other block tags: break, continue, nesting, modifiers, else, errors inside.
  '{% for r in items %}{% if r.price == 4.25 %}{% continue %}{% endif %}{{ r.title }}{% if forloop.index == 3 %}{% break %}{% endif %},{% endfor %}|{% for r in items reversed offset: 1 %}{{ forloop.rindex }}{{ r.price }}{% endfor %}',
  '{% for a in items limit: 2 %}{% for b in items offset: 1 %}{{ forloop.parentloop.index }}.{{ forloop.index }}{% if forloop.last %};{% endif %}{% endfor %}{% endfor %}{% for c in items offset: continue limit: 1 %}{{ c.title }}{% endfor %}',
  '{% for r in items %}{% capture t %}[{{ r.title | truncate: 6 }}]{% endcapture %}{{ t }}{% else %}empty{% endfor %}{% for ch in name %}{{ ch }}{% endfor %}{% for kv in map %}{{ kv[0] }}={{ kv[1] }} {% endfor %}',
  '{% tablerow r in items cols: 2 %}{{ r.title }}{% endtablerow %}{% for r in items %}{{ r.title | explode }}{{ name | explode }}{% endfor %}',
  '{% for i in (1..3) %}{% for j in (1..i) %}{{ j }}{% endfor %}{% unless forloop.last %}-{% endunless %}{% endfor %}{{ 1 | divided_by: zero }}',
  // for (rendered synchronously): `offset: continue` of the same loop, modifiers from variables and in written order, a
  // forloop written out, collections that are not arrays (nil, a number, a string, an object), a limit that fails.
  '{% for r in items limit: 2 %}{{ r.title }}{% endfor %}|{% for r in items offset: continue limit: idx %}{{ r.title }}{{ forloop }}{% endfor %}|{% for r in items offset: continue %}{{ r.title }}{% else %}done{% endfor %}',
  '{% for r in items limit: idx reversed offset: idx %}{{ r.price }}{% endfor %}|{% for r in missing %}x{% else %}nil{% endfor %}|{% for r in zero %}{{ r }}{% else %}num{% endfor %}|{% for r in items limit: name %}{{ r.title }}{% endfor %}',
  // Tags rendered synchronously (if, unless, assign, capture): operators, literals, filters in conditions, errors.
  '{% if name and flag %}a{% elsif name or flag %}b{% endif %}{% if not flag %}c{% endif %}{% if name contains "da" %}d{% endif %}{% if items contains 3 %}e{% endif %}',
  '{% if items == empty %}empty{% endif %}{% if name == blank %}blank{% endif %}{% if missing == nil %}nil{% endif %}{% if zero >= 0 and idx < 2 %}cmp{% endif %}{% if price != 3 %}ne{% else %}eq{% endif %}',
  '{% if name | size %}long{% endif %}{% if name | remove: name %}nonempty{% endif %}{% if name | explode %}x{% else %}y{% endif %}|{% if items.first.title == "Second" %}first{% elsif items.last.price > 2.5 %}last{% endif %}',
  '{% unless flag %}u1{% elsif name %}u2{% else %}u3{% endunless %}{% unless name %}v1{% elsif flag %}v2{% else %}v3{% endunless %}',
  '{% assign a = items | map: "title" | join: "/" %}{{ a }}{% assign b = name | explode %}{{ b }}{% assign c = idx == 1 %}{{ c }}{% assign d = (1..3) %}{{ d | join: "" }}',
  '{% capture outer %}[{% capture inner %}{{ name | upcase }}{% endcapture %}{{ inner | size }}{% if inner %}+{% endif %}]{% endcapture %}{{ outer }}{{ inner }}{% assign e = outer | append: "!" %}{{ e }}',
  '{% for r in items %}{% assign t = r.title | truncate: 5 %}{% if r.price > 3 %}{% break %}{% endif %}{{ t }};{% endfor %}{% for r in items %}{% unless r.price == 3 %}{% continue %}{% endunless %}{{ r.title }}{% endfor %}',
];

const DATA: Record<string, unknown>[] = [
  {
    name: "Ada <b>&amp;</b> O'Neil",
    first_name: null,
    flag: false,
    zero: 0,
    idx: 1,
    keyName: 'k',
    plan: 'pro',
    price: 3,
    extra: '2',
    url: 'https://x.example/?a=b c',
    created: '2026-11-27T10:00:00Z',
    text: '<p>Tom &amp; Jerry &lt;3 "quotes" and more words here</p>',
    items: [
      { title: 'First <title>', price: 3 },
      { title: 'Second', price: 4.25 },
      { title: 'Third', price: 3 },
    ],
    map: { 'a key': 'spaced', k: 'by key' },
    lq: { title: 'own title', toLiquid: () => ({ title: 'toLiquid title', x: 1 }) },
    fn: { run: () => 'ran', name: 'fn' },
    bare: Object.assign(Object.create(null) as object, { k: 'no prototype' }),
    child: Object.assign(Object.create({ k: 'inherited' }) as object, { own: 'own' }),
  },
  { name: 'boom', items: [], plan: 'free', idx: 'x', zero: 0 },
  {},
];

function outcome(engine: Liquid, templates: Template[], data: Record<string, unknown>): string {
  try {
    return `ok:${engine.renderSync(templates, { ...data }) as string}`;
  } catch (err) {
    return `error:${(err as Error).name}:${(err as Error).message}`;
  }
}

describe('fast output renderers', () => {
  for (const [name, engine] of [
    ['html', html],
    ['plain', plain],
  ] as const) {
    test.each(TEMPLATES.map((t, i) => [i, t]))(`${name} engine, template %i renders as liquidjs does`, (_i, source) => {
      for (const data of DATA) {
        const expected = outcome(engine, engine.parse(source), data);
        expect(outcome(engine, accelerate(engine.parse(source)), data)).toBe(expected);
      }
    });
  }

  for (const [name, reference, engine] of [
    ['html', html, htmlSync],
    ['plain', plain, plainSync],
  ] as const) {
    test.each(TEMPLATES.map((t, i) => [i, t]))(`${name} engine, template %i renders as liquidjs does with template lists rendered synchronously`, (_i, source) => {
      for (const data of DATA) expect(outcome(engine, accelerate(engine.parse(source)), data)).toBe(outcome(reference, reference.parse(source), data));
    });
  }

  test('a loop that runs past the render time limit is stopped with liquidjs error, as without the list renderer', () => {
    const slow = '{% for a in (1..5000) %}{% for b in (1..5000) %}{{ b }}{% endfor %}{% endfor %}';
    const quick = new Liquid({ ...options, renderLimit: 200 });
    renderTemplatesSynchronously(quick);
    expect(outcome(quick, accelerate(quick.parse(slow)), {})).toMatch(/^error:RenderError:template render limit exceeded/);
  });

  test('a remembered filter result (strip_html, truncate, truncatewords) charges the memory limit as the call does', () => {
    const small = { ...options, memoryLimit: 50_000 };
    const reference = new Liquid(small);
    const fast = new Liquid(small);
    renderTemplatesSynchronously(fast);
    const blurb = `<p>${'word '.repeat(600)}</p>`;
    for (const [n, source] of [
      [5, '{% for i in (1..N) %}{{ s | strip_html | truncatewords: 4 }}{{ s | truncate: 9, "…" }}{% endfor %}'],
      [40, '{% for i in (1..N) %}{{ s | strip_html | truncatewords: 4 }}{{ s | truncate: 9, "…" }}{% endfor %}'],
    ] as const) {
      const template = source.replace('N', String(n));
      const expected = outcome(reference, reference.parse(template), { s: blurb });
      // Twice: the second render finds every result remembered.
      expect(outcome(fast, accelerate(fast.parse(template)), { s: blurb })).toBe(expected);
      expect(outcome(fast, accelerate(fast.parse(template)), { s: blurb })).toBe(expected);
      expect(expected).toMatch(n === 5 ? /^ok:/ : /memory alloc limit exceeded/);
    }
  });

  test("the output escape of a string is liquidjs' escape: the same text, the same charge to the memory limit", () => {
    const escape = liquidFilters.escape as (this: unknown, s: unknown) => string;
    const self = { context: { memoryLimit: { use: () => undefined } } };
    for (const s of ['', 'plain words', `&<>"'`, "a&b<c>d\"e'f", 'x&amp;y', "'''", '\ud800&\udfff', 'é & ü']) expect(escapeHtml(s)).toBe(escape.call(self, s));
    const small = { ...options, outputEscape: 'escape' as const, memoryLimit: 10_000 };
    const reference = new Liquid(small);
    const fast = new Liquid(small);
    renderTemplatesSynchronously(fast);
    for (const [n, expect_] of [
      [2, /^ok:(Tom &amp; Jerry&#39;s ){2}$/],
      [800, /memory alloc limit exceeded/],
    ] as const) {
      const template = `{% for i in (1..${n}) %}{{ s }}{% endfor %}`;
      const expected = outcome(reference, reference.parse(template), { s: "Tom & Jerry's " });
      expect(expected).toMatch(expect_);
      expect(outcome(fast, accelerate(fast.parse(template)), { s: "Tom & Jerry's " })).toBe(expected);
    }
  });

  test('they are installed on what render.ts parses, and a render still gives what the template says', () => {
    expect(renderTemplate('{% for r in items %}{{ r.t | upcase }};{% endfor %}{{ name ?? "there" }}', { items: [{ t: 'a<' }, { t: 'b' }] }, { html: true })).toBe('A&lt;;B;there');
  });

  test('an output this does not handle (an operator, a range) keeps liquidjs renderer; every other output, HTML and an if get a fast one', () => {
    const parsed = accelerate(html.parse('<p>{{ a }}</p>{{ a == b }}{{ (1..2) | join }}{% if x %}{{ y | upcase }}{% endif %}')) as unknown as { render: { name: string }; branches?: { templates: { render: { name: string } }[] }[] }[];
    expect(parsed.map((t) => t.render.name)).toEqual(['renderHtml', 'renderOutput', 'renderHtml', 'render', 'render', 'renderBranch']);
    expect(parsed[5]!.branches![0]!.templates.map((t) => t.render.name)).toEqual(['renderOutput']);
  });
});
