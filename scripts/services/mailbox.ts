import path from 'node:path';
import { startProcess, waitForPort } from './process';

export interface RunningMailbox {
  smtpUrl: string;
  webUrl: string;
  stop(): Promise<void>;
}

/** Starts MailDev: an SMTP server that keeps every message, with a mailbox page and a REST API. */
export async function startMailbox(opts: { smtpPort: number; webPort: number; logFile?: string }): Promise<RunningMailbox> {
  const bin = path.join(path.dirname(require.resolve('maildev/package.json')), 'bin', 'maildev');
  const proc = startProcess(
    'maildev',
    process.execPath,
    [bin, '--ip', '127.0.0.1', '--smtp', String(opts.smtpPort), '--web', String(opts.webPort), '--silent'],
    { logFile: opts.logFile },
  );
  await waitForPort('127.0.0.1', opts.smtpPort, 30_000, 'the MailDev SMTP server');
  await waitForPort('127.0.0.1', opts.webPort, 30_000, 'the MailDev web UI');
  return {
    smtpUrl: `smtp://127.0.0.1:${opts.smtpPort}`,
    webUrl: `http://localhost:${opts.webPort}`,
    stop: () => proc.stop(),
  };
}
