import {
  checkTemplateSyntax,
  compileBody,
  htmlToText,
  isMjml,
  MAX_TEMPLATE_BYTES,
  renderBody,
  renderEmail,
  renderSubject,
  renderTemplate,
  TemplateError,
  toSingleLine,
} from '../../domain/rendering/render';
import { expandDefaults } from '../../domain/rendering/defaults-sugar';
import { LruCache } from '../../domain/cache/lru';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

/** The TemplateError thrown by `fn` (fails the test when nothing, or something else, is thrown). */
function templateError(fn: () => unknown): TemplateError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(TemplateError);
    return err as TemplateError;
  }
  throw new Error('expected a TemplateError');
}

async function templateErrorAsync(fn: () => Promise<unknown>): Promise<TemplateError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(TemplateError);
    return err as TemplateError;
  }
  throw new Error('expected a TemplateError');
}

const MJML = (inner: string) => `<mjml><mj-body><mj-section><mj-column>${inner}</mj-column></mj-section></mj-body></mjml>`;

describe('renderTemplate', () => {
  test('renders variables and filters', () => {
    expect(renderTemplate('Hi {{ name | upcase }}', { name: 'ada' })).toBe('Hi ADA');
  });
  test('unknown variables render empty', () => {
    expect(renderTemplate('Hi {{ missing }}!', {})).toBe('Hi !');
    expect(renderTemplate('Hi {{ missing.deep.path }}!', {})).toBe('Hi !');
  });
  test('only own properties are visible (no prototype getters such as constructor)', () => {
    expect(renderTemplate('[{{ name.constructor }}][{{ data.__proto__ }}]', { name: 'x', data: {} })).toBe('[][]');
  });
  test('include, render and layout are refused when parsed, with a clear reason', () => {
    for (const source of ["{% include '/etc/passwd' %}", "{% render 'x' %}", "{% layout 'x' %}ok"]) {
      const err = templateError(() => renderTemplate(source, {}));
      expect(err.options.errors![0]!.message).toMatch(/include, render and layout are not available/);
      expect(checkTemplateSyntax(source)).toMatch(/not available/);
    }
  });
  test('a source without Liquid markup is returned as is', () => {
    const s = '<p>plain</p>';
    expect(renderTemplate(s, {})).toBe(s);
  });
  test('a syntax error is a 422 VALIDATION_ERROR naming the field, never a plain Error', () => {
    const err = templateError(() => renderTemplate('Hi {{ name ', {}, { field: 'subject' }));
    expect(err.statusCode).toBe(422);
    expect(err.code).toBe('VALIDATION_ERROR');
    expect(err.options.errors).toEqual([{ field: 'subject', code: 'invalid_template', message: expect.stringMatching(/not closed/) }]);
  });
  test('an unknown filter is refused (strict filters)', () => {
    expect(templateError(() => renderTemplate('{{ a | nosuchfilter }}', { a: 1 })).options.errors![0]!.code).toBe('invalid_template');
  });
});

