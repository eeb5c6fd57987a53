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
