import { randomUUID } from 'node:crypto';
import { receivedBy, useFaultStack } from './support';
import { initOrm, type MikroORM } from '../../domain/orm';
import { TemporalGateway } from '../../temporal/client';
import { campaignRow, sendCampaign } from '../../domain/campaigns/campaign-steering';
import { SENDS_PER_CONNECTION } from '../../domain/campaigns/campaign-send';

/**
 * `kill -9` of the worker in the middle of a 20,000-recipient campaign, then a new worker: every recipient must still
 * get the message, and a recipient may get it twice only if its SMTP transaction was under way, or answered but not
 * yet recorded, at the kill (rows are recorded at most 15 ms after their reply). The test prints what it counted.
 */

const RECIPIENTS = 20_000;

const f = useFaultStack('campaign-kill');
let orm: MikroORM;
let gateway: TemporalGateway;

beforeAll(async () => {
  orm = await initOrm(f.stack.databaseUrl, 2);
  gateway = await TemporalGateway.connect({ address: f.stack.temporalAddress, namespace: 'default', taskQueue: 'mailwright' });
});
afterAll(async () => {
  await gateway?.close();
  await orm?.close();
});

test('kill -9 of the worker mid-campaign: after restart every recipient got the message, duplicates only from the messages in flight', async () => {
  const { project, domain, db } = f;
  const tag = `crash${randomUUID().slice(0, 6)}`;
  await db.query(
    `insert into contacts (id, project_id, email, subscribed, data)
     select gen_random_uuid(), $1, $2 || '-' || i || '@example.com', true, jsonb_build_object('tag', $2::text, 'n', i) from generate_series(1, $3) i`,
    [project.projectId, tag, RECIPIENTS],
  );
  const id = randomUUID();
  await db.query(
    `insert into campaigns (id, project_id, name, subject, body, from_email, audience_type, audience_filter)
     values ($1, $2, 'Crash test', 'Issue {{ n }}', '<p>Hello {{ n }}</p>', $3, 'FILTERED', $4)`,
    [id, project.projectId, `news@${domain}`, JSON.stringify({ operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: tag }] })],
  );
  await sendCampaign(orm.em.fork(), gateway, project.projectId, id);

  // Kill once a good part, but far from all, has been sent.
  const sentNow = async () => (await db.query(`select count(*)::int as n from emails where campaign_id = $1 and status = 'SENT'`, [id])).rows[0].n as number;
  const deadline = Date.now() + 120_000;
  while ((await sentNow()) < RECIPIENTS * 0.3) {
    if (Date.now() > deadline) throw new Error(`only ${await sentNow()} sent after 120 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await f.stack.kill('worker');
  await f.stack.startWorker(false);
  const sentAtKill = await sentNow();

  const end = Date.now() + 240_000;
  while ((await campaignRow(orm.em.fork(), project.projectId, id)).status !== 'SENT') {
    if (Date.now() > end) throw new Error(`the campaign did not finish within 240 s of the restart (${await sentNow()} sent)`);
    await new Promise((r) => setTimeout(r, 250));
  }
  const received = receivedBy(f.capture.messages, `${tag}-`);
  const counts = [...received.values()];
  const duplicates = counts.reduce((n, c) => n + c - 1, 0);
  const missing = RECIPIENTS - received.size;
  console.log(`[campaign crash] recipients ${RECIPIENTS}, recorded SENT at the kill ${sentAtKill}, received distinct ${received.size}, missing ${missing}, duplicates ${duplicates}`);
  expect(missing).toBe(0);
  // What can be in flight at a kill: per share, the SMTP transactions under way (SENDS_PER_CONNECTION x SMTP_POOL_SIZE)
  // and the replies not yet recorded (at most 200, or 25 ms worth); two shares.
  expect(duplicates).toBeLessThanOrEqual(2 * (SENDS_PER_CONNECTION * 5 + 200));
  const stats = (await db.query('select audience, sent, failed, skipped from campaign_stats where campaign_id = $1', [id])).rows[0];
  expect(stats).toEqual({ audience: RECIPIENTS, sent: RECIPIENTS, failed: 0, skipped: 0 });
}, 420_000);
