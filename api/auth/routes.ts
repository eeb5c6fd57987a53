import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { SignupBody, LoginBody, EmailOnlyBody, VerifyEmailBody, ResetPasswordBody, AcceptedSchema } from './schema';
import { errorResponses } from '../common.schema';
import { UserSchema, presentUser } from '../presenters/user.presenter';
import { login, signup } from '../../domain/users/user.service';
import { AppError } from '../../domain/errors';
import { clearSessionCookie, setSessionCookie } from '../middleware/auth';
import { AccountThrottle, type ThrottleDecision, type ThrottleRule } from '../../domain/auth/account-throttle';
import { resetPassword, verifyEmail } from '../../domain/auth/account-tokens';
import type { AccountTokenPurpose } from '../../domain/auth/account.entities';
import { normalizeEmail } from '../../domain/contacts/email-address';
import { oauthRoutes } from './oauth.routes';
import type { AppContext } from '../context';

const throttled = { description: 'Too many attempts (TOO_MANY_ATTEMPTS); see Retry-After', schema: errorResponses(429)[429].schema };

/**
 * 429 TOO_MANY_ATTEMPTS with Retry-After, when the throttle refused the request. The message names no time: each lock
 * has its own (Retry-After and the suggestion give it), and a locked unknown account must read like a locked real one.
 */
function enforce(decision: ThrottleDecision, what: string): void {
  if (decision.allowed) return;
  const seconds = decision.retryAfterSeconds;
  throw new AppError(429, 'TOO_MANY_ATTEMPTS', `Too many ${what}; try again after the time in Retry-After`, {
    suggestion: `Retry after ${seconds} s (the Retry-After header).`,
    headers: { 'Retry-After': String(seconds) },
  });
}