describe('`??` default sugar', () => {
  test.each([
    ['{{ name ?? Default }}', {}, 'Default'],
    ['{{ name ?? Default }}', { name: 'Ada' }, 'Ada'],
    ['{{ name ?? "Dear customer" }}', {}, 'Dear customer'],
    ["{{ name ?? 'Dear customer' }}", {}, 'Dear customer'],
    ['{{ name ?? Dear customer }}', {}, 'Dear customer'],
    ['{{ name ?? "" }}!', {}, '!'],
    ['{{- name ?? x -}} !', {}, 'x!'],
    ['{{ name ?? friend | capitalize }}', {}, 'Friend'],
    ['{{ name | upcase ?? FRIEND }}', { name: 'ada' }, 'ADA'],
    ['{{ user.first ?? there }}', { user: {} }, 'there'],
    ['{{ name ?? say "hi" }}', {}, 'say "hi"'],
    ['{{ name ?? back\\slash }}', {}, 'back\\slash'],
    ['{{ n ?? 0 }}', {}, '0'],
    ['{{ flag ?? off }}', { flag: false }, 'off'],
  ])('%s with %j -> %s', (source, variables, expected) => {
    expect(renderTemplate(source, variables)).toBe(expected);
  });

  test('only `{{ }}` output tags are rewritten: not quoted strings, tags, raw blocks or text', () => {
    expect(expandDefaults('{{ "a ?? b" }}')).toBe('{{ "a ?? b" }}');
    expect(expandDefaults('a ?? b')).toBe('a ?? b');
    expect(expandDefaults('{% if a ?? b %}{% endif %}')).toBe('{% if a ?? b %}{% endif %}');
    expect(expandDefaults('{% raw %}{{ a ?? b }}{% endraw %}{{ a ?? b }}')).toBe('{% raw %}{{ a ?? b }}{% endraw %}{{ a | default: "b" }}');
    expect(renderTemplate('{% raw %}{{ a ?? b }}{% endraw %}', {})).toBe('{{ a ?? b }}');
    expect(renderTemplate('{{ "x ?? y" }}', {})).toBe('x ?? y');
  });

  test('the fallback is literal text, and HTML-escaped in bodies like any output', () => {
    expect(renderTemplate('{{ a ?? <b>hi</b> }}', {}, { html: true })).toBe('&lt;b&gt;hi&lt;/b&gt;');
    expect(renderTemplate('{{ a ?? other }}', { other: 'VAR' })).toBe('other');
  });

  test('sugar is also checked by checkTemplateSyntax', () => {
    expect(checkTemplateSyntax('{{ name ?? "Dear customer" }}')).toBeNull();
    expect(checkTemplateSyntax('{{ name ?? x | nosuch }}')).toMatch(/undefined filter/);
  });
});

describe('HTML escaping', () => {
  const evil = '<script>alert("x")</script> & \'quoted\'';
  test('bodies escape variables by default, so contact data cannot inject markup', () => {
    expect(renderTemplate('<p>{{ v }}</p>', { v: evil }, { html: true })).toBe(
      '<p>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;quoted&#39;</p>',
    );
    expect(renderTemplate('<a title="{{ v }}">x</a>', { v: '" onmouseover="x' }, { html: true })).toBe('<a title="&#34; onmouseover=&#34;x">x</a>');
  });
  test('`| raw` as the last filter opts out', () => {
    expect(renderTemplate('{{ v | raw }}', { v: '<b>ok</b>' }, { html: true })).toBe('<b>ok</b>');
  });
  test('`| escape` written by hand does not escape twice', () => {
    expect(renderTemplate('{{ v | escape }}|{{ v | escape_once }}', { v: 'a & <b>' }, { html: true })).toBe('a &amp; &lt;b&gt;|a &amp; &lt;b&gt;');
  });
  test('subjects and plain templates are not escaped (they are not HTML)', () => {
    expect(renderSubject('Re: {{ v }}', { v: 'Tom & Jerry <tj@x.y>' })).toBe('Re: Tom & Jerry <tj@x.y>');
    expect(renderTemplate('{{ v }}', { v: 'a & b' })).toBe('a & b');
  });
});

