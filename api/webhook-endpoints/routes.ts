import type { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses, IdParams } from '../common.schema';
import { cursorListSchema } from '../presenters/contact.presenter';
import { WebhookDeliverySchema, WebhookEndpointSchema, WebhookEndpointWithSecretSchema, presentDelivery, presentEndpoint } from '../presenters/webhook-endpoint.presenter';
import { registerWebhookPayloads } from './payloads';
import { CreateWebhookEndpointBody, DeliveryParams, ListWebhookDeliveriesQuery, ListWebhookEndpointsQuery, ReplayParams, ReplayWebhookEventsBody, UpdateWebhookEndpointBody, WebhookReplaySchema, WebhookReplayStatusSchema } from './schema';
import { MAX_REPLAY_RANGE_MS, prepareReplay, replayDeliveryCounts } from '../../domain/webhook-endpoints/webhook-replay';
import { workflowIds } from '../../temporal/workflow-ids';
import { SecretBox } from '../../domain/domains/secret-box';
import { sql } from '../../domain/db/sql';
import { notFound, serviceUnavailable } from '../../domain/errors';
import { webhookIdOf } from '../../domain/webhook-endpoints/standard-webhooks';
import {
  SECRET_ROTATION_GRACE_MS,
  createEndpoint,
  createTestDelivery,
  deleteEndpoint,
  getEndpoint,
  listDeliveries,
  listEndpoints,
  retryDelivery,
  rotateEndpointSecret,
  updateEndpoint,
  type AddressPolicy,
} from '../../domain/webhook-endpoints/webhook-endpoint.service';

const TAGS = ['Webhook endpoints'];

/** A call to Temporal; without Temporal, a 503 that says what was done and what to do (by default: a delivery, stored). */
async function temporalOr503<T>(
  call: () => Promise<T>,
  message = 'The delivery is stored but could not be started (Temporal is unavailable); send it with POST .../deliveries/:deliveryId/retry',
): Promise<T> {
  try {
    return await call();
  } catch {
    throw serviceUnavailable(message);
  }
}

/**
 * The project's own receivers of its events (README › Webhooks out), under `/webhook-endpoints`: `/webhooks/...` is
 * where providers post to us. Deliveries are made by the worker (the `webhooks-out` outbox consumer and the
 * `webhook-delivery` workflows); the test and retry routes store a delivery and start its workflow once committed.
 */
