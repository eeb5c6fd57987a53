import { z } from 'zod';

/** The body exactly as SNS posts it (JSON with content-type text/plain); parsed and verified by the handler. */
export const SnsBody = z.string().meta({
  description:
    'An Amazon SNS HTTP(S) message (Notification, SubscriptionConfirmation or UnsubscribeConfirmation) as SNS posts it: JSON, ' +
    'usually with `Content-Type: text/plain; charset=UTF-8`. Raw message delivery must be off: the envelope carries the signature.',
});

export const SnsResult = z
  .object({
    outcome: z.enum(['applied', 'unchanged', 'duplicate', 'unknown_email', 'not_a_report', 'confirmed', 'unsubscribed']).meta({
      description:
        '`applied`: the report changed the email or recorded events; `unchanged`: a genuine report with nothing to change; ' +
        '`duplicate`: this SNS MessageId was processed before; `unknown_email`: no email of ours has the Message-ID; `not_a_report`: ' +
        'a notification that is not an SES Delivery/Bounce/Complaint; `confirmed`: the subscription was confirmed; ' +
        '`unsubscribed`: an UnsubscribeConfirmation, acknowledged.',
    }),
    emailId: z.string().optional(),
    events: z.array(z.string()).meta({ description: 'Names of the events recorded' }),
  })
  .meta({ id: 'SnsResult' });
export type SnsResult = z.infer<typeof SnsResult>;
