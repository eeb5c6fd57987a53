// `npm run bench:render`: per-recipient rendering throughput of realistic templated emails, in process (no stack).
// Compiles each body once (as a send or campaign does), then renders it for N recipients with varying data: Liquid
// only, Liquid + the plain-text part, the whole per-recipient pipeline as /v1/send ran it before the composer
// (contact links, subject, HTML, text, tracking, List-Unsubscribe), the composer's per-recipient path (composeEmail)
// and the composer followed by MIME assembly (what a campaign activity does before the SMTP transaction).
// Bodies: `html` (a 3.5 KB digest), `mjml` (the same in MJML) and `campaign` (an MJML newsletter: a loop, a condition,
// eight links, tracking on, marketing headers). Every row reports wall and CPU time per recipient; rows run interleaved.
// Options (env): RECIPIENTS (20000), FORMAT=html|mjml|campaign|both (html and mjml)|all (all), ROUNDS (10).
import { randomUUID } from 'node:crypto';
import { compileBody, renderBody, renderSubject, renderTemplate, type CompiledBody } from '../domain/rendering/render';
import { applyTracking, contactLinks, listUnsubscribeHeaders, type LinkConfig } from '../domain/tracking/links';
import { composeCacheStats, composeEmail, mimeMessageOf, prepareMessage, type PreparedMessage } from '../domain/compose/composer';
import { buildMime } from '../domain/mail/mime';

const RECIPIENTS = Number(process.env.RECIPIENTS ?? 20_000);
const FORMAT = process.env.FORMAT ?? 'all';
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const linkConfig: LinkConfig = { publicUrl: 'https://mail.example.com', appSecret: 'bench-app-secret-0123456789-abcdefghij' };
const FROM = { email: 'news@mail.example.com', name: 'Example News' };

const SUBJECT = '{{ first_name ?? "Hello" }}, your {{ plan | upcase }} summary for {{ month }}';

/** A typical digest: greeting with a default, a loop, conditionals, a few links, a footer with the contact's links. */
const HTML_BODY = `<!doctype html><html><head><meta charset="utf-8"><title>Your summary</title>
<style>body{font-family:Helvetica,Arial,sans-serif;color:#222}.btn{background:#2563eb;color:#fff;padding:12px 20px;border-radius:6px;text-decoration:none}</style></head>
<body><div style="max-width:600px;margin:0 auto;padding:24px">
<img src="https://cdn.example.com/logo.png" alt="Example" width="120">
<h1>Hi {{ first_name ?? "there" }},</h1>
<p>Here is what happened on your <strong>{{ plan }}</strong> plan in {{ month }}. You have {{ credits | default: 0 }} credits left.</p>
{% if orders.size > 0 %}
<table width="100%" cellpadding="0" cellspacing="0">
{% for order in orders %}
  <tr>
    <td style="padding:8px 0;border-bottom:1px solid #eee"><a href="https://shop.example.com/orders/{{ order.id }}?utm_source=mail&amp;utm_campaign=digest">Order {{ order.id }}</a> &middot; {{ order.items }} item{% if order.items != 1 %}s{% endif %}</td>
    <td style="padding:8px 0;border-bottom:1px solid #eee;text-align:right">{{ order.total | times: 1.2 | round: 2 }} {{ currency ?? EUR }}</td>
  </tr>
{% endfor %}
</table>
{% else %}
<p>No orders this month. <a href="https://shop.example.com/new?ref={{ id }}">See what is new</a>.</p>
{% endif %}
<p style="margin:24px 0"><a class="btn" href="https://app.example.com/dashboard?u={{ id }}&amp;m={{ month | url_encode }}">Open your dashboard</a></p>
<p>Recommended for you:</p>
<ul>{% for r in recommendations limit: 5 %}<li><a href="{{ r.url }}">{{ r.title | truncate: 60 }}</a> — {{ r.blurb | strip_html | truncatewords: 20 }}</li>{% endfor %}</ul>
${'<p style="color:#555;font-size:14px">Lorem ipsum dolor sit amet, consectetur adipiscing elit. Integer nec odio. Praesent libero. Sed cursus ante dapibus diam. Sed nisi. Nulla quis sem at nibh elementum imperdiet.</p>\n'.repeat(8)}
<hr><p style="font-size:12px;color:#888">You receive this because {{ email }} is subscribed.
<a href="{{ manageUrl }}">Manage your subscription</a> or <a href="{{ unsubscribeUrl }}">unsubscribe</a>.</p>
</div></body></html>`;

