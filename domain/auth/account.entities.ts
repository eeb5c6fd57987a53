import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { User } from '../users/user.entity';
import { uuidv7 } from '../ids';

const ACCOUNT_TOKEN_PURPOSES = ['VERIFY_EMAIL', 'RESET_PASSWORD'] as const;
export type AccountTokenPurpose = (typeof ACCOUNT_TOKEN_PURPOSES)[number];

/**
 * A single-use token sent in an account email (README › Accounts and sign-in). Only its SHA-256 is stored: the token is
 * 256 random bits, so a fast hash is enough and a database leak gives no working link.
 */
export const AccountToken = defineEntity({
  name: 'AccountToken',
  tableName: 'account_tokens',
  indexes: [{ properties: ['user', 'purpose'] }, { properties: ['expiresAt'] }],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    user: () => p.manyToOne(User).deleteRule('cascade'),
    purpose: p.enum([...ACCOUNT_TOKEN_PURPOSES]),
    tokenHash: p.string().length(64).unique(),
    /** The address the token was sent to: a verification counts only while the account still has it. */
    email: p.string().length(320),
    expiresAt: p.datetime(),
    usedAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});
export type AccountToken = InferEntity<typeof AccountToken>;

export const OAUTH_PROVIDERS = ['github', 'google'] as const;
export type OAuthProviderId = (typeof OAUTH_PROVIDERS)[number];

/** A provider account linked to a user: the next sign-in with it finds the user even if the provider's email changed. */
export const OAuthAccount = defineEntity({
  name: 'OAuthAccount',
  tableName: 'oauth_accounts',
  uniques: [{ properties: ['provider', 'providerUserId'] }],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    user: () => p.manyToOne(User).deleteRule('cascade'),
    provider: p.enum([...OAUTH_PROVIDERS]),
    providerUserId: p.string().length(255),
    /** The verified email the provider gave when the account was linked. */
    email: p.string().length(320),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});

/**
 * Failed logins per throttle key (an account's or a client address's SHA-256) and fixed window; the login throttle
 * (login-throttle.ts) writes and reads them with SQL. UNLOGGED like the API rate limit's windows: a crash that empties
 * it only starts the counts over.
 */
export const LoginThrottleWindow = defineEntity({
  name: 'LoginThrottleWindow',
  tableName: 'login_throttle_windows',
  indexes: [{ properties: ['windowStart'] }],
  properties: {
    key: p.string().length(64).primary(),
    windowStart: p.datetime().primary(),
    count: p.integer().default(0),
  },
});
