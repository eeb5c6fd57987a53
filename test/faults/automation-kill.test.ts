import { randomUUID } from 'node:crypto';
import { simpleParser } from 'mailparser';
import { api } from '../helpers/api';
import { db } from '../helpers/db';
import type { TestProject } from '../helpers/fixtures';
import { pooled, useFaultStack } from './support';

/**
 * `kill -9` of the worker while 1,000 automation runs wait, then a new worker: every run must finish, every contact
 * must get exactly the emails of its path, each exactly once, and WAIT_FOR_EVENT must take the branch the events say.
 *
 *   Workflow A (trigger X): SEND_EMAIL(A1) -> DELAY(A_DELAY) -> SEND_EMAIL(A2)                                 500 runs
 *   Workflow B (trigger Y): SEND_EMAIL(B1) -> WAIT_FOR_EVENT(Z, B_TIMEOUT) -event-> DELAY(B_EVENT_DELAY) -> SEND_EMAIL(B2)
 *                                                                          -timeout-> SEND_EMAIL(B3)          500 runs
 *
 * The DELAY on B's event branch keeps the runs that got their event before the kill waiting at the kill too, and
 * means no SMTP transaction is under way at the kill whatever the moment the event arrives: with nothing in flight,
 * exactly once is what the design promises (the campaign crash test covers sends cut off mid-transaction).
 * B's contacts, by when Z is tracked:
 *   before   200  Z tracked before the kill; the kill waits until all of them sit in the event branch's DELAY;
 *   racing   100  Z tracked just before the kill, not waited for (outbox, signal or workflow task in flight);
 *   down     100  Z tracked after the kill, while the new worker boots (the consumer delivers it after the restart);
 *   none     100  no Z: the timeout branch.
 * The kill happens only once all 1,000 executions are WAITING (A in its DELAY, B in WAIT_FOR_EVENT or the event
 * DELAY), every first email is SENT and captured, and the earliest timer is still well ahead.
 *
 * Figures (printed as `[automation crash]`), three runs on the 2-core dev machine: 1,000 triggers tracked in 2.3-6.6 s,
 * all WAITING after 15.7-22.1 s, kill at 19.1-27.2 s with the earliest timer 28.5-29.4 s ahead (12-36 of the 100
 * "racing" runs already in the event DELAY at the kill; all 100 "down" events still in the outbox when tracked),
 * every run COMPLETED 55.1-58.5 s after the restart (bounded by the timers, not the recovery); 2,000 messages,
 * duplicates 0, missing 0, wrong branch 0; 79-84 s for the test.
 */

const PER_WORKFLOW = 500;
const B_GROUPS = { before: 200, racing: 100, down: 100, none: 100 } as const;
const A_DELAY_S = 60;
const B_TIMEOUT_S = 60;
const B_EVENT_DELAY_S = 30;
/** At the kill, no timer may be due sooner than this (otherwise the kill would not be "while every run waits"). */
const MIN_TIMER_HEADROOM_MS = 15_000;
const TRACK_CONCURRENCY = 12;

const f = useFaultStack('automation-kill');
let project: TestProject;
let domain: string;
const call = (method: string, path: string, body?: unknown) => api(method, path, { key: project.secretKey, body });

beforeAll(() => {
  ({ project, domain } = f);
});

