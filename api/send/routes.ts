import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { SendBody, SendResponse } from './schema';
import { errorResponses } from '../common.schema';
import { acceptSend } from '../../domain/emails/send.service';
import type { Address } from '../../domain/emails/email.entity';

function toAddress(v: string | { name?: string; email: string }): Address {
  return typeof v === 'string' ? { email: v } : { email: v.email, name: v.name };
}

export function sendRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'post',
    path: '/v1/send',
    summary: 'Send a transactional email',
    description:
      'Each recipient is upserted as a contact (new contacts are unsubscribed unless `subscribed` says otherwise) and gets ' +
      `its own rendered email. The call returns once the emails are stored and their delivery workflow has started. At most 50 recipients per call.`,
    tags: ['Public API'],
    auth: 'secret',
    body: SendBody,
    bodyLimit: deps.config.limits.sendBody,
    responses: { 200: { description: 'Accepted for delivery', schema: SendResponse }, ...errorResponses(400, 401, 403, 413, 422, 503) },
    handler: async ({ ctx, body }) => {
      const recipients = (Array.isArray(body.to) ? body.to : [body.to]).map(toAddress);
      const from = toAddress(body.from);
      if (!from.name && body.name) from.name = body.name;
      const accepted = await acceptSend(ctx.state.em, { intake: deps.intake, contacts: deps.contactIntake, domainCache: deps.caches.domains }, {
        projectId: ctx.state.principal!.projectId,
        to: recipients,
        from,
        replyTo: body.reply,
        subject: body.subject,
        html: body.body,
        subscribed: body.subscribed,
        data: body.data,
        headers: body.headers,
      });
      return {
        body: {
          success: true,
          data: {
            emails: accepted.map((a) => ({ contact: { id: a.contactId, email: a.contactEmail }, email: a.emailId })),
            timestamp: new Date().toISOString(),
          },
        },
      };
    },
  });
}
