import type { Routes } from '../route';
import type { ApiDeps, AppContext } from '../context';
import { OAuthCallbackQuery, OAuthConfigSchema, OAuthProviderParams } from './schema';
import { errorResponses } from '../common.schema';
import { setSessionCookie } from '../middleware/auth';
import { AppError } from '../../domain/errors';
import type { OAuthProviderId } from '../../domain/auth/account.entities';
import { OAUTH_STATE_TTL_MS, OAuthStateSealer, configuredProviders, finishOAuth, oauthFailed, signInWithOAuth, startOAuth } from '../../domain/auth/oauth';

const STATE_COOKIE = 'mailwright_oauth';
const tags = ['Dashboard auth'];

/** Sign-in with GitHub and Google (README › Accounts and sign-in): authorization code flow with state and PKCE. */
export function oauthRoutes(routes: Routes, deps: ApiDeps): void {
  const providers = new Map(configuredProviders(deps.config.accounts.oauth).map((p) => [p.id, p]));
  const sealer = new OAuthStateSealer(deps.config.appSecret);
  const callbackUrl = (id: OAuthProviderId) => `${deps.config.publicUrl}/auth/oauth/${id}/callback`;
  const providerOf = (id: OAuthProviderId) => {
    const provider = providers.get(id);
    if (!provider) throw new AppError(404, 'NOT_FOUND', `Sign-in with ${id} is not configured on this deployment`, { suggestion: 'GET /auth/oauth-config lists the providers.' });
    return provider;
  };
  // Only the callback path gets the cookie back; it is HttpOnly and Lax (the provider's redirect is a top-level GET).
  const setStateCookie = (ctx: AppContext, value: string, maxAge: number) => {
    ctx.cookies.secure = deps.config.cookieSecure;
    ctx.cookies.set(STATE_COOKIE, value, { httpOnly: true, sameSite: 'lax', secure: deps.config.cookieSecure, maxAge, path: '/auth/oauth', overwrite: true });
  };

  routes.add({
    method: 'get',
    path: '/auth/oauth-config',
    summary: 'The configured OAuth sign-in providers',
    description: 'A provider is listed when its client id and secret are set (GITHUB_CLIENT_ID/SECRET, GOOGLE_CLIENT_ID/SECRET).',
    tags,
    auth: 'none',
    responses: { 200: { description: 'Providers', schema: OAuthConfigSchema } },
    handler: async () => ({
      body: { providers: [...providers.values()].map((p) => ({ id: p.id, name: p.name, authorizeUrl: `/auth/oauth/${p.id}` })) },
    }),
  });

  routes.add({
    method: 'get',
    path: '/auth/oauth/:provider',
    summary: 'Start signing in with an OAuth provider (a browser redirect)',
    description:
      `Redirects (302) to the provider's authorization page with a random state and an S256 PKCE challenge; both are kept in an encrypted, ` +
      `HttpOnly cookie valid ${OAUTH_STATE_TTL_MS / 60_000} minutes, which the callback checks. 404 when the provider is not configured.`,
    tags,
    auth: 'none',
    params: OAuthProviderParams,
    responses: { 302: { description: "To the provider's authorization page" }, ...errorResponses(404) },
    handler: async ({ ctx, params }) => {
      const provider = providerOf(params.provider);
      const { url, flow } = await startOAuth(provider, callbackUrl(provider.id));
      setStateCookie(ctx, sealer.seal(flow), OAUTH_STATE_TTL_MS);
      ctx.set('Cache-Control', 'no-store');
      ctx.redirect(url);
      return { status: 302 };
    },
  });

  routes.add({
    method: 'get',
    path: '/auth/oauth/:provider/callback',
    summary: 'OAuth callback: sign in and redirect to the dashboard',
    description:
      'The provider redirects here. The state must match the one in this browser\'s cookie (403 INVALID_OAUTH_STATE otherwise: missing, ' +
      'forged, expired, or another sign-in\'s); the code is exchanged with the PKCE verifier, and the provider\'s verified primary email ' +
      'signs in the user linked to this provider account, else the user with that email (now linked), else a new user when signup is enabled ' +
      '(403 SIGNUP_DISABLED otherwise). A provider that refuses, or has no verified email, is 403 OAUTH_FAILED. Success sets the session ' +
      'cookie and redirects (302) to PUBLIC_URL.',
    tags,
    auth: 'none',
    params: OAuthProviderParams,
    query: OAuthCallbackQuery,
    responses: { 302: { description: 'Signed in; to the dashboard' }, ...errorResponses(403, 404, 503) },
    handler: async ({ ctx, params, query }) => {
      const provider = providerOf(params.provider);
      const sealed = ctx.cookies.get(STATE_COOKIE);
      setStateCookie(ctx, '', 0); // one callback per started sign-in, whatever its outcome
      const flow = sealer.open(sealed, provider.id, query.state);
      if (query.error) throw oauthFailed(`The sign-in was not authorized at the provider (${query.error})`);
      if (!query.code) throw oauthFailed('The provider sent no authorization code');
      const profile = await finishOAuth(provider, callbackUrl(provider.id), query.code, flow);
      if (!profile) throw oauthFailed(`Your ${provider.name} account has no verified email address`);
      const user = await signInWithOAuth(ctx.state.em, provider.id, profile, { signupEnabled: deps.config.signupEnabled });
      setSessionCookie(ctx, deps, user);
      ctx.set('Cache-Control', 'no-store');
      ctx.redirect(`${deps.config.publicUrl}/`);
      return { status: 302 };
    },
  });
}
