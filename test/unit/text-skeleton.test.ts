import { randomUUID } from 'node:crypto';
import { composeEmail, prepareMessage } from '../../domain/compose/composer';
import { renderTextPart, textSkeletonOf, tidyText } from '../../domain/compose/text-skeleton';
import { expandDefaults } from '../../domain/rendering/defaults-sugar';
import { compileBody, htmlToText, renderTemplate } from '../../domain/rendering/render';
import { CAMPAIGN_BODY, HTML_BODY, MJML_BODY } from '../../bench/bodies';

/** The body's skeleton, from what the composer starts from (the compiled body, `??` expanded). */
async function skeletonOf(body: string) {
  const compiled = await compileBody(body);
  return { compiled, skeleton: textSkeletonOf(expandDefaults(compiled.html)) };
}

const words = (t: string) => t.replace(/\s+/g, ' ').trim();

const recommendations = (i: number) =>
  Array.from({ length: 6 }, (_, k) => ({
    url: `https://blog.example.com/posts/${k}?ref=${i}`,
    title: `A story worth reading, number ${k}, about something <interesting> & new`,
    blurb: `<p>Short <b>summary</b> ${k} with enough words to be truncated somewhere around here, eventually, maybe.</p>`,
  }));

const benchData = (i: number): Record<string, unknown> => ({
  first_name: i % 5 === 0 ? undefined : `Reader ${i}`,
  plan: ['free', 'pro', 'team'][i % 3],
  month: 'November',
  credits: i % 100,
  currency: i % 2 ? 'USD' : undefined,
  orders: Array.from({ length: i % 6 }, (_, k) => ({ id: `A-${i}-${k}`, items: (k % 3) + 1, total: 10 + k * 3.5 })),
  recommendations: recommendations(i),
  id: `contact-${i}`,
  email: `reader-${i}@example.com`,
  manageUrl: `https://mail.example.com/manage/t${i}`,
  unsubscribeUrl: `https://mail.example.com/unsubscribe/t${i}`,
});

