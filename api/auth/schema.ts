import { z } from 'zod';
import { emailString } from '../validation';
import { OAUTH_PROVIDERS } from '../../domain/auth/account.entities';

export const SignupBody = z
  .object({ email: emailString, password: z.string().min(8, 'At least 8 characters').max(256), name: z.string().min(1).max(200).optional() })
  .meta({ id: 'SignupRequest' });

export const LoginBody = z.object({ email: emailString, password: z.string().min(1).max(256) }).meta({ id: 'LoginRequest' });

/** A token from an account email: 43 base64url characters as issued; anything else is simply not a live token (403). */
const AccountTokenString = z.string().min(1).max(200).meta({ description: 'The `token` parameter of the link in the email', example: 'q3Ztk2mWcE0lqkXW8n6mDgqD1kq4iG3bX6dVbT8YQmU' });

export const EmailOnlyBody = z.object({ email: emailString }).meta({ id: 'AccountEmailRequest' });

export const VerifyEmailBody = z.object({ token: AccountTokenString }).meta({ id: 'VerifyEmailRequest' });

export const ResetPasswordBody = z
  .object({ token: AccountTokenString, password: z.string().min(8, 'At least 8 characters').max(256) })
  .meta({ id: 'ResetPasswordRequest' });

export const AcceptedSchema = z
  .object({ accepted: z.literal(true), message: z.string() })
  .meta({ id: 'AccountEmailAccepted', description: 'The same answer whether or not the address has an account.' });

export const OAuthConfigSchema = z
  .object({
    providers: z.array(
      z.object({
        id: z.enum(OAUTH_PROVIDERS),
        name: z.string(),
        authorizeUrl: z.string().meta({ description: 'Open this path of the API in the browser to sign in with the provider' }),
      }),
    ),
  })
  .meta({ id: 'OAuthConfig' });

export const OAuthProviderParams = z.object({ provider: z.enum(OAUTH_PROVIDERS) });

// Bounded so that the longest query, percent-encoded, fits Node's 16 KB of request line and headers (a longer URL is
// a 431 before any route runs); real codes are tens of characters, the state is ours (43).
export const OAuthCallbackQuery = z.object({
  code: z.string().max(512).optional(),
  state: z.string().max(128).optional(),
  error: z.string().max(128).optional(),
});
