import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { resolveTemporalBinary } from '../../scripts/services/temporal-server';
import { Client, Connection } from '@temporalio/client';
import { stackEnv } from '../stack-env';

export const HISTORIES_DIR = path.join(__dirname, '..', 'histories');

/**
 * With RECORD_HISTORIES=1, saves a finished workflow's history under test/histories/<name>.json (the format of
 * `temporal workflow show --output json`). The replay test replays every saved history against the current workflow
 * code, so a change that running executions would replay differently fails the suite until it is guarded with
 * patched(). Record again only for new behaviour.
 */
export async function maybeRecordHistory(workflowId: string, name: string): Promise<void> {
  if (process.env.RECORD_HISTORIES !== '1') return;
  const binary = resolveTemporalBinary(() => undefined);
  if (!binary) throw new Error('RECORD_HISTORIES needs the temporal CLI');
  // A run's last database write comes before its completion: wait for the close, or the history is cut short.
  const connection = await Connection.connect({ address: stackEnv().temporalAddress });
  try {
    await new Client({ connection }).workflow.getHandle(workflowId).result().catch(() => undefined);
  } finally {
    await connection.close();
  }
  const json = execFileSync(binary, ['workflow', 'show', '--workflow-id', workflowId, '--output', 'json', '--address', stackEnv().temporalAddress], {
    encoding: 'utf8',
  });
  fs.mkdirSync(HISTORIES_DIR, { recursive: true });
  fs.writeFileSync(path.join(HISTORIES_DIR, `${name}.json`), json);
}
