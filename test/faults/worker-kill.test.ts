import { Client, Connection } from '@temporalio/client';
import { workflowIds } from '../../temporal/workflow-ids';
import { sharesByWorker } from '../../bench/shares';
import { campaignState, lostAndDuplicated, receivedBy, seedContacts, sendTaggedCampaign, sleep, useFaultStack, waitUntil } from './support';

/**
 * A campaign with two worker processes (`CAMPAIGN_PARTITIONS=2`, one share per worker at a time), unthrottled (a
 * throttled campaign's shares are not limited per worker), large enough that both are mid-share when one of them gets
 * `kill -9`. Checked: both workers were sending a share at once (each holds
 * one share's activity, and each share has recorded SENT rows), the survivor finishes the campaign (it sends the dead
 * worker's share after the heartbeat timeout), and every recipient gets the message once, except the messages in
 * flight at the kill (accepted by the relay, outcome not recorded), which may arrive twice and no more. Prints
 * `[fault worker-kill]`.
 */

const RECIPIENTS = 12_000;

const f = useFaultStack('worker-kill', { CAMPAIGN_PARTITIONS: '2', CAMPAIGN_SHARES_PER_WORKER: '1' });

test('two workers each send a share of a campaign; kill -9 of one mid-campaign: the other finishes it, every recipient once except the messages in flight at the kill (at most twice)', async () => {
  await f.stack.startSecondWorker();
  const pids = { [f.stack.worker!.child.pid!]: 'worker', [f.stack.worker2!.child.pid!]: 'worker2' } as Record<number, 'worker' | 'worker2'>;
  const connection = await Connection.connect({ address: f.stack.temporalAddress });
  const client = new Client({ connection });
  try {
    const tag = `wk${Math.random().toString(36).slice(2, 8)}`;
    const to = await seedContacts(f.db, f.project.projectId, tag, RECIPIENTS);
    const t0 = Date.now();
    const id = await sendTaggedCampaign(f.project, f.domain, tag);
    const handle = client.workflow.getHandle(workflowIds.campaignSend(id));

    // The workers holding a share now: per pending share activity (one per share at a time), who started it.
    const holders = async (): Promise<Map<number, string>> => {
      const d = await handle.describe();
      const held = new Map<number, string>();
      for (const a of d.raw.pendingActivities ?? []) {
        if (a.activityType?.name !== 'sendCampaignPartition' || !a.lastWorkerIdentity || !a.lastStartedTime) continue;
        held.set(Number(a.activityId), pids[Number(a.lastWorkerIdentity.split('@')[0])] ?? a.lastWorkerIdentity);
      }
      return held;
    };
    const sentByShare = async (): Promise<number[]> => {
      const { rows } = await f.db.query<{ share: number; n: number }>(
        `select get_byte(uuid_send(contact_id), 15) % 2 as share, count(*)::int as n from emails where campaign_id = $1 and status = 'SENT' group by 1`,
        [id],
      );
      return [0, 1].map((s) => rows.find((r) => r.share === s)?.n ?? 0);
    };
    const state = async () => ({ holders: Object.fromEntries(await holders()), sent: await sentByShare() });
    // Both workers hold a share, and both shares have sent a tenth of theirs.
    await waitUntil('both workers sending a share', 120_000, async () => {
      const [held, sent] = [await holders(), await sentByShare()];
      return new Set(held.values()).size === 2 && sent.every((n) => n >= RECIPIENTS / 20);
    }, state);
    const before = await state();
    const victim = before.holders[Object.keys(before.holders)[0]!]! as 'worker' | 'worker2';

    await f.stack.kill(victim);
    const capturedAtKill = new Set([...receivedBy(f.capture.messages, `${tag}-`).keys()]);
    await sleep(1_000); // the dead worker's open transaction is rolled back once Postgres sees its socket closed
    const recorded = new Set((await f.db.query<{ to_email: string }>(`select to_email from emails where campaign_id = $1 and status = 'SENT'`, [id])).rows.map((r) => r.to_email.toLowerCase()));
    // Accepted by the relay without a recorded outcome: the only messages that may be sent again.
    const inFlight = new Set([...capturedAtKill].filter((r) => !recorded.has(r)));

    await waitUntil('the campaign ended', 300_000, async () => ['SENT', 'FAILED', 'CANCELLED'].includes((await campaignState(f.db, id)).status), () => campaignState(f.db, id));
    const end = await campaignState(f.db, id);
    const received = receivedBy(f.capture.messages, `${tag}-`);
    const { lost, duplicated } = lostAndDuplicated(received, to);
    const twiceOutsideWindow = [...received].filter(([r, n]) => n > 1 && !inFlight.has(r)).length;
    const maxCopies = Math.max(...received.values());
    const stats = (await f.db.query('select audience, sent, failed, skipped from campaign_stats where campaign_id = $1', [id])).rows[0];
    const survivor = victim === 'worker' ? 'worker2' : 'worker';
    const shares = await sharesByWorker(f.stack.temporalAddress, id, pids);
    console.log(
      `[fault worker-kill] campaign ${RECIPIENTS} recipients, 2 shares, 2 workers; before the kill: holders ${JSON.stringify(before.holders)}, SENT per share ${JSON.stringify(before.sent)}; ` +
        `kill -9 of ${victim} ${((Date.now() - t0) / 1000).toFixed(1)} s in (${capturedAtKill.size} captured, ${recorded.size} recorded, ${inFlight.size} in flight); ` +
        `${end.status}, emails ${JSON.stringify(end.emails)}, stats ${JSON.stringify(stats)}; received distinct ${received.size}, lost ${lost}, duplicated ${duplicated} (max copies ${maxCopies}); ` +
        `completed share calls by worker ${JSON.stringify(shares)}`,
    );
    expect(new Set(Object.values(before.holders))).toEqual(new Set(['worker', 'worker2']));
    expect(before.sent.every((n) => n > 0)).toBe(true);
    expect(end.status).toBe('SENT');
    expect(stats).toEqual({ audience: RECIPIENTS, sent: RECIPIENTS, failed: 0, skipped: 0 });
    expect({ lost, twiceOutsideWindow, maxCopies }).toEqual({ lost: 0, twiceOutsideWindow: 0, maxCopies: duplicated > 0 ? 2 : 1 });
    expect(duplicated).toBeLessThanOrEqual(inFlight.size);
    // The survivor sent both shares to their end (the dead worker's calls never completed).
    expect(shares[survivor]?.shares).toEqual([0, 1]);
  } finally {
    await connection.close();
  }
}, 600_000);
