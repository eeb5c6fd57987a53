import { randomUUID, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { deliver } from '../helpers/smtp-client';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { makeCert, snsSign } from '../helpers/sns';
import { stackEnv } from '../stack-env';
import { loadConfig } from '../../domain/config';
import { uuidv7 } from '../../domain/ids';
import { returnPathAddress } from '../../domain/inbound/return-path';
import { initOrm, type MikroORM } from '../../domain/orm';
import { AppError } from '../../domain/errors';
import { composeEmail, prepareMessage, type PreparedMessage } from '../../domain/compose/composer';
import type { LinkConfig } from '../../domain/tracking/links';
import { EventDispatcher } from '../../domain/events/event-dispatcher';
import type { OutboxEvent } from '../../domain/events/event-consumer';
import { retireConsumer } from '../../domain/events/outbox-admin';
import { presentCampaignSendStats } from '../../api/presenters/campaign-stats.presenter';
import {
  CAMPAIGN_STATS_CONSUMER,
  campaignStatsConsumer,
  getCampaignStats,
  pruneCampaignEventReceipts,
  uuidv7Floor,
  type CampaignCounters,
} from '../../domain/campaigns/campaign-stats';

/**
 * Campaign statistics from real events: the open pixel, click redirects and the one-click unsubscribe through the
 * API, SES reports through /webhooks/sns, each recorded with its outbox rows, and the campaign-stats consumer fed by
 * an outbox dispatcher. The send engine is built in parallel, so campaigns and their `emails` rows are written with
 * SQL here (as the snapshot writes them, then SENT), and each message is composed in this process exactly as the
 * send activity composes it (same composer, the API's public URL and link secret), which gives its real links.
 *
 * The dispatcher runs in this process: the stack's worker runs only the consumers of its registry. Several
 * dispatchers may share a consumer (they lock shards), so this holds whether the worker runs it too or not.
 */

const stack = stackEnv();
const apiConfig = loadConfig({ ...process.env, NODE_ENV: 'test', DATABASE_URL: stack.databaseUrl, PUBLIC_URL: stack.apiUrl });
const cfg: LinkConfig = apiConfig;

// SNS, played by the test as in webhooks-sns.test.ts: a self-signed certificate served on loopback.
const TOPIC = 'arn:aws:sns:us-east-1:123456789012:mailwright-ses';
const signer = makeCert('campaign-stats-signer');
let snsServer: http.Server;
let snsBase: string;

let dispatcher: EventDispatcher;
/** Whether this file added the consumer to event_consumers (then it retires it at the end: no worker runs it). */
let registeredHere = false;
let orm: MikroORM;

let projectA: TestProject;
let projectB: TestProject;
let domainA: string;
let domainB: string;

beforeAll(async () => {
  snsServer = http.createServer((req, res) => {
    if (req.url === '/cert.pem') return void res.end(signer.pem);
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => snsServer.listen(0, '127.0.0.1', resolve));
  snsBase = `http://127.0.0.1:${(snsServer.address() as AddressInfo).port}`;

  registeredHere = (await db().query('select 1 from event_consumers where name = $1', [CAMPAIGN_STATS_CONSUMER])).rowCount === 0;
  dispatcher = new EventDispatcher(stack.databaseUrl, [campaignStatsConsumer], {
    pollIntervalMs: 500,
    batchSize: 500,
    retry: { maxAttempts: 3, baseDelayMs: 200, maxDelayMs: 1_000 },
  });
  await dispatcher.start(); // registers the consumer: events recorded from now on are queued for it
  orm = await initOrm(stack.databaseUrl, 2);

  [projectA, projectB] = await Promise.all([createTestProject('Stats A'), createTestProject('Stats B')]);
  domainA = uniqueDomain();
  domainB = uniqueDomain();
  await addVerifiedDomain(projectA.projectId, domainA);
  await addVerifiedDomain(projectB.projectId, domainB);
});

afterAll(async () => {
  await dispatcher?.stop();
  if (registeredHere) await retireConsumer(db(), CAMPAIGN_STATS_CONSUMER);
  await orm?.close();
  await closeDb();
  await new Promise((r) => snsServer.close(r));
});

// ---------------------------------------------------------------------------------------------------------------
// Fixtures

interface Recipient {
  contactId: string;
  email: string;
  emailId: string;
}

async function createContact(p: TestProject): Promise<{ id: string; email: string }> {
  const email = `reader-${randomUUID().slice(0, 8)}@example.com`;
  const res = await api('POST', '/contacts', { key: p.secretKey, body: { email, subscribed: true } });
  expect(res.status).toBe(201);
  return { id: res.body.id, email };
}

/** A campaign as sending leaves it: SENDING, its counters row, one SENT `emails` row per recipient (no body stored). */
async function sendingCampaign(p: TestProject, domain: string, recipients: number): Promise<{ campaignId: string; recipients: Recipient[] }> {
  const campaignId = uuidv7();
  await db().query(
    `insert into campaigns (id, project_id, name, subject, body, from_email, audience_type, status, audience_size, started_at)
     values ($1, $2, 'November news', 'News', '<p>Hi</p>', $3, 'ALL', 'SENDING', $4, now())`,
    [campaignId, p.projectId, `news@${domain}`, recipients],
  );
  await db().query('insert into campaign_stats (campaign_id, audience, sent) values ($1, $2, $2)', [campaignId, recipients]);
  const out: Recipient[] = [];
  for (let i = 0; i < recipients; i++) {
    const contact = await createContact(p);
    out.push({ contactId: contact.id, email: contact.email, emailId: await sentEmail(p, domain, contact, campaignId) });
  }
  return { campaignId, recipients: out };
}

/** A SENT marketing email of the contact, of a campaign or (null) not. */
async function sentEmail(p: TestProject, domain: string, contact: { id: string; email: string }, campaignId: string | null): Promise<string> {
  const emailId = uuidv7();
  await db().query(
    `insert into emails (id, project_id, contact_id, kind, to_email, from_email, subject, html, status, attempts, sent_at, campaign_id, message_id)
     values ($1, $2, $3, 'MARKETING', $4, $5, 'News', '', 'SENT', 1, now(), $6, $7)`,
    [emailId, p.projectId, contact.id, contact.email, `news@${domain}`, campaignId, `<${emailId}@${domain}>`],
  );
  return emailId;
}

const BODY = '<html><body><p>Our November news.</p><p><a href="https://shop.example/sale?utm=nov">The sale</a></p></body></html>';
const prepared = new Map<string, Promise<PreparedMessage>>();

/** The message as the campaign sender composes it for this recipient: its real pixel, click and unsubscribe links. */
async function compose(domain: string, r: Recipient): Promise<{ open: string; click: string; oneClick: string }> {
  if (!prepared.has(domain)) {
    prepared.set(
      domain,
      prepareMessage({
        content: { subject: 'News for {{ email }}', body: BODY },
        kind: 'MARKETING',
        templateId: null,
        from: { email: `news@${domain}` },
        replyTo: null,
        tracking: { opens: true, clicks: true },
        links: cfg,
      }),
    );
  }
  const mail = composeEmail(await prepared.get(domain)!, { contactId: r.contactId, email: r.email, emailId: r.emailId });
  const path = (re: RegExp, text: string) => new URL(re.exec(text)![1]!).pathname;
  return {
    open: path(/src="([^"]+\/t\/o\/[\w-]+)"/, mail.html),
    click: path(/href="([^"]+\/t\/c\/[\w-]+)"/, mail.html),
    oneClick: path(/^<(https?:\/\/[^>]+)>/, mail.headers['List-Unsubscribe']!),
  };
}

