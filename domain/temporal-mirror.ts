import { logger } from './logger';

const CLOSED_AS_FAILED = new Set(['TERMINATED', 'FAILED', 'TIMED_OUT']);

/** What an active row becomes when Temporal closed its run outside the run's own code. */
export interface ClosedOutside {
  status: 'CANCELLED' | 'FAILED';
  reason: string;
}

/**
 * Asks Temporal how the run of an active row stands and says what the row should show: CANCELLED for a run
 * cancelled there (the run normally records that itself; this covers a cancel it could not record), FAILED for one
 * terminated, failed or timed out (`<what> was terminated in Temporal`). Null while it runs, when it completed, when
 * there is none, or when Temporal cannot be asked (logged: the row stays as stored). Campaigns and automation
 * executions call this on read, so an operator's action in Web UI shows at the next read.
 */
export async function closedOutside(readStatus: () => Promise<string | null>, what: string, log: Record<string, unknown>): Promise<ClosedOutside | null> {
  let status: string | null;
  try {
    status = await readStatus();
  } catch (err) {
    logger.warn({ err, ...log }, `could not read the status of ${what}`);
    return null;
  }
  if (status === 'CANCELLED') return { status: 'CANCELLED', reason: 'Cancelled in Temporal' };
  if (status && CLOSED_AS_FAILED.has(status)) return { status: 'FAILED', reason: `${what[0]!.toUpperCase()}${what.slice(1)} was ${status.toLowerCase().replace('_', ' ')} in Temporal` };
  return null;
}