export function authRoutes(routes: Routes, deps: ApiDeps): void {
  const limits = deps.config.accounts.throttle;
  const throttle = new AccountThrottle(limits.windowMs);
  const loginRules = (email: string, ctx: AppContext): ThrottleRule[] => [
    { key: `login:account:${normalizeEmail(email)}`, limit: limits.loginsPerAccount },
    { key: `login:ip:${ctx.ip}`, limit: limits.loginsPerIp },
  ];

  /**
   * Starts the email's workflow whether or not the address has an account (the activity finds out), so the answer
   * and its timing are the same either way.
   */
  const requestAccountEmail = async (ctx: AppContext, purpose: AccountTokenPurpose, email: string, throttleKey?: string) => {
    if (throttleKey) {
      const rules = [
        { key: `${throttleKey}:address:${normalizeEmail(email)}`, limit: limits.emailsPerAddress },
        { key: `${throttleKey}:ip:${ctx.ip}`, limit: limits.emailsPerIp },
      ];
      enforce(await throttle.hit(ctx.state.em, rules), 'emails asked for this address or from this client');
    }
    await deps.temporal.startAccountEmail({ purpose, email, requestId: ctx.state.requestId });
  };

  routes.add({
    method: 'post',
    path: '/auth/signup',
    summary: 'Create a dashboard account and log in',
    description:
      'Sets the session cookie and sends the verification email (see POST /auth/verify-email). Returns 403 SIGNUP_DISABLED when the deployment disables signup (SIGNUP_ENABLED=false).',
    tags: ['Dashboard auth'],
    auth: 'none',
    body: SignupBody,
    responses: { 201: { description: 'Account created', schema: UserSchema }, ...errorResponses(400, 403, 409, 422) },
    handler: async ({ ctx, body, afterCommit }) => {
      if (!deps.config.signupEnabled) {
        throw new AppError(403, 'SIGNUP_DISABLED', 'Signup is disabled on this deployment', { suggestion: 'Ask an administrator to invite you.' });
      }
      const user = await signup(ctx.state.em, body);
      setSessionCookie(ctx, deps, user);
      // Once the account is committed (the email's activity looks it up). It exists either way: without Temporal the
      // user asks for the email again (request-verification).
      afterCommit(() => requestAccountEmail(ctx, 'VERIFY_EMAIL', user.email).catch((err: unknown) => ctx.state.log.warn({ err }, 'verification email not started')));
      return { status: 201, body: presentUser(user) };
    },
  });

  routes.add({
    method: 'post',
    path: '/auth/login',
    summary: 'Log in with email and password',
    description:
      'Sets `mailwright_session`: a JWT in an HttpOnly, SameSite=Lax cookie (Secure when PUBLIC_URL is https), valid 7 days. ' +
      'Failed logins are throttled per account and per client address (LOGIN_MAX_FAILURES_PER_ACCOUNT, LOGIN_MAX_FAILURES_PER_IP per AUTH_THROTTLE_WINDOW): ' +
      'past either, 429 TOO_MANY_ATTEMPTS with Retry-After, whether or not the account exists.',
    tags: ['Dashboard auth'],
    auth: 'none',
    body: LoginBody,
    responses: { 200: { description: 'Logged in', schema: UserSchema }, ...errorResponses(400, 401, 422), 429: throttled },
    handler: async ({ ctx, body }) => {
      const rules = loginRules(body.email, ctx);
      enforce(await throttle.hit(ctx.state.em, rules), 'failed logins for this account or from this client');
      const user = await login(ctx.state.em, body); // a failure keeps its count
      await throttle.forgive(ctx.state.em, rules);
      setSessionCookie(ctx, deps, user);
      return { body: presentUser(user) };
    },
  });

  routes.add({
    method: 'get',
    path: '/auth/logout',
    summary: 'Log out (clears the session cookie)',
    tags: ['Dashboard auth'],
    auth: 'none',
    responses: { 204: { description: 'Logged out' } },
    handler: async ({ ctx }) => {
      clearSessionCookie(ctx, deps);
      return {};
    },
  });

  const accepted = { accepted: true as const, message: 'If an account has this address, an email is on its way.' };

  const throttledLikeThis = 'At most ACCOUNT_EMAILS_PER_ADDRESS requests per address and ACCOUNT_EMAILS_PER_IP per client address per AUTH_THROTTLE_WINDOW (429 TOO_MANY_ATTEMPTS).';
  const emailRequests = [
    {
      path: '/auth/request-verification',
      purpose: 'VERIFY_EMAIL',
      summary: 'Send the verification email again',
      description: 'Mails a new verification link (valid EMAIL_VERIFICATION_TTL, 48 hours by default; it replaces earlier links) to the account with this address, unless it is verified already.',
    },
    {
      path: '/auth/request-password-reset',
      purpose: 'RESET_PASSWORD',
      summary: 'Send a password reset email',
      description: 'Mails a reset link (valid PASSWORD_RESET_TTL, 1 hour by default; it replaces earlier links) to the account with this address.',
    },
  ] as const;
  for (const r of emailRequests) {
    routes.add({
      method: 'post',
      path: r.path,
      summary: r.summary,
      description: `${r.description} The answer is the same whether or not the address has an account. ${throttledLikeThis}`,
      tags: ['Dashboard auth'],
      auth: 'none',
      body: EmailOnlyBody,
      responses: { 202: { description: 'Accepted', schema: AcceptedSchema }, ...errorResponses(400, 422, 503), 429: throttled },
      handler: async ({ ctx, body }) => {
        await requestAccountEmail(ctx, r.purpose, body.email, r.path);
        return { status: 202, body: accepted };
      },
    });
  }

  routes.add({
    method: 'post',
    path: '/auth/verify-email',
    summary: 'Verify the account email with the token from the link',
    description: 'The token works once, before it expires. 403 INVALID_TOKEN for an unknown, used or expired token.',
    tags: ['Dashboard auth'],
    auth: 'none',
    body: VerifyEmailBody,
    responses: { 200: { description: 'The verified account', schema: UserSchema }, ...errorResponses(400, 403, 422) },
    handler: async ({ ctx, body }) => ({ body: presentUser(await verifyEmail(ctx.state.em, body.token)) }),
  });

  routes.add({
    method: 'post',
    path: '/auth/reset-password',
    summary: 'Set a new password with the token from the reset link',
    description:
      'The token works once, before it expires (403 INVALID_TOKEN otherwise). Every session of the account issued before ends; the response ' +
      'logs this browser in with a new session cookie.',
    tags: ['Dashboard auth'],
    auth: 'none',
    body: ResetPasswordBody,
    responses: { 200: { description: 'Password changed; logged in', schema: UserSchema }, ...errorResponses(400, 403, 422) },
    handler: async ({ ctx, body }) => {
      const user = await resetPassword(ctx.state.em, body.token, body.password);
      setSessionCookie(ctx, deps, user);
      return { body: presentUser(user) };
    },
  });

  oauthRoutes(routes, deps);
}
