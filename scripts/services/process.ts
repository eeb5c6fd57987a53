import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';

export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  /** Sends SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
  stop(graceMs?: number): Promise<void>;
  exited: Promise<number | null>;
}

/** Spawns a long-running child whose output goes to a log file or is prefixed on our stdout. */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  opts: SpawnOptions & { logFile?: string; prefixOutput?: boolean } = {},
): ManagedProcess {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  if (opts.logFile) {
    const out = fs.createWriteStream(opts.logFile, { flags: 'a' });
    child.stdout?.pipe(out, { end: false });
    child.stderr?.pipe(out, { end: false });
    child.once('close', () => out.end()); // after both streams have ended
  } else if (opts.prefixOutput) {
    const prefix = (chunk: Buffer) =>
      chunk
        .toString()
        .split('\n')
        .filter((l) => l.length > 0)
        .forEach((l) => process.stdout.write(`[${name}] ${l}\n`));
    child.stdout?.on('data', prefix);
    child.stderr?.on('data', prefix);
  } else {
    child.stdout?.resume();
    child.stderr?.resume();
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    name,
    child,
    exited,
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      signal(child, 'SIGTERM', opts.detached);
      const timer = setTimeout(() => signal(child, 'SIGKILL', opts.detached), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * Signals a child, or with `group` its whole process group (a child spawned `detached` leads one): `npm run x` runs
 * its script in a shell of its own, and a signal to npm alone may leave the script running.
 */
export function signal(child: ChildProcess, sig: NodeJS.Signals, group = false): void {
  if (group && child.pid !== undefined) {
    try {
      process.kill(-child.pid, sig);
    } catch {
      // the group is gone already
    }
  } else child.kill(sig);
}

/** Resolves once something accepts TCP connections on host:port, or rejects after timeoutMs. */
export async function waitForPort(host: string, port: number, timeoutMs: number, what = `${host}:${port}`): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const sock = net.connect({ host, port });
      sock.once('connect', () => {
        sock.destroy();
        resolve(true);
      });
      sock.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Whether a loopback port can be listened on now (it is closed again at once). */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** The first port of the kernel's own range (what it gives a listen on port 0 and an outgoing connection). */
function ephemeralFloor(): number {
  try {
    const first = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(first) && first > 0) return first;
  } catch {
    // Not Linux: below 32768 is outside the usual ranges (Linux 32768-60999, macOS and Windows 49152-65535).
  }
  return 32768;
}

/** Ports this process has handed out: two services started from it never get the same one. */
const handedOut = new Set<number>();

/**
 * A free loopback port for a service started later, below the kernel's own range. A port the kernel picked (a listen
 * on port 0, then closed) could be given again by the kernel to a server of this process, or to an outgoing
 * connection, before the service listened on it: the test stack's inbound server once found its port taken by the
 * crash-control server that set-up starts on port 0. Chosen at random from 10000 up to that range, checked free;
 * the kernel's own pick when no such port is found.
 */
export async function freePort(): Promise<number> {
  const ceiling = ephemeralFloor() - 1;
  const FLOOR = 10_000;
  for (let attempt = 0; ceiling - FLOOR >= 1_000 && attempt < 50; attempt++) {
    const port = FLOOR + Math.floor(Math.random() * (ceiling - FLOOR + 1));
    if (handedOut.has(port)) continue;
    // Taken before the check, so that a call running beside this one cannot pick it meanwhile.
    handedOut.add(port);
    if (await canListen(port)) return port;
    handedOut.delete(port);
  }
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      handedOut.add(port);
      srv.close(() => resolve(port));
    });
  });
}