describe('compileBody + renderBody', () => {
  test('HTML body: variables escaped, text part derived from the HTML', async () => {
    const compiled = await compileBody('<h1>Hi {{ name }}</h1><p>Tom &amp; {{ friend }}</p>');
    expect(compiled.mjml).toBe(false);
    const out = renderBody(compiled, { name: 'Ada', friend: '<Jerry>' });
    expect(out.html).toBe('<h1>Hi Ada</h1><p>Tom &amp; &lt;Jerry&gt;</p>');
    expect(out.text).toBe('HI ADA\n\nTom & <Jerry>');
  });

  test('one compiled body renders many recipients independently', async () => {
    const compiled = await compileBody('<p>{{ email }}</p>');
    expect(['a@x.y', 'b@x.y'].map((email) => renderBody(compiled, { email }).html)).toEqual(['<p>a@x.y</p>', '<p>b@x.y</p>']);
  });

  test('the same body compiles to the cached result (MJML is compiled once per content)', async () => {
    const body = MJML('<mj-text>cache {{ n }}</mj-text>');
    const a = await compileBody(body);
    const b = await compileBody(body);
    expect(b.html).toBe(a.html);
    expect(b.templates).toBe(a.templates);
  });

  test('a body over the size cap -> 422 template_too_large', async () => {
    const big = `<p>${'x'.repeat(MAX_TEMPLATE_BYTES)}</p>`;
    const err = await templateErrorAsync(() => compileBody(big));
    expect(err.options.errors![0]).toMatchObject({ field: 'body', code: 'template_too_large' });
    expect(templateError(() => renderTemplate(big, {})).options.errors![0]!.code).toBe('template_too_large');
    // Multi-byte characters count as their UTF-8 size.
    const wide = 'é'.repeat(MAX_TEMPLATE_BYTES / 2 + 1);
    expect(templateError(() => renderTemplate(wide, {})).options.errors![0]!.code).toBe('template_too_large');
    expect(renderTemplate('é'.repeat(MAX_TEMPLATE_BYTES / 2), {})).toHaveLength(MAX_TEMPLATE_BYTES / 2);
  });

  test('a render that runs too long is stopped (renderLimit) -> 422 template_limit_exceeded', async () => {
    const compiled = await compileBody('{% for i in (1..3000) %}{% for j in (1..3000) %}{% endfor %}{% endfor %}');
    const started = Date.now();
    const err = templateError(() => renderBody(compiled, {}));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(err.options.errors![0]).toMatchObject({ field: 'body', code: 'template_limit_exceeded', message: expect.stringMatching(/render limit/) });
  });

  test('a render that allocates too much is stopped (memoryLimit) -> 422 template_limit_exceeded', () => {
    const doubling = '{% assign s = "xxxxxxxxxx" %}{% for i in (1..40) %}{% assign s = s | append: s %}{% endfor %}{{ s | size }}';
    expect(templateError(() => renderTemplate(doubling, {})).options.errors![0]).toMatchObject({
      code: 'template_limit_exceeded',
      message: expect.stringMatching(/memory/),
    });
    expect(templateError(() => renderTemplate('{% for i in (1..100000000) %}x{% endfor %}', {})).options.errors![0]!.code).toBe('template_limit_exceeded');
  });
});

