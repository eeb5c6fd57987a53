import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { Client, Connection } from '@temporalio/client';
import { stackEnv } from '../stack-env';
import { projectWithDomain } from '../helpers/automations';
import type { TestProject } from '../helpers/fixtures';
import { closeDb } from '../helpers/db';
import { pooled } from '../helpers/pooled';
import { lostAndDuplicated, seedContacts, sendTaggedCampaign, sleep, waitUntil } from '../faults/support';
import { workflowIds } from '../../temporal/workflow-ids';

/**
 * Faults on the production rehearsal (rehearsal tier only: `npm run test:rehearsal`), each with the counts it saw in one
 * `[cluster fault ...]` line (RELIABILITY.md): the real Temporal server on Postgres, two APIs behind the balancer, two
 * workers. The tier's crash control (test/rehearsal-global-setup.ts) kills worker-1 or api-1 with SIGKILL and starts it
 * again, or stops the one Postgres (the app's and Temporal's databases) for 8 s.
 */

let project: TestProject;
let domain: string;
let pg: Pool;

beforeAll(async () => {
  ({ project, domain } = await projectWithDomain('cluster faults'));
  // Its own pool, quiet about the connections a Postgres restart ends.
  pg = new Pool({ connectionString: stackEnv().databaseUrl, max: 4 });
  pg.on('error', () => undefined);
}, 60_000);

afterAll(async () => {
  await pg.end();
  await closeDb();
});

async function control(path: '/restart' | '/restart-api' | '/restart-postgres'): Promise<number> {
  const t = Date.now();
  const res = await fetch(`${stackEnv().workerControlUrl}${path}`, { method: 'POST' });
  if (res.status !== 204) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return Date.now() - t;
}

/** The capture's messages per envelope recipient starting with `prefix` (the relay runs in the tier's setup). */
async function received(prefix: string): Promise<Map<string, number>> {
  const list = (await (await fetch(`${stackEnv().mailboxUrl}/messages`)).json()) as { to: string[] }[];
  const counts = new Map<string, number>();
  for (const m of list) for (const to of m.to) if (to.startsWith(prefix)) counts.set(to, (counts.get(to) ?? 0) + 1);
  return counts;
}

const campaignStatus = async (id: string) => (await pg.query<{ status: string }>('select status from campaigns where id = $1', [id])).rows[0]?.status;

test('kill -9 of a worker mid-campaign on the cluster: both workers were sending a share, the campaign ends SENT, every recipient once except the messages in flight at the kill (at most twice)', async () => {
  const RECIPIENTS = 6_000;
  const tag = `cwk${randomUUID().slice(0, 6)}`;
  const to = await seedContacts(pg, project.projectId, tag, RECIPIENTS);
  const t0 = Date.now();
  const id = await sendTaggedCampaign(project, domain, tag);
  const connection = await Connection.connect({ address: stackEnv().temporalAddress });
  try {
    const handle = new Client({ connection }).workflow.getHandle(workflowIds.campaignSend(id));
    // The worker identities (`<pid>@<host>`) holding a share now, and the SENT rows per share.
    const holders = async () => {
      const d = await handle.describe();
      return new Set((d.raw.pendingActivities ?? []).filter((a) => a.activityType?.name === 'sendCampaignPartition' && a.lastStartedTime).map((a) => a.lastWorkerIdentity));
    };
    const sentByShare = async () => {
      const { rows } = await pg.query<{ share: number; n: number }>(
        `select get_byte(uuid_send(contact_id), 15) % 2 as share, count(*)::int as n from emails where campaign_id = $1 and status = 'SENT' group by 1`,
        [id],
      );
      return [0, 1].map((s) => rows.find((r) => r.share === s)?.n ?? 0);
    };
    await waitUntil('both workers sending a share', 180_000, async () => (await holders()).size === 2 && (await sentByShare()).every((n) => n >= RECIPIENTS / 40), async () => ({
      holders: [...(await holders())],
      sent: await sentByShare(),
    }));
    const before = { holders: [...(await holders())], sent: await sentByShare() };
    await control('/restart'); // kill -9 of worker-1, which holds one of the two shares; a new worker-1 process starts
    const killedAt = Date.now() - t0;
    const capturedAtKill = await received(`${tag}-`);
    await sleep(1_000);
    const recorded = new Set((await pg.query<{ to_email: string }>(`select to_email from emails where campaign_id = $1 and status = 'SENT'`, [id])).rows.map((r) => r.to_email.toLowerCase()));
    const inFlight = new Set([...capturedAtKill.keys()].filter((r) => !recorded.has(r)));
    await waitUntil('the campaign ended', 300_000, async () => ['SENT', 'FAILED', 'CANCELLED'].includes((await campaignStatus(id)) ?? ''), () => campaignStatus(id));
    const endedAt = Date.now() - t0;
    const got = await received(`${tag}-`);
    const { lost, duplicated } = lostAndDuplicated(got, to);
    const twiceOutsideWindow = [...got].filter(([r, n]) => n > 1 && !inFlight.has(r)).length;
    const maxCopies = Math.max(...got.values());
    const stats = (await pg.query('select audience, sent, failed, skipped from campaign_stats where campaign_id = $1', [id])).rows[0];
    console.log(
      `[cluster fault worker-kill] campaign ${RECIPIENTS} recipients, 2 shares over 2 workers; before the kill: holders ${before.holders.join(', ')}, SENT per share ${JSON.stringify(before.sent)}; ` +
        `kill -9 of worker-1 ${(killedAt / 1000).toFixed(1)} s in (${capturedAtKill.size} captured at the kill, ${recorded.size} recorded SENT a second later, ${inFlight.size} in flight); ` +
        `${await campaignStatus(id)} ${(endedAt / 1000).toFixed(1)} s after the send, stats ${JSON.stringify(stats)}; received distinct ${got.size}, lost ${lost}, duplicated ${duplicated} (max copies ${maxCopies})`,
    );
    expect(before.holders).toHaveLength(2);
    expect(await campaignStatus(id)).toBe('SENT');
    expect(stats).toEqual({ audience: RECIPIENTS, sent: RECIPIENTS, failed: 0, skipped: 0 });
    expect({ lost, twiceOutsideWindow, maxCopies }).toEqual({ lost: 0, twiceOutsideWindow: 0, maxCopies: duplicated > 0 ? 2 : 1 });
    expect(duplicated).toBeLessThanOrEqual(inFlight.size);
  } finally {
    await connection.close();
  }
}, 600_000);

