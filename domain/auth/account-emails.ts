import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';
import type { Config } from '../config';
import type { AccountTokenPurpose } from './account.entities';
import { issueAccountToken } from './account-tokens';
import { User } from '../users/user.entity';
import { normalizeEmail } from '../contacts/email-address';
import { buildMime } from '../mail/mime';
import { sendMeasured } from '../mail/transport';
import { messageIdFor } from '../emails/delivery';
import { escapeAttribute } from '../tracking/links';
import { uuidv7 } from '../ids';

export interface AccountEmailRequest {
  purpose: AccountTokenPurpose;
  /** The address asked for, as the caller typed it: whether it has an account is found out here, never in the API. */
  email: string;
}

export type AccountEmailOutcome = { status: 'SENT'; messageId: string } | { status: 'SKIPPED'; reason: string };

/** Where the dashboard takes the token of each email (a page that posts it to the API). */
const PAGES: Record<AccountTokenPurpose, string> = { VERIFY_EMAIL: '/verify-email', RESET_PASSWORD: '/reset-password' };

/** `48 hours`, `1 hour`, `30 minutes`. */
function lifetime(ms: number): string {
  const [n, unit] = ms % 3_600_000 === 0 ? [ms / 3_600_000, 'hour'] : [Math.max(1, Math.round(ms / 60_000)), 'minute'];
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

/** The subject and both bodies of an account email. */
function accountMessage(purpose: AccountTokenPurpose, input: { link: string; ttlMs: number; name: string | null }) {
  const hello = input.name ? `Hello ${input.name},` : 'Hello,';
  const [subject, intro, action, outro] =
    purpose === 'VERIFY_EMAIL'
      ? ['Verify your email address', 'Confirm that this address belongs to your Mailwright account:', 'Verify email address', 'If you did not create an account, ignore this email.']
      : ['Reset your password', 'Someone (hopefully you) asked to reset the password of your Mailwright account:', 'Choose a new password', 'If you did not ask for this, ignore this email: your password stays as it is.'];
  const expiry = `The link works once, for ${lifetime(input.ttlMs)}.`;
  const e = escapeAttribute;
  const html = `<p>${e(hello)}</p><p>${e(intro)}</p><p><a href="${e(input.link)}">${e(action)}</a></p><p>${e(expiry)} ${e(outro)}</p>`;
  const text = `${hello}\n\n${intro}\n\n${input.link}\n\n${expiry} ${outro}\n`;
  return { subject, html, text };
}

/**
 * Sends a verification or password reset email to the account with this address, through the SMTP relay, with a
 * fresh token. Nothing is sent when there is no such account, or for a verification, when the address is verified.
 * Throws nodemailer's error when the relay refuses or cannot be reached (the caller decides what is retried).
 */
export async function sendAccountEmail(
  em: EntityManager,
  transport: Transporter,
  config: Pick<Config, 'publicUrl' | 'accounts'>,
  request: AccountEmailRequest,
): Promise<AccountEmailOutcome> {
  const user = await em.findOne(User, { email: normalizeEmail(request.email) });
  if (!user) return { status: 'SKIPPED', reason: 'no account has this address' };
  if (request.purpose === 'VERIFY_EMAIL' && user.emailVerifiedAt) return { status: 'SKIPPED', reason: 'the address is verified already' };
  const ttlMs = request.purpose === 'VERIFY_EMAIL' ? config.accounts.verificationTtlMs : config.accounts.resetTtlMs;
  const token = await issueAccountToken(em, user, request.purpose, ttlMs);
  const link = `${config.publicUrl}${PAGES[request.purpose]}?token=${token}`;
  const { subject, html, text } = accountMessage(request.purpose, { link, ttlMs, name: user.name ?? null });
  const from = config.accounts.systemFrom;
  const messageId = messageIdFor(uuidv7(), from.address);
  const raw = buildMime({
    messageId,
    from,
    to: { address: user.email, name: user.name },
    subject,
    html,
    text,
    // RFC 3834: an automatic message; auto-responders should not answer it.
    headers: { 'Auto-Submitted': 'auto-generated' },
  });
  await sendMeasured(transport, { envelope: { from: from.address, to: [user.email] }, raw });
  return { status: 'SENT', messageId };
}
