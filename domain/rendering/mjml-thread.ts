import path from 'node:path';
import { Piscina } from 'piscina';
import type { MjmlOutput } from './mjml-compile';

/**
 * MJML compiled in a thread of its own that ends when idle (piscina, as the campaign render threads). The worker
 * uses it (render.ts `compileMjmlWith`) so its main thread never loads MJML: MJML and what it loads added about
 * 43 MB to a process, which a sending worker otherwise kept for its life after a campaign's first MJML compile
 * (BENCHMARKS.md › Issue 28, thirteenth stop). A compile is once per template (render.ts caches the HTML), so the
 * thread's start (about 0.8 s of CPU, loading MJML as the main thread did) is paid per burst of new templates.
 */
export interface MjmlThread {
  compile(source: string): Promise<MjmlOutput>;
  /** Threads alive: 1 while compiling and for a moment after, then 0. */
  threads(): number;
  close(): Promise<void>;
}

/** How long the thread waits for another compile before it ends. */
const IDLE_MS = 2_000;

export function createMjmlThread(): MjmlThread {
  const pool = new Piscina<string, MjmlOutput>({
    // `.ts` under tsx, `.js` compiled (scripts/build.ts): the thread runs the same kind of file as this one.
    filename: path.join(__dirname, `mjml-compile${path.extname(__filename)}`),
    minThreads: 0,
    maxThreads: 1,
    idleTimeout: IDLE_MS,
  });
  return { compile: (source) => pool.run(source), threads: () => pool.threads.length, close: () => pool.destroy() };
}
