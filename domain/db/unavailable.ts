import { DriverException } from '@mikro-orm/core';

/** Node's errors for a connection that could not be made or was cut (the Unix socket is gone while Postgres is down). */
const CONNECTION_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOENT']);

/**
 * Whether the database is away (stopped, restarting, unreachable) rather than refusing a statement: SQLSTATE class 08
 * (connection exception), 57P01-57P03 (shutting down, crashed, starting up), 53300 (too many connections), a socket
 * error on connecting or reading, a pool's acquire or connect timeout, or a connection cut mid-query (or used after);
 * also when such an error is the cause of the one thrown.
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  const e = err as { code?: unknown; name?: unknown; message?: unknown; syscall?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (/^08[0-9A-Z]{3}$/.test(code) || ['57P01', '57P02', '57P03', '53300'].includes(code)) return true;
  if (CONNECTION_ERRNOS.has(code) && (err instanceof DriverException || e?.syscall === 'connect' || /^(connect|read|write) E[A-Z]+/.test(message))) return true;
  if (e?.name === 'KnexTimeoutError' || /^Connection terminated|is not queryable|timeout exceeded when trying to connect/.test(message)) return true;
  // A wrapper (a batch that failed for all its callers) keeps the driver's error as its cause.
  const cause = (err as { cause?: unknown } | undefined)?.cause;
  return depth < 3 && cause !== undefined && isDatabaseUnavailable(cause, depth + 1);
}
