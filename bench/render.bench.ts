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
import { CAMPAIGN_BODY, HTML_BODY, MJML_BODY } from './bodies';

const RECIPIENTS = Number(process.env.RECIPIENTS ?? 20_000);
const FORMAT = process.env.FORMAT ?? 'all';
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const linkConfig: LinkConfig = { publicUrl: 'https://mail.example.com', appSecret: 'bench-app-secret-0123456789-abcdefghij' };
const FROM = { email: 'news@mail.example.com', name: 'Example News' };

const SUBJECT = '{{ first_name ?? "Hello" }}, your {{ plan | upcase }} summary for {{ month }}';

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
