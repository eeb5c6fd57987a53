import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { SnsBody, SnsResult } from './schema';
import { parseSnsMessage, SnsVerifier } from '../../domain/webhooks/sns';
import { applySesReport, parseSesReport } from '../../domain/webhooks/ses-reports';

/** SNS messages are at most 256 KB; JSON escaping of the inner message can roughly double that. */
const MAX_SNS_BODY = 1024 * 1024;

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
}
