import fs from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { HISTORIES_DIR } from '../helpers/histories';

/**
 * Every recorded history under test/histories/ must replay against the current workflow code. A failure means a
 * change would break executions already running in production: guard it with patched() instead.
 */
const files = fs.existsSync(HISTORIES_DIR) ? fs.readdirSync(HISTORIES_DIR).filter((f) => f.endsWith('.json')) : [];

describe('replay of recorded workflow histories', () => {
  test('there are recorded histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  test.each(files)('%s replays without non-determinism', async (file) => {
    const history: unknown = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, file), 'utf8'));
    await Worker.runReplayHistory({ workflowsPath: path.join(__dirname, '..', '..', 'temporal', 'workflows') }, history, file);
  }, 60_000);
});
