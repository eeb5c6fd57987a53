import path from 'node:path';
import pLimit from 'p-limit';
import { Piscina } from 'piscina';
import { ContactDataReader, renderPacked, unpack, type PackedBatch, type RenderTask, type RenderedMessage } from './render-task';

/**
 * Where campaign messages are rendered: a pool of worker threads (piscina) so a worker process renders on every core
 * while its main thread talks SMTP and SQL, or inline when `threads` is 0. Threads load render-task.ts through the
 * same loader as the process (they inherit its `--import tsx`).
 */
export interface RenderPool {
  render(task: RenderTask): Promise<RenderedMessage[]>;
  close(): Promise<void>;
}

/**
 * How many batches without a signature render at once on `threads` threads: one thread fewer, so the worker's main
 * thread (SMTP, SQL, the hand-over, about half a render thread's work per message) keeps a core of its own. On two
 * cores, two render threads beside the main thread cost about a tenth more CPU per message than one and sent 100,000
 * no faster, with 50-60 MB more memory (BENCHMARKS.md › Issue 28, ninth stop). A signed batch may use every thread:
 * its RSA signatures make the render threads the limit, and the second core is what keeps a signed campaign close to
 * an unsigned one.
 */
export const unsignedConcurrency = (threads: number): number => Math.max(1, threads - 1);

/**
 * `run` holding back unsigned tasks beyond unsignedConcurrency(threads) until one ends; signed tasks are not held.
 * p-limit (already in the tree, through jest and eslint) rather than a queue of our own. A task waits here, before
 * piscina, so piscina starts a second thread only for signed batches.
 */
export function limitUnsigned<T extends { dkim?: unknown }, R>(threads: number, run: (task: T) => Promise<R>): (task: T) => Promise<R> {
  const unsigned = pLimit(unsignedConcurrency(threads));
  return (task) => (task.dkim ? run(task) : unsigned(run, task));
}

/** `databaseUrl`: where a batch's contact data is read (render-task.ts ContactDataReader), by each thread itself. */
export function createRenderPool(threads: number, databaseUrl: string): RenderPool {
  if (threads === 0) {
    const reader = new ContactDataReader(databaseUrl);
    return { render: async (task) => unpack(await renderPacked(task, reader)), close: () => reader.close() };
  }
  const pool = new Piscina<RenderTask, PackedBatch>({
    // `.ts` under tsx, `.js` compiled (scripts/build.ts): the threads run the same kind of file as this one.
    filename: path.join(__dirname, `render-task${path.extname(__filename)}`),
    workerData: { databaseUrl },
    minThreads: 0,
    maxThreads: threads,
    // Idle threads go away, so a worker that sends no campaign holds no render threads.
    idleTimeout: 60_000,
    // Rendering allocates fast and keeps little: a bounded old generation makes V8 collect early instead of growing the
    // heap (a 512 KB template compiled by MJML fits easily); a young generation of 24 MB lets most of a message's
    // garbage die young. It was 48 MB and 128 MB while quoted-printable and Liquid's generators made far more garbage
    // per message; the smaller bounds keep a sending worker's memory down (BENCHMARKS.md › Campaign send, issue 28).
    resourceLimits: { maxYoungGenerationSizeMb: 24, maxOldGenerationSizeMb: 64 },
  });
  const run = limitUnsigned(threads, (task: RenderTask) => pool.run(task));
  return { render: async (task) => unpack(await run(task)), close: () => pool.destroy() };
}
