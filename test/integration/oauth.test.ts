import { randomUUID } from 'node:crypto';
import type { ManagedProcess } from '../../scripts/services/process';
import { loadConfig } from '../../domain/config';
import { OAuthStateSealer } from '../../domain/auth/oauth';
import { stackEnv } from '../stack-env';
import { startExtraApi } from '../helpers/extra-api';
import { api, sessionCookie } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { startFakeOAuthProvider, type FakeAccount } from '../support/fake-oauth-provider';

// API processes of this file's own, configured for GitHub and Google sign-in against a fake provider on loopback
// (test/support/fake-oauth-provider.ts); the stack's API has no provider configured.
const CLIENTS = { github: { id: 'gh-client', secret: 'gh-secret' }, google: { id: 'google-client.apps', secret: 'google-secret' } };
let fake: Awaited<ReturnType<typeof startFakeOAuthProvider>>;
const children: ManagedProcess[] = [];
let url: string; // signup enabled
let closedUrl: string; // SIGNUP_ENABLED=false

const providerEnv = (fakeUrl: string) => ({
  GITHUB_CLIENT_ID: CLIENTS.github.id,
  GITHUB_CLIENT_SECRET: CLIENTS.github.secret,
  GITHUB_URL: fakeUrl,
  GITHUB_API_URL: `${fakeUrl}/api`,
  GOOGLE_CLIENT_ID: CLIENTS.google.id,
  GOOGLE_CLIENT_SECRET: CLIENTS.google.secret,
  GOOGLE_AUTHORIZE_URL: `${fakeUrl}/google/authorize`,
  GOOGLE_TOKEN_URL: `${fakeUrl}/google/token`,
  GOOGLE_USERINFO_URL: `${fakeUrl}/google/userinfo`,
});

beforeAll(async () => {
  fake = await startFakeOAuthProvider(CLIENTS);
  const [open, closed] = await Promise.all([
    startExtraApi('api-oauth', providerEnv(fake.url)),
    startExtraApi('api-oauth-closed', { ...providerEnv(fake.url), SIGNUP_ENABLED: 'false' }),
  ]);
  children.push(open.process, closed.process);
  url = open.url;
  closedUrl = closed.url;
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await fake?.stop();
  await closeDb();
});

let nextId = 1000;
function account(email: string, opts: { verified?: boolean; primary?: boolean } = {}): FakeAccount {
  const id = String(nextId++);
  return { id, login: `octo${id}`, name: `Octo ${id}`, emails: [{ email, primary: opts.primary ?? true, verified: opts.verified ?? true }] };
}
const uniqueEmail = (tag: string) => `oauth-${tag}-${randomUUID().slice(0, 8)}@example.com`;

function cookieFrom(res: Response, name: string): string | undefined {
  const c = res.headers.getSetCookie().find((v) => v.startsWith(`${name}=`));
  return c?.split(';')[0];
}

/** GET /auth/oauth/:provider: the state cookie and the provider's authorization URL it redirects to. */
async function start(provider: 'github' | 'google', baseUrl = url): Promise<{ stateCookie: string; authorizeUrl: URL }> {
  const res = await fetch(`${baseUrl}/auth/oauth/${provider}`, { redirect: 'manual' });
  expect(res.status).toBe(302);
  const stateCookie = cookieFrom(res, 'mailwright_oauth');
  expect(stateCookie).toBeDefined();
  return { stateCookie: stateCookie!, authorizeUrl: new URL(res.headers.get('location')!) };
}

/** The provider's consent: where it sends the browser back (the callback URL with code and state). */
async function consent(authorizeUrl: URL): Promise<URL> {
  const res = await fetch(authorizeUrl, { redirect: 'manual' });
  expect(res.status).toBe(302);
  return new URL(res.headers.get('location')!);
}

async function callback(callbackUrl: URL | string, cookie?: string): Promise<Response> {
  return fetch(callbackUrl, { redirect: 'manual', headers: cookie ? { cookie } : {} });
}

/** A whole sign-in as `who`; the callback's response. */
async function signIn(provider: 'github' | 'google', who: FakeAccount | undefined, baseUrl = url): Promise<Response> {
  fake.signInAs(who);
  const { stateCookie, authorizeUrl } = await start(provider, baseUrl);
  return callback(await consent(authorizeUrl), stateCookie);
}

async function me(res: Response): Promise<{ id: string; email: string; emailVerified: boolean }> {
  const session = cookieFrom(res, 'mailwright_session');
  expect(session).toBeDefined();
  const user = await api('GET', '/users/@me', { baseUrl: url, cookie: session });
  expect(user.status).toBe(200);
  return user.body;
}

async function expectRefused(res: Response, code: string): Promise<void> {
  expect(res.status).toBe(403);
  const body = (await res.json()) as { success: boolean; error: { code: string; statusCode: number } };
  expect(body.success).toBe(false);
  expect(body.error).toMatchObject({ code, statusCode: 403 });
  expect(cookieFrom(res, 'mailwright_session')).toBeUndefined();
}