export function webhookEndpointRoutes(routes: Routes, deps: ApiDeps): void {
  const box = new SecretBox(deps.config.appSecret);
  const policy: AddressPolicy = {
    allowPrivateNetworks: deps.config.automations.webhookAllowPrivateNetworks,
    allowedNetworks: deps.config.automations.webhookAllowedNetworks,
  };
  const graceHours = SECRET_ROTATION_GRACE_MS / 3_600_000;
  registerWebhookPayloads(routes.registry);

  routes.add({
    method: 'post',
    path: '/webhook-endpoints',
    summary: "Add a receiver of the project's events",
    description:
      'The answer carries the signing `secret` (`whsec_...`), shown this once. The URL must be https (http only for an internal receiver the ' +
      'SSRF guard of WEBHOOK steps allows); an address that is not public is refused, here for an IP literal, at each call for a name.',
    tags: TAGS,
    auth: 'secret',
    body: CreateWebhookEndpointBody,
    responses: { 201: { description: 'Created, with its secret', schema: WebhookEndpointWithSecretSchema }, ...errorResponses(401, 422) },
    handler: async ({ ctx, body, principal }) => {
      const { secret, ...row } = await createEndpoint(ctx.state.em, box, policy, principal.projectId, body);
      return { status: 201, body: { ...presentEndpoint(row), secret } };
    },
  });

  routes.add({
    method: 'get',
    path: '/webhook-endpoints',
    summary: 'List webhook endpoints, newest first (cursor pagination)',
    tags: TAGS,
    auth: 'secret',
    query: ListWebhookEndpointsQuery,
    responses: { 200: { description: 'A page', schema: cursorListSchema(WebhookEndpointSchema, 'WebhookEndpointList') }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => {
      const page = await listEndpoints(ctx.state.em, principal.projectId, query);
      return { body: { ...page, data: page.data.map(presentEndpoint) } };
    },
  });

  routes.add({
    method: 'get',
    path: '/webhook-endpoints/:id',
    summary: 'Get a webhook endpoint',
    tags: TAGS,
    auth: 'secret',
    params: IdParams,
    responses: { 200: { description: 'The endpoint', schema: WebhookEndpointSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentEndpoint(await getEndpoint(sql(ctx.state.em), principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/webhook-endpoints/:id',
    summary: 'Change a webhook endpoint (URL, event types, description, enabled)',
    description: 'Enabling an endpoint (again) clears its failure streak and `disabledReason`. Deliveries of a disabled endpoint end CANCELLED.',
    tags: TAGS,
    auth: 'secret',
    params: IdParams,
    body: UpdateWebhookEndpointBody,
    responses: { 200: { description: 'The endpoint after the change', schema: WebhookEndpointSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, body, principal }) => ({ body: presentEndpoint(await updateEndpoint(ctx.state.em, policy, principal.projectId, params.id, body)) }),
  });

  routes.add({
    method: 'delete',
    path: '/webhook-endpoints/:id',
    summary: 'Delete a webhook endpoint and its deliveries',
    tags: TAGS,
    auth: 'secret',
    params: IdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      await deleteEndpoint(ctx.state.em, principal.projectId, params.id);
      return {};
    },
  });

  routes.add({
    method: 'post',
    path: '/webhook-endpoints/:id/rotate-secret',
    summary: 'Replace the signing secret',
    description: `The new secret is shown this once. For ${graceHours} hours the previous one signs too: \`webhook-signature\` carries a \`v1,\` entry for each.`,
    tags: TAGS,
    auth: 'secret',
    params: IdParams,
    responses: { 200: { description: 'The endpoint with its new secret', schema: WebhookEndpointWithSecretSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      const { secret, ...row } = await rotateEndpointSecret(ctx.state.em, box, principal.projectId, params.id);
      return { body: { ...presentEndpoint(row), secret } };
    },
  });

  routes.add({
    method: 'get',
    path: '/webhook-endpoints/:id/deliveries',
    summary: "An endpoint's deliveries with their attempts, newest first (cursor pagination)",
    description:
      "A contact's deliveries are attempted one at a time in the order they were made: one PENDING behind an earlier PENDING delivery of the same " +
      'contact has no new attempt until that one succeeded or ended (README › Webhooks out › Order).',
    tags: TAGS,
    auth: 'secret',
    params: IdParams,
    query: ListWebhookDeliveriesQuery,
    responses: { 200: { description: 'A page', schema: cursorListSchema(WebhookDeliverySchema, 'WebhookDeliveryList') }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, query, principal }) => {
      const page = await listDeliveries(ctx.state.em, principal.projectId, params.id, query);
      return { body: { ...page, data: page.data.map((d) => presentDelivery(d, webhookIdOf(d.id))) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/webhook-endpoints/:id/test',
    summary: 'Send a `webhook.test` event to the endpoint',
    description: 'Stored as a delivery (listed with the others) and sent at once, with the retries of any delivery; a disabled endpoint\'s ends CANCELLED.',
    tags: TAGS,
    auth: 'secret',
    params: IdParams,
    responses: { 202: { description: 'The delivery, on its way', schema: WebhookDeliverySchema }, ...errorResponses(401, 404, 422, 503) },
    handler: async ({ ctx, params, principal, afterCommit }) => {
      const d = await createTestDelivery(ctx.state.em, principal.projectId, params.id);
      afterCommit(() => temporalOr503(() => deps.temporal.startWebhookDelivery({ projectId: principal.projectId, endpointId: params.id, deliveryIds: [d.id] })));
      return { status: 202, body: presentDelivery(d, webhookIdOf(d.id)) };
    },
  });

  routes.add({
    method: 'post',
    path: '/webhook-endpoints/:id/replay',
    summary: "Send the project's events of a time range to the endpoint again",
    description:
      `Every event of the project recorded in [from, to) (at most ${MAX_REPLAY_RANGE_MS / 86_400_000} days) whose type the endpoint wants now is queued, in recorded order, by a ` +
      '`webhook-replay/<endpointId>/<replayId>` workflow: a delivery where the endpoint has none for the event (a new `webhook-id`), the existing one ' +
      'sent again where it ended FAILED or CANCELLED (the same `webhook-id`); one that is PENDING or SUCCEEDED is left as it is, so repeating a replay ' +
      "sends nothing twice. The deliveries are listed and retried like any. A disabled endpoint's end CANCELLED: enable it first.",
    tags: TAGS,
    auth: 'secret',
    params: IdParams,
    body: ReplayWebhookEventsBody,
    responses: { 202: { description: 'The replay, on its way', schema: WebhookReplaySchema }, ...errorResponses(401, 404, 422, 503) },
    handler: async ({ ctx, params, body, principal, afterCommit }) => {
      const replay = await prepareReplay(ctx.state.em, principal.projectId, params.id, body);
      afterCommit(() => temporalOr503(() => deps.temporal.startWebhookReplay(replay), 'The replay could not be started (Temporal is unavailable); send the request again'));
      return {
        status: 202,
        body: { replayId: replay.replayId, endpointId: params.id, from: replay.from, to: replay.to, workflowId: workflowIds.webhookReplay(params.id, replay.replayId) },
      };
    },
  });

  routes.add({
    method: 'get',
    path: '/webhook-endpoints/:id/replays/:replayId',
    summary: 'The state of a replay and what it queued',
    description:
      "The replay's workflow state (from Temporal: RUNNING until every event of the range is read and queued, then COMPLETED), the events read and " +
      'deliveries queued so far, and those deliveries by their status now. The deliveries themselves are listed with the others (GET .../deliveries).',
    tags: TAGS,
    auth: 'secret',
    params: ReplayParams,
    responses: { 200: { description: 'The replay', schema: WebhookReplayStatusSchema }, ...errorResponses(401, 404, 422, 503) },
    handler: async ({ ctx, params, principal }) => {
      await getEndpoint(sql(ctx.state.em), principal.projectId, params.id);
      const run = await temporalOr503(
        () => deps.temporal.webhookReplayStatus({ endpointId: params.id, replayId: params.replayId }),
        "The replay's state could not be read (Temporal is unavailable); ask again later",
      );
      if (!run) throw notFound('Webhook replay');
      const { from, to, events, queued } = run.progress;
      return {
        body: {
          replayId: params.replayId,
          endpointId: params.id,
          from,
          to,
          workflowId: workflowIds.webhookReplay(params.id, params.replayId),
          state: run.state as z.infer<typeof WebhookReplayStatusSchema>['state'],
          events,
          queued,
          deliveries: await replayDeliveryCounts(ctx.state.em, params.id, params.replayId),
        },
      };
    },
  });

  routes.add({
    method: 'post',
    path: '/webhook-endpoints/:id/deliveries/:deliveryId/retry',
    summary: 'Send a delivery again',
    description: 'The same body under the same `webhook-id`, whatever the delivery\'s status, with a fresh round of retries. A disabled endpoint ends it CANCELLED.',
    tags: TAGS,
    auth: 'secret',
    params: DeliveryParams,
    responses: { 202: { description: 'The delivery, on its way again', schema: WebhookDeliverySchema }, ...errorResponses(401, 404, 422, 503) },
    handler: async ({ ctx, params, principal, afterCommit }) => {
      const d = await retryDelivery(ctx.state.em, principal.projectId, params.id, params.deliveryId);
      afterCommit(() =>
        temporalOr503(() => deps.temporal.startWebhookDelivery({ projectId: principal.projectId, endpointId: params.id, deliveryIds: [d.id], suffix: `retry/${ctx.state.requestId}` })),
      );
      return { status: 202, body: presentDelivery(d, webhookIdOf(d.id)) };
    },
  });
}
