import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, waitForPort } from '../../scripts/services/process';

/**
 * A real Postfix for tests: a private instance (its own config, queue and data directories in a temporary folder,
 * listening on one loopback port) that Mailwright uses as its SMTP relay, and that, like a relay on the Internet,
 * accepts mail first and reports failures later with its own DSN (RFC 3464) to the envelope sender.
 *
 * What the instance does with a recipient, in this order:
 *   defer-*@<localDomain>        deferred (4.2.2, "Mailbox full"); after `delayWarningTime` Postfix sends a
 *                                "delayed" DSN, after `deferredLifetime` a "failed" one
 *   <mailbox>@<localDomain>      delivered to the capture port (or discarded without one), for `mailboxes`
 *   *@<localDomain>              accepted, then bounced: 5.1.1 "User unknown", a Postfix-generated DSN
 *   *@<bounceDomain>             relayed to the inbound server under test (127.0.0.1:<inboundPort>): this is where
 *                                the DSNs above go, since Mailwright's envelope sender is on its bounce host
 *   anything else                relayed to the capture port when one is given, else refused at RCPT TO (554 5.7.1)
 *
 * Debian's `postfix` package is installed on first use when missing (scripts/postfix/install.sh: about 15 s with
 * package lists present, plus an `apt-get update` on a fresh image), so the first `startPostfix` of a machine needs a
 * long hook timeout. Postfix runs as root (its master refuses anything else); without root the commands go through
 * `sudo -n`.
 */

interface PostfixOptions {
  /** Port of the inbound SMTP server under test on 127.0.0.1: mail for `bounceDomains` is relayed there. */
  inboundPort: number;
  /** The domains whose mail goes to the inbound server (the bounce hosts of Mailwright's envelope senders). */
  bounceDomains: string[];
  /** The domain this MTA is final destination for, where every user but `mailboxes` is unknown. Default `mta.test`. */
  localDomain?: string;
  /** Local parts at `localDomain` that exist (delivered to `capturePort`, or discarded without one). */
  mailboxes?: string[];
  /** Port on 127.0.0.1 that receives mail for every other domain; without it, such recipients are refused. */
  capturePort?: number;
  /** The instance's SMTP port on 127.0.0.1; a free one by default. */
  smtpPort?: number;
  /** Age of a deferred message at which Postfix sends its "delayed" DSN (Postfix time syntax); `0` turns it off. */
  delayWarningTime?: string;
  /** Age at which a deferred message is given up and bounced ("failed" DSN; Postfix time syntax). Default `10m`. */
  deferredLifetime?: string;
  /** More main.cf parameters, applied last (e.g. `{ bounce_size_limit: '1000' }`). */
  mainCf?: Record<string, string>;
}

export interface RunningPostfix {
  host: '127.0.0.1';
  smtpPort: number;
  /** The instance as Mailwright's `SMTP_URL` (no TLS, no authentication: loopback is in `mynetworks`). */
  smtpUrl: string;
  /** The instance's folder (config/, queue/, data/, maillog); removed by `stop()`. */
  directory: string;
  /** The instance's log so far, one entry per line (the last lines seen if it has stopped). */
  logs(): string[];
  /** Resolves with the first log line matching `pattern`, or rejects with the log after `timeoutMs`. */
  waitForLog(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Retries deferred mail now (`postqueue -f`) instead of at the next queue run. */
  flush(): Promise<void>;
  /** Stops the instance and removes its folder. Idempotent. */
  stop(): Promise<void>;
}

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');
const INSTALL_SCRIPT = path.join(ROOT, 'scripts/postfix/install.sh');
const WATCHDOG_SCRIPT = path.join(ROOT, 'scripts/postfix/watchdog.sh');
const BOUNCE_TEMPLATES = path.join(ROOT, 'scripts/postfix/bounce.cf');
const POSTFIX = '/usr/sbin/postfix';
const POSTCONF = '/usr/sbin/postconf';
const POSTQUEUE = '/usr/sbin/postqueue';

const isRoot = process.getuid?.() === 0;
/** argv for a command that needs root: as it is when we are root, else through password-less sudo. */
const asRoot = (cmd: string, args: string[]): [string, string[]] => (isRoot ? [cmd, args] : ['sudo', ['-n', cmd, ...args]]);

/** Domain names go into a regular expression and main.cf: only plain host names are accepted. */
const DOMAIN = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;
const LOCAL_PART = /^[a-z0-9][a-z0-9._+-]*$/;
const TIME = /^\d+[smhdw]?$/;
const reEscape = (s: string) => s.replace(/[.+]/g, (c) => `\\${c}`);
const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };
/** A Postfix time value in seconds; a bare number is in the parameter's default unit, given as `unit`. */
const seconds = (t: string, unit: string) => Number(/^\d+/.exec(t)![0]) * UNIT_SECONDS[/[smhdw]$/.exec(t)?.[0] ?? unit]!;

