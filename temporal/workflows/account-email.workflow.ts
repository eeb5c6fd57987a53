import { proxyActivities } from '@temporalio/workflow';
import type { AccountActivities } from '../activities/account.activities';
import type { AccountEmailOutcome, AccountEmailRequest, InvitationEmailRequest } from '../../domain/auth/account-emails';

// A transient SMTP failure (4xx, connection) is retried with backoff for up to an hour; a 5xx is final (the activity
// fails non-retryably). Each attempt issues a fresh token, so only the email that got through carries a working link.
const { sendAccountEmail, sendInvitationEmail } = proxyActivities<AccountActivities>({
  startToCloseTimeout: '1 minute',
  scheduleToCloseTimeout: '1 hour',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '10 minutes' },
});

/**
 * Sends one verification or password reset email (README › Accounts and sign-in). The API starts it for every
 * request, whether the address has an account or not, so its answer cannot tell; the activity finds out, and the
 * token never appears in the workflow's history (the activity makes it, mails it and returns only the outcome).
 */
export async function accountEmail(input: AccountEmailRequest): Promise<AccountEmailOutcome> {
  return sendAccountEmail(input);
}

/**
 * Sends one project invitation email (README › Teams and permissions), the same way: the activity issues the token
 * and mails it, so the token never appears in the history.
 */
export async function invitationEmail(input: InvitationEmailRequest): Promise<AccountEmailOutcome> {
  return sendInvitationEmail(input);
}
