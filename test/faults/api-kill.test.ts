import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { pooled, sleep, useFaultStack, waitUntil } from './support';

/**
 * `kill -9` of the API while `/v1/send` runs under load, twice, each time followed by a new API process. Every call
 * has its own recipient and its own `Idempotency-Key`; a call that fails with a connection error (or a 503, or 409
 * IDEMPOTENCY_KEY_IN_USE) is retried by the client with the same key and body, as a client should. Counted: every
 * call that got a 200 is delivered exactly once (by the email id in its Message-ID), no recipient gets two messages,
 * and no call is left without an answer. Prints `[fault api-kill]`.
 */

const CALLS = 3_000;
const CONCURRENCY = 16;
const KILL_AT = [1_000, 2_000]; // completed calls
/** How long a client keeps retrying one call (connection refused while the API restarts, a key still in use). */
const RETRY_FOR_MS = 90_000;


const f = useFaultStack('api-kill');

type Outcome = { emailId?: string; attempts: number; statuses: string[] };

test('kill -9 of the API twice under /v1/send load: every 200 delivered exactly once, retries with the same Idempotency-Key send nothing twice', async () => {
  const tag = `k${randomUUID().slice(0, 6)}`;
  let done = 0;
  let killing: Promise<void> | undefined;
  const kills: { atCall: number; restartMs: number }[] = [];
  const tally = { connectionErrors: 0, replayed: 0, byStatus: {} as Record<string, number> };

  const call = async (i: number): Promise<Outcome> => {
    const to = `${tag}-${i}@example.com`;
    const body = JSON.stringify({ to, from: `api@${f.domain}`, subject: `Call ${i}`, body: `<p>Call ${i}</p>` });
    const headers = { authorization: `Bearer ${f.project.secretKey}`, 'content-type': 'application/json', 'idempotency-key': `${tag}-${i}` };
    const outcome: Outcome = { attempts: 0, statuses: [] };
    const deadline = Date.now() + RETRY_FOR_MS;
    while (Date.now() < deadline) {
      outcome.attempts++;
      let status: string;
      try {
        const res = await fetch(`${f.stack.apiUrl}/v1/send`, { method: 'POST', headers, body });
        const json = (await res.json().catch(() => undefined)) as { data?: { emails: { email: string }[] }; error?: { code: string } } | undefined;
        if (res.status === 200) {
          if (res.headers.get('idempotent-replayed') === 'true') tally.replayed++;
          outcome.emailId = json!.data!.emails[0]!.email;
          outcome.statuses.push('200');
          tally.byStatus['200'] = (tally.byStatus['200'] ?? 0) + 1;
          return outcome;
        }
        status = `${res.status} ${json?.error?.code ?? ''}`.trim();
      } catch {
        status = 'connection error';
        tally.connectionErrors++;
      }
      outcome.statuses.push(status);
      tally.byStatus[status] = (tally.byStatus[status] ?? 0) + 1;
      // Retryable: the API is gone (connection refused or reset), unavailable, or the key's first request runs.
      if (!/^(connection error|503|409 IDEMPOTENCY_KEY_IN_USE)/.test(status)) return outcome;
      await sleep(500);
    }
    return outcome;
  };

  const t0 = Date.now();
  const outcomes = await pooled(
    Array.from({ length: CALLS }, (_, i) => i),
    CONCURRENCY,
    async (i) => {
      const o = await call(i);
      done++;
      if (kills.length < KILL_AT.length && done >= KILL_AT[kills.length]! && !killing) {
        const atCall = done;
        killing = (async () => {
          const k = Date.now();
          await f.stack.kill('api');
          await f.stack.startApi();
          kills.push({ atCall, restartMs: Date.now() - k });
          killing = undefined;
        })();
      }
      return o;
    },
  );
  await killing;
  const loadMs = Date.now() - t0;

  const accepted = outcomes.filter((o) => o.emailId).map((o) => o.emailId!);
  const unanswered = outcomes.filter((o) => !o.emailId);
  // Emails stored by a request whose API died before it started their delivery wait for the sweeper (every 5 minutes,
  // for emails QUEUED over 10 minutes): run it now for anything QUEUED over 20 s, as the schedule would later.
  await sleep(20_000);
  const connection = await Connection.connect({ address: f.stack.temporalAddress });
  const swept = await new Client({ connection }).workflow.execute('emailSweeper', { taskQueue: 'mailwright', workflowId: `sweep-${randomUUID()}`, args: [{ olderThanMs: 20_000 }] });
  await connection.close();

  const statuses = async () =>
    Object.fromEntries((await f.db.query(`select status, count(*)::int as n from emails where to_email like $1 group by status`, [`${tag}-%`])).rows.map((r) => [r.status, r.n]));
  await waitUntil('every email of the run final', 180_000, async () => Object.keys(await statuses()).every((s) => s === 'SENT' || s === 'BOUNCED' || s === 'FAILED'), statuses);
  await sleep(2_000);

  // Captured: by the email id in the Message-ID (<email id@sender domain>) and by recipient.
  const mine = f.capture.messages.filter((m) => m.to.some((t) => t.startsWith(`${tag}-`)));
  const byEmailId = new Map<string, number>();
  const byRecipient = new Map<string, number>();
  for (const m of mine) {
    const id = /^Message-ID:\s*<([^@>]+)@/im.exec(m.raw.toString('utf8'))?.[1] ?? 'none';
    byEmailId.set(id, (byEmailId.get(id) ?? 0) + 1);
    for (const t of m.to) byRecipient.set(t, (byRecipient.get(t) ?? 0) + 1);
  }
  const lost = accepted.filter((id) => !byEmailId.has(id)).length;
  const duplicated = [...byRecipient.values()].reduce((n, c) => n + c - 1, 0);
  const rows = (await f.db.query<{ n: number; recipients: number }>(`select count(*)::int as n, count(distinct to_email)::int as recipients from emails where to_email like $1`, [`${tag}-%`])).rows[0]!;
  const deliveredWithout200 = [...byRecipient.keys()].filter((to) => !outcomes[Number(to.split('@')[0]!.split('-').pop())]?.emailId).length;

  console.log(
    `[fault api-kill] ${CALLS} calls at concurrency ${CONCURRENCY}, kill -9 of the API after ${kills.map((k) => `${k.atCall} (new API in ${(k.restartMs / 1000).toFixed(1)} s)`).join(' and ')}; ` +
      `load ${(loadMs / 1000).toFixed(1)} s; answers ${JSON.stringify(tally.byStatus)}, connection errors ${tally.connectionErrors}, replayed 200s ${tally.replayed}, ` +
      `calls retried ${outcomes.filter((o) => o.attempts > 1).length}; 200 ${accepted.length}, without a 200 ${unanswered.length}; email rows ${rows.n} for ${rows.recipients} recipients; ` +
      `sweeper restarted ${swept.restarted}; lost ${lost}, duplicated ${duplicated}, delivered without a 200 ${deliveredWithout200}`,
  );
  expect(kills).toHaveLength(KILL_AT.length);
  expect({ lost, duplicated, unanswered: unanswered.length, rows: rows.n }).toEqual({ lost: 0, duplicated: 0, unanswered: 0, rows: CALLS });
  expect(byRecipient.size).toBe(CALLS);
}, 600_000);
