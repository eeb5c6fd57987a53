import { retryDelayMs } from '../../domain/events/event-dispatcher';
import { EventConsumerRegistry } from '../../domain/events/event-consumer';

describe('event outbox (pure parts)', () => {
  test('retry delays double from the base delay up to the cap, with at most 10% jitter', () => {
    const policy = { maxAttempts: 10, baseDelayMs: 1_000, maxDelayMs: 10_000 };
    const bases = [1_000, 2_000, 4_000, 8_000, 10_000, 10_000];
    for (let run = 0; run < 50; run++) {
      bases.forEach((base, i) => {
        const d = retryDelayMs(policy, i + 1);
        expect(d).toBeGreaterThanOrEqual(base);
        expect(d).toBeLessThanOrEqual(base * 1.1);
      });
    }
  });

  test('a consumer name is registered once, and only a stable lower-case name', () => {
    const registry = new EventConsumerRegistry();
    const consumer = { name: 'campaign-stats', handle: async () => undefined };
    registry.register(consumer);
    expect(() => registry.register({ ...consumer })).toThrow('registered twice');
    expect(() => registry.register({ name: 'Campaign Stats', handle: async () => undefined })).toThrow('must match');
    expect(registry.list()).toEqual([consumer]);
  });
});