test('kill -9 of one API under /v1/send load through the balancer: the other serves meanwhile, every call answered 200 (retries with the same Idempotency-Key), each delivered exactly once', async () => {
  const CALLS = 1_500;
  const tag = `cak${randomUUID().slice(0, 6)}`;
  const tally: Record<string, number> = {};
  let done = 0;
  let killing: Promise<number> | undefined;
  // Answers 200 while api-1 is dead or starting again: the other API served them through the balancer.
  let servedWhileDown = 0;
  let down = false;
  const t0 = Date.now();
  const outcomes = await pooled(
    Array.from({ length: CALLS }, (_, i) => i),
    16,
    async (i) => {
      const body = JSON.stringify({ to: `${tag}-${i}@example.com`, from: `api@${domain}`, subject: `Call ${i}`, body: `<p>Call ${i}</p>` });
      const headers = { authorization: `Bearer ${project.secretKey}`, 'content-type': 'application/json', 'idempotency-key': `${tag}-${i}` };
      let emailId: string | undefined;
      for (let attempt = 0; attempt < 200 && !emailId; attempt++) {
        let status: string;
        try {
          const res = await fetch(`${stackEnv().apiUrl}/v1/send`, { method: 'POST', headers, body });
          const json = (await res.json().catch(() => undefined)) as { data?: { emails: { email: string }[] }; error?: { code: string } } | undefined;
          status = `${res.status} ${json?.error?.code ?? ''}`.trim();
          if (res.status === 200) {
            emailId = json!.data!.emails[0]!.email;
            if (down) servedWhileDown++;
          }
        } catch {
          status = 'connection error';
        }
        tally[status] = (tally[status] ?? 0) + 1;
        if (emailId) break;
        if (!/^(connection error|502|503|409 IDEMPOTENCY_KEY_IN_USE)/.test(status)) break;
        await sleep(500);
      }
      if (++done === CALLS / 3) {
        down = true;
        killing = control('/restart-api').finally(() => (down = false));
      }
      return emailId;
    },
  );
  const restartMs = await killing!;
  const loadMs = Date.now() - t0;
  // Emails stored by a request that died with its API before their delivery started wait for the sweeper: run it now
  // for anything QUEUED over 20 s, as its schedule would later.
  await sleep(20_000);
  const connection = await Connection.connect({ address: stackEnv().temporalAddress });
  const swept = await new Client({ connection }).workflow.execute('emailSweeper', { taskQueue: 'mailwright', workflowId: `sweep-${randomUUID()}`, args: [{ olderThanMs: 20_000 }] });
  await connection.close();
  const statuses = async () => Object.fromEntries((await pg.query(`select status, count(*)::int as n from emails where to_email like $1 group by status`, [`${tag}-%`])).rows.map((r) => [r.status, r.n]));
  await waitUntil('every email final', 180_000, async () => Object.keys(await statuses()).every((s) => s === 'SENT' || s === 'BOUNCED' || s === 'FAILED'), statuses);
  await sleep(2_000);
  const got = await received(`${tag}-`);
  const accepted = outcomes.filter(Boolean).length;
  const recipients = Array.from({ length: CALLS }, (_, i) => `${tag}-${i}@example.com`);
  const { lost, duplicated } = lostAndDuplicated(got, recipients);
  const rows = (await pg.query<{ n: number }>(`select count(*)::int as n from emails where to_email like $1`, [`${tag}-%`])).rows[0]!.n;
  console.log(
    `[cluster fault api-kill] ${CALLS} /v1/send calls at concurrency 16 through the balancer, kill -9 of api-1 after call ${CALLS / 3} (back in ${(restartMs / 1000).toFixed(1)} s, ${servedWhileDown} calls answered 200 meanwhile); ` +
      `load ${(loadMs / 1000).toFixed(1)} s; answers ${JSON.stringify(tally)}; 200 ${accepted} of ${CALLS}; email rows ${rows}; statuses ${JSON.stringify(await statuses())}; sweeper restarted ${swept.restarted}; ` +
      `lost ${lost}, duplicated ${duplicated}`,
  );
  expect(servedWhileDown).toBeGreaterThan(0);
  expect({ accepted, rows, lost, duplicated }).toEqual({ accepted: CALLS, rows: CALLS, lost: 0, duplicated: 0 });
}, 600_000);

