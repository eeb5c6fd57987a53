import type { EntityManager } from '@mikro-orm/postgresql';
import { transaction, type Sql } from './db/sql';
import { serviceUnavailable } from './errors';
import { logger } from './logger';

/**
 * The one shape of "store it, then start its workflow" (email delivery batches, sender domains, import and bulk
 * jobs). The data is stored first, so a workflow never starts without it; if the start fails, `compensate` undoes
 * the stored work or marks it failed, and the caller gets 503 with `unavailable`: nothing is left half-queued, and
 * nothing is reported accepted that will not run. A compensation that fails is logged; the 503 stands (what it
 * could not undo is for the owner's own recovery, e.g. the email sweeper).
 */
export async function persistThenStart<T>(steps: {
  persist: () => Promise<T>;
  start: (persisted: T) => Promise<unknown>;
  compensate: (persisted: T, err: unknown) => Promise<unknown>;
  /** The 503's message: what was not done, and that nothing was kept. */
  unavailable: string;
  /** Context for the log lines. */
  log: Record<string, unknown>;
}): Promise<T> {
  const persisted = await steps.persist();
  try {
    await steps.start(persisted);
  } catch (err) {
    logger.error({ err, ...steps.log }, 'could not start a workflow; undoing what was stored');
    await steps.compensate(persisted, err).catch((undoErr: unknown) => logger.error({ err: undoErr, ...steps.log }, 'could not undo after a failed workflow start'));
    throw serviceUnavailable(steps.unavailable);
  }
  return persisted;
}

/**
 * The one cancel shape (campaigns, import and bulk jobs, automation executions): the database records the intent,
 * then Temporal is told, as one unit. `record` runs in a transaction and moves the row to its cancelled state (or
 * throws the 404/409 of a row that cannot be cancelled); `tell` then asks Temporal to cancel the run while that
 * transaction is still open, and the transaction commits only once Temporal has taken the request. If Temporal cannot be
 * reached, the transaction rolls back and the caller gets 503 with `unavailable`: nothing was recorded, nothing was
 * told, and the client can retry. Once Temporal has the request it is durable there: should the commit itself fail,
 * the run's own cancellation handling records the same end (each run's end-recording statement changes only an active
 * row, and waits on this transaction's row lock). `tell` must be bounded (TemporalGateway gives its cancels a
 * deadline), since the row stays locked while it runs.
 */
export async function recordThenTell<T>(
  em: EntityManager,
  steps: {
    record: (tx: Sql) => Promise<T>;
    /** Not called when `record` says there is nothing to tell (e.g. the row was cancelled already). */
    tell: (recorded: T) => Promise<unknown>;
    skipTell?: (recorded: T) => boolean;
    unavailable: string;
    log: Record<string, unknown>;
  },
): Promise<T> {
  return transaction(em, async (tx) => {
    const recorded = await steps.record(tx);
    if (steps.skipTell?.(recorded)) return recorded;
    try {
      await steps.tell(recorded);
    } catch (err) {
      logger.error({ err, ...steps.log }, 'could not tell Temporal; the cancel is not recorded');
      throw serviceUnavailable(steps.unavailable);
    }
    return recorded;
  });
}