describe('configuration', () => {
  test('GET /auth/oauth-config lists the configured providers, and /config names them', async () => {
    const res = await api('GET', '/auth/oauth-config', { baseUrl: url });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      providers: [
        { id: 'github', name: 'GitHub', authorizeUrl: '/auth/oauth/github' },
        { id: 'google', name: 'Google', authorizeUrl: '/auth/oauth/google' },
      ],
    });
    expect((await api('GET', '/config', { baseUrl: url })).body.oauthProviders).toEqual(['github', 'google']);
  });

  test('without client ids nothing is listed and the sign-in routes are 404', async () => {
    expect((await api('GET', '/auth/oauth-config')).body).toEqual({ providers: [] });
    expect((await api('GET', '/config')).body.oauthProviders).toEqual([]);
    const res = await api('GET', '/auth/oauth/github');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
    expect((await api('GET', '/auth/oauth/github/callback?code=x&state=y')).status).toBe(404);
    expect((await api('GET', '/auth/oauth/gitlab', { baseUrl: url })).status).toBe(422);
  });

  test('the redirect carries the client id, the callback URL, a random state and an S256 PKCE challenge', async () => {
    const a = await start('github');
    const b = await start('github');
    for (const { authorizeUrl } of [a, b]) {
      expect(`${authorizeUrl.origin}${authorizeUrl.pathname}`).toBe(`${fake.url}/login/oauth/authorize`);
      expect(authorizeUrl.searchParams.get('client_id')).toBe(CLIENTS.github.id);
      expect(authorizeUrl.searchParams.get('redirect_uri')).toBe(`${url}/auth/oauth/github/callback`);
      expect(authorizeUrl.searchParams.get('code_challenge_method')).toBe('S256');
      expect(authorizeUrl.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(authorizeUrl.searchParams.get('scope')).toBe('read:user user:email');
    }
    expect(a.authorizeUrl.searchParams.get('state')).not.toBe(b.authorizeUrl.searchParams.get('state'));
    expect(a.authorizeUrl.searchParams.get('code_challenge')).not.toBe(b.authorizeUrl.searchParams.get('code_challenge'));
    // The cookie holds neither the state nor the verifier in the clear.
    expect(a.stateCookie).not.toContain(a.authorizeUrl.searchParams.get('state')!);
  });
});

