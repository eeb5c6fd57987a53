import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';
import type { Config } from '../config';
import type { AccountTokenPurpose } from './account.entities';
import { issueAccountToken, issueInvitationToken } from './account-tokens';
import { User } from '../users/user.entity';
import { normalizeEmail } from '../contacts/email-address';
import { buildMime } from '../mail/mime';
import { sendMeasured } from '../mail/transport';
import { messageIdFor } from '../emails/message-id';
import { escapeAttribute } from '../tracking/links';
import { uuidv7 } from '../ids';

export interface AccountEmailRequest {
  purpose: AccountTokenPurpose;
  /** The address asked for, as the caller typed it: whether it has an account is found out here, never in the API. */
  email: string;
}

/** The invitation email of a pending invitation (domain/projects/members.service.ts). */
export interface InvitationEmailRequest {
  invitationId: string;
}

export type AccountEmailOutcome = { status: 'SENT'; messageId: string } | { status: 'SKIPPED'; reason: string };

/** Where the dashboard takes the token of each email (a page that posts it to the API). */
const PAGES: Record<AccountTokenPurpose, string> = { VERIFY_EMAIL: '/verify-email', RESET_PASSWORD: '/reset-password' };
const INVITATION_PAGE = '/accept-invitation';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** `7 days`, `48 hours`, `1 hour`, `30 minutes`. */
function lifetime(ms: number): string {
  const [n, unit] = ms % DAY === 0 && ms >= 3 * DAY ? [ms / DAY, 'day'] : ms % HOUR === 0 ? [ms / HOUR, 'hour'] : [Math.max(1, Math.round(ms / 60_000)), 'minute'];
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

interface SystemMessage {
  subject: string;
  name: string | null;
  intro: string;
  link: string;
  action: string;
  ttlMs: number;
  outro: string;
}

/** A system email with a link: a greeting, what happened, the one link, how long it works. */
function linkMessage(m: SystemMessage): { subject: string; html: string; text: string } {
  const hello = m.name ? `Hello ${m.name},` : 'Hello,';
  const expiry = `The link works once, for ${lifetime(m.ttlMs)}.`;
  const e = escapeAttribute;
  const html = `<p>${e(hello)}</p><p>${e(m.intro)}</p><p><a href="${e(m.link)}">${e(m.action)}</a></p><p>${e(expiry)} ${e(m.outro)}</p>`;
  const text = `${hello}\n\n${m.intro}\n\n${m.link}\n\n${expiry} ${m.outro}\n`;
  return { subject: m.subject, html, text };
}

/**
 * Mails a message of the service's own (account emails, invitations, suspension notices) from SYSTEM_EMAIL_FROM
 * through the relay; throws nodemailer's error when it refuses.
 */
export async function sendSystemEmail(
  transport: Transporter,
  config: Pick<Config, 'accounts'>,
  to: { address: string; name?: string | null },
  message: { subject: string; html: string; text: string },
): Promise<{ status: 'SENT'; messageId: string }> {
  const from = config.accounts.systemFrom;
  const messageId = messageIdFor(uuidv7(), from.address);
  const raw = buildMime({
    messageId,
    from,
    to: { address: to.address, name: to.name },
    ...message,
    // RFC 3834: an automatic message; auto-responders should not answer it.
    headers: { 'Auto-Submitted': 'auto-generated' },
  });
  await sendMeasured(transport, { envelope: { from: from.address, to: [to.address] }, raw });
  return { status: 'SENT', messageId };
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
  const [subject, intro, action, outro] =
    request.purpose === 'VERIFY_EMAIL'
      ? ['Verify your email address', 'Confirm that this address belongs to your Mailwright account:', 'Verify email address', 'If you did not create an account, ignore this email.']
      : ['Reset your password', 'Someone (hopefully you) asked to reset the password of your Mailwright account:', 'Choose a new password', 'If you did not ask for this, ignore this email: your password stays as it is.'];
  return sendSystemEmail(transport, config, { address: user.email, name: user.name }, linkMessage({ subject, name: user.name ?? null, intro, link, action, ttlMs, outro }));
}

/**
 * Mails a project invitation (README › Teams and permissions) with a fresh token, which replaces the invitation's
 * earlier one. Nothing is sent when the invitation is gone (accepted or revoked).
 */
export async function sendInvitationEmail(em: EntityManager, transport: Transporter, config: Pick<Config, 'publicUrl' | 'accounts'>, request: InvitationEmailRequest): Promise<AccountEmailOutcome> {
  const ttlMs = config.accounts.invitationTtlMs;
  const issued = await issueInvitationToken(em, request.invitationId, ttlMs);
  if (!issued) return { status: 'SKIPPED', reason: 'the invitation was accepted or revoked' };
  const { token, invitation } = issued;
  const by = invitation.inviterName ?? invitation.inviterEmail;
  return sendSystemEmail(transport, config, { address: invitation.email }, linkMessage({
    subject: `You are invited to ${invitation.projectName} on Mailwright`,
    name: null,
    intro: `${by ? `${by} invited you` : 'You are invited'} to the Mailwright project "${invitation.projectName}" as ${invitation.role}. Choose a password to join:`,
    link: `${config.publicUrl}${INVITATION_PAGE}?token=${token}`,
    action: 'Accept the invitation',
    ttlMs,
    outro: 'If you did not expect this invitation, ignore this email.',
  }));
}
