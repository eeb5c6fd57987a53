import type { Pool } from 'pg';
import { api } from '../helpers/api';
import type { TestProject } from '../helpers/fixtures';
import { closeDb } from '../helpers/db';
import { projectWithDomain } from '../helpers/automations';
import { OwnStack } from '../helpers/own-stack';
import { startSmtpCapture } from '../support/smtp-capture';
import type { Captured } from '../support/smtp-capture';

/** Shared by the fault tests: their stack, bounded load, waiting, counting what arrived, a campaign to tagged contacts. */

export { pooled } from '../helpers/pooled';

export interface FaultStack {
  /** The SMTP relay the worker talks to, in this process (scripted per recipient; `messages` is what it accepted). */
  capture: Awaited<ReturnType<typeof startSmtpCapture>>;
  stack: OwnStack;
  /** A pool on the stack's Postgres that survives its restarts. */
  db: Pool;
  project: TestProject;
  domain: string;
}

/**
 * The file's own stack, started before its tests and stopped after them: a capture relay, the stack pointed at it
 * (`env` for the API and the worker), and a project with a verified sender domain. Fields are set once `beforeAll` ran.
 */
export function useFaultStack(name: string, env: Record<string, string> = {}): FaultStack {
  const f = {} as FaultStack;
  beforeAll(async () => {
    f.capture = await startSmtpCapture();
    f.stack = await OwnStack.start({ name: `fault-${name}`, env: { SMTP_URL: f.capture.smtpUrl, ...env } });
    f.db = f.stack.pool();
    ({ project: f.project, domain: f.domain } = await projectWithDomain(`fault ${name}`));
  }, 300_000);
  afterAll(async () => {
    await closeDb();
    await f.stack?.stop();
    await f.capture?.stop();
  });
  return f;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it holds; throws with `state()` after `timeoutMs`. Returns the milliseconds it took. */
export async function waitUntil(what: string, timeoutMs: number, check: () => Promise<boolean>, state?: () => Promise<unknown>): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check().catch(() => false)) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not reached within ${timeoutMs / 1000} s (${JSON.stringify(await state?.().catch((e: Error) => e.message))})`);
    await sleep(500);
  }
}

/** Captured messages per envelope recipient, for recipients starting with `prefix`. */
export function receivedBy(messages: Captured[], prefix: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const m of messages) for (const to of m.to) if (to.startsWith(prefix)) counts.set(to, (counts.get(to) ?? 0) + 1);
  return counts;
}

/** Of `expected` recipients: how many got nothing and how many extra copies arrived. */
export function lostAndDuplicated(received: Map<string, number>, expected: string[]): { lost: number; duplicated: number } {
  let lost = 0;
  let duplicated = 0;
  for (const to of expected) {
    const n = received.get(to.toLowerCase()) ?? 0;
    if (n === 0) lost++;
    else duplicated += n - 1;
  }
  return { lost, duplicated };
}

/** Contacts `<tag>-<i>@example.com` (tagged in data.tag) inserted directly: a campaign's audience. */
export async function seedContacts(db: Pool, projectId: string, tag: string, count: number): Promise<string[]> {
  await db.query(
    `insert into contacts (id, project_id, email, subscribed, data)
     select gen_random_uuid(), $1, $2 || '-' || i || '@example.com', true, jsonb_build_object('tag', $2::text, 'n', i) from generate_series(1, $3) i`,
    [projectId, tag, count],
  );
  return Array.from({ length: count }, (_, i) => `${tag}-${i + 1}@example.com`);
}

/** Creates a campaign to the contacts tagged `tag` and sends it through the API; returns its id. */
export async function sendTaggedCampaign(project: TestProject, domain: string, tag: string): Promise<string> {
  const created = await api('POST', '/campaigns', {
    key: project.secretKey,
    body: {
      name: `Fault ${tag}`,
      subject: 'Issue {{ n }}',
      body: '<p>Hello {{ n }}</p>',
      from: `news@${domain}`,
      audienceType: 'FILTERED',
      audienceFilter: { operator: 'AND', conditions: [{ field: 'data.tag', operator: 'equals', value: tag }] },
    },
  });
  if (created.status !== 201) throw new Error(`campaign: ${created.status} ${created.text}`);
  const sent = await api('POST', `/campaigns/${created.body.id}/send`, { key: project.secretKey });
  if (sent.status !== 200 && sent.status !== 202) throw new Error(`campaign send: ${sent.status} ${sent.text}`);
  return created.body.id as string;
}

export async function campaignState(db: Pool, campaignId: string): Promise<{ status: string; emails: Record<string, number> }> {
  const [{ rows: c }, { rows: e }] = await Promise.all([
    db.query<{ status: string }>('select status from campaigns where id = $1', [campaignId]),
    db.query<{ status: string; n: number }>('select status, count(*)::int as n from emails where campaign_id = $1 group by status', [campaignId]),
  ]);
  return { status: c[0]?.status ?? 'none', emails: Object.fromEntries(e.map((r) => [r.status, r.n])) };
}

/**
 * A campaign to `recipients` fresh contacts, with `piece` stopped for `downMs` once 30% are recorded SENT and started
 * again; waits for the campaign to end and counts: recipients lost, extra copies, the final state and stats. The
 * worker and the API are not restarted. Prints one `[fault <piece>]` line.
 */
export async function campaignThroughRestart(f: FaultStack, piece: 'postgres' | 'temporal', recipients: number, downMs: number) {
  const tag = `${piece[0]}c${Math.random().toString(36).slice(2, 8)}`;
  const workerPid = f.stack.worker!.child.pid;
  const to = await seedContacts(f.db, f.project.projectId, tag, recipients);
  const t0 = Date.now();
  const id = await sendTaggedCampaign(f.project, f.domain, tag);
  const sentNow = async () => (await f.db.query<{ n: number }>(`select count(*)::int as n from emails where campaign_id = $1 and status = 'SENT'`, [id])).rows[0]!.n;
  await waitUntil('30% sent', 180_000, async () => (await sentNow()) >= recipients * 0.3, async () => campaignState(f.db, id));
  const sentAtStop = await sentNow();
  const capturedAtStop = receivedBy(f.capture.messages, `${tag}-`).size;
  const down = await f.stack.restart(piece, downMs);
  const sentWhenBack = await sentNow();
  await waitUntil('the campaign ended', 300_000, async () => ['SENT', 'FAILED', 'CANCELLED'].includes((await campaignState(f.db, id)).status), () => campaignState(f.db, id));
  const state = await campaignState(f.db, id);
  const received = receivedBy(f.capture.messages, `${tag}-`);
  const { lost, duplicated } = lostAndDuplicated(received, to);
  const stats = (await f.db.query('select audience, sent, failed, skipped from campaign_stats where campaign_id = $1', [id])).rows[0];
  const sameWorker = f.stack.worker?.child.pid === workerPid && f.stack.worker?.child.exitCode === null;
  console.log(
    `[fault ${piece}] campaign ${recipients} recipients, ${piece} down for ${(down / 1000).toFixed(1)} s from ${sentAtStop} recorded SENT (${capturedAtStop} captured; ${sentWhenBack} recorded when it was back); ` +
      `${state.status} ${((Date.now() - t0) / 1000).toFixed(1)} s after the send, emails ${JSON.stringify(state.emails)}, stats ${JSON.stringify(stats)}; ` +
      `received distinct ${received.size}, lost ${lost}, duplicated ${duplicated}; same worker process alive: ${sameWorker}`,
  );
  return { status: state.status, lost, duplicated, stats, sameWorker };
}
