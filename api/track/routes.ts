import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { TrackBody, TrackResponse } from './schema';
import { errorResponses } from '../common.schema';
import { billingGuard } from '../billing/guard';

export function trackRoutes(routes: Routes, deps: ApiDeps): void {
  const billing = billingGuard(deps);
  routes.add({
    method: 'post',
    path: '/v1/track',
    summary: 'Track an event for a contact (public or secret key)',
    description:
      'Creates or updates the contact (new contacts are subscribed unless `subscribed` is false), then records the event. ' +
      'Tracking the same event again records a new event (no idempotency). Reserved names are refused with the field error code `reserved_event`. Past the project\'s events cap (or its contacts cap, for a new address): 402 `BILLING_LIMIT_EXCEEDED`.',
    tags: ['Public API'],
    auth: 'public',
    ownTransactions: 'Batched: requests share an intake round (domain/contacts/contact-intake.ts), committed per round',
    body: TrackBody,
    responses: { 200: { description: 'Recorded', schema: TrackResponse }, ...errorResponses(400, 401, 402, 403, 413, 422) },
    handler: async ({ ctx, body, principal }) => {
      await billing.assertTrack(ctx.state.em, principal.projectId, body.email);
      const r = await deps.contactIntake.track(principal.projectId, body);
      return { body: { success: true, data: { contact: r.contactId, event: r.eventId, timestamp: new Date(r.timestamp).toISOString() } } };
    },
  });
}