const MJML_BODY = `<mjml><mj-head><mj-title>Your summary</mj-title><mj-preview>{{ first_name ?? "Hello" }}, your {{ month }} summary</mj-preview>
<mj-attributes><mj-all font-family="Helvetica, Arial, sans-serif" /></mj-attributes></mj-head>
<mj-body background-color="#f4f4f5"><mj-section background-color="#ffffff"><mj-column>
<mj-image src="https://cdn.example.com/logo.png" alt="Example" width="120px" />
<mj-text font-size="20px">Hi {{ first_name ?? "there" }},</mj-text>
<mj-text>Here is what happened on your <strong>{{ plan }}</strong> plan in {{ month }}. You have {{ credits | default: 0 }} credits left.</mj-text>
<mj-table>{% for order in orders %}<tr><td><a href="https://shop.example.com/orders/{{ order.id }}?utm_source=mail&amp;utm_campaign=digest">Order {{ order.id }}</a></td><td style="text-align:right">{{ order.total | times: 1.2 | round: 2 }} {{ currency ?? EUR }}</td></tr>{% endfor %}</mj-table>
<mj-button href="https://app.example.com/dashboard?u={{ id }}">Open your dashboard</mj-button>
<mj-text><ul>{% for r in recommendations limit: 5 %}<li><a href="{{ r.url }}">{{ r.title | truncate: 60 }}</a></li>{% endfor %}</ul></mj-text>
${'<mj-text color="#555555" font-size="14px">Lorem ipsum dolor sit amet, consectetur adipiscing elit. Integer nec odio. Praesent libero. Sed cursus ante dapibus diam.</mj-text>\n'.repeat(6)}
<mj-divider /><mj-text font-size="12px" color="#888888">You receive this because {{ email }} is subscribed.
<a href="{{ manageUrl }}">Manage your subscription</a> or <a href="{{ unsubscribeUrl }}">unsubscribe</a>.</mj-text>
</mj-column></mj-section></mj-body></mjml>`;

/** A campaign newsletter: hero, a loop over articles with buttons, a conditional offer, social links, the footer links. */
const CAMPAIGN_BODY = `<mjml><mj-head><mj-title>{{ first_name ?? "Hello" }}, the November issue</mj-title>
<mj-preview>Three stories picked for the {{ plan }} plan</mj-preview>
<mj-attributes><mj-all font-family="Helvetica, Arial, sans-serif" /><mj-button background-color="#2563eb" /></mj-attributes></mj-head>
<mj-body background-color="#f4f4f5">
<mj-section background-color="#ffffff"><mj-column>
<mj-image src="https://cdn.example.com/hero.png" alt="November" href="https://www.example.com/?utm_source=newsletter&amp;utm_campaign=nov" />
<mj-text font-size="20px">Hi {{ first_name ?? "there" }},</mj-text>
<mj-text>Here is what we wrote this month{% if plan == "team" %} for your team{% endif %}.</mj-text>
</mj-column></mj-section>
<mj-raw>{% for r in recommendations limit: 3 %}</mj-raw>
<mj-section background-color="#ffffff"><mj-column>
<mj-text font-size="16px"><strong>{{ r.title | truncate: 60 }}</strong></mj-text>
<mj-text>{{ r.blurb | strip_html | truncatewords: 20 }}</mj-text>
<mj-button href="{{ r.url }}&amp;utm_source=newsletter">Read more</mj-button>
</mj-column></mj-section>
<mj-raw>{% endfor %}</mj-raw>
<mj-raw>{% if credits < 10 %}</mj-raw>
<mj-section background-color="#fffbeb"><mj-column><mj-text>Only {{ credits }} credits left: <a href="https://app.example.com/billing?u={{ id }}">top up</a>.</mj-text></mj-column></mj-section>
<mj-raw>{% endif %}</mj-raw>
<mj-section><mj-column>
<mj-social icon-size="24px" mode="horizontal"><mj-social-element name="x" href="https://x.com/example">X</mj-social-element><mj-social-element name="github" href="https://github.com/example">GitHub</mj-social-element></mj-social>
<mj-text font-size="12px" color="#888888">You receive this because {{ email }} subscribed to Example News.
<a href="{{ manageUrl }}">Manage your subscription</a> or <a href="{{ unsubscribeUrl }}">unsubscribe</a>.
<a href="https://www.example.com/privacy">Privacy</a></mj-text>
</mj-column></mj-section>
</mj-body></mjml>`;