describe('text-part skeleton', () => {
  test.each([
    ['bench html digest', HTML_BODY],
    ['bench mjml digest', MJML_BODY],
    ['bench campaign newsletter', CAMPAIGN_BODY],
  ])('%s: the skeleton gives the words of html-to-text on each rendered body', async (_name, body) => {
    const { compiled, skeleton } = await skeletonOf(body);
    expect(skeleton).not.toBeNull();
    for (const i of [0, 1, 2, 3, 4, 5, 9, 10, 11]) {
      const data = benchData(i);
      expect({ i, text: words(renderTextPart(skeleton!, data)) }).toEqual({ i, text: words(htmlToText(renderTemplate(compiled, data))) });
    }
  });

  const ada = { name: 'Ada', n: 3, items: ['one', 'two'], flag: true, url: 'https://x.example/a', q: 'a & b <b>bold</b> "q"' };
  const cases: [string, string, Record<string, unknown>[]][] = [
    ['a loop', '<ul>{% for i in items %}<li>{{ i }}</li>{% endfor %}</ul><p>after</p>', [ada, { items: [] }, { items: ['x'] }]],
    ['conditionals', '<p>Hi {{ name }}{% if flag %}, welcome back{% else %}, welcome{% endif %}.</p>{% unless flag %}<p>new</p>{% endunless %}', [ada, { flag: false }]],
    ['a case', '<p>{% case n %}{% when 1 %}one{% when 3 %}three{% else %}many{% endcase %} points</p>', [ada, { n: 1 }, { n: 9 }]],
    ['Liquid in a link href', '<p>See <a href="https://shop.example/o/{{ n }}?u={{ name | url_encode }}&amp;x=1">order {{ n }}</a>.</p>', [ada, { n: 0, name: 'A B' }]],
    ['a link whose href is a value', '<p><a href="{{ url }}">{{ label }}</a> and <a href="{{ url }}">{{ url }}</a></p>', [
      { url: 'https://x.example/a', label: 'read' },
      { url: '', label: 'empty href' },
      { url: '#top', label: 'anchor' },
      { url: 'mailto:a@x.example', label: 'mail' },
      { url: 'https://x.example/a', label: '' },
    ]],
    ['a heading with a variable (html-to-text uppercases it)', '<h1>Hello {{ name }}</h1><p>Body {{ name }}</p><h2>{% if flag %}Yes{% endif %} {{ q }}</h2>', [ada, { name: 'éric ß', flag: false }]],
    ['values with & and <b>', '<p>{{ q }} | {{ q | escape }} | {{ q | escape_once }} | {{ q | strip_html }}</p>', [ada, { q: '&amp; &copy; <i>x</i>' }]],
    ['a long value', '<p>Intro {{ long }} outro with more words after it to reach the wrap column of eighty characters.</p>', [{ long: 'word '.repeat(60) }, { long: 'x'.repeat(200) }]],
    ['whitespace control', '<p>a {{- name -}} b</p>\n{%- if flag -%}\n<p>kept</p>\n{%- endif -%}\n<p>end</p>', [ada, { flag: false }]],
    ['hidden preview and head with values (not in the text)', '<html><head><title>{{ name }}</title></head><body><div style="display:none">Preview {{ name }}</div><p>Body {{ name }}</p><img alt="{{ name }}" src="x.png"></body></html>', [ada]],
  ];
  test.each(cases)('%s: the same words as html-to-text of each rendered body', async (_name, body, datas) => {
    const { compiled, skeleton } = await skeletonOf(body);
    expect(skeleton).not.toBeNull();
    for (const data of datas) {
      expect({ data, text: words(renderTextPart(skeleton!, data)) }).toEqual({ data, text: words(htmlToText(renderTemplate(compiled, data))) });
    }
  });

  test.each([
    ['short values on short lines', '<h1>Hi {{ name }}</h1><p>You have {{ n }} points.</p><ul>{% for i in items %}<li><a href="https://x.example/{{ i }}">{{ i }}</a></li>{% endfor %}</ul>'],
    ['a block loop between paragraphs', '<p>Before</p>{% for i in items %}<p>Item {{ i }}</p>{% endfor %}<p>After</p>'],
    // A tag that prints nothing leaves two blanks between words, or one before a line end: tidied as html-to-text does.
    ['tags that leave blanks', '<p>Hello {% if flag %}{{ name }}{% endif %} world</p><p>Total {% unless flag %}{{ n }}{% endunless %}</p>'],
  ])('%s: exactly html-to-text where no value changes where a line wraps', async (_name, body) => {
    const { compiled, skeleton } = await skeletonOf(body);
    for (const data of [ada, { name: 'Bo', n: 0, items: [] }]) {
      expect(renderTextPart(skeleton!, data)).toBe(htmlToText(renderTemplate(compiled, data)));
    }
  });

  test.each([
    ['a raw block', '<p>{% raw %}{{ literal }}{% endraw %} {{ name }}</p>'],
    ['a comment', '<p>{% comment %}x{% endcomment %}{{ name }}</p>'],
    ['an unescaped output', '<p>{{ html | raw }}</p>'],
    ['a tag that prints (cycle, increment, echo, capture)', '<p>{% increment n %} {{ name }}</p>'],
    ['a tag in an attribute name', '<p {% if flag %}hidden{% endif %}>x {{ name }}</p>'],
    ['an output in an attribute name', '<p data-{{ k }}="1">x</p>'],
    ['a dynamic tag name', '<{{ tag }}>x</{{ tag }}>'],
    ['Liquid in a style element', '<style>.a { color: {{ color }} }</style><p>{{ name }}</p>'],
    ['Liquid in a script', '<script>var a = "{{ name }}";</script><p>x</p>'],
    ['Liquid in a style attribute (the hidden-element selectors read it)', '<p style="display:{{ d }}">x</p>'],
    ['a conditional that opens an element it does not close', '{% if flag %}<div>{% endif %}<p>{{ name }}</p>{% if flag %}</div>{% endif %}'],
    ['a tag inside a comment (it would vanish from the text)', '<!-- {% if flag %} --><p>x</p><!-- {% endif %} -->'],
    ['a tag in an attribute html-to-text drops', '<p title="{% if flag %}a{% endif %}">{{ name }}</p>'],
    ['literal braces decoded from entities (the restored template would read them as Liquid)', '<p>&#123;&#123; name }} {{ name }}</p>'],
    ['Liquid in pre (blanks kept verbatim)', '<pre>  {{ name }}  </pre>'],
    ['a value in a title or textarea in the body (htmlparser2 does not decode it)', '<p>x</p><textarea>{{ name }}</textarea>'],
    ['an unquoted href with a value in the link text', '<a href=https://x.example>{{ name }}</a>'],
    ['a for loop closed outside the link it opened in', '<a href="https://x.example/{{ a }}">{% for i in xs %}x</a>{% endfor %}'],
  ])('no skeleton (html-to-text per recipient) for %s', async (_name, body) => {
    const { skeleton } = await skeletonOf(body);
    expect(skeleton).toBeNull();
  });

  test("a link whose href and text come from values has the words of html-to-text: the URL once when the words are the URL, mailto: and # rules", async () => {
    const { compiled, skeleton } = await skeletonOf('<p>Go <a href="{{ h }}">{{ t }}</a> now</p>');
    expect(skeleton).not.toBeNull();
    const hrefs = ['https://x.example/a', 'mailto:ada@x.example', 'mailto:', '#top', 'x', 'https://x.example/a b', ''];
    const texts = ['', ' ', 'https://x.example/a', ' https://x.example/ a ', 'https://x.example/a/', 'https://x.example/', 'ada@x.example', 'ada @x.example\n', 'x', 'Read more', '\u200b', 'https://x.example/a b'];
    for (const h of hrefs) {
      for (const t of texts) expect({ h, t, text: words(renderTextPart(skeleton!, { h, t })) }).toEqual({ h, t, text: words(htmlToText(renderTemplate(compiled, { h, t }))) });
    }
  });

  test('tidying is the three replaces it stands for, on any text of blanks, line ends and words', () => {
    const reference = (s: string) => s.replace(/[ \t]+$/gm, '').replace(/(\S) {2,}(?=\S)/g, '$1 ').replace(/^\n+|\n+$/g, '');
    const pieces = [' ', ' ', ' ', '\n', '\n', 'a', 'bc', '\t', '\r', '\r\n', '\u00a0', '\u2028', '\u2029', '\ud800', '.'];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    const texts = ['', ' ', '  ', 'a  b', ' a  b ', '\n\na \n  b  \n\n', 'x  \ty', 'x\u00a0  y', 'a   \n   * b'];
    for (let i = 0; i < 3000; i++) texts.push(Array.from({ length: next() % 24 }, () => pieces[next() % pieces.length]).join(''));
    for (const text of texts) expect({ text, tidy: tidyText(text) }).toEqual({ text, tidy: reference(text) });
  });

  test('a body without Liquid: its text is converted once and is exactly html-to-text', async () => {
    const body = '<h1>Static</h1><p>Read <a href="https://x.example/a">the post</a>, then <a href="https://x.example/a">https://x.example/a</a>.</p>';
    const { skeleton } = await skeletonOf(body);
    expect(renderTextPart(skeleton!, { name: 'ignored' })).toBe(htmlToText(body));
  });

  test('the composer uses the skeleton when there is one, and html-to-text of each rendered body when not', async () => {
    const cfg = { publicUrl: 'https://mail.example.com', appSecret: 'unit-test-app-secret-0123456789-abcdef' };
    const compose = async (body: string) => {
      const message = await prepareMessage({
        content: { subject: 's', body },
        kind: 'TRANSACTIONAL',
        templateId: null,
        from: { email: 'a@shop.example' },
        replyTo: null,
        tracking: { opens: true, clicks: true },
        links: cfg,
      });
      return { message, email: composeEmail(message, { contactId: randomUUID(), email: 'r@example.com', data: { name: 'Ada', html: '<b>x</b>' } }) };
    };
    const withSkeleton = await compose('<p>Hi {{ name }}, <a href="https://x.example/{{ name }}">go</a></p>');
    expect(withSkeleton.message.content.text).not.toBeNull();
    expect(withSkeleton.email.text).toBe('Hi Ada, go [https://x.example/Ada]');
    const without = await compose('<p>Hi {% raw %}{{ name }}{% endraw %} {{ html | raw }}</p>');
    expect(without.message.content.text).toBeNull();
    expect(without.email.text).toBe('Hi {{ name }} x');
  });
});

