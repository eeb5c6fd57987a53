import jwt from 'jsonwebtoken';
import type Koa from 'koa';
import type { AppContext, AppState, ApiDeps } from '../context';
import { authenticateApiKey } from '../../domain/projects/project.service';
import { AppError } from '../../domain/errors';
import { UUID_RE } from '../../domain/ids';
import { sql } from '../../domain/db/sql';
import { enforceRateLimit } from './rate-limit';

const SESSION_COOKIE = 'mailwright_session';
const SESSION_TTL_SECONDS = 7 * 24 * 3600;

function bearer(ctx: AppContext): string | undefined {
  const header = ctx.get('authorization');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** API-key auth: the project comes from the key, and the request counts against its rate limit. `allowPublic` only for POST /v1/track. */
export function requireApiKey(deps: ApiDeps, allowPublic: boolean): Koa.Middleware<AppState> {
  return async (ctx: AppContext, next) => {
    ctx.state.principal = await authenticateApiKey(ctx.state.em, bearer(ctx), { allowPublic, cache: deps.caches.keys });
    // Counted once the project is known and before the body is read: a refused request costs no parsing.
    if (deps.rateLimiter) await enforceRateLimit(ctx, deps.rateLimiter, ctx.state.principal.projectId);
    await next();
  };
}

/**
 * Dashboard auth: a JWT in an HttpOnly cookie set by /auth/login. It carries the user's session version (`ver`,
 * absent: 0), which must still be the user's: a password reset increments it, ending every session issued before.
 */
export function requireSession(deps: ApiDeps): Koa.Middleware<AppState> {
  return async (ctx: AppContext, next) => {
    const token = ctx.cookies.get(SESSION_COOKIE);
    if (!token) throw new AppError(401, 'UNAUTHORIZED', 'Log in first', { suggestion: 'POST /auth/login sets the session cookie.' });
    const invalid = () => new AppError(401, 'UNAUTHORIZED', 'Your session is invalid or has expired; log in again');
    let version: unknown;
    try {
      const payload = jwt.verify(token, deps.config.jwtSecret, { algorithms: ['HS256'] }) as jwt.JwtPayload;
      // A session names a user by id; any other subject (a token signed for something else) is no session.
      if (typeof payload.sub !== 'string' || !UUID_RE.test(payload.sub)) throw new Error('no user subject');
      ctx.state.userId = payload.sub;
      version = payload.ver ?? 0;
    } catch {
      throw invalid();
    }
    const user = await sql(ctx.state.em).one<{ session_version: number }>('select session_version from users where id = $1', [ctx.state.userId]);
    if (!user || user.session_version !== version) throw invalid();
    await next();
  };
}

export function setSessionCookie(ctx: AppContext, deps: ApiDeps, user: { id: string; sessionVersion: number }): void {
  const token = jwt.sign({ ver: user.sessionVersion }, deps.config.jwtSecret, { algorithm: 'HS256', subject: user.id, expiresIn: SESSION_TTL_SECONDS });
  // Behind a TLS-terminating proxy the connection to us is plain http; the cookie is still Secure when PUBLIC_URL is https.
  ctx.cookies.secure = deps.config.cookieSecure;
  ctx.cookies.set(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: deps.config.cookieSecure,
    maxAge: SESSION_TTL_SECONDS * 1000,
    path: '/',
    overwrite: true,
  });
}

export function clearSessionCookie(ctx: AppContext, deps: ApiDeps): void {
  ctx.cookies.secure = deps.config.cookieSecure;
  ctx.cookies.set(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'lax', secure: deps.config.cookieSecure, maxAge: 0, path: '/', overwrite: true });
}
