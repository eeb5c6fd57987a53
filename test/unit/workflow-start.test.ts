import { persistThenStart } from '../../domain/workflow-start';
import { AppError } from '../../domain/errors';

/** Persist, then start, compensate on failure: the one helper behind email intake, domains and contact jobs. */
describe('persistThenStart', () => {
  test('stores, starts, and returns what was stored; nothing is undone', async () => {
    const calls: string[] = [];
    const out = await persistThenStart({
      persist: async () => (calls.push('persist'), 'row-1'),
      start: async (row) => calls.push(`start ${row}`),
      compensate: async () => calls.push('compensate'),
      unavailable: 'x',
      log: {},
    });
    expect(out).toBe('row-1');
    expect(calls).toEqual(['persist', 'start row-1']);
  });

  test('a failed start is compensated with the stored value and the error, then answered 503 with the message', async () => {
    const undone: unknown[] = [];
    const failure = new Error('temporal down');
    const err = await persistThenStart({
      persist: async () => 'row-2',
      start: async () => {
        throw failure;
      },
      compensate: async (row, e) => undone.push(row, e),
      unavailable: 'Nothing was kept; retry.',
      log: {},
    }).catch((e: unknown) => e);
    expect(undone).toEqual(['row-2', failure]);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ statusCode: 503, code: 'SERVICE_UNAVAILABLE', message: 'Nothing was kept; retry.' });
  });

  test('a compensation that fails too still answers 503 (not its own error)', async () => {
    const err = await persistThenStart({
      persist: async () => 1,
      start: async () => Promise.reject(new Error('down')),
      compensate: async () => Promise.reject(new Error('database down too')),
      unavailable: 'Unavailable.',
      log: {},
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ statusCode: 503, message: 'Unavailable.' });
  });

  test('a failed persist starts nothing and passes its own error through', async () => {
    let started = false;
    const err = await persistThenStart({
      persist: async () => Promise.reject(new AppError(409, 'DOMAIN_EXISTS', 'exists')),
      start: async () => (started = true),
      compensate: async () => undefined,
      unavailable: 'x',
      log: {},
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ statusCode: 409, code: 'DOMAIN_EXISTS' });
    expect(started).toBe(false);
  });
});