let installing: Promise<void> | undefined;

/**
 * Installs Debian's postfix when missing; once per process (the script itself is idempotent and locked, so parallel
 * jest workers are safe). Rejects with the script's output when it cannot install.
 */
function ensurePostfixInstalled(): Promise<void> {
  installing ??= (async () => {
    try {
      await run('bash', [INSTALL_SCRIPT], { timeout: 15 * 60_000, maxBuffer: 16 * 1024 * 1024 });
    } catch (err) {
      installing = undefined; // a later call may try again (e.g. after the apt lock was released)
      const e = err as { stderr?: string; stdout?: string; message: string };
      throw new Error(`installing postfix failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`.trim(), { cause: err });
    }
  })();
  return installing;
}

/** `major.minor` of the installed Postfix, to pick a compatibility level it knows. */
async function postfixVersion(): Promise<[number, number]> {
  const { stdout } = await run(POSTCONF, ['-dh', 'mail_version']);
  const [major = 0, minor = 0] = stdout.trim().split('.').map(Number);
  return [major, minor];
}

function mainCf(
  o: Required<Omit<PostfixOptions, 'capturePort' | 'smtpPort'>> & { capturePort?: number; dir: string; version: [number, number] },
): string {
  const [major, minor] = o.version;
  const relayDomains = [o.localDomain, ...o.bounceDomains].join(', ');
  const settings: [string, string, string?][] = [
    // 3.6 is the newest level this code was checked against; older Postfix (3.4, 3.5) only knows levels up to 2.
    ['compatibility_level', major > 3 || (major === 3 && minor >= 6) ? '3.6' : '2', 'silences the backwards-compatibility warnings'],
    ['queue_directory', path.join(o.dir, 'queue')],
    ['data_directory', path.join(o.dir, 'data')],
    ['myhostname', o.localDomain, 'the greeting, Received: lines, and MAILER-DAEMON@<this> as the DSN\'s From:'],
    ['mydomain', o.localDomain],
    ['myorigin', '$myhostname'],
    ['mydestination', '', 'nothing is delivered locally: the local domain is a relay domain whose users fail in transport_maps'],
    ['local_recipient_maps', ''],
    ['alias_maps', '', 'the system /etc/aliases is not ours to read (and has no .db on a "No configuration" install)'],
    ['alias_database', ''],
    ['inet_interfaces', 'loopback-only'],
    ['inet_protocols', 'ipv4'],
    ['mynetworks', '127.0.0.0/8', 'Mailwright on loopback relays without authentication'],
    // Every recipient in relay_domains is accepted at RCPT TO (relay_recipient_maps empty: every user "exists"), so
    // failures happen after acceptance and come back as a DSN. Other domains only when a capture port takes them.
    ['relay_domains', relayDomains],
    ['relay_recipient_maps', ''],
    // Without this, smtpd asks trivial-rewrite where a recipient goes and refuses one routed to error: (550 5.1.1) or
    // retry: (450) right at RCPT TO, which is the synchronous 5xx Mailwright already handles, not the later DSN.
    ['smtpd_reject_unlisted_recipient', 'no'],
    ['smtpd_relay_restrictions', o.capturePort ? 'permit_mynetworks, reject_unauth_destination' : 'reject_unauth_destination'],
    ['smtpd_recipient_restrictions', ''],
    ['transport_maps', `regexp:${path.join(o.dir, 'config', 'transport')}`],
    // No DNS at all: every next hop is a bracketed IP address, and nothing resolves names.
    ['smtp_dns_support_level', 'disabled'],
    ['smtp_host_lookup', 'native'],
    ['smtpd_peername_lookup', 'no'],
    ['smtp_tls_security_level', 'none', 'the inbound server may offer STARTTLS with a self-signed certificate'],
    ['smtpd_tls_security_level', 'none'],
    ['smtpd_banner', '$myhostname ESMTP Postfix (Mailwright test MTA)'],
    ['biff', 'no'],
    ['append_dot_mydomain', 'no'],
    ['message_size_limit', String(64 * 1024 * 1024), 'above Mailwright\'s MAX_MESSAGE_SIZE default (40 MB)'],
    // Tests send bursts through pooled connections; Postfix's anti-abuse slowdowns would only add flakiness.
    ['in_flow_delay', '0s'],
    ['smtpd_error_sleep_time', '0s'],
    ['smtpd_soft_error_limit', '1000'],
    ['smtpd_hard_error_limit', '1000'],
    ['smtpd_client_connection_count_limit', '0'],
    // Queue timers in seconds instead of minutes, so a DSN (and a retry) arrives within a test's patience.
    ['queue_run_delay', '1s'],
    ['minimal_backoff_time', '1s'],
    ['maximal_backoff_time', '2s'],
    ['maximal_queue_lifetime', o.deferredLifetime],
    // A DSN the inbound server defers is retried every ~2 s for this long (at most maximal_queue_lifetime, or Postfix
    // warns and lowers it itself).
    ['bounce_queue_lifetime', `${Math.min(120, seconds(o.deferredLifetime, 'd'))}s`],
    ['delay_warning_time', o.delayWarningTime],
    ['bounce_template_file', path.join(o.dir, 'config', 'bounce.cf'), 'the delay notice in seconds (scripts/postfix/bounce.cf)'],
    ['notify_classes', '', 'no postmaster notices: postmaster@<localDomain> would just be another unknown user'],
    // The log in the instance's own folder (Postfix 3.4+): the system has no syslog to rely on, and a failing test
    // prints it. The path must be under one of maillog_file_prefixes.
    ['maillog_file', path.join(o.dir, 'maillog')],
    ['maillog_file_prefixes', o.dir],
  ];
  // The caller's parameters replace ours in place (main.cf takes the last of duplicates, but postconf warns about them).
  const extra = new Map(Object.entries(o.mainCf));
  const lines = settings.map(([k, v, why]) => {
    const value = extra.get(k) ?? v;
    extra.delete(k);
    return `${why ? `# ${why}\n` : ''}${k} = ${value}`;
  });
  return [...lines, ...[...extra].map(([k, v]) => `${k} = ${v}`)].join('\n') + '\n';
}

