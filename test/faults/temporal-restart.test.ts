import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { expectStatus } from '../helpers/automations';
import { campaignThroughRestart, pooled, sleep, useFaultStack, waitUntil } from './support';

/**
 * The Temporal dev server stopped and started again (it persists to a file, so it comes back with its workflows) on a
 * stack of the test's own, during a campaign and while automation runs wait; the API and worker are not restarted.
 * Counted: the campaign ends SENT with every recipient once; every run completes with the emails of its path, each
 * once, and an event tracked while Temporal was away still takes its WAIT_FOR_EVENT branch. Prints `[fault temporal]`.
 */

const RECIPIENTS = 5_000;
const DOWN_MS = 8_000;
const RUNS = { delay: 150, waitEvent: 100, waitEventDown: 50, waitTimeout: 50 };
const DELAY_S = 30;
const WAIT_S = 45;

const call = (method: string, path: string, body?: unknown) => api(method, path, { key: f.project.secretKey, body });

const f = useFaultStack('temporal');

test('Temporal restarted during a campaign: the campaign resumes and ends SENT with every recipient once', async () => {
  const r = await campaignThroughRestart(f, 'temporal', RECIPIENTS, DOWN_MS);
  expect(r).toEqual({ status: 'SENT', lost: 0, duplicated: 0, stats: { audience: RECIPIENTS, sent: RECIPIENTS, failed: 0, skipped: 0 }, sameWorker: true });
}, 600_000);

