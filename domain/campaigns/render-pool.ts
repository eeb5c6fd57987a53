import path from 'node:path';
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

/** `databaseUrl`: where a batch's contact data is read (render-task.ts ContactDataReader), by each thread itself. */
export function createRenderPool(threads: number, databaseUrl: string): RenderPool {
  if (threads === 0) {
    const reader = new ContactDataReader(databaseUrl);
    return { render: async (task) => unpack(await renderPacked(task, reader)), close: () => reader.close() };
  }
  const pool = new Piscina<RenderTask, PackedBatch>({
    filename: path.join(__dirname, 'render-task.ts'),
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
  return { render: async (task) => unpack(await pool.run(task)), close: () => pool.destroy() };
}
