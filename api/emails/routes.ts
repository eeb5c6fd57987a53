import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { IdParams, errorResponses } from '../common.schema';
import { EmailSchema, presentEmail } from '../presenters/email.presenter';
import { getEmail } from '../../domain/emails/email.service';

export function emailRoutes(routes: Routes, _deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/emails/:id',
    summary: 'One email: its delivery status, SMTP reply, Message-ID, opens and clicks',
    description:
      'Statuses: QUEUED (accepted) -> SENDING (an attempt is under way) -> SENT (the relay accepted it) -> DELIVERED (a delivery report ' +
      'said so), or BOUNCED (a 5xx reply), FAILED (transient failures for longer than the retry window) or CANCELLED (marketing mail to ' +
      'a contact who unsubscribed before it was sent). The email.* events of the contact tell the same story with timestamps.',
    tags: ['Emails'],
    auth: 'secret',
    params: IdParams,
    responses: { 200: { description: 'The email', schema: EmailSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentEmail(await getEmail(ctx.state.em, principal.projectId, params.id)) }),
  });
}