const BODIES = { html: HTML_BODY, mjml: MJML_BODY, campaign: CAMPAIGN_BODY };
type Format = keyof typeof BODIES;

/** A recipient's own data (what the contact intake hands over), without the always-available variables. */
function recipientData(i: number): { contactId: string; email: string; data: Record<string, unknown> } {
  return {
    contactId: randomUUID(),
    email: `reader-${i}@example.com`,
    data: {
      first_name: i % 5 === 0 ? undefined : `Reader ${i}`,
      plan: ['free', 'pro', 'team'][i % 3],
      month: 'November',
      credits: i % 100,
      currency: i % 2 ? 'USD' : undefined,
      orders: Array.from({ length: i % 6 }, (_, k) => ({ id: `A-${i}-${k}`, items: (k % 3) + 1, total: 10 + k * 3.5 })),
      recommendations: Array.from({ length: 6 }, (_, k) => ({
        url: `https://blog.example.com/posts/${k}?ref=${i}`,
        title: `A story worth reading, number ${k}, about something <interesting> & new`,
        blurb: `<p>Short <b>summary</b> ${k} with enough words to be truncated somewhere around here, eventually, maybe.</p>`,
      })),
    },
  };
}

type Recipient = ReturnType<typeof recipientData>;

/** The variables the composer builds (and acceptSend built before it): data plus id, email and the contact's links. */
function variablesOf(r: Recipient): Record<string, unknown> {
  const links = contactLinks(r.contactId, linkConfig);
  return {
    ...r.data,
    id: r.contactId,
    email: r.email,
    mailwright_id: r.contactId,
    mailwright_email: r.email,
    unsubscribeUrl: links.unsubscribeUrl,
    subscribeUrl: links.subscribeUrl,
    manageUrl: links.manageUrl,
  };
}

/**
 * Runs every row over the same recipients in ROUNDS interleaved rounds (row 1, row 2, ..., then again), so a change
 * in the machine's load during the run touches every row alike; reports totals and the median round's CPU per render.
 */
function measureRows(rows: [label: string, fn: (i: number) => void][], n: number) {
  for (const [, fn] of rows) for (let i = 0; i < Math.min(500, n); i++) fn(i); // warm-up: JIT
  const per = Math.ceil(n / ROUNDS);
  const totals = rows.map(() => ({ seconds: 0, cpuUs: 0, renders: 0, roundCpu: [] as number[] }));
  for (let round = 0; round < ROUNDS; round++) {
    const from = round * per;
    const to = Math.min(n, from + per);
    rows.forEach(([, fn], r) => {
      const cpu = process.cpuUsage();
      const started = process.hrtime.bigint();
      for (let i = from; i < to; i++) fn(i);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const used = process.cpuUsage(cpu);
      const t = totals[r]!;
      t.seconds += seconds;
      t.cpuUs += used.user + used.system;
      t.renders += to - from;
      t.roundCpu.push((used.user + used.system) / (to - from));
    });
  }
  return rows.map(([label], r) => {
    const t = totals[r]!;
    const sorted = [...t.roundCpu].sort((x, y) => x - y);
    return {
      label,
      renders: t.renders,
      seconds: Math.round(t.seconds * 100) / 100,
      rendersPerSecond: Math.round(t.renders / t.seconds),
      usPerRender: Math.round((t.seconds / t.renders) * 1e6),
      cpuUsPerRender: Math.round(t.cpuUs / t.renders),
      medianRoundCpuUsPerRender: Math.round(sorted[Math.floor(sorted.length / 2)]!),
    };
  });
}

