// `npm run bench:render`: per-recipient rendering throughput of a realistic templated email, in process (no stack).
// Compiles the body once (as a send or campaign does), then renders it for N recipients with varying data:
// Liquid only, Liquid + the plain-text part, and the whole per-recipient pipeline (subject, HTML, text, tracking).
// Options (env): RECIPIENTS (20000), FORMAT=html|mjml|both (both).
import { randomUUID } from 'node:crypto';
import { compileBody, renderBody, renderSubject, renderTemplate, type CompiledBody } from '../domain/rendering/render';
import { applyTracking, contactLinks, type LinkConfig } from '../domain/tracking/links';

const RECIPIENTS = Number(process.env.RECIPIENTS ?? 20_000);
const FORMAT = process.env.FORMAT ?? 'both';
const linkConfig: LinkConfig = { publicUrl: 'https://mail.example.com', appSecret: 'bench-app-secret-0123456789-abcdefghij' };

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

function recipientVariables(i: number): Record<string, unknown> {
  const id = randomUUID();
  const links = contactLinks(id, linkConfig);
  return {
    id,
    email: `reader-${i}@example.com`,
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
    unsubscribeUrl: links.unsubscribeUrl,
    manageUrl: links.manageUrl,
  };
}

function measure(label: string, n: number, fn: (i: number) => void) {
  for (let i = 0; i < Math.min(500, n); i++) fn(i); // warm-up: JIT
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn(i);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { label, renders: n, seconds: Math.round(seconds * 100) / 100, rendersPerSecond: Math.round(n / seconds), usPerRender: Math.round((seconds / n) * 1e6) };
}

async function benchFormat(format: 'html' | 'mjml', variables: Record<string, unknown>[]) {
  const source = format === 'mjml' ? MJML_BODY : HTML_BODY;
  const compileStarted = process.hrtime.bigint();
  const compiled: CompiledBody = await compileBody(source);
  const compileMs = Number(process.hrtime.bigint() - compileStarted) / 1e6;
  const n = variables.length;
  const sample = renderBody(compiled, variables[1]!);
  const results = [
    measure('liquid html', n, (i) => renderTemplate(compiled, variables[i % n]!)),
    measure('html + text part', n, (i) => renderBody(compiled, variables[i % n]!)),
    measure('full recipient: subject + html + text + tracking', n, (i) => {
      const v = variables[i % n]!;
      renderSubject(SUBJECT, v);
      const { html } = renderBody(compiled, v);
      applyTracking(html, { emailId: v.id as string, opens: true, clicks: true }, linkConfig);
    }),
  ];
  return {
    format,
    sourceBytes: Buffer.byteLength(source),
    compiledBytes: Buffer.byteLength(compiled.html),
    renderedHtmlBytes: Buffer.byteLength(sample.html),
    textBytes: Buffer.byteLength(sample.text),
    compileMs: Math.round(compileMs),
    results,
  };
}

async function main() {
  const variables = Array.from({ length: Math.min(RECIPIENTS, 5_000) }, (_, i) => recipientVariables(i));
  // Renders cycle through the prepared variable sets, so building them is not measured.
  const runs = variables.length < RECIPIENTS ? Array.from({ length: RECIPIENTS }, (_, i) => variables[i % variables.length]!) : variables;
  const formats = FORMAT === 'both' ? (['html', 'mjml'] as const) : [FORMAT as 'html' | 'mjml'];
  const report = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    recipients: RECIPIENTS,
    formats: [] as unknown[],
  };
  for (const format of formats) report.formats.push(await benchFormat(format, runs));
  console.log(JSON.stringify(report, null, 2));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