const get = (path: string) => fetch(`${stack.apiUrl}${path}`, { redirect: 'manual' });
const oneClick = (path: string) =>
  fetch(`${stack.apiUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });

/** An SES report about one email through POST /webhooks/sns, signed as SNS signs. */
async function sesReport(domain: string, r: Recipient, kind: 'Delivery' | 'Bounce' | 'Complaint', part: Record<string, unknown>): Promise<void> {
  const messageId = `<${r.emailId}@${domain}>`;
  const message = JSON.stringify({
    notificationType: kind,
    mail: {
      timestamp: new Date().toISOString(),
      messageId: `0100019${randomUUID().replace(/-/g, '')}-000000`,
      source: `news@${domain}`,
      destination: [r.email],
      headers: [{ name: 'Message-ID', value: messageId }],
      commonHeaders: { messageId, subject: 'News', to: [r.email] },
    },
    [kind.toLowerCase()]: { timestamp: new Date().toISOString(), ...part },
  });
  const envelope = snsSign(
    {
      Type: 'Notification',
      MessageId: randomUUID(),
      TopicArn: TOPIC,
      Message: message,
      Timestamp: new Date().toISOString(),
      SignatureVersion: '2',
      SigningCertURL: `${snsBase}/cert.pem`,
      UnsubscribeURL: `${snsBase}/?Action=Unsubscribe`,
    },
    signer.key as KeyObject,
  );
  const res = await api('POST', '/webhooks/sns', {
    raw: JSON.stringify(envelope),
    headers: { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': 'Notification' },
  });
  expect(res.status).toBe(200);
  expect(res.body.outcome).toBe('applied');
}

type Counters = CampaignCounters;
const COUNTER_COLUMNS = `audience, sent, delivered, opened_unique as "openedUnique", opened_total as "openedTotal", clicked_unique as "clickedUnique",
  clicked_total as "clickedTotal", bounced, complained, unsubscribed, failed, skipped`;
const ZERO: Counters = { audience: 0, sent: 0, delivered: 0, openedUnique: 0, openedTotal: 0, clickedUnique: 0, clickedTotal: 0, bounced: 0, complained: 0, unsubscribed: 0, failed: 0, skipped: 0 };

async function counters(campaignId: string): Promise<Counters> {
  const { rows } = await db().query<Counters>(`select ${COUNTER_COLUMNS} from campaign_stats where campaign_id = $1`, [campaignId]);
  return rows[0]!;
}

/** Waits until the consumer has taken every event recorded so far (its outbox queue is empty). */
async function drained(timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db().query<{ n: number }>('select count(*)::int as n from event_outbox where consumer = $1', [CAMPAIGN_STATS_CONSUMER]);
    if (rows[0]!.n === 0) return;
    if (Date.now() > deadline) throw new Error(`${rows[0]!.n} events still queued for ${CAMPAIGN_STATS_CONSUMER}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Events of an email as the outbox hands them to a consumer. */
async function outboxEventsOf(emailId: string): Promise<OutboxEvent[]> {
  const { rows } = await db().query<OutboxEvent>(
    `select id, project_id as "projectId", contact_id as "contactId", name, data, source, email_id as "emailId", created_at as "createdAt", 0 as attempts
     from events where email_id = $1 order by id`,
    [emailId],
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------------------------

describe('campaign stats from events', () => {
  let campaignA: string;
  let a: Recipient[];
  let campaignB: string;
  let b: Recipient[];
  let loneEmail: Recipient;

  const EXPECTED_A: Counters = {
    ...ZERO,
    audience: 4,
    sent: 4,
    delivered: 2,
    openedUnique: 2,
    openedTotal: 3,
    clickedUnique: 2,
    clickedTotal: 3,
    bounced: 1,
    complained: 1,
    unsubscribed: 2,
  };

  beforeAll(async () => {
    ({ campaignId: campaignA, recipients: a } = await sendingCampaign(projectA, domainA, 4));
    ({ campaignId: campaignB, recipients: b } = await sendingCampaign(projectB, domainB, 2));
    const lone = await createContact(projectA);
    loneEmail = { contactId: lone.id, email: lone.email, emailId: await sentEmail(projectA, domainA, lone, null) };
  });

  test('opens, clicks, unsubscribes, deliveries, bounces and complaints through the real endpoints reach the counters, each counted once', async () => {
    const [m1, m2] = [await compose(domainA, a[0]!), await compose(domainA, a[1]!)];
    // Reader 1 opens twice and clicks once; reader 2 opens once, clicks twice and unsubscribes (one-click, twice).
    for (const path of [m1.open, m1.open, m1.click, m2.open, m2.click, m2.click]) expect((await get(path)).status).toBe(path.includes('/t/c/') ? 302 : 200);
    expect((await oneClick(m2.oneClick)).status).toBe(200);
    expect((await oneClick(m2.oneClick)).status).toBe(200); // already unsubscribed: no second event
    // Delivery reports for 1 and 2, a permanent bounce for 3, a transient bounce (not a bounce yet) and a complaint for 4.
    await sesReport(domainA, a[0]!, 'Delivery', { recipients: [a[0]!.email], smtpResponse: '250 ok' });
    await sesReport(domainA, a[1]!, 'Delivery', { recipients: [a[1]!.email], smtpResponse: '250 ok' });
    await sesReport(domainA, a[2]!, 'Bounce', { bounceType: 'Permanent', bounceSubType: 'General', bouncedRecipients: [{ emailAddress: a[2]!.email }] });
    await sesReport(domainA, a[3]!, 'Bounce', { bounceType: 'Transient', bounceSubType: 'MailboxFull', bouncedRecipients: [{ emailAddress: a[3]!.email }] });
    await sesReport(domainA, a[3]!, 'Complaint', { complainedRecipients: [{ emailAddress: a[3]!.email }], complaintFeedbackType: 'abuse' });
    // Another project's campaign gets one open; an email of no campaign gets opened and clicked.
    expect((await get((await compose(domainB, b[0]!)).open)).status).toBe(200);
    const lone = await compose(domainA, loneEmail);
    expect((await get(lone.open)).status).toBe(200);
    expect((await get(lone.click)).status).toBe(302);

    await drained();
    expect(await counters(campaignA)).toEqual(EXPECTED_A);
    expect(await counters(campaignB)).toEqual({ ...ZERO, audience: 2, sent: 2, openedUnique: 1, openedTotal: 1 });
    // The email of no campaign left no trace in the consumer's tables.
    const traces = await db().query('select 1 from campaign_email_marks where email_id = $1 union all select 1 from events e join campaign_event_receipts r on r.event_id = e.id where e.email_id = $1', [
      loneEmail.emailId,
    ]);
    expect(traces.rowCount).toBe(0);
  });

  test('a DSN and an ARF report mailed back to the inbound server (any relay, not SES) count as the bounce and the complaint', async () => {
    const { campaignId, recipients: [bounced, complained] } = await sendingCampaign(projectA, domainA, 2);
    const bounceHost = `bounces.${domainA}`;
    const report = (r: Recipient, type: 'delivery-status' | 'feedback-report', fields: string[]) => {
      const boundary = randomUUID();
      return [
        `From: ${type === 'delivery-status' ? 'Mail Delivery System <MAILER-DAEMON@mta.test>' : 'Feedback Loop <fbl@isp.test>'}`,
        `To: ${returnPathAddress(r.emailId, bounceHost, apiConfig.appSecret)}`,
        `Subject: Report`,
        `Message-ID: <${randomUUID()}@mta.test>`,
        `MIME-Version: 1.0`,
        `Content-Type: multipart/report; report-type=${type}; boundary="${boundary}"`,
        ``,
        `--${boundary}`,
        `Content-Type: text/plain`,
        ``,
        `A report about ${r.email}.`,
        ``,
        `--${boundary}`,
        `Content-Type: message/${type}`,
        ``,
        ...fields,
        ``,
        `--${boundary}--`,
        ``,
      ].join('\r\n');
    };
    const dsn = report(bounced, 'delivery-status', ['Reporting-MTA: dns; mta.test', '', `Final-Recipient: rfc822; ${bounced.email}`, 'Action: failed', 'Status: 5.1.1', 'Diagnostic-Code: smtp; 550 5.1.1 User unknown']);
    const arf = report(complained, 'feedback-report', ['Feedback-Type: abuse', 'Version: 1', `Original-Mail-From: <${returnPathAddress(complained.emailId, bounceHost, apiConfig.appSecret)}>`, `Original-Rcpt-To: <${complained.email}>`]);
    expect((await deliver(stack.inboundSmtpPort, '', [returnPathAddress(bounced.emailId, bounceHost, apiConfig.appSecret)], dsn)).data?.code).toBe(250);
    expect((await deliver(stack.inboundSmtpPort, 'fbl@isp.test', [`abuse@${bounceHost}`], arf)).data?.code).toBe(250);
    await waitForEmailStatus(bounced.emailId, 'BOUNCED');
    for (const deadline = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 150))) {
      const { rows } = await db().query(`select 1 from events where email_id = $1 and name = 'email.complained'`, [complained.emailId]);
      if (rows.length) break;
      if (Date.now() > deadline) throw new Error('the ARF report was not applied');
    }
    await drained();
    expect(await counters(campaignId)).toEqual({ ...ZERO, audience: 2, sent: 2, bounced: 1, complained: 1, unsubscribed: 1 });
  });

  test('an unsubscribe through a link composed into an email is recorded with that email; a complaint names its email too', async () => {
    const { rows } = await db().query<{ contact_id: string; email_id: string | null; data: unknown }>(
      `select contact_id, email_id, data from events where name = 'contact.unsubscribed' and contact_id = any($1::uuid[]) order by id`,
      [[a[1]!.contactId, a[3]!.contactId]],
    );
    expect(rows).toEqual([
      { contact_id: a[1]!.contactId, email_id: a[1]!.emailId, data: { via: 'unsubscribe_link', oneClick: true } },
      { contact_id: a[3]!.contactId, email_id: a[3]!.emailId, data: { via: 'complaint' } },
    ]);
    expect((await db().query('select subscribed from contacts where id = $1', [a[1]!.contactId])).rows[0].subscribed).toBe(false);
  });

  test('events handed to the consumer again (a redelivery after a crash) count nothing more, also two deliveries at once', async () => {
    await drained();
    const before = await counters(campaignA);
    const replay = [...(await outboxEventsOf(a[0]!.emailId)), ...(await outboxEventsOf(a[1]!.emailId)), ...(await outboxEventsOf(a[3]!.emailId))];
    expect(replay.map((e) => e.name)).toEqual(expect.arrayContaining(['email.open', 'email.click', 'email.delivered', 'contact.unsubscribed', 'email.complained']));
    await campaignStatsConsumer.handle(replay, { pool: db() });
    await Promise.all([campaignStatsConsumer.handle(replay, { pool: db() }), campaignStatsConsumer.handle(replay, { pool: db() })]);
    expect(await counters(campaignA)).toEqual(before);
  });

  test('a new event delivered twice, in two calls, in one batch and concurrently, counts once: its total once, its first open once', async () => {
    const before = await counters(campaignA);
    const base = { projectId: projectA.projectId, contactId: a[2]!.contactId, data: {}, source: 'SYSTEM' as const, emailId: a[2]!.emailId, createdAt: new Date(), attempts: 0 };
    // Not in `events`, so no dispatcher ever sees them: only these direct calls deliver them.
    const open = { ...base, id: uuidv7(), name: 'email.open' };
    const secondOpen = { ...base, id: uuidv7(), name: 'email.open' };
    await campaignStatsConsumer.handle([open], { pool: db() });
    await campaignStatsConsumer.handle([open, open], { pool: db() });
    await Promise.all([campaignStatsConsumer.handle([open, secondOpen], { pool: db() }), campaignStatsConsumer.handle([secondOpen, open], { pool: db() })]);
    expect(await counters(campaignA)).toEqual({ ...before, openedUnique: before.openedUnique + 1, openedTotal: before.openedTotal + 2 });
    // A second delivery report or permanent bounce of the same email (another event id) is not a second outcome.
    await campaignStatsConsumer.handle([{ ...base, id: uuidv7(), name: 'email.bounced', data: { bounceType: 'Permanent' } }], { pool: db() });
    await campaignStatsConsumer.handle([{ ...base, id: uuidv7(), name: 'email.delivered', emailId: a[0]!.emailId, contactId: a[0]!.contactId }], { pool: db() });
    expect(await counters(campaignA)).toEqual({ ...before, openedUnique: before.openedUnique + 1, openedTotal: before.openedTotal + 2 });
  });

  test('events of other kinds, without an email, or of a campaign without counters (deleted) are ignored', async () => {
    const before = await counters(campaignA);
    const base = { projectId: projectA.projectId, contactId: a[0]!.contactId, data: {}, source: 'SYSTEM' as const, emailId: a[0]!.emailId, createdAt: new Date(), attempts: 0 };
    const gone = await sendingCampaign(projectA, domainA, 1);
    await db().query('delete from campaigns where id = $1', [gone.campaignId]); // its counters go with it; its emails stay
    await campaignStatsConsumer.handle(
      [
        { ...base, id: uuidv7(), name: 'purchase', source: 'TRACKED' },
        { ...base, id: uuidv7(), name: 'email.sent' },
        { ...base, id: uuidv7(), name: 'contact.subscribed' },
        { ...base, id: uuidv7(), name: 'email.open', emailId: null },
        { ...base, id: uuidv7(), name: 'email.open', emailId: gone.recipients[0]!.emailId, contactId: gone.recipients[0]!.contactId },
      ],
      { pool: db() },
    );
    expect(await counters(campaignA)).toEqual(before);
    expect((await db().query('select 1 from campaign_email_marks where email_id = $1', [gone.recipients[0]!.emailId])).rowCount).toBe(0);
  });

  test('getCampaignStats reads the counters with rates; a draft has zeros; another project\'s campaign is 404', async () => {
    const em = orm.em.fork();
    const stats = await getCampaignStats(em, projectA.projectId, campaignA);
    const now = await counters(campaignA);
    expect(stats).toEqual({
      campaignId: campaignA,
      ...now,
      deliveryRate: Math.round((now.delivered / now.sent) * 1e4) / 1e4,
      openRate: Math.round((now.openedUnique / now.sent) * 1e4) / 1e4,
      clickRate: Math.round((now.clickedUnique / now.sent) * 1e4) / 1e4,
      clickToOpenRate: Math.round((now.clickedUnique / now.openedUnique) * 1e4) / 1e4,
      bounceRate: Math.round((now.bounced / now.sent) * 1e4) / 1e4,
      complaintRate: Math.round((now.complained / now.sent) * 1e4) / 1e4,
      unsubscribeRate: Math.round((now.unsubscribed / now.sent) * 1e4) / 1e4,
      suppressed: 0,
      updatedAt: expect.any(Date),
    });
    expect(stats).toMatchObject({ deliveryRate: 0.5, bounceRate: 0.25, complaintRate: 0.25, unsubscribeRate: 0.5 });

    const draftId = uuidv7();
    await db().query(`insert into campaigns (id, project_id, name, from_email, audience_type) values ($1, $2, 'Draft', $3, 'ALL')`, [draftId, projectA.projectId, `news@${domainA}`]);
    expect(await getCampaignStats(em, projectA.projectId, draftId)).toEqual({
      campaignId: draftId,
      ...ZERO,
      deliveryRate: 0,
      openRate: 0,
      clickRate: 0,
      clickToOpenRate: 0,
      bounceRate: 0,
      complaintRate: 0,
      unsubscribeRate: 0,
      suppressed: 0,
      updatedAt: null,
    });

    for (const [project, campaign] of [[projectB.projectId, campaignA], [projectA.projectId, campaignB], [projectA.projectId, uuidv7()]] as const) {
      const err = await getCampaignStats(em, project, campaign).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AppError);
      expect(err).toMatchObject({ statusCode: 404, code: 'NOT_FOUND' });
    }
  });

  test('GET /campaigns/:id/stats answers the presented counters and rates; another project\'s key gets 404', async () => {
    const res = await api('GET', `/campaigns/${campaignA}/stats`, { key: projectA.secretKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(presentCampaignSendStats(await getCampaignStats(orm.em.fork(), projectA.projectId, campaignA)));
    expect(res.body).toMatchObject({ campaignId: campaignA, sent: 4, openedUnique: 3, openRate: 0.75, bounceRate: 0.25, updatedAt: expect.stringMatching(/Z$/) });
    const foreign = await api('GET', `/campaigns/${campaignA}/stats`, { key: projectB.secretKey });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('NOT_FOUND');
  });
});

describe('event receipts', () => {
  test('pruning removes receipts of events older than a week, except one whose event may still be delivered (in the outbox); recent ones stay', async () => {
    const week = 7 * 24 * 3_600_000;
    const old = () => uuidv7Floor(Date.now() - week - 60_000).slice(0, 24) + randomUUID().slice(24);
    const [oldDone, oldParked, recent] = [old(), old(), uuidv7()];
    const campaignId = uuidv7();
    await db().query('insert into campaign_event_receipts (event_id, campaign_id) select unnest($1::uuid[]), $2', [[oldDone, oldParked, recent], campaignId]);
    // A parked outbox row: an operator may replay it, so its receipt must stay (parked rows are not picked up by the dispatcher).
    await db().query(
      `insert into event_outbox (consumer, shard, event_id, contact_id, attempts, parked_at, last_error) values ($1, 0, $2, $3, 12, now(), 'test')`,
      [CAMPAIGN_STATS_CONSUMER, oldParked, randomUUID()],
    );
    try {
      await pruneCampaignEventReceipts(db());
      const { rows } = await db().query<{ event_id: string }>('select event_id from campaign_event_receipts where campaign_id = $1 order by event_id', [campaignId]);
      expect(rows.map((r) => r.event_id).sort()).toEqual([oldParked, recent].sort());
    } finally {
      await db().query('delete from event_outbox where consumer = $1 and event_id = $2', [CAMPAIGN_STATS_CONSUMER, oldParked]);
    }
  });

  test('receipts are only written for opens and clicks of campaign emails', async () => {
    const { rows } = await db().query<{ name: string; n: number }>(
      `select e.name, count(*)::int as n from campaign_event_receipts r join events e on e.id = r.event_id group by e.name order by e.name`,
    );
    expect(rows.every((r) => r.name === 'email.open' || r.name === 'email.click')).toBe(true);
    expect(rows.map((r) => r.name)).toEqual(['email.click', 'email.open']);
  });
});
