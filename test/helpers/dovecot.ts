import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, waitForPort } from '../../scripts/services/process';

/**
 * A real IMAP server for tests: a private Dovecot instance (Debian's `dovecot-imapd`, installed on first use by
 * scripts/dovecot/install.sh), with its own config, run and mail directories in a temporary folder, one passwd-file
 * user, maildir storage, plain IMAP on one loopback port. The system service is never used or started.
 *
 * Mail belongs to the `dovecot` system user (Dovecot refuses to access mail as root). The instance runs under a
 * small shell that kills it when its stdin closes: at stop(), or when the test process dies without calling it.
 */

export interface RunningDovecot {
  host: '127.0.0.1';
  port: number;
  user: string;
  password: string;
  /** The instance's folder (dovecot.conf, users, mail/, dovecot.log); removed by stop(). */
  directory: string;
  /** Dovecot's log so far. */
  log(): string;
  stop(): Promise<void>;
}

const run = promisify(execFile);
const INSTALL_SCRIPT = path.resolve(__dirname, '../../scripts/dovecot/install.sh');
const DOVECOT = '/usr/sbin/dovecot';

let installing: Promise<void> | undefined;

function ensureDovecotInstalled(): Promise<void> {
  installing ??= (async () => {
    try {
      await run('bash', [INSTALL_SCRIPT], { timeout: 15 * 60_000, maxBuffer: 16 * 1024 * 1024 });
    } catch (err) {
      installing = undefined;
      const e = err as { stderr?: string; stdout?: string; message: string };
      throw new Error(`installing dovecot failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`.trim(), { cause: err });
    }
  })();
  return installing;
}

async function systemIds(user: string): Promise<{ uid: number; gid: number }> {
  const [uid, gid] = await Promise.all([run('id', ['-u', user]), run('id', ['-g', user])]);
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

function dovecotConf(dir: string, port: number, ids: { uid: number; gid: number }): string {
  return `# A private instance for Mailwright's tests (test/helpers/dovecot.ts)
base_dir = ${dir}/run
state_dir = ${dir}/state
instance_name = mw-dovecot-${path.basename(dir)}
log_path = ${dir}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:${dir}/mail/%u
first_valid_uid = ${ids.uid}
last_valid_uid = ${ids.uid}
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u ${dir}/users
}
userdb {
  driver = static
  args = uid=${ids.uid} gid=${ids.gid} home=${dir}/mail/%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${port}
  }
  inet_listener imaps {
    port = 0
  }
}
service stats {
  inet_listener http {
    port = 0
  }
}
namespace inbox {
  inbox = yes
  separator = /
}
`;
}

/** Starts a private Dovecot with one user; call stop() in afterAll. */
export async function startDovecot(opts: { user?: string; password?: string } = {}): Promise<RunningDovecot> {
  await ensureDovecotInstalled();
  const user = opts.user ?? 'bounces';
  const password = opts.password ?? 'bounce-secret';
  const port = await freePort();
  const ids = await systemIds('dovecot');
  const dir = fs.mkdtempSync(path.join('/tmp', 'mw-dovecot-'));
  fs.chmodSync(dir, 0o755);
  for (const sub of ['run', 'state', 'mail']) fs.mkdirSync(path.join(dir, sub));
  fs.chownSync(path.join(dir, 'mail'), ids.uid, ids.gid);
  fs.writeFileSync(path.join(dir, 'users'), `${user}:{PLAIN}${password}\n`, { mode: 0o640 });
  fs.chownSync(path.join(dir, 'users'), 0, ids.gid); // read by the auth process, which runs as dovecot
  fs.writeFileSync(path.join(dir, 'dovecot.conf'), dovecotConf(dir, port, ids));
  const logFile = path.join(dir, 'dovecot.log');
  // Foreground (-F) under a shell that kills it when stdin closes, so it never outlives the test process.
  const child: ChildProcess = spawn('bash', ['-c', `${DOVECOT} -F -c "$1" & p=$!; cat >/dev/null; kill $p 2>/dev/null; wait $p`, 'dovecot', path.join(dir, 'dovecot.conf')], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const log = () => (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '') + stderr;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      child.stdin!.end();
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (!process.env.KEEP_TEST_DATA) fs.rmSync(dir, { recursive: true, force: true });
    })());
  try {
    await Promise.race([
      waitForPort('127.0.0.1', port, 20_000, `dovecot on 127.0.0.1:${port}`),
      exited.then((code) => {
        throw new Error(`dovecot exited (code ${code}):\n${log()}`);
      }),
    ]);
  } catch (err) {
    await stop();
    throw err;
  }
  return { host: '127.0.0.1', port, user, password, directory: dir, log, stop };
}
