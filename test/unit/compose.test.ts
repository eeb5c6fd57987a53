import { randomUUID } from 'node:crypto';
import {
  composeCacheStats,
  composeEmail,
  composeWireEmail,
  mimeMessageOf,
  newEmailOf,
  prepareContent,
  prepareMessage,
  resolveMessage,
  type MessageInput,
} from '../../domain/compose/composer';
import { planLinks } from '../../domain/compose/link-plan';
import { messageIdFor } from '../../domain/emails/message-id';
import { buildMime, writeWireMessage } from '../../domain/mail/mime';
import { WireWriter } from '../../domain/mail/wire-writer';
import { expandDefaults } from '../../domain/rendering/defaults-sugar';
import { compileBody, MAX_RENDERED_CHARS, renderBody, renderCounters, renderSubject, TemplateError } from '../../domain/rendering/render';
import { applyTracking, contactLinks, listUnsubscribeHeaders, type LinkConfig } from '../../domain/tracking/links';
import { linkTokens } from '../../domain/tracking/tokens';
import { parseReturnPath, parseUnsubscribeAddress } from '../../domain/inbound/return-path';

const cfg: LinkConfig = { publicUrl: 'https://mail.example.com', appSecret: 'unit-test-app-secret-0123456789-abcdef' };
const FROM = { email: 'News@Mail.Shop.Example', name: 'Shop' };

const MJML = (inner: string) => `<mjml><mj-body><mj-section><mj-column>${inner}</mj-column></mj-section></mj-body></mjml>`;

function input(body: string, over: Partial<MessageInput> = {}): MessageInput {
  return {
    content: { subject: 'Hi {{ name ?? you }}', body },
    kind: 'MARKETING',
    templateId: null,
    from: FROM,
    replyTo: null,
    tracking: { opens: true, clicks: true },
    links: cfg,
    ...over,
  };
}

/** What /v1/send produced per recipient before the composer (send.service.ts at 254f053), for the same inputs. */
async function previousPipeline(
  subject: string,
  body: string,
  data: Record<string, unknown>,
  contactId: string,
  email: string,
  emailId: string,
  tracking: { opens: boolean; clicks: boolean },
  kind: 'MARKETING' | 'TRANSACTIONAL',
) {
  const links = contactLinks(contactId, cfg, emailId); // since issue 14 the links name the email they are composed into
  const variables = {
    ...data,
    id: contactId,
    email,
    mailwright_id: contactId,
    mailwright_email: email,
    unsubscribeUrl: links.unsubscribeUrl,
    subscribeUrl: links.subscribeUrl,
    manageUrl: links.manageUrl,
  };
  const rendered = renderBody(await compileBody(body), variables);
  return {
    subject: renderSubject(subject, variables),
    html: applyTracking(rendered.html, { emailId, ...tracking }, cfg),
    text: rendered.text,
    headers: kind === 'MARKETING' ? listUnsubscribeHeaders(links, FROM.email, cfg) : {},
  };
}

