import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement } from './db/sql';
import { logger } from './logger';
import { automationOfRunId, campaignOfWorkflowId } from '../temporal/workflow-ids';

/** A campaign send or automation run that Temporal closed outside its own code (`TemporalGateway.runsClosedOutside`). */
export interface ClosedRun {
  workflowId: string;
  status: 'TERMINATED' | 'TIMED_OUT' | 'FAILED';
}

/** `terminated`, `timed out`, `failed`: how a reason says it. */
const said = (status: ClosedRun['status']) => status.toLowerCase().replace('_', ' ');

const MIRROR_CAMPAIGNS = statement(
  'mirror_closed_campaigns',
  `update campaigns c set status = 'FAILED', status_reason = r.reason, finished_at = now(), updated_at = now()
  from unnest($1::uuid[], $2::text[], $3::text[]) as r(id, workflow_id, reason)
  where c.id = r.id and c.workflow_id = r.workflow_id and c.status in ('SCHEDULED', 'SENDING', 'PAUSED')`,
);

const MIRROR_EXECUTIONS = statement(
  'mirror_closed_executions',
  `update automation_executions x set status = 'FAILED', status_reason = r.reason, waiting_event = null, next_wake_at = null,
    finished_at = now(), updated_at = now()
  from unnest($1::uuid[], $2::text[], $3::text[]) as r(automation_id, workflow_id, reason)
  where x.automation_id = r.automation_id and x.status in ('RUNNING', 'WAITING') and x.workflow_id = r.workflow_id`,
);

/**
 * Mirrors Temporal into the database where it changed state without the workflow's own code: a campaign whose
 * `campaign-send` run was terminated (or timed out, or failed before it could say so) becomes FAILED (`The
 * campaign-send workflow was terminated in Temporal`), an automation execution likewise (`The run was terminated in
 * Temporal`). Runs cancelled in Temporal record CANCELLED themselves (their cancellation handling), so they are not
 * here. Only active rows change; a row already ended keeps its state, so a run listed again changes nothing. The email
 * sweeper calls this every 5 minutes with the runs Temporal lists; reads (GET) never ask Temporal or write.
 * Returns how many rows changed.
 */
export async function mirrorClosedRuns(em: EntityManager, runs: ClosedRun[]): Promise<number> {
  const campaigns = runs.flatMap((r) => {
    const id = campaignOfWorkflowId(r.workflowId);
    return id ? [{ id, ...r }] : [];
  });
  const executions = runs.flatMap((r) => {
    const automationId = automationOfRunId(r.workflowId);
    return automationId ? [{ automationId, ...r }] : [];
  });
  let changed = 0;
  if (campaigns.length > 0) {
    changed += await sql(em).run(MIRROR_CAMPAIGNS, [
      campaigns.map((c) => c.id),
      campaigns.map((c) => c.workflowId),
      campaigns.map((c) => `The campaign-send workflow was ${said(c.status)} in Temporal`),
    ]);
  }
  if (executions.length > 0) {
    changed += await sql(em).run(MIRROR_EXECUTIONS, [
      executions.map((x) => x.automationId),
      executions.map((x) => x.workflowId),
      executions.map((x) => `The run was ${said(x.status)} in Temporal`),
    ]);
  }
  if (changed > 0) logger.info({ changed, runs: runs.length }, 'mirrored runs closed in Temporal into the database');
  return changed;
}