async function benchFormat(format: Format, recipients: Recipient[]) {
  const source = BODIES[format];
  const n = recipients.length;
  const variables = recipients.map(variablesOf);
  const compileStarted = process.hrtime.bigint();
  const compiled: CompiledBody = await compileBody(source);
  const compileMs = Number(process.hrtime.bigint() - compileStarted) / 1e6;
  const input = {
    content: { subject: SUBJECT, body: source },
    kind: 'MARKETING' as const,
    templateId: null,
    from: FROM,
    replyTo: null,
    tracking: { opens: true, clicks: true },
    links: linkConfig,
  };
  // The first prepareContent of this content does the per-template work (the body's MJML and Liquid are cached by
  // compileBody above, as a template save would have left them); the second is a cache hit.
  const prepareStarted = process.hrtime.bigint();
  const message: PreparedMessage = await prepareMessage(input);
  const prepareMs = Number(process.hrtime.bigint() - prepareStarted) / 1e6;
  const preparedAgainStarted = process.hrtime.bigint();
  await prepareMessage(input);
  const preparedAgainMs = Number(process.hrtime.bigint() - preparedAgainStarted) / 1e6;
  const sample = composeEmail(message, recipients[1]!);
  const compose = (i: number) => composeEmail(message, { ...recipients[i % n]!, emailId: randomUUID() });
  const results = measureRows(
    [
      ['liquid html', (i) => renderTemplate(compiled, variables[i % n]!)],
      ['html + text part', (i) => renderBody(compiled, variables[i % n]!)],
      [
        'full recipient: subject + html + text + tracking',
        (i) => {
          const v = variables[i % n]!;
          renderSubject(SUBJECT, v);
          const { html } = renderBody(compiled, v);
          applyTracking(html, { emailId: v.id as string, opens: true, clicks: true }, linkConfig);
        },
      ],
      [
        'before the composer: acceptSend per recipient (links, subject, html, text, tracking, headers)',
        (i) => {
          const r = recipients[i % n]!;
          const links = contactLinks(r.contactId, linkConfig);
          const v = variablesOf(r);
          const rendered = renderBody(compiled, v);
          applyTracking(rendered.html, { emailId: randomUUID(), opens: true, clicks: true }, linkConfig);
          renderSubject(SUBJECT, v);
          listUnsubscribeHeaders(links, FROM.email, linkConfig);
        },
      ],
      ['composeEmail (the same, prepared once)', compose],
      ['composeEmail + buildMime (a campaign before SMTP)', (i) => buildMime(mimeMessageOf(compose(i)))],
    ],
    n,
  );
  return {
    format,
    sourceBytes: Buffer.byteLength(source),
    compiledBytes: Buffer.byteLength(compiled.html),
    renderedHtmlBytes: Buffer.byteLength(sample.html),
    textBytes: Buffer.byteLength(sample.text),
    compileMs: Math.round(compileMs),
    prepareMs: Math.round(prepareMs * 10) / 10,
    preparedAgainMs: Math.round(preparedAgainMs * 100) / 100,
    linksMarkedOnce: message.content.plan !== null,
    trackedLinks: message.content.plan?.slots.length ?? null,
    results,
  };
}

async function main() {
  const prepared = Array.from({ length: Math.min(RECIPIENTS, 5_000) }, (_, i) => recipientData(i));
  // Renders cycle through the prepared recipients, so building their data is not measured.
  const runs = prepared.length < RECIPIENTS ? Array.from({ length: RECIPIENTS }, (_, i) => prepared[i % prepared.length]!) : prepared;
  const formats: Format[] = FORMAT === 'all' ? ['html', 'mjml', 'campaign'] : FORMAT === 'both' ? ['html', 'mjml'] : [FORMAT as Format];
  const report = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    recipients: RECIPIENTS,
    formats: [] as unknown[],
    composeCache: {} as ReturnType<typeof composeCacheStats>,
  };
  for (const format of formats) report.formats.push(await benchFormat(format, runs));
  report.composeCache = composeCacheStats();
  console.log(JSON.stringify(report, null, 2));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