/**
 * master.cf: only the services this instance uses, none chrooted (a chroot would need copies of system files inside
 * the queue folder), smtpd on one loopback address and port.
 */
function masterCf(smtpPort: number): string {
  const services = [
    `127.0.0.1:${smtpPort} inet n - n - - smtpd`,
    'cleanup unix n - n - 0 cleanup',
    'qmgr unix n - n 300 1 qmgr',
    'rewrite unix - - n - - trivial-rewrite',
    'bounce unix - - n - 0 bounce',
    'defer unix - - n - 0 bounce',
    'trace unix - - n - 0 bounce',
    'verify unix - - n - 1 verify',
    'flush unix n - n 1000? 0 flush',
    'proxymap unix - - n - - proxymap',
    'smtp unix - - n - - smtp',
    'relay unix - - n - - smtp',
    'showq unix n - n - - showq',
    'error unix - - n - - error',
    'retry unix - - n - - error',
    'discard unix - - n - - discard',
    'anvil unix - - n - 1 anvil',
    'scache unix - - n - 1 scache',
    'postlog unix-dgram n - n - 1 postlogd',
  ];
  return '# service type private unpriv chroot wakeup maxproc command\n' + services.join('\n') + '\n';
}

/** The transport table: regexp lookups see the whole recipient address, first match wins (see the module comment). */
function transportTable(o: { localDomain: string; bounceDomains: string[]; mailboxes: string[]; inboundPort: number; capturePort?: number }): string {
  const local = reEscape(o.localDomain);
  const capture = o.capturePort ? `smtp:[127.0.0.1]:${o.capturePort}` : undefined;
  const lines = [`/^defer-[^@]*@${local}$/ retry:4.2.2 Mailbox full (deferred by the Mailwright test MTA)`];
  if (o.mailboxes.length) lines.push(`/^(${o.mailboxes.map(reEscape).join('|')})@${local}$/ ${capture ?? 'discard:delivered'}`);
  lines.push(`/@${local}$/ error:5.1.1 User unknown`);
  lines.push(`/@(${o.bounceDomains.map(reEscape).join('|')})$/ smtp:[127.0.0.1]:${o.inboundPort}`);
  // Reached only when smtpd accepted the recipient, i.e. with a capture port (otherwise refused at RCPT TO).
  lines.push(`/./ ${capture ?? 'error:5.7.1 Relaying denied (Mailwright test MTA)'}`);
  return lines.join('\n') + '\n';
}