describe('MJML', () => {
  test('a body starting with <mjml (after whitespace) is MJML', () => {
    expect(isMjml('  \n<mjml><mj-body></mj-body></mjml>')).toBe(true);
    expect(isMjml('<MJML lang="en">')).toBe(true);
    expect(isMjml('<p>about <mjml></p>')).toBe(false);
    expect(isMjml('<mjmlx>')).toBe(false);
  });

  test("compiled HTML carries no indentation or blank lines, except inside <pre> and <textarea>, and renders the same text", async () => {
    const body = MJML(`<mj-text>First line\n      second line</mj-text><mj-raw><pre>\n   keep\n\n   this</pre><textarea>  a\n\n  b</textarea></mj-raw>`);
    const { html } = await compileBody(body);
    const outside = html.replace(/<pre>[\s\S]*<\/textarea>/, 'X');
    expect(outside).not.toMatch(/^[ \t]/m);
    expect(outside).not.toMatch(/\n\s*\n/);
    expect(html).toContain('<pre>\n   keep\n\n   this</pre><textarea>  a\n\n  b</textarea>');
    expect(html).toMatch(/First line\s+second line/);
    expect(htmlToText(html)).toContain('First line second line');
  });

  test('compiles to responsive HTML, then Liquid renders inside it (text, href, src, loops, typed attributes)', async () => {
    const body = `<mjml><mj-head><mj-title>{{ title }}</mj-title></mj-head><mj-body>
      <mj-section><mj-column>
        <mj-text color="{{ brand ?? #ff0000 }}">Hello {{ name ?? "Dear customer" }} &amp; <a href="https://ex.com/?a=1&amp;id={{ id }}">link</a></mj-text>
        <mj-text>{% for item in items %}<p>{{ item.name }}: {{ item.price }}</p>{% endfor %}</mj-text>
        <mj-button href="https://ex.com/u/{{ id }}">Go</mj-button>
        <mj-image src="{{ img | default: 'https://ex.com/logo.png' }}" alt="logo" />
        <mj-raw>{% if vip %}</mj-raw><mj-text>VIP only</mj-text><mj-raw>{% endif %}</mj-raw>
      </mj-column></mj-section></mj-body></mjml>`;
    const compiled = await compileBody(body);
    expect(compiled.mjml).toBe(true);
    expect(compiled.html).toMatch(/^<!doctype html>/i);
    expect(compiled.html).toContain('{{ id }}');
    const vip = renderBody(compiled, { title: 'T', id: 'c-1', items: [{ name: 'A', price: 1 }, { name: 'B<', price: 2 }], vip: true }).html;
    expect(vip).toContain('<title>T</title>');
    expect(vip).toContain('Hello Dear customer &amp; <a href="https://ex.com/?a=1&amp;id=c-1">link</a>');
    expect(vip).toContain('color:#ff0000');
    expect(vip).toContain('<p>A: 1</p><p>B&lt;: 2</p>');
    expect(vip).toContain('href="https://ex.com/u/c-1"');
    expect(vip).toContain('src="https://ex.com/logo.png"');
    expect(vip).toContain('VIP only');
    expect(vip).toContain('@media'); // responsive
    expect(vip).not.toMatch(/\{\{|\{%/);
    const plain = renderBody(compiled, { name: 'Ada', id: 'c-2', brand: '#00ff00' });
    expect(plain.html).not.toContain('VIP only');
    expect(plain.html).toContain('Hello Ada');
    expect(plain.html).toContain('color:#00ff00');
  });

  test('invalid MJML -> 422 invalid_mjml naming the line and element, without server paths', async () => {
    const err = await templateErrorAsync(() => compileBody(MJML('<mj-bogus>x</mj-bogus>')));
    expect(err.statusCode).toBe(422);
    const fe = err.options.errors![0]!;
    expect(fe).toMatchObject({ field: 'body', code: 'invalid_mjml' });
    expect(fe.message).toMatch(/line 1 \(mj-bogus\)/);
    expect(fe.message).not.toContain(process.cwd());
    expect((await templateErrorAsync(() => compileBody('<mjml></mjml>'))).options.errors![0]!.code).toBe('invalid_mjml');
  });

  test('a failed compile is not cached: the same body fails again', async () => {
    const body = MJML('<mj-nope/>');
    await templateErrorAsync(() => compileBody(body));
    await templateErrorAsync(() => compileBody(body));
  });

  test('mj-include cannot read files', async () => {
    const compiled = await compileBody(`<mjml><mj-body><mj-include path="${process.cwd()}/package.json" /><mj-section><mj-column><mj-text>x</mj-text></mj-column></mj-section></mj-body></mjml>`);
    expect(compiled.html).not.toContain('"dependencies"');
  });

  test("the worker's MJML thread compiles what the process compiles, reports the same errors, ends when idle, and the process never loads MJML", async () => {
    // Where the worker runs it: a Node process with tsx's loader, which the thread inherits (as the render threads do).
    const script = `
      const { createMjmlThread } = require('./domain/rendering/mjml-thread.ts');
      const { mjmlToHtml } = require('./domain/rendering/mjml-compile.ts');
      const { compileMjmlWith, compileBody, renderBody } = require('./domain/rendering/render.ts');
      (async () => {
        const thread = createMjmlThread();
        const source = ${JSON.stringify(MJML('<mj-text>Hi {{ name }}</mj-text><mj-button href="https://ex.com/{{ id }}">Go</mj-button>'))};
        const viaThread = await thread.compile(source);
        const aliveAfterCompile = thread.threads();
        const bogus = await thread.compile(${JSON.stringify(MJML('<mj-bogus>x</mj-bogus>'))});
        compileMjmlWith(thread.compile);
        const compiled = await compileBody(source.replace('Hi', 'Hello'));
        const rendered = renderBody(compiled, { name: 'Ada', id: 'c-1' }).html;
        let empty = null;
        await compileBody('<mjml></mjml>').catch((err) => (empty = err.options.errors[0]));
        const loadedHere = Object.keys(require.cache).some((f) => f.includes('/node_modules/mjml'));
        await new Promise((r) => setTimeout(r, 3000));
        const aliveAfterIdle = thread.threads();
        await thread.close();
        const inProcess = await mjmlToHtml(source);
        console.log(JSON.stringify({ same: viaThread.html === inProcess.html, errors: viaThread.errors, bogus: bogus.errors, aliveAfterCompile, rendered, empty, loadedHere, aliveAfterIdle }));
      })();`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '-e', script], { cwd: path.join(__dirname, '..', '..') });
    const out = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(out.same).toBe(true);
    expect(out.errors).toEqual([]);
    expect(out.bogus).toEqual([{ line: 1, message: expect.stringContaining('mj-bogus'), tagName: 'mj-bogus' }]);
    expect(out.aliveAfterCompile).toBe(1);
    expect(out.rendered).toContain('Hello Ada');
    expect(out.rendered).toContain('href="https://ex.com/c-1"');
    expect(out.empty).toMatchObject({ field: 'body', code: 'invalid_mjml' });
    // Until the in-process compile at the end, MJML was loaded by the thread alone.
    expect(out.loadedHere).toBe(false);
    expect(out.aliveAfterIdle).toBe(0);
  }, 30_000);

  test('Liquid errors in MJML are reported on the body', async () => {
    const err = await templateErrorAsync(() => compileBody(MJML('<mj-text>{{ x | nosuch }}</mj-text>')));
    expect(err.options.errors![0]).toMatchObject({ field: 'body', code: 'invalid_template' });
  });
});

describe('text part', () => {
  test('links as `text [url]`, images skipped, hidden elements (preview text, pixels) skipped', () => {
    const text = htmlToText(
      '<div style="display:none;font-size:1px">Preview</div><p>Read <a href="https://ex.com/a?b=1&amp;c=2">the post</a>.</p>' +
        '<img src="https://ex.com/logo.png" alt="Logo"><p><a href="https://ex.com/">https://ex.com/</a></p>',
    );
    expect(text).toBe('Read the post [https://ex.com/a?b=1&c=2].\n\nhttps://ex.com/');
  });

  test('renderEmail gives subject, html and text together', async () => {
    const out = await renderEmail({
      subject: 'Hello {{ name ?? there }}\n',
      body: MJML('<mj-text>Hi {{ name }}, <a href="https://ex.com/{{ id }}">open</a></mj-text>'),
      variables: { name: 'Ada', id: 7 },
    });
    expect(out.subject).toBe('Hello Ada');
    expect(out.html).toContain('Hi Ada');
    expect(out.text).toContain('Hi Ada, open [https://ex.com/7]');
    expect(out.text).not.toMatch(/<|\{\{/);
  });
});

describe('subjects stay on one line', () => {
  test.each([
    ['Hi {{ n }}', { n: 'A\r\nBcc: victim@example.com' }, 'Hi A Bcc: victim@example.com'],
    ['Line1\nLine2', {}, 'Line1 Line2'],
    ['{{ a }}\r\n\r\n  {{ b }}', { a: 'x', b: 'y' }, 'x y'],
    ['  padded  ', {}, 'padded'],
    ['tab\there', {}, 'tab\there'],
    ['nul{{ v }}', { v: 'a\u0000b' }, 'nulab'],
    ['sep{{ v }}', { v: 'a\u2028b' }, 'sepa b'],
  ])('%j with %j -> %j', (subject, variables, expected) => {
    expect(renderSubject(subject, variables)).toBe(expected);
    expect(renderSubject(subject, variables)).not.toMatch(/[\r\n]/);
  });
  test('renderTemplate({ subject: true }) is the same rule', () => {
    expect(renderTemplate('a\nb', {}, { subject: true })).toBe('a b');
    expect(toSingleLine('a \n b')).toBe('a b');
  });
  test('subject errors name the subject field', () => {
    expect(templateError(() => renderSubject('{{ x', {})).options.errors![0]!.field).toBe('subject');
  });
});

describe('LruCache', () => {
  test('evicts the least recently used entry past maxEntries', () => {
    const lru = new LruCache<number>({ maxEntries: 2, maxWeight: 100 });
    lru.set('a', 1, 1);
    lru.set('b', 2, 1);
    expect(lru.get('a')).toBe(1); // a is now the most recent
    lru.set('c', 3, 1);
    expect([lru.get('a'), lru.get('b'), lru.get('c')]).toEqual([1, undefined, 3]);
  });
  test('keeps the total weight under maxWeight and skips entries heavier than the budget', () => {
    const lru = new LruCache<string>({ maxEntries: 10, maxWeight: 10 });
    lru.set('a', 'a', 6);
    lru.set('b', 'b', 6);
    expect(lru.get('a')).toBeUndefined();
    expect(lru.totalWeight).toBe(6);
    lru.set('huge', 'h', 11);
    expect(lru.get('huge')).toBeUndefined();
    expect(lru.get('b')).toBe('b');
  });
});
