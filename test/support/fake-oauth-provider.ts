import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';

/** Who signs in at the fake provider next: the account the "user" consents with. */
export interface FakeAccount {
  id: string;
  login: string;
  name: string | null;
  /** GitHub's /user/emails list; Google's userinfo uses the first entry. */
  emails: { email: string; primary: boolean; verified: boolean }[];
}

interface Grant {
  provider: 'github' | 'google';
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  account: FakeAccount;
}

/** What the fake saw of each authorization request and token request (for the tests' assertions). */
export interface FakeLog {
  authorize: URLSearchParams[];
  token: { params: URLSearchParams; authorization: string | undefined; outcome: string }[];
}

/**
 * A loopback stand-in for GitHub's and Google's OAuth endpoints, as the real ones behave for the authorization code
 * flow with PKCE: `authorize` consents at once (as the next account) and redirects back with a code and the state;
 * the token endpoint checks the client's credentials (HTTP Basic), the code (single use), the redirect URI and the
 * PKCE verifier against the S256 challenge, and answers with an access token (OAuth 2.0 errors as JSON otherwise);
 * the profile endpoints answer for that token.
 *   GitHub: GET /login/oauth/authorize, POST /login/oauth/access_token, GET /api/user, GET /api/user/emails
 *   Google: GET /google/authorize, POST /google/token, GET /google/userinfo
 */
export async function startFakeOAuthProvider(clients: Record<'github' | 'google', { id: string; secret: string }>): Promise<{
  url: string;
  log: FakeLog;
  /** The account the next authorization consents as. */
  signInAs(account: FakeAccount | undefined): void;
  stop(): Promise<void>;
}> {
  let next: FakeAccount | undefined;
  const codes = new Map<string, Grant>();
  const tokens = new Map<string, FakeAccount>();
  const log: FakeLog = { authorize: [], token: [] };

  const json = (res: http.ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

  const authorize = (provider: 'github' | 'google', url: URL, res: http.ServerResponse) => {
    const q = url.searchParams;
    log.authorize.push(q);
    const redirect = q.get('redirect_uri');
    if (q.get('client_id') !== clients[provider].id || !redirect || q.get('response_type') !== 'code') return json(res, 400, { error: 'invalid_request' });
    const back = new URL(redirect);
    back.searchParams.set('state', q.get('state') ?? '');
    if (!next) back.searchParams.set('error', 'access_denied');
    else {
      const code = randomBytes(16).toString('hex');
      codes.set(code, { provider, clientId: clients[provider].id, redirectUri: redirect, codeChallenge: q.get('code_challenge_method') === 'S256' ? (q.get('code_challenge') ?? '') : '', account: next });
      back.searchParams.set('code', code);
    }
    res.writeHead(302, { location: back.toString() }).end();
  };

  const token = (provider: 'github' | 'google', body: string, authorization: string | undefined, res: http.ServerResponse) => {
    const params = new URLSearchParams(body);
    const refuse = (error: string) => {
      log.token.push({ params, authorization, outcome: error });
      // GitHub answers errors with 200 and an error body; Google with 400. arctic reads both.
      json(res, provider === 'github' ? 200 : 400, { error });
    };
    const expected = `Basic ${Buffer.from(`${clients[provider].id}:${clients[provider].secret}`).toString('base64')}`;
    if (authorization !== expected) return refuse('invalid_client');
    const code = params.get('code') ?? '';
    const grant = codes.get(code);
    codes.delete(code); // single use, even when the request fails
    if (!grant || grant.provider !== provider || params.get('grant_type') !== 'authorization_code') return refuse('invalid_grant');
    if (params.get('redirect_uri') !== grant.redirectUri) return refuse('invalid_grant');
    const verifier = params.get('code_verifier') ?? '';
    if (!grant.codeChallenge || createHash('sha256').update(verifier).digest('base64url') !== grant.codeChallenge) return refuse('invalid_grant');
    const accessToken = randomBytes(16).toString('hex');
    tokens.set(accessToken, grant.account);
    log.token.push({ params, authorization, outcome: 'ok' });
    json(res, 200, { access_token: accessToken, token_type: 'bearer', scope: provider === 'github' ? 'read:user,user:email' : 'openid email profile', expires_in: 3600 });
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const account = tokens.get(/^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '');
      const route = `${req.method} ${url.pathname}`;
      if (route === 'GET /login/oauth/authorize') return authorize('github', url, res);
      if (route === 'GET /google/authorize') return authorize('google', url, res);
      if (route === 'POST /login/oauth/access_token') return token('github', body, req.headers.authorization, res);
      if (route === 'POST /google/token') return token('google', body, req.headers.authorization, res);
      if (!account) return json(res, 401, { message: 'Bad credentials' });
      if (route === 'GET /api/user') return json(res, 200, { id: Number(account.id), login: account.login, name: account.name, email: null });
      if (route === 'GET /api/user/emails') return json(res, 200, account.emails.map((e) => ({ ...e, visibility: null })));
      if (route === 'GET /google/userinfo') {
        const e = account.emails[0];
        return json(res, 200, { sub: account.id, name: account.name, email: e?.email, email_verified: e?.verified ?? false });
      }
      json(res, 404, { message: 'Not Found' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    log,
    signInAs: (account) => {
      next = account;
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
