import fs from 'node:fs';

const TICK = 100; // clock ticks per second on Linux

/**
 * CPU seconds (user + system) of this benchmark's processes: itself (with the sink), and its descendants, named by pid
 * for the API and the workers, by command for the rest (Postgres and its backends, the Temporal dev server).
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
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    procs.set(Number(entry), { ppid: Number(fields[1]), comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), seconds: (Number(fields[11]) + Number(fields[12])) / TICK });
  }
  const ours = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 20; p = procs.get(p)?.ppid ?? 0, hops++) if (p === process.pid) return true;
    return false;
  };
  const out: Record<string, number> = {};
  for (const [pid, p] of procs) {
    const named = Object.entries(pids).find(([, n]) => n === pid)?.[0];
    if (!named && !ours(pid)) continue;
    const group = named ?? (p.comm === 'postgres' || p.comm === 'temporal' ? p.comm : 'other');
    out[group] = (out[group] ?? 0) + p.seconds;
  }
  return out;
}

/** `VmHWM` (the process's peak since it started, start-up included) or `VmRSS` (now), in MB. */
export function rssMb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}
