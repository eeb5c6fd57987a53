import path from 'node:path';
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
