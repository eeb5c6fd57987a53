import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { IDEMPOTENCY_KEY, MAX_RECIPIENTS, SendBody, SendResponse } from './schema';
import { errorResponses } from '../common.schema';
import { acceptSend, storedSend, type AcceptedEmail } from '../../domain/emails/send.service';
import { withIdempotency } from '../../domain/idempotency/idempotency';
import { badRequest } from '../../domain/errors';
import type { Address } from '../../domain/emails/email.entity';
import { billingGuard } from '../billing/guard';

function toAddress(v: string | { name?: string; email: string }): Address {
  return typeof v === 'string' ? { email: v } : { email: v.email, name: v.name };
}

export function sendRoutes(routes: Routes, deps: ApiDeps): void {
  const billing = billingGuard(deps);
  routes.add({
    method: 'post',
    path: '/v1/send',
    summary: 'Send an email',
    description: [
      'Each recipient is processed in sequence: it is upserted as a contact (new contacts are unsubscribed unless `subscribed` says otherwise) ',
      `and gets its own rendered email. At most ${MAX_RECIPIENTS} recipients per call.`,
      '\n\n`template` uses a template\'s subject, body, sender and reply-to; explicit `subject`, `body`, `from` and `reply` override them. ',
      'The email is MARKETING when its template is, otherwise TRANSACTIONAL: transactional mail reaches unsubscribed contacts, marketing mail ',
      'is never sent to them (checked when it is sent; such an email ends CANCELLED) and carries `List-Unsubscribe` (https and mailto) and ',
      '`List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058).',
      '\n\nRendering: Liquid over the contact\'s data, the call\'s `data` (`{ value, persistent: false }` values are used for this call only) ',
      'and `id`, `email`, `unsubscribeUrl`, `subscribeUrl`, `manageUrl`, `mailwright_id`, `mailwright_email`. `{{ name ?? Default }}` gives a ',
      'default; unknown variables render empty. A body starting with `<mjml>` is compiled to responsive HTML; every email also gets a plain-text part.',
      '\n\nTracking: links are rewritten to signed redirects and an open pixel is added, per the project settings; `tracking` overrides them.',
      '\n\nAttachments: at most 10, 10 MB decoded in total (MAX_ATTACHMENTS_SIZE), whole message at most 40 MB (MAX_MESSAGE_SIZE); ',
      'an inline attachment with `contentId` is referenced as `cid:<contentId>`.',
      '\n\n`Idempotency-Key` header (optional, at most 255 printable characters): a retry with the same key and body within 24 hours returns ',
      'the first response (with `Idempotent-Replayed: true`) and sends nothing; the same key with a different body is 409 `IDEMPOTENCY_KEY_MISMATCH`, ',
      'and while the first request is in flight 409 `IDEMPOTENCY_KEY_IN_USE`.',
      '\n\nBilling caps: a call whose recipients would pass the emails (or contacts) cap of the project is refused whole with 402 `BILLING_LIMIT_EXCEEDED`, nothing stored.',
      '\n\nThe call returns once the emails are stored and their delivery workflow has started.',
      '\n\nSuppressed addresses: a recipient on the project\'s suppression list (GET /suppressions) is still upserted as a contact, and its ',
      'email is stored with the final status SUPPRESSED (`error` says why) and never sent; its item answers `status: "SUPPRESSED"` and ',
      '`suppression.reason`. The call succeeds for the other recipients; an item without suppression answers `status: "QUEUED"`.',
    ].join(''),
    tags: ['Public API'],
    auth: 'secret',
    ownTransactions: 'Batched: accepted emails share an intake round (domain/emails/email-intake.ts) that stores and starts them as one unit',
    body: SendBody,
    bodyLimit: deps.config.limits.sendBody,
    responses: { 200: { description: 'Accepted for delivery', schema: SendResponse }, ...errorResponses(400, 401, 402, 403, 404, 409, 413, 422, 503) },
    handler: async ({ ctx, body, principal }) => {
      const key = ctx.get('idempotency-key') || undefined;
      if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) {
        throw badRequest('Invalid Idempotency-Key header', 'Use at most 255 printable ASCII characters, e.g. a UUID.');
      }
      const item = (a: AcceptedEmail) => ({
        contact: { id: a.contactId, email: a.contactEmail },
        email: a.emailId,
        status: a.suppressed ? ('SUPPRESSED' as const) : ('QUEUED' as const),
        ...(a.suppressed ? { suppression: { reason: a.suppressed } } : {}),
      });
      const respond = (accepted: AcceptedEmail[]) => ({ success: true as const, data: { emails: accepted.map(item), timestamp: new Date().toISOString() } });
      type Response = ReturnType<typeof respond>;
      // The response reserved before the store cannot know which addresses the store found suppressed: a replay of it
      // (its request's process died after storing) takes that from the stored emails.
      const stored = async (reserved: Response): Promise<Response | undefined> => {
        const found = await storedSend(ctx.state.em, reserved.data.emails.map((e) => e.email));
        if (found.size === 0) return undefined;
        const emails = reserved.data.emails.map((e) => {
          const s = found.get(e.email);
          if (!s?.suppressed) return e;
          return { ...e, status: 'SUPPRESSED' as const, ...(s.reason ? { suppression: { reason: s.reason } } : {}) };
        });
        return { ...reserved, data: { ...reserved.data, emails } };
      };
      const result = await withIdempotency(ctx.state.em, { projectId: principal.projectId, key, body, stored }, async (reserve) => {
        const from = body.from === undefined ? undefined : toAddress(body.from);
        if (from && !from.name && body.name) from.name = body.name;
        const accepted = await acceptSend(
          ctx.state.em,
          { intake: deps.intake, contacts: deps.contactIntake, domainCache: deps.caches.domains, templateCache: deps.caches.templates, limits: deps.config.limits, billing },
          {
            projectId: principal.projectId,
            settings: principal.settings,
            to: (Array.isArray(body.to) ? body.to : [body.to]).map(toAddress),
            templateId: body.template,
            from,
            replyTo: body.reply,
            subject: body.subject,
            body: body.body,
            subscribed: body.subscribed,
            data: body.data,
            headers: body.headers,
            attachments: body.attachments,
            tracking: body.tracking,
          },
          // With an Idempotency-Key, the response is reserved before the emails are stored: a retry after this process
          // dies replays it if they were stored, and sends them again only if they were not.
          { beforeStore: (beforeStore) => reserve(respond(beforeStore)) },
        );
        return { status: 200, body: respond(accepted) };
      });
      if (result.replayed) ctx.set('Idempotent-Replayed', 'true');
      return { status: result.status, body: result.body };
    },
  });
}
