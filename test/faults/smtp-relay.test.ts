import { randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { campaignState, lostAndDuplicated, pooled, receivedBy, sendTaggedCampaign, useFaultStack, waitUntil } from './support';

/**
 * The SMTP relay misbehaving, on a stack of the test's own whose worker talks to a relay the test scripts per
 * recipient and attempt (test/support/smtp-capture.ts): 451 on RCPT TO and after DATA, 550 on RCPT TO and 554 after
 * DATA, no answer to RCPT TO (the socket timeout, 30 s), the connection cut in the middle of DATA, and connections
 * that are never greeted (the greeting timeout, 10 s). Transient failures must be retried and each such message
 * delivered once; a 5xx must bounce at once, once (BOUNCED and one `email.bounced`, never retried); nothing lost.
 * The same relay then serves a campaign with the same mix. Prints `[fault smtp]`.
 */

const SCRIPT = {
  clean: { prefix: 'ok', count: 100, transient: 0 },
  rcpt451: { prefix: 'tempfail-2', count: 20, transient: 2 },
  data451: { prefix: 'tempdata-1', count: 20, transient: 1 },
  rcpt550: { prefix: 'bounce', count: 20, transient: 0 },
  data554: { prefix: 'bouncedata', count: 20, transient: 0 },
  stall: { prefix: 'stall-1', count: 4, transient: 1 },
  drop: { prefix: 'drop-1', count: 20, transient: 1 },
} as const;
type Kind = keyof typeof SCRIPT;
const permanent = (k: Kind) => k === 'rcpt550' || k === 'data554';


// Stalled sessions hold a pooled connection each for the socket timeout: a pool of 10 keeps the others moving.
const f = useFaultStack('smtp', { SMTP_POOL_SIZE: '10', CAMPAIGN_RETRY_DELAYS: '2s,5s,10s,20s' });

/** The recipients of one run: `<prefix>-<tag>-<i>@example.com` per scripted kind. */
function recipients(tag: string): { to: string; kind: Kind }[] {
  return (Object.keys(SCRIPT) as Kind[]).flatMap((kind) => Array.from({ length: SCRIPT[kind].count }, (_, i) => ({ to: `${SCRIPT[kind].prefix}-${tag}-${i}@example.com`, kind })));
}

/** Per kind: lost, duplicated, wrong final status, and relay attempts outside the script. */
function tally(all: { to: string; kind: Kind; status: string; events: Record<string, number> }[], received: Map<string, number>) {
  const out: Record<string, { n: number; lost: number; duplicated: number; wrongStatus: number; wrongEvents: number; attempts: number }> = {};
  for (const kind of Object.keys(SCRIPT) as Kind[]) {
    const mine = all.filter((r) => r.kind === kind);
    const expected = permanent(kind) ? [] : mine.map((r) => r.to);
    const { lost, duplicated } = lostAndDuplicated(received, expected);
    out[kind] = {
      n: mine.length,
      lost,
      // A bounced recipient must have received nothing at all.
      duplicated: duplicated + (permanent(kind) ? mine.reduce((n, r) => n + (received.get(r.to) ?? 0), 0) : 0),
      wrongStatus: mine.filter((r) => r.status !== (permanent(kind) ? 'BOUNCED' : 'SENT')).length,
      wrongEvents: mine.filter((r) => JSON.stringify(r.events) !== JSON.stringify(permanent(kind) ? { 'email.bounced': 1 } : { 'email.sent': 1 })).length,
      attempts: mine.reduce((n, r) => n + (f.capture.attempts.get(r.to) ?? 0), 0),
    };
  }
  return out;
}

test('a relay answering 4xx, 5xx, stalling and dropping mid-DATA: transient failures retried and delivered once, 5xx bounced once, nothing lost (/v1/send)', async () => {
  const tag = `s${randomUUID().slice(0, 6)}`;
  const list = recipients(tag);
  f.capture.stallConnections(2); // the first two connections the worker opens are never greeted
  const t0 = Date.now();
  const errors: string[] = [];
  const ids = await pooled(list, 8, async ({ to }, i) => {
    const res = await api('POST', '/v1/send', { key: f.project.secretKey, body: { to, from: `relay@${f.domain}`, subject: `Fault ${i}`, body: `<p>Message ${i}</p>` } });
    if (res.status !== 200) errors.push(`${res.status} ${res.text.slice(0, 200)}`);
    return res.body?.data?.emails?.[0]?.email as string;
  });
  expect(errors).toEqual([]);

  const final = async () =>
    (await f.db.query<{ n: number }>(`select count(*)::int as n from emails where id = any($1::uuid[]) and status in ('SENT', 'BOUNCED', 'FAILED', 'CANCELLED')`, [ids])).rows[0]!.n;
  const statuses = async () =>
    Object.fromEntries((await f.db.query(`select status, count(*)::int as n from emails where id = any($1::uuid[]) group by status`, [ids])).rows.map((r) => [r.status, r.n]));
  // Retries back off 5 s, 10 s, ...: two 451s and a 30 s stall settle within a minute or two.
  const settledMs = await waitUntil('every email final', 240_000, async () => (await final()) === ids.length, statuses);

  const rows = new Map(
    (await f.db.query<{ id: string; status: string }>('select id, status from emails where id = any($1::uuid[])', [ids])).rows.map((r) => [r.id, r.status]),
  );
  const events = new Map<string, Record<string, number>>();
  for (const r of (await f.db.query<{ emailId: string; name: string; n: number }>(`select email_id as "emailId", name, count(*)::int as n from events where email_id = any($1::uuid[]) group by 1, 2`, [ids])).rows) {
    events.set(r.emailId, { ...events.get(r.emailId), [r.name]: r.n });
  }
  const all = list.map((r, i) => ({ ...r, status: rows.get(ids[i]!) ?? 'missing', events: events.get(ids[i]!) ?? {} }));
  const counts = tally(all, receivedBy(f.capture.messages, ''));
  const totals = Object.values(counts).reduce((t, c) => ({ lost: t.lost + c.lost, duplicated: t.duplicated + c.duplicated, wrong: t.wrong + c.wrongStatus + c.wrongEvents }), { lost: 0, duplicated: 0, wrong: 0 });
  console.log(
    `[fault smtp] /v1/send ${list.length} emails (${Object.entries(SCRIPT).map(([k, s]) => `${k} ${s.count}`).join(', ')}; first 2 connections never greeted): ` +
      `errors ${errors.length}, all final ${((Date.now() - t0) / 1000).toFixed(1)} s after the first call (${(settledMs / 1000).toFixed(1)} s after the last), ` +
      `lost ${totals.lost}, duplicated ${totals.duplicated}, wrong status or events ${totals.wrong}; relay attempts per kind ${Object.entries(counts).map(([k, c]) => `${k} ${c.attempts}`).join(', ')}`,
  );
  expect(totals).toEqual({ lost: 0, duplicated: 0, wrong: 0 });
  for (const kind of Object.keys(SCRIPT) as Kind[]) {
    if (kind === 'clean') continue;
    // 5xx: one attempt each, never retried; transient: the scripted failures, then the one that delivered.
    expect([kind, counts[kind]!.attempts]).toEqual([kind, SCRIPT[kind].count * (permanent(kind) ? 1 : SCRIPT[kind].transient + 1)]);
  }
}, 360_000);

test('the same relay under a campaign: transient failures delivered once by the retry passes, 5xx bounced once, nothing lost', async () => {
  const tag = `c${randomUUID().slice(0, 6)}`;
  // The campaign's audience is tagged contacts; their addresses carry the script: the first of each kind's count.
  const list = recipients(tag);
  await f.db.query(
    `insert into contacts (id, project_id, email, subscribed, data) select gen_random_uuid(), $1, e, true, jsonb_build_object('tag', $2::text, 'n', ord)
     from unnest($3::text[]) with ordinality as t(e, ord)`,
    [f.project.projectId, tag, list.map((r) => r.to)],
  );
  f.capture.stallConnections(2);
  const t0 = Date.now();
  const id = await sendTaggedCampaign(f.project, f.domain, tag);
  await waitUntil('the campaign ended', 300_000, async () => ['SENT', 'FAILED', 'CANCELLED'].includes((await campaignState(f.db, id)).status), () => campaignState(f.db, id));
  const state = await campaignState(f.db, id);
  const byTo = new Map(
    (await f.db.query<{ to: string; status: string; id: string }>('select to_email as "to", status, id from emails where campaign_id = $1', [id])).rows.map((r) => [r.to, r]),
  );
  const bounceEvents = new Map(
    (await f.db.query<{ emailId: string; n: number }>(`select email_id as "emailId", count(*)::int as n from events where name = 'email.bounced' and email_id in (select id from emails where campaign_id = $1) group by 1`, [id])).rows.map((r) => [r.emailId, r.n]),
  );
  // Campaign messages record no email.sent event (their sends count in the stats): a sent one expects none.
  const all = list.map((r) => {
    const row = byTo.get(r.to);
    const n = row ? bounceEvents.get(row.id) : undefined;
    const events: Record<string, number> = permanent(r.kind) ? (n ? { 'email.bounced': n } : {}) : { 'email.sent': 1 };
    return { ...r, status: row?.status ?? 'missing', events };
  });
  const counts = tally(all, receivedBy(f.capture.messages, ''));
  const totals = Object.values(counts).reduce((t, c) => ({ lost: t.lost + c.lost, duplicated: t.duplicated + c.duplicated, wrong: t.wrong + c.wrongStatus + c.wrongEvents }), { lost: 0, duplicated: 0, wrong: 0 });
  const stats = (await f.db.query('select audience, sent, bounced, failed, skipped from campaign_stats where campaign_id = $1', [id])).rows[0];
  console.log(
    `[fault smtp] campaign ${list.length} recipients (same mix): ${state.status} after ${((Date.now() - t0) / 1000).toFixed(1)} s, emails ${JSON.stringify(state.emails)}, ` +
      `stats ${JSON.stringify(stats)}, lost ${totals.lost}, duplicated ${totals.duplicated}, wrong status or events ${totals.wrong}; ` +
      `relay attempts per kind ${Object.entries(counts).map(([k, c]) => `${k} ${c.attempts}`).join(', ')}`,
  );
  const bounced = SCRIPT.rcpt550.count + SCRIPT.data554.count;
  expect(state.status).toBe('SENT');
  expect(totals).toEqual({ lost: 0, duplicated: 0, wrong: 0 });
  // `sent` counts every message handed to the relay, bounced ones included (bounced / sent is the bounce rate).
  expect(stats).toEqual({ audience: list.length, sent: list.length, bounced, failed: 0, skipped: 0 });
  for (const kind of ['rcpt550', 'data554'] as const) expect([kind, counts[kind]!.attempts]).toEqual([kind, SCRIPT[kind].count]);
}, 420_000);
