import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { SignupBody, LoginBody } from './schema';
import { errorResponses } from '../common.schema';
import { UserSchema, presentUser } from '../presenters/user.presenter';
import { login, signup } from '../../domain/users/user.service';
import { AppError } from '../../domain/errors';
import { clearSessionCookie, setSessionCookie } from '../middleware/auth';

export function authRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'post',
    path: '/auth/signup',
    summary: 'Create a dashboard account and log in',
    description: 'Sets the session cookie. Returns 403 SIGNUP_DISABLED when the deployment disables signup (SIGNUP_ENABLED=false).',
    tags: ['Dashboard auth'],
    auth: 'none',
    body: SignupBody,
    responses: { 201: { description: 'Account created', schema: UserSchema }, ...errorResponses(400, 403, 409, 422) },
    handler: async ({ ctx, body }) => {
      if (!deps.config.signupEnabled) {
        throw new AppError(403, 'SIGNUP_DISABLED', 'Signup is disabled on this deployment', { suggestion: 'Ask an administrator to invite you.' });
      }
      const user = await signup(ctx.state.em, body);
      setSessionCookie(ctx, deps, user.id);
      return { status: 201, body: presentUser(user) };
    },
  });

  routes.add({
    method: 'post',
    path: '/auth/login',
    summary: 'Log in with email and password',
    description: 'Sets `mailwright_session`: a JWT in an HttpOnly, SameSite=Lax cookie (Secure when PUBLIC_URL is https), valid 7 days.',
    tags: ['Dashboard auth'],
    auth: 'none',
    body: LoginBody,
    responses: { 200: { description: 'Logged in', schema: UserSchema }, ...errorResponses(400, 401, 422) },
    handler: async ({ ctx, body }) => {
      const user = await login(ctx.state.em, body);
      setSessionCookie(ctx, deps, user.id);
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
}
