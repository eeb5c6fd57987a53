import fs from 'node:fs';

const TICK = 100; // clock ticks per second on Linux

/** The fields of a `/proc/.../stat` line after the command's closing parenthesis (field 3, the state, is the first). */
const statFields = (stat: string) => stat.slice(stat.lastIndexOf(')') + 2).split(' ');

/** CPU seconds (user + system, fields 14 and 15) from statFields. */
const cpuSeconds = (fields: string[]) => (Number(fields[11]) + Number(fields[12])) / TICK;

/**
 * CPU seconds of a process and of its children that ended and were waited for (cutime and cstime, fields 16 and 17):
 * what a process tree has spent, including processes gone from /proc. Without the children's part, a Postgres backend
 * that closed during a run took all its CPU out of the sum (a campaign run once reported -2.4 s for Postgres, with
 * backends of idle pooled connections closing during the send); with it, that CPU moves into the postmaster's figure
 * and the difference holds.
 */
const treeCpuSeconds = (fields: string[]) => cpuSeconds(fields) + (Number(fields[13]) + Number(fields[14])) / TICK;

/**
 * CPU seconds (user + system, with the children each has waited for) of this benchmark's processes: itself (with the
 * sink), and its descendants, named by pid for the API and the workers (a named process counts with its children: the
 * rehearsal starts each app as `npm run <script>`, whose node process is the grandchild), by command for the rest
 * (Postgres and its backends, the Temporal dev server or the rehearsal's `temporal-server`).
 */
export function cpuByProcess(pids: Record<string, number>): Record<string, number> {
  const procs = new Map<number, { ppid: number; comm: string; seconds: number }>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = statFields(stat);
    procs.set(Number(entry), { ppid: Number(fields[1]), comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), seconds: treeCpuSeconds(fields) });
  }
  const names = new Map<number, string>();
  for (const [name, pid] of Object.entries(pids)) if (!names.has(pid)) names.set(pid, name);
  // The nearest named process up the tree (the process itself first), and whether the tree reaches this one.
  const owner = (pid: number): { named?: string; ours: boolean } => {
    let named: string | undefined;
    for (let p = pid, hops = 0; p > 1 && hops < 20; p = procs.get(p)?.ppid ?? 0, hops++) {
      named ??= p !== process.pid ? names.get(p) : undefined;
      if (p === process.pid) return { named, ours: true };
    }
    return { named, ours: false };
  };
  const out: Record<string, number> = {};
  for (const [pid, p] of procs) {
    const { named, ours } = owner(pid);
    if (!named && !ours) continue;
    const group = pid === process.pid ? (names.get(pid) ?? 'other') : (named ?? (p.comm === 'postgres' ? 'postgres' : p.comm.startsWith('temporal') ? 'temporal' : 'other'));
    out[group] = (out[group] ?? 0) + p.seconds;
  }
  return out;
}

/** CPU seconds (user + system) of each thread of a process, by thread id (threads that ended are gone). */
export function cpuByThread(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      out.set(Number(tid), cpuSeconds(statFields(fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'))));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/**
 * A worker's CPU between two cpuByThread snapshots, in milliseconds per message, by kind of thread: its main thread
 * (SMTP, SQL, Temporal), its `renderThreads` busiest other threads (the render threads, which start with the send), and
 * the rest (V8's platform threads: garbage collection and compilation; libuv's; the Temporal core's).
 */
export function threadShares(pid: number, before: Map<number, number>, after: Map<number, number>, renderThreads: number, messages: number) {
  const used = [...after].map(([tid, s]) => ({ tid, s: s - (before.get(tid) ?? 0) }));
  const perMessage = (s: number) => Math.round((s * 1_000_000) / Math.max(1, messages)) / 1000;
  const others = used.filter((t) => t.tid !== pid).sort((a, b) => b.s - a.s);
  return {
    main: perMessage(used.find((t) => t.tid === pid)?.s ?? 0),
    renderThreads: others.slice(0, renderThreads).map((t) => perMessage(t.s)),
    otherThreads: perMessage(others.slice(renderThreads).reduce((n, t) => n + t.s, 0)),
  };
}

/** `VmHWM` (the process's peak since it started, start-up included) or `VmRSS` (now), in MB. */
export function rssMb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

/**
 * The node process that does the work under `pid`: itself, or for the rehearsal's `npm run <script>` (npm, then a
 * shell) the first `node` process below it.
 */
export function mainNodeProcess(pid: number): number {
  const comm = (p: number) => fs.readFileSync(`/proc/${p}/comm`, 'utf8').trim();
  const children = (p: number) => {
    try {
      return fs.readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  };
  for (let queue = [pid]; queue.length; ) {
    const p = queue.shift()!;
    if (comm(p) === 'node') return p;
    queue.push(...children(p));
  }
  return pid;
}

/** CPU seconds of each of these pids now (0 for one that has gone). */
export function cpuOfPids(pids: number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      out.set(pid, cpuSeconds(statFields(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))));
    } catch {
      out.set(pid, 0);
    }
  }
  return out;
}