/** A small deterministic PRNG (mulberry32), so the generated corpus is the same on every run. */
function prng(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Pieces of real and hostile templates: links in every quoting, Liquid in text, values, loops, comments, styles. */
const FRAGMENTS = [
  '<p>Hi {{ name }}, you have {{ n | default: 0 }} points.</p>',
  '<a href="https://static.example/path?x=1&amp;y=2">static</a>',
  '<a href="https://shop.example/orders/{{ n }}?utm_source=mail&amp;u={{ name | url_encode }}">order {{ n }}</a>',
  '<a href="{{ url }}">from data</a>',
  '<a href="https://ent.example/{{ n }}?a=1&amp;b=2&amp;amp;c&#38;d=&lt;&ampe=&amp;x">entities</a><a href="https://amp.example/{{ n }}?a=1&amp;b={{ q }}&amp;c=3">amp only</a>',
  "<a href='https://single.example/?a=1&amp;b={{ q }}'>single</a>",
  '<a href=https://unquoted.example/x class=btn>unquoted</a>',
  '<A HREF="HTTPS://UPPER.EXAMPLE/Path">upper</A>',
  '<map><area href="https://area.example/{{ n }}" alt="area"></map>',
  '{% if flag %}<a href="https://if.example">if</a>{% else %}<span style="color:red">no</span>{% endif %}',
  '{% for i in items %}<a href="https://loop.example/{{ i }}" style="color:#333" target="_blank">item {{ i }}</a>{% endfor %}',
  '<!-- {{ name }} <a href="https://comment.example">c</a> -->',
  '<div style="display:none;font-size:1px">Preview for {{ name }}</div>',
  '<div style="color:{{ color }}">styled by data</div>',
  '<table role="presentation" width="100%" cellpadding="0"><tr><td style="padding:0 10px" colspan="2" class="c">cell {{ n }}</td></tr></table>',
  '<ol start="3" type="a" style="margin:0"><li>three</li><li>four</li></ol>',
  '<span style="disp&#108;ay:none">hidden by an entity</span>',
  '<a href="https://mail.example.com/unsubscribe/{{ n }}">own link</a> <a href="{{ manageUrl }}">manage</a>',
  '<a href="mailto:{{ email }}">mail</a> <a href="#top">anchor</a> <a href="/relative">rel</a> <a href="">empty</a> <a href>bare</a>',
  '<img src="https://img.example/x.png" alt="{{ name }}" width="10" style="border:0">',
  '<script>var who = "{{ name }}";</script><style>.x { color: red }</style>',
  '<h1 style="margin:0" align="center">Heading {{ name }}</h1>',
  '<p>a {{- name -}} b</p>',
  '<p title="one" TITLE="two">duplicate attribute</p>',
  '<textarea>{{ name }}</textarea><title>{{ name }}</title>',
  '{% unless flag %}<p>unless</p>{% endunless %}{% case n %}{% when 1 %}<b>one</b>{% else %}<i>other</i>{% endcase %}',
  '{% raw %}<a href="https://raw.example">{{ literal }}</a>{% endraw %}',
  '{% comment %}<a href="https://commented.example">gone</a>{% endcomment %}',
  '<pre style="white-space:pre">  keep   {{ name }}  </pre>',
  '<p>{{ name ?? "Dear customer" }} &amp; {{ q }} &copy; 2026</p>',
  // Liquid hrefs whose static start decides trackableUrl's answer for every recipient, or looks as if it did.
  '<a href="https://query.example?{{ n }}">query</a><a href="https://path.example/a {{- name }}">trimmed</a><a href="HTTPS://Mail.Example.com/unsubscribe/t-{{ n }}">own, uppercase</a>',
  '<a href="https://port.example:99999/{{ n }}">bad port</a><a href="https:///{{ name }}">no host</a><a href="https://bad host.example/{{ n }}">blank</a>',
  '<a href="https://mail.example.com/t/{{ path }}">near our own</a><a href="https://back.example\\{{ n }}">backslash</a><a href="https://amp.example&amp;{{ n }}/">amp</a><a href="https://{{ name }}.example/">host</a>',
  // These make the plan refuse the body (links found per recipient instead); the output must not change either way.
  '<p>{{ name | raw }}</p>',
  '{% capture c %}<a href="https://capture.example">captured</a>{% endcapture %}{{ c }}',
  '<a {% if flag %}href="https://conditional-attr.example"{% endif %}>conditional attribute</a>',
  '<a href="https://tag-in-value.example/{% if flag %}yes{% endif %}">tag in value</a>',
  '<p>a < {{- name }}</p>',
  '{% if flag %}<!--{% endif %} <a href="https://flip.example">a comment or not</a> -->',
];

const DATA: Record<string, unknown>[] = [
  { name: 'Ada', n: 1, url: 'https://data.example/?x=1&y=<2>', q: 'a&b "c" \'d\'', flag: true, items: [1, 2], color: 'red', path: 'c/made-ours' },
  { name: '', n: 0, url: 'javascript:alert(1)', q: '&amp;', flag: false, items: [], color: 'red; display:none', path: 'elsewhere' },
  { name: 'x"><a href="https://evil.example">pwn</a>', url: ' https://spaced.example/ ', items: ['<b>'], color: '"><b>' },
];

function generatedBodies(count: number): string[] {
  const random = prng(13);
  const pick = () => FRAGMENTS[Math.floor(random() * FRAGMENTS.length)]!;
  return Array.from({ length: count }, (_, i) => {
    const parts = Array.from({ length: 2 + Math.floor(random() * 6) }, pick).join('\n');
    // Some with a document around them (the pixel goes before </body>), some fragments, some MJML.
    if (i % 5 === 0) return MJML(`<mj-text>${parts.replace(/<\/?(?:script|style|title|textarea|map|area|pre)[^>]*>/gi, '')}</mj-text>`);
    return i % 2 ? `<!doctype html><html><head><title>T</title></head><body style="margin:0">${parts}</body></html>` : parts;
  });
}

describe('composeEmail', () => {
  test('gives exactly what the per-recipient pipeline of /v1/send gave (subject, tracked HTML, text, headers) on a generated corpus', async () => {
    const bodies = generatedBodies(120);
    let planned = 0;
    let skeletons = 0;
    for (const [b, body] of bodies.entries()) {
      if (planLinks(expandDefaults((await compileBody(body)).html))) planned++;
      const tracking = [
        { opens: true, clicks: true },
        { opens: false, clicks: true },
        { opens: true, clicks: false },
        { opens: false, clicks: false },
      ][b % 4]!;
      const kind = b % 3 ? ('MARKETING' as const) : ('TRANSACTIONAL' as const);
      const message = await prepareMessage(input(body, { tracking, kind }));
      if (message.content.text) skeletons++;
      for (const data of DATA) {
        const contactId = randomUUID();
        const emailId = randomUUID();
        const composed = composeEmail(message, { contactId, email: 'reader@example.com', data, emailId });
        const before = await previousPipeline('Hi {{ name ?? you }}', body, data, contactId, 'reader@example.com', emailId, tracking, kind);
        // A text part from a skeleton wraps by the placeholders' length (text-skeleton.ts): the same words, lines may break elsewhere.
        const text = (t: string) => (message.content.text ? t.replace(/\s+/g, ' ').trim() : t);
        expect({ body, subject: composed.subject, html: composed.html, text: text(composed.text), headers: composed.headers }).toEqual({
          body,
          ...before,
          text: text(before.text),
        });
      }
    }
    // Most bodies take the marked path; the corpus exercises both.
    expect(planned).toBeGreaterThan(bodies.length / 3);
    expect(planned).toBeLessThan(bodies.length);
    // Text parts too: from a skeleton for some bodies, by html-to-text per recipient for the others.
    expect(skeletons).toBeGreaterThan(0);
    expect(skeletons).toBeLessThan(bodies.length);
  });

  test('composeWireEmail: the HTML as segments writes the bytes of composeEmail on the generated corpus (7bit, 8bit, quoted-printable)', async () => {
    const bodies = generatedBodies(120);
    // Data that makes every encoding and junction happen: non-ASCII, line ends, dots after them, long lines, NUL, a split pair.
    const data = [...DATA, { name: 'Zoë — 😀\n.dot\r', q: `${'w'.repeat(1200)}\0`, url: 'https://data.example/é?x=1\r\n.', items: ['\ud83d', '\ude00'], flag: true, n: 2 }];
    let segmented = 0;
    let messages = 0;
    for (const [b, body] of bodies.entries()) {
      const tracking = { opens: b % 2 === 0, clicks: b % 3 !== 0 };
      const message = await prepareMessage(input(body, { tracking }));
      for (const d of data) {
        const recipient = { contactId: randomUUID(), email: 'reader@example.com', data: d, emailId: randomUUID() };
        const wire = composeWireEmail(message, recipient);
        const plain = composeEmail(message, recipient);
        expect({ ...wire.email, html: '', text: '' }).toEqual({ ...plain, html: '', text: '' });
        if (wire.htmlSegments) segmented++;
        else expect(wire.email.html).toBe(plain.html);
        for (const eightBit of [false, true]) {
          const opts = { eightBit, boundary: '=_mw_0123456789abcdef', date: new Date(0) };
          const a = new WireWriter(64);
          writeWireMessage(a, { ...mimeMessageOf(plain), date: opts.date }, opts);
          const w = new WireWriter(64);
          writeWireMessage(w, { ...mimeMessageOf(wire.email), date: opts.date }, opts, wire.htmlSegments ?? undefined);
          if (!w.take().equals(a.take())) throw new Error(`different bytes: ${body} with ${JSON.stringify(d)} (eightBit ${eightBit})`);
          messages++;
        }
      }
    }
    expect(messages).toBe(bodies.length * data.length * 2);
    // Bodies with a plan and a text skeleton go as segments; the hostile rest does not: both ways are compared.
    expect(segmented).toBeGreaterThan(bodies.length / 2);
    expect(segmented).toBeLessThan(bodies.length * data.length);
  });

  test('marks links once per content, and leaves bodies whose links depend on Liquid to the per-recipient tokenizer', async () => {
    const plan = (body: string) => planLinks(expandDefaults(body));
    const marked = plan('<body><a href="https://a.example/{{ id }}">a</a>{% for i in xs %}<a href="https://b.example">b</a>{% endfor %}</body>');
    expect(marked).toMatchObject({ slots: [{ quote: 3 }, { quote: 3, staticHref: 'https://b.example' }], pixelMarked: true });
    for (const body of [
      '<p>{{ html | raw }}</p>',
      '{% capture c %}<a href="https://x.example">x</a>{% endcapture %}{{ c }}',
      '<a {% if a %}href="https://x.example"{% endif %}>x</a>',
      '<a href="https://x.example/{% if a %}y{% endif %}">x</a>',
      '<a href={{ url }}>unquoted value from data</a>',
      '<{{ tag }}>dynamic tag</{{ tag }}>',
      '<body></body>{% if a %}after the body{% endif %}',
      '<p>1 < {{- n }}</p>',
      '{% cycle "<a href=x>", "b" %}',
      '<!-- {% if a %} --> <a href="https://x.example">x</a> <!-- {% endif %} -->',
      '<style>{% if a %}</style><a href="https://x.example">{% endif %}</style>',
    ]) {
      expect({ body, plan: plan(body) }).toEqual({ body, plan: null });
    }
  });

  test('runs the per-template work once for many recipients: one preparation, no parse or MJML compile per recipient', async () => {
    const body = MJML(
      `<mj-text>Hi {{ first_name ?? "there" }} <a href="https://shop.example/?u={{ id }}">shop</a> <a href="https://blog.example/${randomUUID()}">blog</a></mj-text>` +
        '<mj-raw>{% for r in items %}</mj-raw><mj-button href="{{ r.url }}">{{ r.title }}</mj-button><mj-raw>{% endfor %}</mj-raw>' +
        '<mj-text><a href="{{ unsubscribeUrl }}">unsubscribe</a></mj-text>',
    );
    const stats = composeCacheStats();
    const counters = renderCounters();
    const message = await prepareMessage(input(body));
    expect(message.content.plan).not.toBeNull();
    expect(composeCacheStats()).toMatchObject({ misses: stats.misses + 1, hits: stats.hits });
    const afterPrepare = renderCounters();
    expect(afterPrepare.mjmlCompiles).toBe(counters.mjmlCompiles + 1);
    expect(afterPrepare.liquidParses).toBeGreaterThan(counters.liquidParses);

    const emails = Array.from({ length: 1_000 }, (_, i) =>
      composeEmail(message, {
        contactId: randomUUID(),
        email: `r${i}@example.com`,
        data: { first_name: `R${i}`, items: [{ url: `https://x.example/${i}`, title: `T${i}` }] },
      }),
    );
    expect(renderCounters()).toEqual(afterPrepare);
    expect(new Set(emails.map((e) => e.html)).size).toBe(1_000);
    expect(emails[7]!.html).toContain('Hi R7');
    // Another send (or campaign batch) of the same content: a cache hit, nothing compiled or parsed again.
    const again = await prepareMessage(input(body, { tracking: { opens: false, clicks: false } }));
    expect(again.content).toBe(message.content);
    expect(composeCacheStats()).toMatchObject({ misses: stats.misses + 1, hits: stats.hits + 1 });
    expect(renderCounters()).toEqual(afterPrepare);
  });

  test('a new version of a template is a new preparation: never served stale', async () => {
    const template = { id: randomUUID(), type: 'MARKETING' as const, subject: 'v1 {{ name }}', body: '<p>v1 {{ name }}</p>', from: FROM.email, fromName: null, replyTo: null };
    const recipient = { contactId: randomUUID(), email: 'r@example.com', data: { name: 'Ada' } };
    const v1 = composeEmail(await prepareMessage({ ...resolveMessage(template, {}), tracking: { opens: false, clicks: false }, links: cfg }), recipient);
    const misses = composeCacheStats().misses;
    // The template is saved again (a new updated_at): same id, new subject and body.
    const v2Template = { ...template, subject: 'v2 {{ name }}', body: MJML('<mj-text>v2 {{ name }}</mj-text>') };
    const v2 = composeEmail(await prepareMessage({ ...resolveMessage(v2Template, {}), tracking: { opens: false, clicks: false }, links: cfg }), recipient);
    expect(v1).toMatchObject({ subject: 'v1 Ada', html: '<p>v1 Ada</p>', templateId: template.id });
    expect(v2).toMatchObject({ subject: 'v2 Ada', templateId: template.id });
    expect(v2.html).toContain('v2 Ada');
    expect(v2.html).not.toContain('v1');
    expect(composeCacheStats().misses).toBe(misses + 1);
  });

  test('a failed preparation is not cached: the same invalid body fails again with the field error', async () => {
    const body = MJML(`<mj-bogus>${randomUUID()}</mj-bogus>`);
    for (let i = 0; i < 2; i++) {
      const err = await prepareContent({ subject: 's', body }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TemplateError);
      expect((err as TemplateError).options.errors![0]).toMatchObject({ field: 'body', code: 'invalid_mjml' });
    }
    const err = await prepareContent({ subject: 'Hi {{ name ', body: '<p>ok</p>' }).catch((e: unknown) => e);
    expect((err as TemplateError).options.errors![0]).toMatchObject({ field: 'subject', code: 'invalid_template' });
  });

  test('variables: contact and call data at the top level, context as {{ context.* }}, the reserved names win', async () => {
    const message = await prepareMessage(
      input('<p>{{ plan }}|{{ email }}|{{ id }}|{{ context.order }}|{{ context }}|{{ mailwright_email }}</p><a href="{{ subscribeUrl }}">s</a>', {
        tracking: { opens: false, clicks: false },
        kind: 'TRANSACTIONAL',
      }),
    );
    const contactId = randomUUID();
    const data = { plan: 'pro', email: 'spoofed@example.com', id: 'spoofed', unsubscribeUrl: 'https://evil.example' };
    const emailId = randomUUID();
    const withContext = composeEmail(message, { contactId, email: 'real@example.com', data, context: { order: 'A-1' }, emailId });
    expect(withContext.html).toContain(`<p>pro|real@example.com|${contactId}|A-1|`);
    expect(withContext.html).toContain(`href="${contactLinks(contactId, cfg, emailId).subscribeUrl}"`);
    const without = composeEmail(message, { contactId, email: 'real@example.com', data: { ...data, context: 'data' } });
    expect(without.html).toContain(`|${contactId}||data|real@example.com</p>`);
    expect(without.headers).toEqual({});
    // Data given to change (a campaign's render thread parses it per message) gets the same email; a caller's is left as it was.
    const owned = { ...data };
    const inPlace = composeEmail(message, { contactId, email: 'real@example.com', data: owned, dataIsOwned: true, context: { order: 'A-1' }, emailId });
    expect(inPlace).toEqual(withContext);
    expect(owned).toMatchObject({ id: contactId, email: 'real@example.com', context: { order: 'A-1' } });
    expect(data).toEqual({ plan: 'pro', email: 'spoofed@example.com', id: 'spoofed', unsubscribeUrl: 'https://evil.example' });
    // Not a plain object: copied, as without the flag.
    const list = Object.assign(['x'], { plan: 'pro' }) as unknown as Record<string, unknown>;
    expect(composeEmail(message, { contactId, email: 'real@example.com', data: list, dataIsOwned: true, emailId }).html).toContain(`<p>pro|real@example.com|${contactId}|`);
    expect(Object.keys(list)).toEqual(['0', 'plan']);
  });

  test('marketing mail gets the List-Unsubscribe pair, signed for the contact and this email, next to the custom headers; transactional mail only its own', async () => {
    const contactId = randomUUID();
    const emailId = randomUUID();
    const headers = { 'X-Campaign': 'nov' };
    const marketing = composeEmail(await prepareMessage(input('<p>x</p>', { headers })), { contactId, email: 'r@example.com', emailId });
    expect(marketing.headers).toEqual({ 'X-Campaign': 'nov', ...listUnsubscribeHeaders(contactLinks(contactId, cfg, emailId), FROM.email, cfg) });
    expect(linkTokens(cfg.appSecret).verify(contactLinks(contactId, cfg, emailId).token, 'contact')).toEqual({ kind: 'contact', contactId, emailId });
    expect(marketing.headers['List-Unsubscribe']).toMatch(/^<https:\/\/mail\.example\.com\/unsubscribe\/[\w-]+>, <mailto:unsubscribe@mail\.shop\.example\?subject=unsubscribe%20[\w-]+>$/);
    expect(marketing.headers['List-Unsubscribe-Post']).toBe('List-Unsubscribe=One-Click');
    // In the order the message's header block writes them: the custom headers, then the pair; a custom header of the
    // same name keeps its place and takes the pair's value (as an object spread would).
    expect(Object.keys(marketing.headers)).toEqual(['X-Campaign', 'List-Unsubscribe', 'List-Unsubscribe-Post']);
    const named = composeEmail(await prepareMessage(input('<p>x</p>', { headers: { 'List-Unsubscribe-Post': 'mine', 'X-Campaign': 'nov' } })), { contactId, email: 'r@example.com', emailId });
    expect(Object.entries(named.headers)).toEqual([
      ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
      ['X-Campaign', 'nov'],
      ['List-Unsubscribe', marketing.headers['List-Unsubscribe']],
    ]);
    const transactional = composeEmail(await prepareMessage(input('<p>x</p>', { headers, kind: 'TRANSACTIONAL' })), { contactId, email: 'r@example.com' });
    expect(transactional.headers).toEqual(headers);
  });

  test('tracking: each link is signed for this email and its exact URL, the pixel goes before </body>, the text part keeps the real URLs', async () => {
    const message = await prepareMessage(
      input('<html><body><p>Read <a href="https://blog.example/p?id={{ n }}&amp;x=1" style="color:#333;padding:4px">the post</a>.</p></body></html>'),
    );
    const emailId = randomUUID();
    const email = composeEmail(message, { contactId: randomUUID(), email: 'r@example.com', data: { n: 7 }, emailId });
    const token = /href="https:\/\/mail\.example\.com\/t\/c\/([\w-]+)"/.exec(email.html)![1]!;
    expect(linkTokens(cfg.appSecret).verify(token, 'click')).toEqual({ kind: 'click', emailId, url: 'https://blog.example/p?id=7&x=1' });
    expect(email.html).toMatch(/<img src="https:\/\/mail\.example\.com\/t\/o\/[\w-]+" width="1" height="1" alt="" style="display:none"><\/body><\/html>$/);
    expect(email.html).toContain('style="color:#333;padding:4px"');
    expect(email.text).toBe('Read the post [https://blog.example/p?id=7&x=1].');
  });

  test('sender domain, Message-ID and envelope, and the MIME it hands to the transport', async () => {
    const message = await prepareMessage(input('<p>Hello {{ name }}</p>', { replyTo: 'help@shop.example', tracking: { opens: false, clicks: false } }));
    const emailId = randomUUID();
    const contactId = randomUUID();
    const email = composeEmail(message, { contactId, email: 'reader@example.com', name: 'Reader', data: { name: 'Ada' }, emailId });
    expect(email).toMatchObject({
      emailId,
      senderDomain: 'mail.shop.example',
      messageId: messageIdFor(emailId, FROM.email),
      envelope: { from: FROM.email, to: ['reader@example.com'] },
      to: { email: 'reader@example.com', name: 'Reader' },
    });
    const raw = buildMime(mimeMessageOf(email));
    expect(raw).toContain(`Message-ID: <${emailId}@mail.shop.example>`);
    expect(raw).toContain('To: Reader <reader@example.com>');
    expect(raw).toContain('Reply-To: help@shop.example');
    expect(raw).toContain('List-Unsubscribe-Post: List-Unsubscribe=One-Click');
    expect(raw).toContain('Hello Ada');
    expect(raw).toMatch(/Content-Type: text\/plain; charset=utf-8[\s\S]*Content-Type: text\/html; charset=utf-8/);
    expect(newEmailOf(email, 'p-1', ['a-1'])).toMatchObject({ id: emailId, projectId: 'p-1', contactId, toName: 'Reader', replyTo: 'help@shop.example', attachmentIds: ['a-1'] });
  });

  test("with the sender domain's return path ACTIVE: the envelope sender is the email's signed b- address and the mailto the u- one", async () => {
    const message = await prepareMessage(input('<p>Hi</p>', { returnPathHost: 'bounces.mail.shop.example' }));
    const emailId = randomUUID();
    const contactId = randomUUID();
    const email = composeEmail(message, { contactId, email: 'reader@example.com', emailId });
    expect(email.envelope.from).toMatch(/^b-[a-z2-7]{48}@bounces\.mail\.shop\.example$/);
    expect(parseReturnPath(email.envelope.from, cfg.appSecret)).toMatchObject({ emailId });
    const mailto = /<mailto:([^?>]+)\?subject=unsubscribe%20([\w-]+)>/.exec(email.headers['List-Unsubscribe']!)!;
    expect(parseUnsubscribeAddress(mailto[1]!, cfg.appSecret)).toEqual({ emailId });
    expect(mailto[1]).toMatch(/@bounces\.mail\.shop\.example$/);
    expect(linkTokens(cfg.appSecret).verify(mailto[2]!, 'contact')).toEqual({ kind: 'contact', contactId, emailId });
    // From, Message-ID and everything else stay as they are: only the envelope and the mailto change.
    expect(email.from).toEqual(FROM);
    expect(email.messageId).toBe(messageIdFor(emailId, FROM.email));

    const plain = composeEmail(await prepareMessage(input('<p>Hi</p>')), { contactId, email: 'reader@example.com', emailId });
    expect(plain.envelope.from).toBe(FROM.email);
    expect(plain.headers['List-Unsubscribe']).toContain('<mailto:unsubscribe@mail.shop.example?subject=');
  });

  test('the 5 MB limit of a rendered body counts what is sent, not the markers the composer adds', async () => {
    // 2,000 links with a cut style attribute: about 100 KB of markers in the marked output.
    const body = '{% for i in (1..2000) %}<a href="https://x.example" style="color:red">x</a>{% endfor %}{% for i in (1..100) %}{{ pad }}{% endfor %}{{ tail }}';
    const message = await prepareMessage(input(body, { tracking: { opens: false, clicks: false }, kind: 'TRANSACTIONAL' }));
    expect(message.content.plan).not.toBeNull();
    const links = '<a href="https://x.example" style="color:red">x</a>'.length * 2000;
    const pad = 'y'.repeat(50_000);
    const fits = MAX_RENDERED_CHARS - links - 100 * pad.length;
    const at = (extra: number) => composeEmail(message, { contactId: randomUUID(), email: 'r@example.com', data: { pad, tail: 'z'.repeat(fits + extra) } });
    expect(at(0).html).toHaveLength(MAX_RENDERED_CHARS);
    const tooLarge = expect.objectContaining({ statusCode: 422, options: expect.objectContaining({ errors: [expect.objectContaining({ code: 'template_limit_exceeded' })] }) });
    expect(() => at(1)).toThrow(tooLarge);
    // The same limit when the HTML goes as segments.
    const wireAt = (extra: number) => composeWireEmail(message, { contactId: randomUUID(), email: 'r@example.com', data: { pad, tail: 'z'.repeat(fits + extra) } });
    expect(wireAt(0).htmlSegments).not.toBeNull();
    expect(() => wireAt(1)).toThrow(tooLarge);
  });

  test('resolveMessage: the template supplies, explicit values override, and a message without a sender is 422', () => {
    const template = { id: 't-1', type: 'MARKETING' as const, subject: 'S', body: 'B', from: 'a@shop.example', fromName: 'Shop', replyTo: 'r@shop.example' };
    expect(resolveMessage(template, {})).toEqual({
      content: { subject: 'S', body: 'B' },
      kind: 'MARKETING',
      templateId: 't-1',
      from: { email: 'a@shop.example', name: 'Shop' },
      replyTo: 'r@shop.example',
    });
    expect(resolveMessage(template, { subject: 'S2', from: { email: 'b@shop.example' }, replyTo: 'x@shop.example' })).toMatchObject({
      content: { subject: 'S2', body: 'B' },
      from: { email: 'b@shop.example' },
      replyTo: 'x@shop.example',
    });
    expect(resolveMessage(undefined, { subject: 'S', body: 'B', from: { email: 'c@shop.example' } })).toMatchObject({ kind: 'TRANSACTIONAL', templateId: null, replyTo: null });
    expect(() => resolveMessage({ ...template, from: null }, {})).toThrow(expect.objectContaining({ statusCode: 422 }));
  });
});