async function ok(res: Awaited<ReturnType<typeof call>>, status: number) {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`);
  return res.body;
}

async function template(subject: string): Promise<string> {
  return (await ok(await call('POST', '/templates', { name: `T ${subject}`, subject, body: `<p>${subject}</p>`, type: 'TRANSACTIONAL', from: `auto@${domain}` }), 201)).id;
}

async function step(workflowId: string, type: string, config: Record<string, unknown>): Promise<string> {
  return (await ok(await call('POST', `/workflows/${workflowId}/steps`, { type, config }), 201)).id;
}

async function transition(workflowId: string, from: string, to: string, branch?: string): Promise<void> {
  await ok(await call('POST', `/workflows/${workflowId}/transitions`, { fromStepId: from, toStepId: to, ...(branch ? { branch } : {}) }), 201);
}

/** Tracks `event` for each address through /v1/track with the public key; returns the event ids. */
async function trackAll(emails: string[], event: string): Promise<string[]> {
  return pooled(emails, TRACK_CONCURRENCY, async (email) => {
    const res = await api('POST', '/v1/track', { key: project.publicKey, body: { email, event } });
    if (res.status !== 200) throw new Error(`track ${event} for ${email}: ${res.status} ${res.text}`);
    return res.body.data.event as string;
  });
}

async function statusCounts(automationIds: string[]): Promise<Record<string, number>> {
  const { rows } = await db().query<{ status: string; n: number }>(
    'select status, count(*)::int as n from automation_executions where automation_id = any($1::uuid[]) group by status',
    [automationIds],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

async function sentEmails(automationIds: string[]): Promise<number> {
  const { rows } = await db().query<{ n: number }>(
    `select count(*)::int as n from emails where status = 'SENT' and split_part(workflow_id, '/', 2) = any($1::text[]) and workflow_id like 'automation/%'`,
    [automationIds],
  );
  return rows[0]!.n;
}

async function waitUntil(what: string, timeoutMs: number, check: () => Promise<boolean>, state: () => Promise<unknown>): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not reached within ${timeoutMs / 1000} s (${JSON.stringify(await state())})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Every captured message to an address starting with `prefix`, with its subject: recipient -> subjects. */
async function capturedSubjects(prefix: string): Promise<Map<string, string[]>> {
  const mine = f.capture.messages.filter((m) => m.to.some((to) => to.startsWith(prefix)));
  const subjects = await pooled(mine, 16, async (m) => (await simpleParser(m.raw)).subject ?? '');
  const byRecipient = new Map<string, string[]>();
  mine.forEach((m, i) => {
    for (const to of m.to) if (to.startsWith(prefix)) byRecipient.set(to, [...(byRecipient.get(to) ?? []), subjects[i]!]);
  });
  return byRecipient;
}

test('kill -9 of the worker while 1,000 runs wait in DELAY and WAIT_FOR_EVENT: after restart every run completes, each email exactly once, the right branches', async () => {
  const tag = `acrash${randomUUID().slice(0, 6)}`;
  const [X, Y, Z] = [`${tag}-x`, `${tag}-y`, `${tag}-z`];
  const subject = { A1: `A1 ${tag}`, A2: `A2 ${tag}`, B1: `B1 ${tag}`, B2: `B2 ${tag}`, B3: `B3 ${tag}` };
  const t = {
    A1: await template(subject.A1),
    A2: await template(subject.A2),
    B1: await template(subject.B1),
    B2: await template(subject.B2),
    B3: await template(subject.B3),
  };

  // Workflow A: SEND -> DELAY -> SEND.
  const a = (await ok(await call('POST', '/workflows', { name: `A ${tag}`, triggerEvent: X }), 201)).id as string;
  const aSend1 = await step(a, 'SEND_EMAIL', { templateId: t.A1 });
  const aDelay = await step(a, 'DELAY', { duration: { amount: A_DELAY_S, unit: 'seconds' } });
  const aSend2 = await step(a, 'SEND_EMAIL', { templateId: t.A2 });
  await transition(a, aSend1, aDelay);
  await transition(a, aDelay, aSend2);

  // Workflow B: SEND -> WAIT_FOR_EVENT(Z) -event-> DELAY -> SEND; -timeout-> SEND.
  const b = (await ok(await call('POST', '/workflows', { name: `B ${tag}`, triggerEvent: Y }), 201)).id as string;
  const bSend1 = await step(b, 'SEND_EMAIL', { templateId: t.B1 });
  const bWait = await step(b, 'WAIT_FOR_EVENT', { event: Z, timeout: { amount: B_TIMEOUT_S, unit: 'seconds' } });
  const bDelay = await step(b, 'DELAY', { duration: { amount: B_EVENT_DELAY_S, unit: 'seconds' } });
  const bSend2 = await step(b, 'SEND_EMAIL', { templateId: t.B2 });
  const bSend3 = await step(b, 'SEND_EMAIL', { templateId: t.B3 });
  await transition(b, bSend1, bWait);
  await transition(b, bWait, bDelay, 'event');
  await transition(b, bDelay, bSend2);
  await transition(b, bWait, bSend3, 'timeout');

  for (const id of [a, b]) expect(await ok(await call('PATCH', `/workflows/${id}`, { enabled: true }), 200)).toMatchObject({ enabled: true, problems: [] });
  const both = [a, b];

  const aContacts = Array.from({ length: PER_WORKFLOW }, (_, i) => `${tag}-a-${i}@example.com`);
  const bContacts = Array.from({ length: PER_WORKFLOW }, (_, i) => `${tag}-b-${i}@example.com`);
  let offset = 0;
  const group = (n: number) => bContacts.slice(offset, (offset += n));
  const bBefore = group(B_GROUPS.before);
  const bRacing = group(B_GROUPS.racing);
  const bDown = group(B_GROUPS.down);
  const bNone = group(B_GROUPS.none);
  expect(offset).toBe(PER_WORKFLOW);

  // 1. Trigger 1,000 runs (A and B interleaved, so both workflows' runs start over the same time).
  const t0 = Date.now();
  const interleaved = aContacts.flatMap((e, i) => [{ email: e, event: X }, { email: bContacts[i]!, event: Y }]);
  await pooled(interleaved, TRACK_CONCURRENCY, async ({ email, event }) => trackAll([email], event));
  const trackedMs = Date.now() - t0;

  // 2. All 1,000 WAITING and all first emails SENT.
  const state = async () => ({ executions: await statusCounts(both), sent: await sentEmails(both) });
  await waitUntil(
    'all 1,000 runs WAITING with their first email SENT',
    90_000,
    async () => (await statusCounts(both)).WAITING === 2 * PER_WORKFLOW && (await sentEmails(both)) === 2 * PER_WORKFLOW,
    state,
  );
  const allWaitingMs = Date.now() - t0;

  // 3. Z for the "before" group; the kill waits until each of their runs sits in the event branch's DELAY.
  await trackAll(bBefore, Z);
  const inEventDelay = async () =>
    (await db().query<{ n: number }>(`select count(*)::int as n from automation_executions where automation_id = $1 and status = 'WAITING' and current_step_id = $2`, [b, bDelay])).rows[0]!.n;
  await waitUntil('the "before" group in the event DELAY', 30_000, async () => (await inEventDelay()) === B_GROUPS.before, async () => ({ inEventDelay: await inEventDelay(), ...(await state()) }));

  // The kill must happen while every run waits: all 1,000 WAITING, no timer due within the headroom.
  const atKill = (
    await db().query<{ waiting: number; earliest: number }>(
      `select count(*) filter (where status = 'WAITING')::int as waiting,
              extract(epoch from min(next_wake_at) filter (where status = 'WAITING') - clock_timestamp())::float * 1000 as earliest
       from automation_executions where automation_id = any($1::uuid[])`,
      [both],
    )
  ).rows[0]!;
  expect(atKill.waiting).toBe(2 * PER_WORKFLOW);
  if (atKill.earliest < MIN_TIMER_HEADROOM_MS) {
    throw new Error(`the setup was too slow: the earliest timer is due in ${Math.round(atKill.earliest)} ms at the kill (need ${MIN_TIMER_HEADROOM_MS}); raise the durations`);
  }
  const capturedBeforeKill = await capturedSubjects(`${tag}-`);
  expect([...capturedBeforeKill.values()].reduce((n, s) => n + s.length, 0)).toBe(2 * PER_WORKFLOW);

  // 4. Z for the "racing" group, then at once kill -9 of the worker (outbox delivery, signals and workflow tasks
  //    in flight); the control answers once the new worker process is spawned.
  await trackAll(bRacing, Z);
  const killedAt = Date.now();
  await f.stack.kill('worker');
  await f.stack.startWorker(false);
  const restartedAt = Date.now();
  const racingInDelayAtKill = (await inEventDelay()) - B_GROUPS.before;

  // 5. Z for the "down" group while the new worker boots; the count of their outbox rows still pending shows the
  //    consumer had not run them yet.
  const downEventIds = await trackAll(bDown, Z);
  const downTrackedMs = Date.now() - restartedAt;
  const pendingDown = (
    await db().query<{ n: number }>(`select count(*)::int as n from event_outbox where consumer = 'automations' and event_id = any($1::uuid[])`, [downEventIds])
  ).rows[0]!.n;

  // 6. Every run ends.
  await waitUntil(
    'all 1,000 runs ended',
    180_000,
    async () => {
      const c = await statusCounts(both);
      return (c.RUNNING ?? 0) + (c.WAITING ?? 0) === 0;
    },
    state,
  );
  const completeAfterRestartMs = Date.now() - restartedAt;

  // Executions: one per contact and workflow, all COMPLETED.
  expect(await statusCounts(both)).toEqual({ COMPLETED: 2 * PER_WORKFLOW });
  const runs = (
    await db().query<{ automationId: string; email: string; n: number; runs: number }>(
      `select x.automation_id as "automationId", c.email, max(x.n)::int as n, count(*)::int as runs
       from automation_executions x join contacts c on c.id = x.contact_id
       where x.automation_id = any($1::uuid[]) group by x.automation_id, c.email`,
      [both],
    )
  ).rows;
  expect(runs).toHaveLength(2 * PER_WORKFLOW);
  expect(runs.filter((r) => r.runs !== 1 || r.n !== 1)).toEqual([]);

  // B's branches, as the WAIT_FOR_EVENT step's outcome recorded them.
  const branches = new Map(
    (
      await db().query<{ email: string; branch: string }>(
        `select c.email, s.outcome->>'branch' as branch
         from automation_executions x join contacts c on c.id = x.contact_id
         join automation_execution_steps s on s.execution_id = x.id and s.step_id = $2
         where x.automation_id = $1`,
        [b, bWait],
      )
    ).rows.map((r) => [r.email, r.branch]),
  );
  const expectedBranch = (email: string) => (bNone.includes(email) ? 'timeout' : 'event');
  expect(branches.size).toBe(PER_WORKFLOW);
  expect(bContacts.filter((e) => branches.get(e) !== expectedBranch(e))).toEqual([]);

  // The steps each run recorded, in order.
  const paths = (
    await db().query<{ email: string; automationId: string; types: string[] }>(
      `select c.email, x.automation_id as "automationId", array_agg(s.type order by s.seq) as types
       from automation_executions x join contacts c on c.id = x.contact_id join automation_execution_steps s on s.execution_id = x.id
       where x.automation_id = any($1::uuid[]) group by c.email, x.automation_id`,
      [both],
    )
  ).rows;
  const expectedPath = (email: string, automationId: string) =>
    automationId === a ? ['SEND_EMAIL', 'DELAY', 'SEND_EMAIL'] : expectedBranch(email) === 'event' ? ['SEND_EMAIL', 'WAIT_FOR_EVENT', 'DELAY', 'SEND_EMAIL'] : ['SEND_EMAIL', 'WAIT_FOR_EVENT', 'SEND_EMAIL'];
  expect(paths).toHaveLength(2 * PER_WORKFLOW);
  expect(paths.filter((p) => JSON.stringify(p.types) !== JSON.stringify(expectedPath(p.email, p.automationId)))).toEqual([]);

  // Email rows: two per contact, every one SENT.
  const emailRows = (
    await db().query<{ status: string; n: number }>(
      `select status, count(*)::int as n from emails where split_part(workflow_id, '/', 2) = any($1::text[]) and workflow_id like 'automation/%' group by status`,
      [both],
    )
  ).rows;
  expect(Object.fromEntries(emailRows.map((r) => [r.status, r.n]))).toEqual({ SENT: 4 * PER_WORKFLOW });

  // The capture server: per contact exactly the subjects of its path, each once.
  const received = await capturedSubjects(`${tag}-`);
  const expectedSubjects = (email: string): string[] => {
    if (email.includes('-a-')) return [subject.A1, subject.A2];
    return expectedBranch(email) === 'event' ? [subject.B1, subject.B2] : [subject.B1, subject.B3];
  };
  const wrong: { email: string; got: string[]; expected: string[] }[] = [];
  let duplicates = 0;
  let missing = 0;
  for (const email of [...aContacts, ...bContacts]) {
    const got = [...(received.get(email.toLowerCase()) ?? [])].sort();
    const expected = expectedSubjects(email).sort();
    duplicates += got.length - new Set(got).size;
    missing += expected.filter((s) => !got.includes(s)).length;
    if (JSON.stringify(got) !== JSON.stringify(expected)) wrong.push({ email, got, expected });
  }
  const strangers = [...received.keys()].filter((to) => !aContacts.includes(to) && !bContacts.includes(to));
  const total = [...received.values()].reduce((n, s) => n + s.length, 0);

  console.log(
    `[automation crash] runs ${2 * PER_WORKFLOW} (A ${PER_WORKFLOW}: DELAY ${A_DELAY_S} s; B ${PER_WORKFLOW}: WAIT ${B_TIMEOUT_S} s, event DELAY ${B_EVENT_DELAY_S} s; ` +
      `Z before/racing/down/none ${B_GROUPS.before}/${B_GROUPS.racing}/${B_GROUPS.down}/${B_GROUPS.none}). ` +
      `Triggers tracked in ${(trackedMs / 1000).toFixed(1)} s, all WAITING after ${(allWaitingMs / 1000).toFixed(1)} s; ` +
      `kill at ${((killedAt - t0) / 1000).toFixed(1)} s (earliest timer ${(atKill.earliest / 1000).toFixed(1)} s ahead; racing group already in the event DELAY ${racingInDelayAtKill}/${B_GROUPS.racing}); ` +
      `restart answered in ${((restartedAt - killedAt) / 1000).toFixed(1)} s; "down" Z tracked ${(downTrackedMs / 1000).toFixed(1)} s after it, ${pendingDown}/${B_GROUPS.down} still in the outbox then; ` +
      `all complete ${(completeAfterRestartMs / 1000).toFixed(1)} s after the restart. ` +
      `Messages ${total} (expected ${4 * PER_WORKFLOW}), wrong contacts ${wrong.length}, duplicates ${duplicates}, missing ${missing}, to strangers ${strangers.length}.`,
  );
  expect(wrong.slice(0, 10)).toEqual([]);
  expect({ total, duplicates, missing, strangers: strangers.length }).toEqual({ total: 4 * PER_WORKFLOW, duplicates: 0, missing: 0, strangers: 0 });

  // Nothing left behind in the automations consumer's outbox (parked or pending) for these events.
  const outbox = (
    await db().query<{ n: number }>(
      `select count(*)::int as n from event_outbox o join events e on e.id = o.event_id where o.consumer = 'automations' and e.project_id = $1`,
      [project.projectId],
    )
  ).rows[0]!.n;
  expect(outbox).toBe(0);
}, 330_000);
