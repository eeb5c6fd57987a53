import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { api, sessionCookie } from '../helpers/api';
import { createTestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';
import { startTsProcess } from '../../scripts/services/stack';
import { freePort, waitForPort } from '../../scripts/services/process';

const email = () => `dash-${randomUUID()}@example.com`;

describe('signup, login and the session cookie', () => {
  test('signup creates the account and sets an HttpOnly, SameSite=Lax cookie (not Secure over http)', async () => {
    const res = await api('POST', '/auth/signup', { body: { email: email(), password: 'long enough password', name: 'Ada' } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: 'Ada', emailVerified: false });
    expect(res.body.passwordHash).toBeUndefined();
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('mailwright_session='))!;
    expect(cookie).toMatch(/httponly/i);
    expect(cookie).toMatch(/samesite=lax/i);
    expect(cookie).not.toMatch(/;\s*secure/i);
  });

  test('emails are case-insensitive: a second signup with other case -> 409 EMAIL_TAKEN', async () => {
    const e = email();
    expect((await api('POST', '/auth/signup', { body: { email: e, password: 'long enough password' } })).status).toBe(201);
    const again = await api('POST', '/auth/signup', { body: { email: e.toUpperCase(), password: 'long enough password' } });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('EMAIL_TAKEN');
  });

  test('a short password -> 422 with a field error on password', async () => {
    const res = await api('POST', '/auth/signup', { body: { email: email(), password: 'short' } });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('password');
  });

  test('login with the right password sets the cookie; /users/@me answers with it', async () => {
    const p = await createTestProject();
    const login = await api('POST', '/auth/login', { body: { email: p.userEmail, password: p.password } });
    expect(login.status).toBe(200);
    const me = await api('GET', '/users/@me', { cookie: sessionCookie(login) });
    expect(me.status).toBe(200);
    expect(me.body.email).toBe(p.userEmail);
  });

  test('login with a wrong password or unknown email -> 401 INVALID_CREDENTIALS', async () => {
    const p = await createTestProject();
    const wrong = await api('POST', '/auth/login', { body: { email: p.userEmail, password: 'wrong password' } });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe('INVALID_CREDENTIALS');
    const unknown = await api('POST', '/auth/login', { body: { email: email(), password: 'whatever it is' } });
    expect(unknown.status).toBe(401);
    expect(unknown.body.error.code).toBe('INVALID_CREDENTIALS');
  });

  test('logout clears the cookie', async () => {
    const res = await api('GET', '/auth/logout');
    expect(res.status).toBe(204);
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('mailwright_session='))!;
    expect(cookie).toMatch(/mailwright_session=;/);
    expect(cookie).toMatch(/expires=Thu, 01 Jan 1970/i);
  });

  test('dashboard endpoints without a cookie or with a forged one -> 401', async () => {
    expect((await api('GET', '/users/@me')).status).toBe(401);
    const forged = await api('GET', '/users/@me', { cookie: 'mailwright_session=eyJhbGciOiJIUzI1NiJ9.e30.x' });
    expect(forged.status).toBe(401);
    expect(forged.body.error.code).toBe('UNAUTHORIZED');
  });

  test('an API key does not open dashboard endpoints', async () => {
    const p = await createTestProject();
    expect((await api('GET', '/users/@me/projects', { key: p.secretKey })).status).toBe(401);
  });
});

describe('projects', () => {
  test('creation returns both keys once; listing shows only the public key and a hint', async () => {
    const p = await createTestProject('Listing');
    expect(p.secretKey).toMatch(/^sk_[A-Za-z0-9_-]{32}$/);
    expect(p.publicKey).toMatch(/^pk_[A-Za-z0-9_-]{32}$/);
    const list = await api('GET', '/users/@me/projects', { cookie: p.cookie });
    expect(list.status).toBe(200);
    expect(list.body).toHaveLength(1);
    expect(list.body[0]).toMatchObject({ id: p.projectId, name: 'Listing', role: 'OWNER', publicKey: p.publicKey });
    expect(list.body[0].secretKeyHint).toBe(p.secretKey.slice(0, 10));
    expect(JSON.stringify(list.body)).not.toContain(p.secretKey);
  });

  test('PATCH updates name and settings', async () => {
    const p = await createTestProject();
    const res = await api('PATCH', `/users/@me/projects/${p.projectId}`, { cookie: p.cookie, body: { name: 'Renamed', settings: { trackOpens: false } } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Renamed', settings: { trackOpens: false, trackClicks: true } });
  });

  test("another user's project is 404 for PATCH, DELETE and key rotation", async () => {
    const a = await createTestProject();
    const b = await createTestProject();
    for (const [method, suffix] of [['PATCH', ''], ['DELETE', ''], ['POST', '/regenerate-keys']] as const) {
      const res = await api(method, `/users/@me/projects/${a.projectId}${suffix}`, { cookie: b.cookie, body: method === 'PATCH' ? { name: 'x' } : undefined });
      expect(res.status).toBe(404);
    }
  });

  test('a malformed project id -> 422 on params.id', async () => {
    const p = await createTestProject();
    const res = await api('POST', '/users/@me/projects/not-a-uuid/regenerate-keys', { cookie: p.cookie });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('params.id');
  });

  test('DELETE removes the project and its keys stop working', async () => {
    const p = await createTestProject();
    expect((await api('DELETE', `/users/@me/projects/${p.projectId}`, { cookie: p.cookie })).status).toBe(204);
    const list = await api('GET', '/users/@me/projects', { cookie: p.cookie });
    expect(list.body).toHaveLength(0);
    const send = await api('POST', '/v1/send', { key: p.secretKey, body: { to: 'a@b.co', from: 'a@b.co', subject: 's', body: 'b' } });
    expect(send.status).toBe(401);
  });
});

describe('GET /config', () => {
  test('answers without authentication', async () => {
    const res = await api('GET', '/config');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ signupEnabled: true });
  });
});

describe('SIGNUP_ENABLED=false', () => {
  test('a deployment with signup disabled refuses it with 403 SIGNUP_DISABLED and says so in /config', async () => {
    const port = await freePort();
    const { databaseUrl, temporalAddress, dataDir } = stackEnv();
    const proc = startTsProcess(
      'api-nosignup',
      'api/server.ts',
      { DATABASE_URL: databaseUrl, TEMPORAL_ADDRESS: temporalAddress, PORT: String(port), SIGNUP_ENABLED: 'false', LOG_LEVEL: 'warn', NODE_ENV: 'test' },
      { logFile: path.join(dataDir, 'api-nosignup.log') },
    );
    try {
      await waitForPort('127.0.0.1', port, 60_000);
      const baseUrl = `http://127.0.0.1:${port}`;
      const res = await api('POST', '/auth/signup', { baseUrl, body: { email: email(), password: 'long enough password' } });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('SIGNUP_DISABLED');
      expect((await api('GET', '/config', { baseUrl })).body.signupEnabled).toBe(false);
    } finally {
      await proc.stop();
    }
  });
});