/** A small deterministic PRNG (mulberry32): the generated cases are the same on every run. */
function prng(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// fast-check is not a dependency (package.json is not this change's to edit): a seeded generator checks the same property.
describe('text-part skeleton, generated bodies and values', () => {
  const FRAGMENTS = [
    '<p>Hi {{ name }}, you have {{ n }} points.</p>',
    '<h2>News for {{ name }}</h2>',
    '<a href="https://x.example/{{ n }}?q={{ name | url_encode }}">{{ name }}</a>',
    '<a href="{{ url }}">{{ label }}</a>',
    '<a href="https://static.example">static {{ label }}</a>',
    '{% if flag %}<p>flag on {{ name }}</p>{% else %}<p>flag off</p>{% endif %}',
    '<ul>{% for i in items %}<li>{{ i }}</li>{% endfor %}</ul>',
    '<table><tr>{% for i in items %}<td>{{ i }}</td>{% endfor %}</tr></table>',
    '<div style="display:none">{{ name }} preview</div>',
    '<p>{{ name | escape }} and {{ label | upcase }} {% if n > 2 %}big{% endif %} end</p>',
    '<img src="https://img.example/{{ n }}.png" alt="{{ name }}">',
    '<p>Long text that goes on and on so that the line wraps somewhere {{ name }} and then more words follow it.</p>',
    '<br>{{ label }}<br>',
    '<ol><li>one</li>{% if flag %}<li>{{ name }}</li>{% endif %}</ol>',
  ];
  const VALUES = ['Ada', '', 'a & b', '<b>bold</b>', 'x'.repeat(90), 'two  spaces\nand a newline', '#anchor', 'mailto:a@x.example', 'https://x.example/1', 'Éric ß'];
  test('for any generated body: no skeleton, or the same words as html-to-text of each rendered body', async () => {
    const random = prng(7);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
    let withSkeleton = 0;
    for (let b = 0; b < 150; b++) {
      const body = Array.from({ length: 1 + Math.floor(random() * 5) }, () => pick(FRAGMENTS)).join(pick(['', '\n', ' ']));
      const compiled = await compileBody(body);
      const skeleton = textSkeletonOf(expandDefaults(compiled.html));
      if (!skeleton) continue;
      withSkeleton++;
      for (let d = 0; d < 4; d++) {
        const url = pick(VALUES);
        const data = { name: pick(VALUES), label: pick([...VALUES, url]), url, n: Math.floor(random() * 5), flag: random() < 0.5, items: VALUES.slice(0, Math.floor(random() * 4)) };
        expect({ body, data, text: words(renderTextPart(skeleton, data)) }).toEqual({ body, data, text: words(htmlToText(renderTemplate(compiled, data))) });
      }
    }
    expect(withSkeleton).toBeGreaterThan(100);
  });
});
