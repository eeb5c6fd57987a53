import http from 'node:http';
import Koa from 'koa';
import { errorHandler } from '../../api/middleware/error-handler';
import { AppError } from '../../domain/errors';

/** The 500 path cannot be provoked through the real API on purpose, so the renderer is exercised directly. */
async function call(handler: Koa.Middleware): Promise<{ status: number; body: any }> {
  const app = new Koa();
  app.silent = true;
  app.use(errorHandler() as unknown as Koa.Middleware);
  app.use(handler);
  const server = http.createServer(app.callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  try {
    const res = await fetch(`http://127.0.0.1:${port}/`);
    return { status: res.status, body: await res.json() };
  } finally {
    server.close();
  }
}

describe('error renderer', () => {
  test('an unexpected error becomes a 500 envelope with no internals', async () => {
    const res = await call(() => {
      throw new Error('connection to 10.0.0.5:5432 failed: password authentication failed for user admin');
    });
    expect(res.status).toBe(500);
    expect(res.body.error.code).toBe('INTERNAL_ERROR');
    expect(JSON.stringify(res.body)).not.toMatch(/10\.0\.0\.5|password|admin|at .*:\d+/);
    expect(res.body.error.requestId).toBeTruthy();
  });

  test('the database being away (stopped, starting up, connection cut) is a 503 SERVICE_UNAVAILABLE envelope, not a 500', async () => {
    const away = [
      Object.assign(new Error('connect ENOENT /tmp/pg/.s.PGSQL.5432'), { code: 'ENOENT', syscall: 'connect' }),
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      new Error('Connection terminated unexpectedly'),
    ];
    for (const err of away) {
      const res = await call(() => {
        throw err;
      });
      expect([err.message, res.status, res.body.error.code]).toEqual([err.message, 503, 'SERVICE_UNAVAILABLE']);
      expect(JSON.stringify(res.body)).not.toMatch(/PGSQL|127\.0\.0\.1/);
    }
    // A missing file is no database outage.
    const file = await call(() => {
      throw Object.assign(new Error("ENOENT: no such file or directory, open '/x'"), { code: 'ENOENT', syscall: 'open' });
    });
    expect(file.status).toBe(500);
  });

  test('an AppError keeps its status, code, field errors and suggestion', async () => {
    const res = await call(() => {
      throw new AppError(409, 'DOMAIN_EXISTS', 'Conflict', { errors: [{ field: 'a', message: 'm', code: 'c' }], suggestion: 'do y' });
    });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'DOMAIN_EXISTS', statusCode: 409, errors: [{ field: 'a', message: 'm', code: 'c' }], suggestion: 'do y' });
  });
});
