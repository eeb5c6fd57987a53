// Bundles the workflow code (webpack, through the SDK) into the file named by the first argument. The worker runs
// this in a short-lived child process at start, so the bundler's few hundred MB never stay in the worker's heap.
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';

async function main() {
  const out = process.argv[2];
  if (!out) throw new Error('usage: bundle-workflows.ts <output file>');
  const { code } = await bundleWorkflowCode({ workflowsPath: path.join(__dirname, 'workflows') });
  fs.writeFileSync(out, code);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
