import { limitUnsigned, unsignedConcurrency } from '../../domain/campaigns/render-pool';

/** Runs `tasks` through limitUnsigned on `threads` threads; the most that were inside `run` at once. */
async function mostAtOnce(threads: number, tasks: { dkim?: unknown }[]): Promise<number> {
  let inside = 0;
  let most = 0;
  const run = limitUnsigned(threads, async (task: { dkim?: unknown }) => {
    most = Math.max(most, ++inside);
    await new Promise((resolve) => setTimeout(resolve, 5));
    inside--;
    return task;
  });
  const results = await Promise.all(tasks.map((t) => run(t)));
  // Every task ran, and each gave its own result.
  expect(results).toEqual(tasks);
  return most;
}

const unsigned = (n: number) => Array.from({ length: n }, () => ({}));
const signed = (n: number) => Array.from({ length: n }, () => ({ dkim: { selector: 's' } }));

describe('render pool: batches at once', () => {
  it('leaves a core to the main thread for unsigned batches, and never fewer than one', () => {
    expect([0, 1, 2, 3, 8].map(unsignedConcurrency)).toEqual([1, 1, 1, 2, 7]);
  });

  it('renders one unsigned batch at a time on two threads, three on four', async () => {
    expect(await mostAtOnce(2, unsigned(6))).toBe(1);
    expect(await mostAtOnce(4, unsigned(6))).toBe(3);
  });

  it('does not hold back signed batches (piscina queues them for every thread)', async () => {
    expect(await mostAtOnce(2, signed(4))).toBe(4);
  });

  it('lets signed batches in while unsigned ones wait their turn', async () => {
    expect(await mostAtOnce(2, [...unsigned(3), ...signed(2)])).toBe(3);
  });
});
