import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import type { AppContext } from '../context';
import { errorResponses } from '../common.schema';
import { ProviderWebhookBody, ProviderWebhookResult, SnsBody, SnsResult } from './schema';
import { AppError } from '../../domain/errors';
import type { ReportProvider } from '../../domain/events/event-writer';
import { parseSnsMessage, SnsVerifier } from '../../domain/webhooks/sns';
import { applySesReport, parseSesReport } from '../../domain/webhooks/ses-reports';
import { applyProviderEvents, type ProviderReport, type SkippedEvent } from '../../domain/webhooks/provider-reports';
import { verifyMailgun, verifyPostmark, verifySendgrid, verifyStandardWebhook } from '../../domain/webhooks/provider-signatures';
import { readSendgridEvents } from '../../domain/webhooks/sendgrid-reports';
import { readMailgunBody, readMailgunEvent } from '../../domain/webhooks/mailgun-reports';
import { readPostmarkRecord } from '../../domain/webhooks/postmark-reports';
import { readResendEvent } from '../../domain/webhooks/resend-reports';

/** SNS messages are at most 256 KB; JSON escaping of the inner message can roughly double that. */
const MAX_SNS_BODY = 1024 * 1024;
/** A SendGrid batch holds many events; a Postmark bounce may carry the bounce's content. */
const MAX_BATCH_BODY = 5 * 1024 * 1024;
const MAX_EVENT_BODY = 2 * 1024 * 1024;

const PROVIDER_SETTINGS: Record<ReportProvider, { name: string; variables: string }> = {
  sendgrid: { name: 'SendGrid', variables: 'SENDGRID_WEBHOOK_PUBLIC_KEY' },
  mailgun: { name: 'Mailgun', variables: 'MAILGUN_WEBHOOK_SIGNING_KEY' },
  postmark: { name: 'Postmark', variables: 'POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD' },
  resend: { name: 'Resend', variables: 'RESEND_WEBHOOK_SECRET' },
};

/** The statuses every report receiver answers besides 200. */
const receiverErrors = {
  ...errorResponses(400, 401, 403, 404, 413, 503),
  503: { ...errorResponses(503)[503]!, description: 'An email of the request is not recorded as sent yet: retried by the provider (the other events were applied)' },
};

const COMMON_DESCRIPTION =
  'Delivered -> DELIVERED + `email.delivered`; a hard bounce -> BOUNCED + `email.bounced` and the address suppressed (`hard_bounce`); a soft ' +
  'bounce -> `email.bounced` with `transient: true`, status kept, counted towards SUPPRESS_SOFT_BOUNCES when it is about the mailbox; a ' +
  'complaint -> `email.complained`, the contact unsubscribed (`via: "complaint"`) and the address suppressed (`complaint`); an unsubscribe -> ' +
  '`contact.unsubscribed`. Each event is applied once (by the provider\'s event id); an event of no email of ours, of a type not used, or ' +
  'that cannot be read is acknowledged (200) and changes nothing. Missing credentials: 401; wrong ones: 403 `INVALID_SIGNATURE`; a signed ' +
  'timestamp further than REPORT_WEBHOOK_TOLERANCE from now: 403 `MESSAGE_EXPIRED`. 404 while the receiver is off (its variables unset).';