test('Temporal restarted while automation runs wait in DELAY and WAIT_FOR_EVENT: every run completes, each email once, events tracked while it was away take their branch', async () => {
  const tag = `ta${randomUUID().slice(0, 6)}`;
  const [X, Y, Z] = [`${tag}-x`, `${tag}-y`, `${tag}-z`];
  const template = async (subject: string) =>
    expectStatus(await call('POST', '/templates', { name: `T ${subject}`, subject, body: `<p>${subject}</p>`, type: 'TRANSACTIONAL', from: `auto@${f.domain}` }), 201).id as string;
  const step = async (w: string, type: string, config: Record<string, unknown>) => expectStatus(await call('POST', `/workflows/${w}/steps`, { type, config }), 201).id as string;
  const link = async (w: string, from: string, toStep: string, branch?: string) =>
    expectStatus(await call('POST', `/workflows/${w}/transitions`, { fromStepId: from, toStepId: toStep, ...(branch ? { branch } : {}) }), 201);
  const subjects = { A1: `A1 ${tag}`, A2: `A2 ${tag}`, B1: `B1 ${tag}`, B2: `B2 ${tag}`, B3: `B3 ${tag}` };

  // A (trigger X): SEND A1 -> DELAY -> SEND A2.  B (trigger Y): SEND B1 -> WAIT_FOR_EVENT(Z) -event-> SEND B2, -timeout-> SEND B3.
  const a = expectStatus(await call('POST', '/workflows', { name: `A ${tag}`, triggerEvent: X }), 201).id as string;
  const [a1, aDelay, a2] = [await step(a, 'SEND_EMAIL', { templateId: await template(subjects.A1) }), await step(a, 'DELAY', { duration: { amount: DELAY_S, unit: 'seconds' } }), await step(a, 'SEND_EMAIL', { templateId: await template(subjects.A2) })];
  await link(a, a1, aDelay);
  await link(a, aDelay, a2);
  const b = expectStatus(await call('POST', '/workflows', { name: `B ${tag}`, triggerEvent: Y }), 201).id as string;
  const b1 = await step(b, 'SEND_EMAIL', { templateId: await template(subjects.B1) });
  const bWait = await step(b, 'WAIT_FOR_EVENT', { event: Z, timeout: { amount: WAIT_S, unit: 'seconds' } });
  const b2 = await step(b, 'SEND_EMAIL', { templateId: await template(subjects.B2) });
  const b3 = await step(b, 'SEND_EMAIL', { templateId: await template(subjects.B3) });
  await link(b, b1, bWait);
  await link(b, bWait, b2, 'event');
  await link(b, bWait, b3, 'timeout');
  for (const w of [a, b]) expectStatus(await call('PATCH', `/workflows/${w}`, { enabled: true }), 200);

  const emails = (group: string, n: number) => Array.from({ length: n }, (_, i) => `${tag}-${group}-${i}@example.com`);
  const aTo = emails('a', RUNS.delay);
  const bEvent = emails('be', RUNS.waitEvent);
  const bDown = emails('bd', RUNS.waitEventDown);
  const bTimeout = emails('bt', RUNS.waitTimeout);
  const track = (list: string[], event: string) =>
    pooled(list, 8, async (email) => expectStatus(await api('POST', '/v1/track', { key: f.project.publicKey, body: { email, event } }), 200));

  const t0 = Date.now();
  await track(aTo, X);
  await track([...bEvent, ...bDown, ...bTimeout], Y);
  const both = [a, b];
  const total = aTo.length + bEvent.length + bDown.length + bTimeout.length;
  const counts = async () =>
    Object.fromEntries(
      (await f.db.query(`select status, count(*)::int as n from automation_executions where automation_id = any($1::uuid[]) group by status`, [both])).rows.map((r) => [r.status, r.n]),
    );
  await waitUntil(`all ${total} runs WAITING`, 120_000, async () => (await counts()).WAITING === total, counts);
  await track(bEvent, Z); // before the restart
  await sleep(2_000);

  // Temporal away; Z for the "down" group while it is (the outbox consumer's signals fail and are retried).
  const t = Date.now();
  await f.stack.stopTemporal();
  const downTracked = await track(bDown, Z).then(() => true).catch((err: Error) => err.message);
  await sleep(Math.max(0, DOWN_MS - (Date.now() - t)));
  await f.stack.startTemporal();
  const downMs = Date.now() - t;
  const restartedAt = Date.now();

  await waitUntil('every run ended', 240_000, async () => {
    const c = await counts();
    return (c.RUNNING ?? 0) + (c.WAITING ?? 0) === 0;
  }, counts);
  const endedMs = Date.now() - restartedAt;
  const final = await counts();
  await sleep(2_000);

  // Per contact: exactly the subjects of its path, each once (subjects parsed from the raw headers).
  const expected = (email: string): string[] =>
    email.includes('-a-') ? [subjects.A1, subjects.A2] : email.includes('-bt-') ? [subjects.B1, subjects.B3] : [subjects.B1, subjects.B2];
  const got = new Map<string, string[]>();
  for (const m of f.capture.messages) {
    const rcpt = m.to.find((x) => x.startsWith(`${tag}-`));
    if (!rcpt) continue;
    const subject = /^Subject:\s*(.*)$/im.exec(m.raw.toString('utf8'))?.[1]?.trim() ?? '';
    got.set(rcpt, [...(got.get(rcpt) ?? []), subject]);
  }
  let lost = 0;
  let duplicated = 0;
  let wrongBranch = 0;
  for (const email of [...aTo, ...bEvent, ...bDown, ...bTimeout]) {
    const mine = got.get(email) ?? [];
    const want = expected(email);
    lost += want.filter((s) => !mine.includes(s)).length;
    duplicated += mine.length - new Set(mine).size;
    if (mine.some((s) => !want.includes(s))) wrongBranch++;
  }
  console.log(
    `[fault temporal] automations: ${total} runs (DELAY ${DELAY_S} s: ${RUNS.delay}; WAIT_FOR_EVENT ${WAIT_S} s: event before ${RUNS.waitEvent}, event while Temporal was down ${RUNS.waitEventDown} (tracked: ${downTracked}), timeout ${RUNS.waitTimeout}); ` +
      `all WAITING ${((restartedAt - t0) / 1000).toFixed(1)} s in, Temporal down ${(downMs / 1000).toFixed(1)} s, all ended ${(endedMs / 1000).toFixed(1)} s after it was back: ${JSON.stringify(final)}; ` +
      `messages ${[...got.values()].reduce((n, s) => n + s.length, 0)} (expected ${2 * total}), lost ${lost}, duplicated ${duplicated}, wrong branch ${wrongBranch}`,
  );
  expect(downTracked).toBe(true);
  expect(final).toEqual({ COMPLETED: total });
  expect({ lost, duplicated, wrongBranch }).toEqual({ lost: 0, duplicated: 0, wrongBranch: 0 });
}, 600_000);
