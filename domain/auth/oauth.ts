import { timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config';
import { OAuthAccount, type OAuthProviderId } from './account.entities';
import { User } from '../users/user.entity';
import { AppError, serviceUnavailable } from '../errors';
import { hashPassword } from '../users/user.service';
import { normalizeEmail } from '../contacts/email-address';
import { SecretBox } from '../domains/secret-box';
import { randomHex } from '../ids';

/** What sign-in needs from a provider: its stable user id and an address it has verified. */
export interface OAuthProfile {
  providerUserId: string;
  email: string;
  name: string | null;
}

export interface OAuthProvider {
  id: OAuthProviderId;
  name: string;
  clientId: string;
  clientSecret: string;
  authorizeUrl: string;
  tokenUrl: string;
  scopes: string[];
  /** The profile behind an access token; undefined when the provider has no verified email for it. */
  profile(accessToken: string): Promise<OAuthProfile | undefined>;
}

export const oauthFailed = (message: string) =>
  new AppError(403, 'OAUTH_FAILED', message, { suggestion: 'Try again, or sign in with your email and password.' });

/** Bound on each call to a provider (token exchange aside, which arctic makes). */
const PROVIDER_TIMEOUT_MS = 10_000;

async function getJson<T>(url: string, accessToken: string, schema: z.ZodType<T>, headers: Record<string, string> = {}): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, {
      headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json', 'user-agent': 'Mailwright', ...headers },
      signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS),
      redirect: 'error',
    });
  } catch {
    throw serviceUnavailable('The sign-in provider could not be reached');
  }
  if (!res.ok) throw oauthFailed(`The sign-in provider refused the profile request (${res.status})`);
  const parsed = schema.safeParse(await res.json().catch(() => undefined));
  if (!parsed.success) throw oauthFailed('The sign-in provider answered with an unexpected profile');
  return parsed.data;
}

const GitHubUser = z.object({ id: z.union([z.number(), z.string()]), login: z.string(), name: z.string().nullish() });
const GitHubEmails = z.array(z.object({ email: z.string(), primary: z.boolean(), verified: z.boolean() }));
const GoogleUser = z.object({ sub: z.string().min(1), email: z.string().optional(), email_verified: z.boolean().optional(), name: z.string().nullish() });

/** The providers whose client id and secret are set, with their endpoints (configurable, for GitHub Enterprise and tests). */
export function configuredProviders(config: Config['accounts']['oauth']): OAuthProvider[] {
  const providers: OAuthProvider[] = [];
  const gh = config.github;
  if (gh) {
    const github = { 'x-github-api-version': '2022-11-28', accept: 'application/vnd.github+json' };
    providers.push({
      id: 'github',
      name: 'GitHub',
      clientId: gh.clientId,
      clientSecret: gh.clientSecret,
      authorizeUrl: `${gh.webUrl}/login/oauth/authorize`,
      tokenUrl: `${gh.webUrl}/login/oauth/access_token`,
      scopes: ['read:user', 'user:email'],
      async profile(accessToken) {
        const user = await getJson(`${gh.apiUrl}/user`, accessToken, GitHubUser, github);
        // /user shows only a public email, verified or not; /user/emails says which address is the verified primary.
        const emails = await getJson(`${gh.apiUrl}/user/emails`, accessToken, GitHubEmails, github);
        const primary = emails.find((e) => e.primary && e.verified);
        return primary ? { providerUserId: String(user.id), email: primary.email, name: user.name ?? user.login } : undefined;
      },
    });
  }
  const gg = config.google;
  if (gg) {
    providers.push({
      id: 'google',
      name: 'Google',
      clientId: gg.clientId,
      clientSecret: gg.clientSecret,
      authorizeUrl: gg.authorizeUrl,
      tokenUrl: gg.tokenUrl,
      scopes: ['openid', 'email', 'profile'],
      async profile(accessToken) {
        const user = await getJson(gg.userinfoUrl, accessToken, GoogleUser);
        return user.email && user.email_verified === true ? { providerUserId: user.sub, email: user.email, name: user.name ?? null } : undefined;
      },
    });
  }
  return providers;
}

/** arctic is an ES module; the API is CommonJS, so it is loaded on first use (Node 20.19+ could require it, jest cannot). */
const arctic = () => import('arctic');

/** The provider's authorization URL for a new sign-in (state and an S256 PKCE challenge), and the flow to keep. */
export async function startOAuth(provider: OAuthProvider, redirectUri: string, now = Date.now()): Promise<{ url: string; flow: OAuthFlowState }> {
  const { OAuth2Client, CodeChallengeMethod, generateState, generateCodeVerifier } = await arctic();
  const client = new OAuth2Client(provider.clientId, provider.clientSecret, redirectUri);
  const flow: OAuthFlowState = { provider: provider.id, state: generateState(), codeVerifier: generateCodeVerifier(), expiresAt: now + OAUTH_STATE_TTL_MS };
  const url = client.createAuthorizationURLWithPKCE(provider.authorizeUrl, flow.state, CodeChallengeMethod.S256, flow.codeVerifier, provider.scopes);
  return { url: url.toString(), flow };
}

