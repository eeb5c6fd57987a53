import { createHash, randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { ParsedMail } from 'mailparser';
import type { ManagedProcess } from '../../scripts/services/process';
import { stackEnv } from '../stack-env';
import { startExtraApi } from '../helpers/extra-api';
import { api, sessionCookie, type ApiResponse } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { messagesTo, waitForMail } from '../helpers/mailbox';

// The account emails are sent by the stack's worker (SYSTEM_EMAIL_FROM and PUBLIC_URL as test/global-setup.ts sets
// them); the API calls go to API processes of this file's own with small throttle limits. Each has a window length
// of its own, which keeps its counters apart from the other's and the stack API's (the key includes the window).
const SENDER = { name: 'Mailwright Accounts', address: 'accounts@mailwright.test' };
const PER_ACCOUNT = 3;
const PER_IP = 6;
const EMAILS_PER_ADDRESS = 2;
const children: ManagedProcess[] = [];
let accountsUrl: string; // per-account limits (its per-IP limits are out of reach)
let ipUrl: string; // a per-IP limit below the per-account one
let temporal: Connection;

beforeAll(async () => {
  const [a, b] = await Promise.all([
    startExtraApi('api-accounts', {
      AUTH_THROTTLE_WINDOW: '37s',
      LOGIN_MAX_FAILURES_PER_ACCOUNT: String(PER_ACCOUNT),
      LOGIN_MAX_FAILURES_PER_IP: '1000',
      ACCOUNT_EMAILS_PER_ADDRESS: String(EMAILS_PER_ADDRESS),
      ACCOUNT_EMAILS_PER_IP: '1000',
    }),
    startExtraApi('api-accounts-ip', {
      AUTH_THROTTLE_WINDOW: '41s',
      LOGIN_MAX_FAILURES_PER_ACCOUNT: '1000',
      LOGIN_MAX_FAILURES_PER_IP: String(PER_IP),
      ACCOUNT_EMAILS_PER_ADDRESS: '1000',
      ACCOUNT_EMAILS_PER_IP: String(PER_IP),
    }),
  ]);
  children.push(a.process, b.process);
  accountsUrl = a.url;
  ipUrl = b.url;
  temporal = await Connection.connect({ address: stackEnv().temporalAddress });
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await temporal?.close();
  await closeDb();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uniqueEmail = (tag: string) => `acct-${tag}-${randomUUID().slice(0, 8)}@example.com`;
const call = (method: string, path: string, body?: unknown, cookie?: string, baseUrl = accountsUrl) => api(method, path, { baseUrl, body, cookie });

async function signup(email: string, password = 'correct horse battery'): Promise<{ cookie: string; id: string }> {
  const res = await call('POST', '/auth/signup', { email, password });
  expect(res.status).toBe(201);
  return { cookie: sessionCookie(res), id: res.body.id };
}

/** The `nth` captured message to `to` with this subject (waits for it). */
async function mail(to: string, subject: string, nth = 1): Promise<ParsedMail> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const all = (await messagesTo(to)).length > 0 ? await waitForMail(to) : [];
    const matching = all.filter((m) => m.subject === subject);
    if (matching.length >= nth) return matching[nth - 1]!;
    if (Date.now() > deadline) throw new Error(`expected ${nth} message(s) "${subject}" to ${to}, found ${matching.length}`);
    await sleep(100);
  }
}

/** The token of the link in the message, checking that the link is PUBLIC_URL's page for it in both parts. */
function tokenOf(message: ParsedMail, page: '/verify-email' | '/reset-password'): string {
  const link = new RegExp(`${stackEnv().apiUrl.replace(/[.:/]/g, '\\$&')}${page}\\?token=([A-Za-z0-9_-]{43})`);
  const fromText = link.exec(message.text ?? '')?.[1];
  expect(fromText).toBeDefined();
  expect(link.exec(String(message.html))?.[1]).toBe(fromText);
  return fromText!;
}

const VERIFY_SUBJECT = 'Verify your email address';
const RESET_SUBJECT = 'Reset your password';

/** What `account-email/<request id>` (the workflow the request started) did. */
async function emailOutcome(res: ApiResponse): Promise<{ status: string }> {
  const client = new Client({ connection: temporal });
  return client.workflow.getHandle(`account-email/${res.headers.get('x-request-id')}`).result();
}

const hashOf = (token: string) => createHash('sha256').update(token).digest('hex');
const expireToken = (token: string) => db().query(`update account_tokens set expires_at = now() - interval '1 second' where token_hash = $1`, [hashOf(token)]);

function expectInvalidToken(res: ApiResponse): void {
  expect(res.status).toBe(403);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe('INVALID_TOKEN');
}

function expectThrottled(res: ApiResponse): void {
  expect(res.status).toBe(429);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe('TOO_MANY_ATTEMPTS');
  expect(res.body.error.statusCode).toBe(429);
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(2 * 41);
  expect(res.body.error.suggestion).toBe(`Retry after ${res.headers.get('retry-after')} s (the Retry-After header).`);
}

describe('email verification', () => {
  test('signup mails a verification link from the system sender; the token verifies the address once', async () => {
    const email = uniqueEmail('verify');
    const { cookie } = await signup(email);
    expect((await call('GET', '/users/@me', undefined, cookie)).body.emailVerified).toBe(false);

    const message = await mail(email, VERIFY_SUBJECT);
    expect(message.from?.value).toEqual([SENDER]);
    expect(message.to && !Array.isArray(message.to) ? message.to.value[0]!.address : undefined).toBe(email);
    expect(message.headers.get('auto-submitted')).toBe('auto-generated');
    expect(message.text).toContain('48 hours');
    const token = tokenOf(message, '/verify-email');

    const verified = await call('POST', '/auth/verify-email', { token });
    expect(verified.status).toBe(200);
    expect(verified.body).toMatchObject({ email, emailVerified: true });
    expect((await call('GET', '/users/@me', undefined, cookie)).body.emailVerified).toBe(true);

    expectInvalidToken(await call('POST', '/auth/verify-email', { token }));
  });

  test('tokens are stored as SHA-256 only, with the documented 48 h expiry', async () => {
    const email = uniqueEmail('hashed');
    await signup(email);
    const token = tokenOf(await mail(email, VERIFY_SUBJECT), '/verify-email');
    const { rows } = await db().query<{ token_hash: string; expires_at: Date; created_at: Date }>(
      `select t.token_hash, t.expires_at, t.created_at from account_tokens t join users u on u.id = t.user_id where u.email = $1 and t.purpose = 'VERIFY_EMAIL'`,
      [email],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).toBe(hashOf(token));
    const { rows: leaked } = await db().query(`select 1 from account_tokens where token_hash = $1 or email = $1`, [token]);
    expect(leaked).toHaveLength(0);
    const lifetimeMs = rows[0]!.expires_at.getTime() - rows[0]!.created_at.getTime();
    expect(Math.abs(lifetimeMs - 48 * 3_600_000)).toBeLessThan(60_000);
  });

  test('a resent link replaces the earlier one, and an expired token is refused', async () => {
    const email = uniqueEmail('resend');
    await signup(email);
    const first = tokenOf(await mail(email, VERIFY_SUBJECT), '/verify-email');
    expect((await call('POST', '/auth/request-verification', { email })).status).toBe(202);
    const second = tokenOf(await mail(email, VERIFY_SUBJECT, 2), '/verify-email');
    expect(second).not.toBe(first);
    expectInvalidToken(await call('POST', '/auth/verify-email', { token: first }));

    await expireToken(second);
    expectInvalidToken(await call('POST', '/auth/verify-email', { token: second }));
    const { rows } = await db().query(`select email_verified_at from users where email = $1`, [email]);
    expect(rows[0].email_verified_at).toBeNull();
  });

  test('a verified address gets no further verification email', async () => {
    const email = uniqueEmail('done');
    await signup(email);
    await call('POST', '/auth/verify-email', { token: tokenOf(await mail(email, VERIFY_SUBJECT), '/verify-email') });
    const res = await call('POST', '/auth/request-verification', { email });
    expect(res.status).toBe(202);
    expect(await emailOutcome(res)).toMatchObject({ status: 'SKIPPED' });
    expect((await messagesTo(email)).length).toBe(1);
  });
});

describe('responses never tell whether an address has an account', () => {
  for (const path of ['/auth/request-verification', '/auth/request-password-reset']) {
    test(`${path}: the same status and body for an account and for an unknown address; only the account gets mail`, async () => {
      const known = uniqueEmail('known');
      await signup(known);
      const unknown = uniqueEmail('unknown');
      const a = await call('POST', path, { email: known });
      const b = await call('POST', path, { email: unknown });
      expect(a.status).toBe(202);
      expect(b.status).toBe(a.status);
      expect(b.body).toEqual(a.body);
      expect(b.headers.get('set-cookie')).toBe(a.headers.get('set-cookie'));
      expect(await emailOutcome(a)).toMatchObject({ status: 'SENT' });
      expect(await emailOutcome(b)).toMatchObject({ status: 'SKIPPED' });
      expect(await messagesTo(unknown)).toEqual([]);
    });
  }

  test('login: a wrong password and an unknown account get the same 401', async () => {
    const email = uniqueEmail('login401');
    await signup(email);
    const wrong = await call('POST', '/auth/login', { email, password: 'not the password' }, undefined, ipUrl);
    const none = await call('POST', '/auth/login', { email: uniqueEmail('nobody'), password: 'not the password' }, undefined, ipUrl);
    expect([wrong.status, none.status]).toEqual([401, 401]);
    expect(none.body.error.code).toBe(wrong.body.error.code);
    expect(none.body.error.message).toBe(wrong.body.error.message);
  });
});

describe('password reset', () => {
  test('a reset link sets a new password once, ends every earlier session and logs this browser in', async () => {
    const email = uniqueEmail('reset');
    const { cookie: before } = await signup(email, 'the old password');
    const otherLogin = await call('POST', '/auth/login', { email, password: 'the old password' });
    const other = sessionCookie(otherLogin);
    expect((await call('GET', '/users/@me', undefined, other)).status).toBe(200);

    expect((await call('POST', '/auth/request-password-reset', { email: `  ${email.toUpperCase()} ` })).status).toBe(202);
    const message = await mail(email, RESET_SUBJECT);
    expect(message.from?.value).toEqual([SENDER]);
    expect(message.text).toContain('1 hour');
    const token = tokenOf(message, '/reset-password');

    const reset = await call('POST', '/auth/reset-password', { token, password: 'the new password' });
    expect(reset.status).toBe(200);
    expect(reset.body).toMatchObject({ email, emailVerified: true });
    const fresh = sessionCookie(reset);

    for (const ended of [before, other]) {
      const res = await call('GET', '/users/@me', undefined, ended);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('UNAUTHORIZED');
    }
    expect((await call('GET', '/users/@me', undefined, fresh)).status).toBe(200);
    expect((await call('POST', '/auth/login', { email, password: 'the old password' })).status).toBe(401);
    expect((await call('POST', '/auth/login', { email, password: 'the new password' })).status).toBe(200);

    expectInvalidToken(await call('POST', '/auth/reset-password', { token, password: 'a third password' }));
    expect((await call('POST', '/auth/login', { email, password: 'the new password' })).status).toBe(200);
  });

  test('a reset token expires after the documented hour, and an expired one changes nothing', async () => {
    const email = uniqueEmail('reset-exp');
    await signup(email, 'the old password');
    expect((await call('POST', '/auth/request-password-reset', { email })).status).toBe(202);
    const token = tokenOf(await mail(email, RESET_SUBJECT), '/reset-password');
    const { rows } = await db().query<{ ms: number }>(`select extract(epoch from expires_at - created_at) * 1000 as ms from account_tokens where token_hash = $1`, [hashOf(token)]);
    expect(Math.abs(Number(rows[0]!.ms) - 3_600_000)).toBeLessThan(60_000);

    await expireToken(token);
    expectInvalidToken(await call('POST', '/auth/reset-password', { token, password: 'the new password' }));
    expect((await call('POST', '/auth/login', { email, password: 'the old password' })).status).toBe(200);
  });

  test('a verification token does not reset a password, nor a reset token verify', async () => {
    const email = uniqueEmail('purpose');
    await signup(email);
    const verifyToken = tokenOf(await mail(email, VERIFY_SUBJECT), '/verify-email');
    expectInvalidToken(await call('POST', '/auth/reset-password', { token: verifyToken, password: 'the new password' }));
    await call('POST', '/auth/request-password-reset', { email });
    const resetToken = tokenOf(await mail(email, RESET_SUBJECT), '/reset-password');
    expectInvalidToken(await call('POST', '/auth/verify-email', { token: resetToken }));
    // Both are still good for their own purpose.
    expect((await call('POST', '/auth/verify-email', { token: verifyToken })).status).toBe(200);
    expect((await call('POST', '/auth/reset-password', { token: resetToken, password: 'the new password' })).status).toBe(200);
  });

  test('bad input is a 422 with field errors, not a 500', async () => {
    const cases: [string, unknown, string][] = [
      ['/auth/reset-password', { token: 'x', password: 'short' }, 'password'],
      ['/auth/reset-password', { password: 'long enough password' }, 'token'],
      ['/auth/verify-email', { token: '' }, 'token'],
      ['/auth/verify-email', { token: 'x'.repeat(201) }, 'token'],
      ['/auth/request-password-reset', { email: 'not an email' }, 'email'],
      ['/auth/request-verification', {}, 'email'],
    ];
    for (const [path, body, field] of cases) {
      const res = await call('POST', path, body);
      expect([path, res.status, res.body.error.code]).toEqual([path, 422, 'VALIDATION_ERROR']);
      expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expectInvalidToken(await call('POST', '/auth/verify-email', { token: 'not-a-token-we-issued' }));
  });
});

describe('login throttling', () => {
  test(`per account: after ${PER_ACCOUNT} failures even the right password gets 429 with Retry-After, and an unknown account the same`, async () => {
    const email = uniqueEmail('throttle');
    await signup(email, 'the right password');
    const unknown = uniqueEmail('throttle-none');
    for (const who of [email, unknown]) {
      for (let i = 0; i < PER_ACCOUNT; i++) expect((await call('POST', '/auth/login', { email: who, password: `wrong ${i}` })).status).toBe(401);
    }
    const right = await call('POST', '/auth/login', { email, password: 'the right password' });
    expectThrottled(right);
    expect(right.headers.get('set-cookie')).toBeNull();
    const none = await call('POST', '/auth/login', { email: unknown, password: 'anything' });
    expectThrottled(none);
    expect(none.body.error.message).toBe(right.body.error.message);
    // Another account from the same client is not affected.
    const other = uniqueEmail('throttle-other');
    await signup(other, 'the right password');
    expect((await call('POST', '/auth/login', { email: other, password: 'the right password' })).status).toBe(200);
  });

  test('successful logins are not failures: many in a row are never throttled', async () => {
    const email = uniqueEmail('ok');
    await signup(email, 'the right password');
    for (let i = 0; i < PER_ACCOUNT * 2; i++) expect((await call('POST', '/auth/login', { email, password: 'the right password' })).status).toBe(200);
  });

  test(`per client address: after ${PER_IP} failures on different accounts, another account is refused too`, async () => {
    const email = uniqueEmail('ip');
    await signup(email, 'the right password');
    let failures = 0;
    let res: ApiResponse | undefined;
    // The first test of this file made some failures from this address on this process already; count to the refusal.
    for (; failures <= PER_IP; failures++) {
      res = await call('POST', '/auth/login', { email: uniqueEmail('ip-guess'), password: 'guess' }, undefined, ipUrl);
      if (res.status !== 401) break;
    }
    expect(failures).toBeLessThanOrEqual(PER_IP);
    expectThrottled(res!);
    expectThrottled(await call('POST', '/auth/login', { email, password: 'the right password' }, undefined, ipUrl));
  });

  test(`account emails: at most ${EMAILS_PER_ADDRESS} per address per window, known or not`, async () => {
    const known = uniqueEmail('flood');
    await signup(known);
    for (const email of [known, uniqueEmail('flood-none')]) {
      for (let i = 0; i < EMAILS_PER_ADDRESS; i++) expect((await call('POST', '/auth/request-password-reset', { email })).status).toBe(202);
      expectThrottled(await call('POST', '/auth/request-password-reset', { email }));
    }
    await mail(known, RESET_SUBJECT, EMAILS_PER_ADDRESS);
    await sleep(1_000);
    expect((await messagesTo(known)).length).toBe(1 + EMAILS_PER_ADDRESS); // the signup's verification and the resets
  });
});
