import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import { resolveTemporalBinary } from '../../scripts/services/temporal-server';
import { SA } from '../../temporal/search-attributes';

/**
 * A throw-away Temporal dev server (the CLI the stack uses, when it is built) and the workflows bundled once, for
 * workflow tests with activity doubles. Call from beforeAll; tear `env` down in afterAll.
 */
export async function workflowTestEnv(opts: { withSearchAttributes?: boolean } = {}): Promise<{ env: TestWorkflowEnvironment; bundle: WorkflowBundle }> {
  const binary = resolveTemporalBinary(() => undefined);
  // Starts that carry search attributes (children started by a workflow) need them registered, as the stack's server does.
  const searchAttributes = opts.withSearchAttributes ? Object.values(SA) : undefined;
  const quiet = { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  const [env, bundle] = await Promise.all([
    TestWorkflowEnvironment.createLocal({ server: { ...(binary ? { executable: { type: 'existing-path', path: binary } } : {}), searchAttributes } }),
    bundleWorkflowCode({ workflowsPath: path.join(__dirname, '..', '..', 'temporal', 'workflows'), logger: quiet }),
  ]);
  return { env, bundle };
}

/**
 * Whether a run's latest command was a timer: no activity was scheduled after the last timer started. A test that acts
 * on a waiting run (a signal, a cancel) waits for this, not just for some timer: acting while an activity the wait
 * scheduled was in flight, or as a timer fell due, made the time-skipping test server refuse the run's next workflow
 * task, after which the run stood still (campaign-ab.workflow.test.ts says how).
 */
export async function latestCommandIsTimer(handle: WorkflowHandle): Promise<boolean> {
  const events = (await handle.fetchHistory()).events ?? [];
  return events.findLastIndex((e) => e.timerStartedEventAttributes) > events.findLastIndex((e) => e.activityTaskScheduledEventAttributes);
}
