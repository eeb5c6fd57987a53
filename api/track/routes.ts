import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { TrackBody, TrackResponse } from './schema';
import { errorResponses } from '../common.schema';

export function trackRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'post',
    path: '/v1/track',
    summary: 'Track an event for a contact (public or secret key)',
    description:
      'Creates or updates the contact (new contacts are subscribed unless `subscribed` is false), then records the event. ' +
      'Tracking the same event again records a new event (no idempotency). Reserved names are refused with the field error code `reserved_event`.',
    tags: ['Public API'],
    auth: 'public',
    body: TrackBody,
    responses: { 200: { description: 'Recorded', schema: TrackResponse }, ...errorResponses(400, 401, 403, 413, 422) },
    handler: async ({ body, principal }) => {
      const r = await deps.contactIntake.track(principal.projectId, body);
      return { body: { success: true, data: { contact: r.contactId, event: r.eventId, timestamp: new Date(r.timestamp).toISOString() } } };
    },
  });
}
