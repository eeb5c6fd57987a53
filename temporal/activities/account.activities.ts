import { ApplicationFailure } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import {
  sendAccountEmail,
  sendInvitationEmail,
  type AccountEmailOutcome,
  type AccountEmailRequest,
  type InvitationEmailRequest,
} from '../../domain/auth/account-emails';
import { isPermanentSmtpFailure } from '../../domain/emails/delivery';

/** A 5xx from the relay is final (non-retryable); anything else thrown is retried. */
async function finalOnRefusal(send: () => Promise<AccountEmailOutcome>): Promise<AccountEmailOutcome> {
  try {
    return await send();
  } catch (err) {
    if (isPermanentSmtpFailure(err)) throw ApplicationFailure.create({ message: `The relay refused the email: ${(err as Error).message}`, nonRetryable: true });
    throw err;
  }
}

export function createAccountActivities(deps: ActivityDeps) {
  return {
    /** Issues a token and mails it. */
    async sendAccountEmail(input: AccountEmailRequest): Promise<AccountEmailOutcome> {
      return finalOnRefusal(() => sendAccountEmail(deps.orm.em.fork(), deps.transport, deps.config, input));
    },
    /** Issues a project invitation's token and mails it. */
    async sendInvitationEmail(input: InvitationEmailRequest): Promise<AccountEmailOutcome> {
      return finalOnRefusal(() => sendInvitationEmail(deps.orm.em.fork(), deps.transport, deps.config, input));
    },
  };
}

export type AccountActivities = ReturnType<typeof createAccountActivities>;