/** Exchanges the callback's code (with the PKCE verifier) and reads the profile; undefined: no verified email. */
export async function finishOAuth(provider: OAuthProvider, redirectUri: string, code: string, flow: OAuthFlowState): Promise<OAuthProfile | undefined> {
  const { OAuth2Client, OAuth2RequestError, ArcticFetchError } = await arctic();
  const client = new OAuth2Client(provider.clientId, provider.clientSecret, redirectUri);
  let accessToken: string;
  try {
    accessToken = (await client.validateAuthorizationCode(provider.tokenUrl, code, flow.codeVerifier)).accessToken();
  } catch (err) {
    if (err instanceof OAuth2RequestError) throw oauthFailed(`The sign-in provider refused the code (${err.code})`);
    if (err instanceof ArcticFetchError) throw serviceUnavailable('The sign-in provider could not be reached');
    throw oauthFailed('The sign-in provider answered the token request unexpectedly');
  }
  return provider.profile(accessToken);
}

/** What the browser keeps between the redirect to the provider and the callback (sealed in a cookie). */
export interface OAuthFlowState {
  provider: OAuthProviderId;
  state: string;
  codeVerifier: string;
  expiresAt: number;
}

/** How long a sign-in may take between the redirect to the provider and its callback. */
export const OAUTH_STATE_TTL_MS = 10 * 60_000;

const invalidState = (message: string) =>
  new AppError(403, 'INVALID_OAUTH_STATE', message, { suggestion: 'Start the sign-in again from GET /auth/oauth/{provider}.' });

/**
 * Seals and opens the flow state: AES-256-GCM with a key derived from APP_SECRET for this purpose only, so the
 * cookie can be neither read (the PKCE verifier stays secret) nor forged nor moved to another provider.
 */
export class OAuthStateSealer {
  private readonly box: SecretBox;

  constructor(appSecret: string) {
    this.box = new SecretBox(appSecret, 'mailwright/oauth-state/v1');
  }

  seal(flow: OAuthFlowState): string {
    return this.box.encrypt(JSON.stringify(flow), `oauth-state:${flow.provider}`);
  }

  /** The flow of this provider's callback, checked against the `state` the provider sent back. */
  open(sealed: string | undefined, provider: OAuthProviderId, returnedState: string | undefined, now = Date.now()): OAuthFlowState {
    if (!sealed) throw invalidState('No sign-in was started in this browser (the state cookie is missing)');
    let flow: OAuthFlowState;
    try {
      flow = JSON.parse(this.box.decrypt(sealed, `oauth-state:${provider}`)) as OAuthFlowState;
    } catch {
      throw invalidState('The sign-in state cookie is invalid');
    }
    if (flow.provider !== provider || typeof flow.state !== 'string' || typeof flow.codeVerifier !== 'string') throw invalidState('The sign-in state cookie is invalid');
    if (!(flow.expiresAt > now)) throw invalidState('The sign-in took too long; its state has expired');
    const a = Buffer.from(returnedState ?? '');
    const b = Buffer.from(flow.state);
    if (a.length !== b.length || !timingSafeEqual(a, b)) throw invalidState('The state the provider returned is not the one this sign-in started with');
    return flow;
  }
}

/**
 * The user a provider account signs in as: the one it is linked to; else the user with its verified email, now
 * linked; else a new user when signup is enabled. Linking an account whose address was never verified here also
 * ends its password and sessions: whoever registered it had not proved the address is theirs, the provider's user has
 * (else a squatter who signed up with someone's address first would share their account).
 */
export async function signInWithOAuth(em: EntityManager, provider: OAuthProviderId, profile: OAuthProfile, opts: { signupEnabled: boolean }): Promise<User> {
  const linked = await em.findOne(OAuthAccount, { provider, providerUserId: profile.providerUserId }, { populate: ['user'] });
  if (linked) return linked.user;
  const email = normalizeEmail(profile.email);
  let user = await em.findOne(User, { email });
  if (user && !user.emailVerifiedAt) {
    user.passwordHash = await hashPassword(randomHex(32));
    user.sessionVersion += 1;
    user.emailVerifiedAt = new Date();
  }
  if (!user) {
    if (!opts.signupEnabled) {
      throw new AppError(403, 'SIGNUP_DISABLED', 'Signup is disabled on this deployment, and no account has this email', { suggestion: 'Ask an administrator to invite you.' });
    }
    // No usable password until the user sets one (POST /auth/request-password-reset).
    user = em.create(User, { email, name: profile.name, passwordHash: await hashPassword(randomHex(32)), emailVerifiedAt: new Date() });
  }
  em.create(OAuthAccount, { user, provider, providerUserId: profile.providerUserId, email });
  await em.flush();
  return user;
}