/** The watchdog stops the instance and removes its folder when its stdin closes: at stop(), or when we die. */
function startWatchdog(configDir: string, dir: string): ChildProcess {
  const [cmd, args] = asRoot('sh', [WATCHDOG_SCRIPT, configDir, dir]);
  const child = spawn(cmd, args, { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  // Neither the process nor our end of its pipe may keep jest alive; the pipe closing at our exit is the point.
  child.unref();
  (child.stdin as unknown as { unref(): void }).unref();
  child.on('error', () => undefined);
  child.stdin!.on('error', () => undefined);
  return child;
}

async function startOnce(opts: PostfixOptions, smtpPort: number, version: [number, number]): Promise<RunningPostfix> {
  const localDomain = (opts.localDomain ?? 'mta.test').toLowerCase();
  const bounceDomains = opts.bounceDomains.map((d) => d.toLowerCase());
  const mailboxes = (opts.mailboxes ?? []).map((m) => m.toLowerCase());
  for (const d of [localDomain, ...bounceDomains]) if (!DOMAIN.test(d)) throw new Error(`startPostfix: not a plain domain name: ${d}`);
  for (const m of mailboxes) if (!LOCAL_PART.test(m)) throw new Error(`startPostfix: unsupported mailbox local part: ${m}`);
  if (bounceDomains.length === 0) throw new Error('startPostfix: bounceDomains is empty');
  if (bounceDomains.includes(localDomain)) throw new Error('startPostfix: the local domain cannot be a bounce domain');
  for (const p of [opts.inboundPort, opts.capturePort ?? 1]) if (!Number.isInteger(p) || p < 1 || p > 65_535) throw new Error(`startPostfix: not a port: ${p}`);
  for (const k of Object.keys(opts.mainCf ?? {})) if (!/^[a-z0-9_]+$/.test(k)) throw new Error(`startPostfix: not a main.cf parameter: ${k}`);
  const delayWarningTime = opts.delayWarningTime ?? '2s';
  const deferredLifetime = opts.deferredLifetime ?? '10m';
  for (const t of [delayWarningTime, deferredLifetime]) if (!TIME.test(t)) throw new Error(`startPostfix: not a Postfix time: ${t}`);

  // A short path: Postfix's UNIX sockets live under queue/private and queue/public, and sun_path is 108 bytes.
  const dir = fs.mkdtempSync(path.join(os.tmpdir().length < 40 ? os.tmpdir() : '/tmp', 'mw-postfix-'));
  fs.chmodSync(dir, 0o755); // the postfix user (daemons drop to it) must reach the queue below
  const configDir = path.join(dir, 'config');
  const maillog = path.join(dir, 'maillog');
  const watchdog = startWatchdog(configDir, dir);
  const watchdogExited = new Promise<void>((resolve) => {
    if (watchdog.exitCode !== null || watchdog.signalCode !== null) resolve();
    else watchdog.once('exit', () => resolve());
  });

  let lastLogs: string[] = [];
  const logs = (): string[] => {
    try {
      lastLogs = fs.readFileSync(maillog, 'utf8').split('\n').filter((l) => l.length > 0); // postlogd writes it 0644
    } catch {
      // not written yet, or removed by stop(): the last lines read
    }
    return lastLogs;
  };
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      logs();
      watchdog.ref(); // the process must not exit while we wait for the instance to go
      watchdog.stdin?.end();
      // `postfix stop` waits up to 5 s for the master, then kills it; a little more for the rm.
      const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 15_000).unref());
      if ((await Promise.race([watchdogExited, timer])) === 'timeout') throw new Error(`postfix watchdog did not finish; instance in ${dir}`);
    })());

  try {
    fs.mkdirSync(configDir, { mode: 0o755 });
    fs.mkdirSync(path.join(dir, 'queue'), { mode: 0o755 });
    fs.writeFileSync(
      path.join(configDir, 'main.cf'),
      mainCf({ dir, localDomain, bounceDomains, mailboxes, inboundPort: opts.inboundPort, capturePort: opts.capturePort, delayWarningTime, deferredLifetime, mainCf: opts.mainCf ?? {}, version }),
    );
    fs.writeFileSync(path.join(configDir, 'master.cf'), masterCf(smtpPort));
    fs.copyFileSync(BOUNCE_TEMPLATES, path.join(configDir, 'bounce.cf'));
    fs.writeFileSync(path.join(configDir, 'transport'), transportTable({ localDomain, bounceDomains, mailboxes, inboundPort: opts.inboundPort, capturePort: opts.capturePort }));
    if (!isRoot) {
      // Postfix checks that its config and queue folders belong to root (and warns otherwise): the same owners as
      // in a run as root. From here on only root (sudo, the watchdog) changes the folder.
      await run(...asRoot('chown', ['-R', 'root:root', dir]));
    }
    // `postfix start` runs `postfix check` first, which creates the queue's subdirectories with their owners and
    // modes (post-install create-missing), then waits for the master's initialisation status (master -w).
    const [cmd, args] = asRoot(POSTFIX, ['-c', configDir, 'start']);
    try {
      await run(cmd, args, { timeout: 60_000 });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`postfix start failed: ${e.message}\n${e.stderr ?? ''}`, { cause: err });
    }
    await waitForPort('127.0.0.1', smtpPort, 10_000, `postfix smtpd on 127.0.0.1:${smtpPort}`);
  } catch (err) {
    const log = logs();
    await stop().catch(() => undefined);
    throw Object.assign(new Error(`${(err as Error).message}\npostfix log:\n${log.join('\n')}`, { cause: err }), { postfixLog: log });
  }

  return {
    host: '127.0.0.1',
    smtpPort,
    smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
    directory: dir,
    logs,
    async waitForLog(pattern: RegExp, timeoutMs = 20_000): Promise<string> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const hit = logs().find((l) => pattern.test(l));
        if (hit !== undefined) return hit;
        if (Date.now() > deadline) throw new Error(`no postfix log line matching ${pattern} within ${timeoutMs} ms; log:\n${logs().join('\n')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async flush() {
      await run(...asRoot(POSTQUEUE, ['-c', configDir, '-f']));
    },
    stop,
  };
}

/**
 * Starts a private Postfix instance (installing the package first when missing). Call `stop()` in afterAll; should
 * the test process end without it (a crash, a killed jest worker), the instance stops and its folder goes anyway.
 * Allow minutes on a machine that has no postfix yet (the install), a second or two after that.
 */
export async function startPostfix(opts: PostfixOptions): Promise<RunningPostfix> {
  await ensurePostfixInstalled();
  const version = await postfixVersion();
  if (version[0] < 3 || (version[0] === 3 && version[1] < 4)) throw new Error(`Postfix ${version.join('.')} is too old: maillog_file needs 3.4`);
  // A free port is only free until someone takes it: with our own pick, a lost race is retried with another.
  for (let attempt = 1; ; attempt++) {
    const port = opts.smtpPort ?? (await freePort());
    try {
      return await startOnce(opts, port, version);
    } catch (err) {
      const busy = /Address already in use/i.test((err as Error).message);
      if (opts.smtpPort !== undefined || !busy || attempt >= 3) throw err;
    }
  }
}