describe('sign-in', () => {
  test('GitHub: a new verified email creates a verified user, logs in and redirects to PUBLIC_URL; PKCE verified at the token endpoint', async () => {
    const email = uniqueEmail('gh-new');
    const res = await signIn('github', account(email.toUpperCase()));
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(`${url}/`);
    expect(cookieFrom(res, 'mailwright_oauth')).toBe('mailwright_oauth='); // spent
    const user = await me(res);
    expect(user).toMatchObject({ email, emailVerified: true });
    const last = fake.log.token.at(-1)!;
    expect(last.outcome).toBe('ok');
    expect(last.params.get('code_verifier')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const { rows } = await db().query(`select provider, provider_user_id, email from oauth_accounts where user_id = $1`, [user.id]);
    expect(rows).toEqual([{ provider: 'github', provider_user_id: expect.any(String), email }]);
  });

  test('the same provider account signs in as the same user again, even after its email changed', async () => {
    const who = account(uniqueEmail('gh-again'));
    const first = await me(await signIn('github', who));
    const moved = { ...who, emails: [{ email: uniqueEmail('gh-moved'), primary: true, verified: true }] };
    const second = await me(await signIn('github', moved));
    expect(second.id).toBe(first.id);
  });

  test('Google: links to the existing account with that email; an address never verified here loses its password', async () => {
    const email = uniqueEmail('google-link');
    const signup = await api('POST', '/auth/signup', { baseUrl: url, body: { email, password: 'squatter password' } });
    expect(signup.status).toBe(201);
    const squatterSession = sessionCookie(signup);
    const res = await signIn('google', account(email));
    expect(res.status).toBe(302);
    const user = await me(res);
    expect(user).toMatchObject({ id: signup.body.id, email, emailVerified: true });
    // Whoever signed up with the address first had not proved it theirs: their password and session end.
    expect((await api('POST', '/auth/login', { baseUrl: url, body: { email, password: 'squatter password' } })).status).toBe(401);
    expect((await api('GET', '/users/@me', { baseUrl: url, cookie: squatterSession })).status).toBe(401);
    expect(fake.log.authorize.at(-1)!.get('scope')).toBe('openid email profile');
  });

  test('a verified account keeps its password when a provider account is linked to it', async () => {
    const email = uniqueEmail('keep');
    const signup = await api('POST', '/auth/signup', { baseUrl: url, body: { email, password: 'my own password' } });
    await db().query(`update users set email_verified_at = now() where id = $1`, [signup.body.id]);
    expect((await me(await signIn('github', account(email)))).id).toBe(signup.body.id);
    expect((await api('POST', '/auth/login', { baseUrl: url, body: { email, password: 'my own password' } })).status).toBe(200);
  });

  test('a provider account without a verified primary email is refused (OAUTH_FAILED), and creates no user', async () => {
    const email = uniqueEmail('unverified');
    await expectRefused(await signIn('github', account(email, { verified: false })), 'OAUTH_FAILED');
    await expectRefused(await signIn('github', account(email, { primary: false })), 'OAUTH_FAILED');
    await expectRefused(await signIn('google', account(email, { verified: false })), 'OAUTH_FAILED');
    const { rows } = await db().query(`select 1 from users where email = $1`, [email]);
    expect(rows).toHaveLength(0);
  });

  test('a sign-in the user declined at the provider is refused (OAUTH_FAILED)', async () => {
    await expectRefused(await signIn('github', undefined), 'OAUTH_FAILED');
  });

  test('with signup disabled an unknown email is refused (SIGNUP_DISABLED), an existing user signs in', async () => {
    const unknown = uniqueEmail('closed');
    await expectRefused(await signIn('github', account(unknown), closedUrl), 'SIGNUP_DISABLED');
    const email = uniqueEmail('closed-known');
    const signup = await api('POST', '/auth/signup', { baseUrl: url, body: { email, password: 'my own password' } });
    const res = await signIn('github', account(email), closedUrl);
    expect(res.status).toBe(302);
    expect((await me(res)).id).toBe(signup.body.id);
  });
});

describe('state and PKCE', () => {
  test('a callback without the state cookie is refused (INVALID_OAUTH_STATE)', async () => {
    fake.signInAs(account(uniqueEmail('nocookie')));
    const { authorizeUrl } = await start('github');
    const exchanges = fake.log.token.length;
    await expectRefused(await callback(await consent(authorizeUrl)), 'INVALID_OAUTH_STATE');
    expect(fake.log.token.length).toBe(exchanges); // refused before the code was exchanged
  });

  test("a state that is not the cookie's is refused: forged, or another sign-in's (login CSRF)", async () => {
    const who = account(uniqueEmail('csrf'));
    fake.signInAs(who);
    const victim = await start('github');
    const attacker = await start('github');
    const attackerCallback = await consent(attacker.authorizeUrl);
    // The attacker's code and state in the victim's browser (which holds the victim's own state cookie).
    await expectRefused(await callback(attackerCallback, victim.stateCookie), 'INVALID_OAUTH_STATE');
    const forged = await consent(victim.authorizeUrl);
    forged.searchParams.set('state', 'forged-state-value');
    await expectRefused(await callback(forged, victim.stateCookie), 'INVALID_OAUTH_STATE');
    const none = await consent(victim.authorizeUrl);
    none.searchParams.delete('state');
    await expectRefused(await callback(none, victim.stateCookie), 'INVALID_OAUTH_STATE');
    expect(fake.log.token.filter((t) => t.params.get('code') === attackerCallback.searchParams.get('code'))).toEqual([]);
  });

  test("a tampered cookie, another provider's, or an expired one is refused", async () => {
    fake.signInAs(account(uniqueEmail('tamper')));
    const gh = await start('github');
    const back = await consent(gh.authorizeUrl);
    const [name, value] = gh.stateCookie.split('=') as [string, string];
    // The second-to-last character (all its bits are significant) replaced by another one.
    const flipped = `${name}=${value.slice(0, -2)}${value.at(-2) === 'A' ? 'B' : 'A'}${value.slice(-1)}`;
    await expectRefused(await callback(back, flipped), 'INVALID_OAUTH_STATE');
    // The GitHub flow's cookie at Google's callback, with the right state.
    const google = new URL(`${url}/auth/oauth/google/callback`);
    google.search = back.search;
    await expectRefused(await callback(google, gh.stateCookie), 'INVALID_OAUTH_STATE');
    // A genuine cookie (sealed with this deployment's APP_SECRET) whose ten minutes are over.
    const appSecret = loadConfig({ ...process.env, NODE_ENV: 'test', DATABASE_URL: stackEnv().databaseUrl }).appSecret;
    const state = back.searchParams.get('state')!;
    const expired = new OAuthStateSealer(appSecret).seal({ provider: 'github', state, codeVerifier: 'v'.repeat(43), expiresAt: Date.now() - 1_000 });
    await expectRefused(await callback(back, `mailwright_oauth=${expired}`), 'INVALID_OAUTH_STATE');
    // The control: the same cookie unexpired gets past the state check (and fails at the provider, on the verifier).
    const live = new OAuthStateSealer(appSecret).seal({ provider: 'github', state, codeVerifier: 'v'.repeat(43), expiresAt: Date.now() + 60_000 });
    await expectRefused(await callback(back, `mailwright_oauth=${live}`), 'OAUTH_FAILED');
    expect(fake.log.token.at(-1)!.outcome).toBe('invalid_grant');
  });

  test('a callback replayed with its cookie does not sign in twice (the code is spent)', async () => {
    fake.signInAs(account(uniqueEmail('replay')));
    const { stateCookie, authorizeUrl } = await start('github');
    const back = await consent(authorizeUrl);
    expect((await callback(back, stateCookie)).status).toBe(302);
    await expectRefused(await callback(back, stateCookie), 'OAUTH_FAILED');
  });
});
