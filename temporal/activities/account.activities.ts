import { ApplicationFailure } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { sendAccountEmail, type AccountEmailOutcome, type AccountEmailRequest } from '../../domain/auth/account-emails';
import { isPermanentSmtpFailure } from '../../domain/emails/delivery';

export function createAccountActivities(deps: ActivityDeps) {
  return {
    /** Issues a token and mails it; a 5xx from the relay is final, anything else thrown is retried. */
    async sendAccountEmail(input: AccountEmailRequest): Promise<AccountEmailOutcome> {
      try {
        return await sendAccountEmail(deps.orm.em.fork(), deps.transport, deps.config, input);
      } catch (err) {
        if (isPermanentSmtpFailure(err)) throw ApplicationFailure.create({ message: `The relay refused the email: ${(err as Error).message}`, nonRetryable: true });
        throw err;
      }
    },
  };
}

export type AccountActivities = ReturnType<typeof createAccountActivities>;
