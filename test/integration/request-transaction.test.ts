import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { createApp } from '../../api/app';
import type { ApiDeps } from '../../api/context';
import { Routes } from '../../api/route';
import { loadConfig } from '../../domain/config';
import { sql } from '../../domain/db/sql';
import { AppError } from '../../domain/errors';
import { initOrm, type MikroORM } from '../../domain/orm';
import { db } from '../helpers/db';
import { stackEnv } from '../stack-env';

/**
 * The request transaction of api/route.ts against the real database: a write route's statements commit together or
 * not at all, `afterCommit` hooks see what was committed, and a route that names its own units of work autocommits.
 * The routes are this test's own, on the real route machinery and the real app (error envelope, EntityManager).
 */
let orm: MikroORM;
let server: http.Server;
let base: string;
const table = `request_tx_${process.pid}`;
const seen: Array<{ hook: string; committed: number[] }> = [];

const committedIds = async () => (await db().query(`select id from ${table} order by id`)).rows.map((r: { id: number }) => r.id);

beforeAll(async () => {
  orm = await initOrm(stackEnv().databaseUrl, 4);
  await db().query(`create table ${table} (id int primary key)`);
  const deps = { config: loadConfig({ ...process.env, DATABASE_URL: stackEnv().databaseUrl }), orm } as ApiDeps;
  const routes = new Routes(deps);
  const Body = z.object({ ids: z.array(z.number().int()), fail: z.boolean().optional() });
  const write = async (em: Parameters<typeof sql>[0], ids: number[], fail?: boolean) => {
    for (const id of ids) await sql(em).run(`insert into ${table} (id) values ($1)`, [id]);
    if (fail) throw new AppError(409, 'CONFLICT', 'failed after writing');
  };
  routes.add({
    method: 'post',
    path: '/tx-test/in-one',
    summary: 'test',
    tags: ['test'],
    auth: 'none',
    body: Body,
    responses: { 200: { description: 'ok' } },
    handler: async ({ ctx, body, afterCommit }) => {
      afterCommit(async () => void seen.push({ hook: 'in-one', committed: await committedIds() }));
      await write(ctx.state.em, body.ids, body.fail);
      return { body: { inTransaction: ctx.state.em.isInTransaction() } };
    },
  });
  routes.add({
    method: 'post',
    path: '/tx-test/own',
    summary: 'test',
    tags: ['test'],
    auth: 'none',
    ownTransactions: 'a test of autocommit',
    body: Body,
    responses: { 200: { description: 'ok' } },
    handler: async ({ ctx, body }) => {
      await write(ctx.state.em, body.ids, body.fail);
      return { body: { inTransaction: ctx.state.em.isInTransaction() } };
    },
  });
  routes.add({
    method: 'get',
    path: '/tx-test/read',
    summary: 'test',
    tags: ['test'],
    auth: 'none',
    responses: { 200: { description: 'ok' } },
    handler: async ({ ctx }) => ({ body: { inTransaction: ctx.state.em.isInTransaction() } }),
  });
  server = http.createServer(createApp(deps, routes).callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await db().query(`drop table if exists ${table}`);
  await orm.close();
});

beforeEach(async () => {
  seen.length = 0;
  await db().query(`truncate ${table}`);
});

const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

test('a write route commits its statements together, and afterCommit hooks run once they are visible to others', async () => {
  const res = await post('/tx-test/in-one', { ids: [1, 2] });
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ inTransaction: true });
  expect(await committedIds()).toEqual([1, 2]);
  expect(seen).toEqual([{ hook: 'in-one', committed: [1, 2] }]);
});

test('a write route that fails after writing leaves nothing, answers its error in the envelope, and runs no hook', async () => {
  const res = await post('/tx-test/in-one', { ids: [3, 4], fail: true });
  expect(res.status).toBe(409);
  expect(await res.json()).toMatchObject({ error: { code: 'CONFLICT', message: 'failed after writing' } });
  expect(await committedIds()).toEqual([]);
  expect(seen).toEqual([]);
});

test('a statement error rolls the request back too (a unique violation is 409 in the envelope, not half a write)', async () => {
  await post('/tx-test/in-one', { ids: [5] });
  const res = await post('/tx-test/in-one', { ids: [6, 5] });
  expect(res.status).toBe(409);
  expect(await committedIds()).toEqual([5]);
});

test('a route that names its own units of work autocommits each statement; a read runs without a transaction', async () => {
  const res = await post('/tx-test/own', { ids: [7, 8], fail: true });
  expect(res.status).toBe(409);
  expect(await committedIds()).toEqual([7, 8]);
  expect(await (await post('/tx-test/own', { ids: [] })).json()).toEqual({ inTransaction: false });
  expect(await (await fetch(`${base}/tx-test/read`)).json()).toEqual({ inTransaction: false });
});