/** Internal receivers of infrastructure callbacks (SPEC.md): authenticated by their own signatures, not by API keys. */
export function webhookRoutes(routes: Routes, deps: ApiDeps): void {
  const sns = new SnsVerifier(deps.config.sns);

  routes.add({
    method: 'post',
    path: '/webhooks/sns',
    summary: 'Amazon SES delivery reports through Amazon SNS',
    description:
      'Subscribe this URL (HTTPS) to the SNS topic of your SES identity or configuration set, with the original headers included. ' +
      'Every message must carry a valid SNS signature (SignatureVersion 1 or 2) by a certificate under SNS_CERT_URL_PATTERN, and ' +
      'come from a topic in SNS_TOPIC_ARNS when that is set. A SubscriptionConfirmation is confirmed by fetching its SubscribeURL. ' +
      'Notifications: Delivery -> DELIVERED + `email.delivered`; Bounce Permanent -> BOUNCED + `email.bounced`; other bounces -> ' +
      '`email.bounced` with `transient: true`, status kept; Complaint -> `email.complained`, and the contact is unsubscribed ' +
      '(`contact.unsubscribed`, `via: "complaint"`). The email is found by its Message-ID; a redelivered MessageId changes nothing. ' +
      '503 asks SNS to retry (the email is not recorded as sent yet, or AWS could not be reached).',
    tags: ['Webhooks'],
    auth: 'none',
    body: SnsBody,
    rawBody: { maxBytes: MAX_SNS_BODY },
    responses: {
      200: { description: 'Processed (see `outcome`)', schema: SnsResult },
      ...errorResponses(400, 403, 413, 503),
    },
    handler: async ({ ctx, body }): Promise<{ body: SnsResult }> => {
      const msg = parseSnsMessage(body);
      await sns.verify(msg);
      if (msg.Type === 'SubscriptionConfirmation') {
        await sns.confirmSubscription(msg);
        ctx.state.log.info({ topicArn: msg.TopicArn }, 'SNS subscription confirmed');
        return { body: { outcome: 'confirmed', events: [] } };
      }
      if (msg.Type === 'UnsubscribeConfirmation') {
        // Nothing to undo here: the subscription is gone on the AWS side. Logged so an operator sees why reports stop.
        ctx.state.log.warn({ topicArn: msg.TopicArn }, 'SNS subscription removed');
        return { body: { outcome: 'unsubscribed', events: [] } };
      }
      const report = parseSesReport(msg.Message);
      if (!report) return { body: { outcome: 'not_a_report', events: [] } };
      return { body: await applySesReport(ctx.state.em, msg.MessageId, report, deps.config.suppression) };
    },
  });

  const receivers = deps.config.reportWebhooks;
  const tolerance = receivers.toleranceMs;
  const header = (ctx: AppContext) => (name: string) => ctx.get(name) || undefined;
  /** The receiver's settings, or 404 while it is off: there is nothing to verify a request with. */
  const settings = <P extends ReportProvider>(provider: P): NonNullable<(typeof receivers)[P]> => {
    const on = receivers[provider];
    if (on) return on as NonNullable<(typeof receivers)[P]>;
    const { name, variables } = PROVIDER_SETTINGS[provider];
    throw new AppError(404, 'NOT_FOUND', `The ${name} report receiver is off on this deployment`, { suggestion: `Set ${variables} to turn it on (README › Delivery reports by webhook).` });
  };
  /** Applies the events; 503 (after applying the others) when one's email is not recorded as sent yet. */
  const apply = async (ctx: AppContext, provider: ReportProvider, events: (ProviderReport | SkippedEvent)[], replayKeys: string[] = []): Promise<{ body: ProviderWebhookResult }> => {
    const { results, retry } = await applyProviderEvents(ctx.state.em, provider, events, deps.config.suppression, replayKeys);
    for (const r of results) if (r.outcome === 'invalid') ctx.state.log.warn({ provider, type: r.type, eventId: r.eventId, detail: r.detail }, 'report webhook: event skipped');
    if (retry) {
      throw new AppError(503, 'SERVICE_UNAVAILABLE', 'An email of this report is not recorded as sent yet; retry shortly (the other events were applied)', { headers: { 'Retry-After': '20' } });
    }
    return { body: { received: events.length, results } };
  };
  /**
   * One receiver: POST /webhooks/incoming/<provider>, the raw body (verified over its bytes), 404 while it is off, each
   * event in a transaction of its own. `receive` verifies the request and reads its events.
   */
  const receiver = <P extends ReportProvider>(
    provider: P,
    def: {
      summary: string;
      description: string;
      maxBytes: number;
      receive: (ctx: AppContext, body: string, on: NonNullable<(typeof receivers)[P]>) => { events: (ProviderReport | SkippedEvent)[]; replayKeys?: string[] };
    },
  ) =>
    routes.add({
      method: 'post',
      path: `/webhooks/incoming/${provider}`,
      summary: def.summary,
      description: `${def.description} ${COMMON_DESCRIPTION}`,
      tags: ['Webhooks'],
      auth: 'none',
      body: ProviderWebhookBody,
      rawBody: { maxBytes: def.maxBytes },
      ownTransactions: "each event is applied in a transaction of its own with its replay record, so one event of a batch never holds or undoes another's",
      responses: { 200: { description: "Processed (see each event's `outcome`)", schema: ProviderWebhookResult }, ...receiverErrors },
      handler: async ({ ctx, body }) => {
        const { events, replayKeys } = def.receive(ctx, body, settings(provider));
        return apply(ctx, provider, events, replayKeys);
      },
    });

  receiver('sendgrid', {
    summary: "SendGrid's Event Webhook: delivery reports",
    description:
      'Point the signed Event Webhook of the SendGrid account here (events: Delivered, Bounced, Dropped, Deferred, Spam Reports, Unsubscribes, ' +
      'Group Unsubscribes) and set SENDGRID_WEBHOOK_PUBLIC_KEY to its verification key. Every request must carry a valid ECDSA signature ' +
      '(`X-Twilio-Email-Event-Webhook-Signature` over the timestamp and the body). A batch is applied event by event. The email is found by ' +
      "`smtp-id` (its Message-ID) or `sg_message_id` (the id SendGrid's SMTP reply named). `bounce` -> hard bounce; `bounce` of type " +
      '`blocked` and `deferred` -> transient, not counted; `dropped` -> BOUNCED, the address suppressed when the reason is about it.',
    maxBytes: MAX_BATCH_BODY,
    receive: (ctx, body, { publicKey }) => {
      verifySendgrid(header(ctx), body, publicKey, tolerance);
      return { events: readSendgridEvents(body) };
    },
  });

  receiver('mailgun', {
    summary: "Mailgun's webhooks: delivery reports",
    description:
      "Add this URL to the sending domain's webhooks in Mailgun (Delivered, Permanent Failure, Temporary Failure, Spam Complaints, " +
      "Unsubscribes) and set MAILGUN_WEBHOOK_SIGNING_KEY to the account's HTTP webhook signing key. The body's `signature` must verify " +
      '(HMAC-SHA256 of timestamp and token); its token is spent once: a second request with it is a `duplicate`. The email is found by ' +
      '`message.headers.message-id`. `failed` with severity `permanent` -> hard bounce, `temporary` -> soft bounce.',
    maxBytes: MAX_EVENT_BODY,
    receive: (_ctx, body, { signingKey }) => {
      const { signature, eventData } = readMailgunBody(body);
      verifyMailgun(signature, signingKey, tolerance);
      return { events: [readMailgunEvent(eventData)], replayKeys: [`token:${signature.token}`] };
    },
  });

  receiver('postmark', {
    summary: "Postmark's webhooks: delivery reports",
    description:
      "Add this URL as a webhook of the Postmark server's message stream (Delivery, Bounce, Spam Complaint, Subscription Change; include " +
      'bounce content for the Message-ID), with HTTP Basic credentials: POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD. The email is ' +
      "found by `MessageID` (the id Postmark's SMTP reply named) or by our Message-ID in a bounce's content. Bounce `Type`: HardBounce, " +
      'BadEmailAddress -> hard bounce; SoftBounce, Transient, DnsError -> soft bounce; SpamComplaint -> complaint; Unsubscribe and a ' +
      'SubscriptionChange that suppresses sending -> unsubscribe; AutoResponder and other non-bounces are ignored; the rest (Blocked, ' +
      'DMARCPolicy, ...) -> transient, not counted. Postmark signs nothing, so no timestamp is checked.',
    maxBytes: MAX_EVENT_BODY,
    receive: (ctx, body, credentials) => {
      verifyPostmark(ctx.get('authorization') || undefined, credentials);
      return { events: [readPostmarkRecord(body)] };
    },
  });

  receiver('resend', {
    summary: "Resend's webhooks: delivery reports",
    description:
      'Add this URL as a webhook in Resend (email.delivered, email.bounced, email.complained, email.delivery_delayed) and set ' +
      'RESEND_WEBHOOK_SECRET to its signing secret (`whsec_...`). Every request must carry a valid Standard Webhooks signature ' +
      '(`svix-id`, `svix-timestamp`, `svix-signature`). The email is found by its Message-ID among `data.headers` or by `data.email_id` ' +
      "(the id Resend's SMTP reply named). `email.bounced` -> hard bounce unless its `bounce.type` is Transient (soft bounce) or " +
      'Undetermined; `email.delivery_delayed` -> transient, not counted.',
    maxBytes: MAX_EVENT_BODY,
    receive: (ctx, body, { secret }) => {
      const id = verifyStandardWebhook(header(ctx), body, secret, tolerance);
      return { events: [readResendEvent(body, id)] };
    },
  });
}