test('Postgres (the app and Temporal) stopped for 8 s under /v1/track load: 503 in the envelope while away, no 500, every accepted event stored and dispatched once; afterwards a send goes out through the same processes', async () => {
  const CALLS = 3_000;
  const tag = `cpg${randomUUID().slice(0, 6)}`;
  const byStatus: Record<string, number> = {};
  let done = 0;
  let restart: Promise<number> | undefined;
  const t0 = Date.now();
  const results = await pooled(
    Array.from({ length: CALLS }, (_, i) => i),
    8,
    async (i) => {
      if (done >= CALLS / 4 && !restart) restart = control('/restart-postgres');
      let eventId: string | undefined;
      let key: string;
      try {
        const res = await fetch(`${stackEnv().apiUrl}/v1/track`, {
          method: 'POST',
          headers: { authorization: `Bearer ${project.publicKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ email: `${tag}-${i}@example.com`, event: `${tag}-ev`, data: { i } }),
        });
        const body = (await res.json().catch(() => undefined)) as any;
        key = res.status === 200 ? '200' : `${res.status} ${body?.error?.code ?? ''}`.trim();
        if (res.status === 200) eventId = body.data.event;
        else if (!(body?.success === false && body.error?.statusCode === res.status)) key += ' (not the envelope)';
      } catch {
        key = 'connection error';
      }
      byStatus[key] = (byStatus[key] ?? 0) + 1;
      done++;
      if (!eventId) await sleep(50);
      return eventId;
    },
  );
  const downMs = await restart!;
  const loadMs = Date.now() - t0;
  const accepted = results.filter((e): e is string => !!e);
  const count = async (table: string, column: string) =>
    new Map((await pg.query<{ id: string; n: number }>(`select ${column}::text as id, count(*)::int as n from ${table} where ${column} = any($1::uuid[]) group by 1`, [accepted])).rows.map((r) => [r.id, r.n]));
  await waitUntil('the probe consumer has every accepted event', 180_000, async () => (await count('event_probe_receipts', 'event_id')).size === accepted.length);
  await sleep(3_000); // a late second delivery would show now
  const stored = await count('events', 'id');
  const probe = await count('event_probe_receipts', 'event_id');
  const lost = accepted.filter((id) => !stored.has(id)).length;
  const dispatchedTwice = [...probe.values()].filter((n) => n > 1).length;
  // Temporal lost its database too: a send after the restart still goes out (API -> Temporal -> worker -> relay).
  const after = `${tag}-after@example.com`;
  const sendAfter = Date.now();
  let sentAfter = false;
  await waitUntil('a send after the restart delivered', 120_000, async () => {
    const res = await fetch(`${stackEnv().apiUrl}/v1/send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${project.secretKey}`, 'content-type': 'application/json', 'idempotency-key': `${tag}-after` },
      body: JSON.stringify({ to: after, from: `api@${domain}`, subject: 'After', body: '<p>After</p>' }),
    });
    if (res.status !== 200) return false;
    sentAfter = (await received(after)).size === 1;
    return sentAfter;
  });
  const errors500 = Object.entries(byStatus).filter(([k]) => k.startsWith('500')).reduce((n, [, v]) => n + v, 0);
  const notEnvelope = Object.entries(byStatus).filter(([k]) => k.includes('not the envelope')).reduce((n, [, v]) => n + v, 0);
  console.log(
    `[cluster fault postgres] /v1/track ${CALLS} calls at concurrency 8 through the balancer, Postgres down for ${(downMs / 1000).toFixed(1)} s after call ${CALLS / 4}; load ${(loadMs / 1000).toFixed(1)} s; ` +
      `answers ${JSON.stringify(byStatus)}; accepted ${accepted.length}, stored ${stored.size}, lost ${lost}, dispatched ${probe.size}, twice ${dispatchedTwice}; ` +
      `a send after it delivered in ${((Date.now() - sendAfter) / 1000).toFixed(1)} s`,
  );
  expect({ errors500, notEnvelope }).toEqual({ errors500: 0, notEnvelope: 0 });
  expect(byStatus['503 SERVICE_UNAVAILABLE'] ?? 0).toBeGreaterThan(0); // the database was really away under load
  expect({ lost, notDispatched: accepted.length - probe.size, dispatchedTwice }).toEqual({ lost: 0, notDispatched: 0, dispatchedTwice: 0 });
  expect(sentAfter).toBe(true);
}, 600_000);
