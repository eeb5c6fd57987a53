import { Client, Connection } from '@temporalio/client';
import { workflowIds } from '../temporal/workflow-ids';

/** What one worker did for a campaign: share calls it completed, and the messages they reported sent. */
export interface WorkerShares {
  /** `sendCampaignPartition` calls completed (a share's round each), and the distinct shares among them. */
  calls: number;
  shares: number[];
  sent: number;
}

/**
 * Who sent a campaign's shares, read from the `campaign-send/<id>` histories (every run, across continue-as-new): the
 * identity of the worker that started each completed `sendCampaignPartition` attempt (`<pid>@<host>`, the SDK's
 * default), named through `names` (pid -> name), and the `sent` count it returned. Attempts lost with a killed worker
 * are not in the history (only the last attempt's start is recorded), so they count for nobody.
 */
export async function sharesByWorker(address: string, campaignId: string, names: Record<number, string>): Promise<Record<string, WorkerShares>> {
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  try {
    const out: Record<string, WorkerShares> = {};
    const workflowId = workflowIds.campaignSend(campaignId);
    for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
      const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
      const events = history.events ?? [];
      const byId = new Map(events.map((e) => [Number(e.eventId), e]));
      for (const e of events) {
        const done = e.activityTaskCompletedEventAttributes;
        if (!done) continue;
        const scheduled = byId.get(Number(done.scheduledEventId))?.activityTaskScheduledEventAttributes;
        if (scheduled?.activityType?.name !== 'sendCampaignPartition') continue;
        const identity = byId.get(Number(done.startedEventId))?.activityTaskStartedEventAttributes?.identity ?? '?';
        const pid = Number(identity.split('@')[0]);
        const name = names[pid] ?? identity;
        const input = JSON.parse(Buffer.from(scheduled.input!.payloads![0]!.data!).toString('utf8')) as { partition: number };
        const result = JSON.parse(Buffer.from(done.result!.payloads![0]!.data!).toString('utf8')) as { sent: number };
        const w = (out[name] ??= { calls: 0, shares: [], sent: 0 });
        w.calls++;
        if (!w.shares.includes(input.partition)) w.shares.push(input.partition);
        w.sent += result.sent;
      }
    }
    for (const w of Object.values(out)) w.shares.sort((a, b) => a - b);
    return out;
  } finally {
    await connection.close();
  }
}
