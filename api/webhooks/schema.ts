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

/** The body exactly as the provider posts it (JSON); verified over its bytes, then parsed by the handler. */
export const ProviderWebhookBody = z.string().meta({
  description: "The provider's webhook request as it posts it (JSON). It is verified over its exact bytes, so it must reach this server unchanged.",
});

export const ProviderWebhookResult = z
  .object({
    received: z.number().int().min(0).meta({ description: 'Events in the request' }),
    results: z.array(
      z.object({
        type: z.string().meta({ description: "The provider's name of the event (`delivered`, `bounce`, `Bounce/HardBounce`, `email.bounced`, ...)" }),
        eventId: z.string().optional().meta({ description: "The provider's id of the event: it is applied once" }),
        outcome: z.enum(['applied', 'unchanged', 'duplicate', 'unknown_email', 'not_sent_yet', 'ignored', 'invalid']).meta({
          description:
            '`applied`: the report changed the email or recorded events; `unchanged`: a genuine report with nothing to change; `duplicate`: ' +
            'this event (or Mailgun token) was used before; `unknown_email`: no email of ours matches; `not_sent_yet`: the email is not ' +
            'recorded as sent yet (the request then answers 503 for the provider to retry; the other events are applied); `ignored`: ' +
            'an event type that is not used (opens, clicks, processed, ...); `invalid`: an event that could not be read (see `detail`), acknowledged.',
        }),
        emailId: z.string().optional(),
        events: z.array(z.string()).meta({ description: 'Names of the events recorded' }),
        detail: z.string().optional(),
      }),
    ),
  })
  .meta({ id: 'ProviderWebhookResult' });
export type ProviderWebhookResult = z.infer<typeof ProviderWebhookResult>;
