import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { expectStatus } from '../helpers/automations';
import { createTestProject } from '../helpers/fixtures';
import { publishRecords } from '../helpers/dns';
import { startDnsServer } from '../support/dns-server';
import { OwnStack } from '../helpers/own-stack';
import { startPostfix, type RunningPostfix } from '../helpers/postfix';
import { freePort } from '../../scripts/services/process';
import { loadConfig } from '../../domain/config';
import { parseReturnPath } from '../../domain/inbound/return-path';

/**
 * A real MTA in the loop: Debian's Postfix (installed where missing) is Mailwright's SMTP relay. It accepts a message
 * for an unknown local user, then fails to deliver it and sends its own DSN to the envelope sender, which is the
 * email's signed return path on the domain's bounce host; Postfix routes the bounce host to Mailwright's inbound
 * server, and the worker marks the email BOUNCED and suppresses the address. Run with `npm run test:mta`.
 */

let stack: OwnStack;
let postfix: RunningPostfix;
let dns: Awaited<ReturnType<typeof startDnsServer>>;
let secretKey: string;
let domain: string;
let projectId: string;

beforeAll(async () => {
  const relayPort = await freePort();
  dns = await startDnsServer();
  stack = await OwnStack.start({ name: 'mta', env: { SMTP_URL: `smtp://127.0.0.1:${relayPort}`, DNS_SERVERS: dns.server, DNS_TIMEOUT: '1s' } });
  // The helpers (publishRecords) talk to this file's DNS server.
  process.env.MAILWRIGHT_TEST_STACK = JSON.stringify({ ...JSON.parse(process.env.MAILWRIGHT_TEST_STACK!), dnsServer: dns.server, dnsControlUrl: dns.controlUrl });
  await stack.startInbound();
  const project = await createTestProject('mta');
  secretKey = project.secretKey;
  projectId = project.projectId;
  domain = `mta-${randomUUID().slice(0, 8)}.example.test`;
  // A sender domain as a user adds one: its records published (the bounce host's MX too), checked: VERIFIED, and its
  // return path ACTIVE, so mail goes out with each email's own return path.
  const added = expectStatus(await api('POST', '/domains', { key: secretKey, body: { domain } }), 201);
  await publishRecords(added.records);
  const checked = expectStatus(await api('GET', `/domains/${added.id}/verify`, { key: secretKey }), 200);
  expect(checked).toMatchObject({ status: 'VERIFIED', returnPath: { status: 'ACTIVE', host: `bounces.${domain}` } });
  postfix = await startPostfix({ inboundPort: stack.inboundPort, smtpPort: relayPort, bounceDomains: [`bounces.${domain}`] });
}, 900_000);

afterAll(async () => {
  await closeDb();
  await postfix?.stop();
  await stack?.stop();
  await dns?.stop();
});

test("Postfix's own DSN for an unknown user reaches the return path: the email is BOUNCED (source dsn) and the address suppressed", async () => {
  const to = `nobody-${randomUUID().slice(0, 8)}@mta.test`;
  const res = expectStatus(await api('POST', '/v1/send', { key: secretKey, body: { to, from: `news@${domain}`, subject: 'Hello', body: '<p>Hello</p>' } }), 200);
  const emailId: string = res.data.emails[0].email;
  // Postfix took it (SENT), then bounced it itself.
  await postfix.waitForLog(new RegExp(`to=<${to}>.*status=bounced`), 60_000);
  const bounce = await postfix.waitForLog(/to=<b-[a-z2-7]{48}@bounces\..*status=sent/, 60_000);
  const returnPath = /to=<(b-[a-z2-7]{48}@[^>]+)>/.exec(bounce)![1]!;
  const secret = loadConfig({ ...process.env, DATABASE_URL: stack.databaseUrl }).appSecret;
  expect(parseReturnPath(returnPath, secret)).toMatchObject({ emailId });
  const email = await waitForEmailStatus(emailId, 'BOUNCED', 60_000);
  expect(email.error).toMatch(/hard, 5\.1\.1/);
  const { rows: events } = await db().query(`select data from events where email_id = $1 and name = 'email.bounced'`, [emailId]);
  expect(events).toEqual([{ data: expect.objectContaining({ source: 'dsn', format: 'rfc3464', bounceType: 'Permanent', status: '5.1.1', reportingMTA: 'mta.test' }) }]);
  const { rows: suppressed } = await db().query(`select reason, source, email_id from suppressions where project_id = $1 and email = $2`, [projectId, to]);
  expect(suppressed).toEqual([{ reason: 'hard_bounce', source: 'dsn', email_id: emailId }]);
  const { rows: inbound } = await db().query(`select kind, status, mail_from from inbound_messages where email_id = $1`, [emailId]);
  expect(inbound).toEqual([{ kind: 'bounce', status: 'PROCESSED', mail_from: '' }]);
  // And the address is skipped from now on.
  const again = expectStatus(await api('POST', '/v1/send', { key: secretKey, body: { to, from: `news@${domain}`, subject: 'Again', body: '<p>x</p>' } }), 200);
  expect(again.data.emails[0]).toMatchObject({ status: 'SUPPRESSED', suppression: { reason: 'hard_bounce' } });
}, 180_000);
