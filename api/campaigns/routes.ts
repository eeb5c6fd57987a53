import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { cursorListSchema } from '../presenters/contact.presenter';
import { CampaignSchema, presentCampaign } from '../presenters/campaign.presenter';
import { CampaignSendStatsSchema, presentCampaignSendStats } from '../presenters/campaign-stats.presenter';
import {
  CampaignIdParams,
  CreateCampaignBody,
  PickWinnerBody,
  ListCampaignsQuery,
  ReplaceCampaignBody,
  SendCampaignBody,
  TestCampaignBody,
  TestCampaignResponse,
  UpdateCampaignBody,
} from './schema';
import {
  createCampaign,
  deleteCampaign,
  duplicateCampaign,
  getCampaign,
  listCampaigns,
  sendTestEmail,
  updateCampaign,
} from '../../domain/campaigns/campaign.service';
import { cancelCampaign, pauseCampaign, resumeCampaign, sendCampaign } from '../../domain/campaigns/campaign-steering';
import { getCampaignStats } from '../../domain/campaigns/campaign-stats';
import { getCampaignAbStats, pickWinner } from '../../domain/campaigns/campaign-ab';
import { billingGuard } from '../billing/guard';

const TAGS = ['Campaigns'];

// A body at the 512 KB cap must reach validation even when JSON escaping doubles it, whatever MAX_JSON_BODY is.
const CAMPAIGN_BODY_LIMIT = 2 * 1024 * 1024;

const CONTENT_RULES =
  'Content is `templateId` or both `subject` and `body`; with a template, an explicit `subject` or `body` overrides its own when the campaign is sent. ' +
  'Subject and body are Liquid (syntax errors: 422 `invalid_template`). `audienceType` SEGMENT requires `segmentId`, FILTERED requires `audienceFilter` ' +
  '(the filter language of segments); each is refused with another type (422 `invalid_combination`). A template or segment that is not the ' +
  "project's is 422 `not_found`. `from` must be on a VERIFIED domain of the project (403 DOMAIN_NOT_VERIFIED).";

const EDIT_RULES =
  'Only DRAFT and SCHEDULED campaigns can be changed (409 CAMPAIGN_NOT_EDITABLE); an edit that loses a race with another edit is 409 CONFLICT. ' +
  '`scheduledAt` moves a SCHEDULED campaign to another future time (on a DRAFT: 422 `not_scheduled`; in the past: 422 `in_past`).';

export function campaignRoutes(routes: Routes, deps: ApiDeps): void {
  const billing = billingGuard(deps);
  routes.add({
    method: 'get',
    path: '/campaigns',
    summary: 'List campaigns, newest first (cursor pagination)',
    description:
      '`status` filters by status, `search` matches a case-insensitive substring of the name. `audienceSize` in the list is the stored ' +
      'snapshot size (null before sending); GET /campaigns/:id counts a draft\'s audience.',
    tags: TAGS,
    auth: 'secret',
    query: ListCampaignsQuery,
    responses: { 200: { description: 'A page of campaigns', schema: cursorListSchema(CampaignSchema, 'CampaignList') }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => {
      const page = await listCampaigns(ctx.state.em, principal.projectId, query);
      return { body: { ...page, data: page.data.map(presentCampaign) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/campaigns',
    summary: 'Create a campaign (DRAFT)',
    description: CONTENT_RULES,
    tags: TAGS,
    auth: 'secret',
    body: CreateCampaignBody,
    bodyLimit: CAMPAIGN_BODY_LIMIT,
    responses: { 201: { description: 'Created, in DRAFT', schema: CampaignSchema }, ...errorResponses(401, 403, 413, 422) },
    handler: async ({ ctx, body, principal }) => ({ status: 201, body: presentCampaign(await createCampaign(ctx.state.em, principal.projectId, body)) }),
  });

  routes.add({
    method: 'get',
    path: '/campaigns/:id',
    summary: 'Get a campaign',
    description:
      'The campaign as stored: a read never asks Temporal. A run cancelled in Temporal records CANCELLED itself; one terminated there shows as ' +
      'FAILED once the email sweeper (every 5 minutes) has seen it. For a DRAFT or SCHEDULED campaign `audienceSize` is counted ' +
      'now (subscribed contacts the audience matches).',
    tags: TAGS,
    auth: 'secret',
    params: CampaignIdParams,
    responses: { 200: { description: 'Campaign', schema: CampaignSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentCampaign(await getCampaign(ctx.state.em, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'put',
    path: '/campaigns/:id',
    summary: 'Replace a campaign',
    description: `The body is the whole campaign: optional fields left out become null. ${CONTENT_RULES} ${EDIT_RULES}`,
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Stores the change, then signals the running workflow (campaign-steering.ts): the signal must see the committed row',
    params: CampaignIdParams,
    body: ReplaceCampaignBody,
    bodyLimit: CAMPAIGN_BODY_LIMIT,
    responses: { 200: { description: 'The campaign as stored', schema: CampaignSchema }, ...errorResponses(401, 403, 404, 409, 413, 422) },
    handler: async ({ ctx, params, body, principal }) => ({
      body: presentCampaign(await updateCampaign(ctx.state.em, deps.temporal, principal.projectId, params.id, body, { replace: true })),
    }),
  });

  routes.add({
    method: 'patch',
    path: '/campaigns/:id',
    summary: 'Update any subset of a campaign',
    description:
      'Absent fields stay; null clears an optional one. Changing `audienceType` drops the stored `segmentId` or `audienceFilter` the new type does not take. ' +
      `${CONTENT_RULES} ${EDIT_RULES}`,
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Stores the change, then signals the running workflow (campaign-steering.ts): the signal must see the committed row',
    params: CampaignIdParams,
    body: UpdateCampaignBody,
    bodyLimit: CAMPAIGN_BODY_LIMIT,
    responses: { 200: { description: 'The campaign as stored', schema: CampaignSchema }, ...errorResponses(401, 403, 404, 409, 413, 422) },
    handler: async ({ ctx, params, body, principal }) => ({
      body: presentCampaign(await updateCampaign(ctx.state.em, deps.temporal, principal.projectId, params.id, body, { replace: false })),
    }),
  });

  routes.add({
    method: 'delete',
    path: '/campaigns/:id',
    summary: 'Delete a campaign',
    description: '409 CAMPAIGN_ACTIVE while it is SCHEDULED, SENDING or PAUSED (cancel it first). The emails it sent stay (GET /emails/:id).',
    tags: TAGS,
    auth: 'secret',
    params: CampaignIdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 409, 422) },
    handler: async ({ ctx, params, principal }) => {
      await deleteCampaign(ctx.state.em, principal.projectId, params.id);
      return {};
    },
  });

  routes.add({
    method: 'post',
    path: '/campaigns/:id/duplicate',
    summary: 'Copy a campaign as a new DRAFT "<name> (copy)"',
    description: 'The copy has the same content, audience and settings, in any status of the original; no schedule, no send state, no stats.',
    tags: TAGS,
    auth: 'secret',
    params: CampaignIdParams,
    responses: { 201: { description: 'The new campaign', schema: CampaignSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ status: 201, body: presentCampaign(await duplicateCampaign(ctx.state.em, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/campaigns/:id/send',
    summary: 'Send a DRAFT now (SENDING) or at `scheduledFor` (SCHEDULED)',
    description:
      'The body is optional. Checks the content, the sender domain (403) and that the audience resolves (422); `scheduledFor` must be in the ' +
      'future (422 `in_past`). A campaign that is not a DRAFT is 409 CAMPAIGN_STATE (of two identical requests, one wins). The send is the ' +
      'Temporal workflow `campaign-send/<id>`; if Temporal is unreachable the campaign stays a DRAFT and the answer is 503. ' +
      "An audience that would take the project past its emails cap this month is refused whole (402 `BILLING_LIMIT_EXCEEDED`; the campaign stays a DRAFT).",
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Stores and starts its workflow as one unit (persistThenStart): the row commits before the start',
    params: CampaignIdParams,
    body: SendCampaignBody,
    responses: { 200: { description: 'The campaign, SENDING or SCHEDULED', schema: CampaignSchema }, ...errorResponses(401, 402, 403, 404, 409, 422, 503) },
    handler: async ({ ctx, params, body, principal }) => ({
      body: presentCampaign(await sendCampaign(ctx.state.em, deps.temporal, principal.projectId, params.id, { billing, ...(body.scheduledFor ? { scheduledFor: body.scheduledFor } : {}) })),
    }),
  });

  routes.add({
    method: 'post',
    path: '/campaigns/:id/pause',
    summary: 'Pause a SENDING campaign',
    description: 'Beyond SPEC. The send stops after the batch in progress; POST /campaigns/:id/resume continues it. Another status: 409 CAMPAIGN_STATE.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Stores the change, then signals the running workflow (campaign-steering.ts): the signal must see the committed row',
    params: CampaignIdParams,
    responses: { 200: { description: 'The campaign, PAUSED', schema: CampaignSchema }, ...errorResponses(401, 404, 409, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentCampaign(await pauseCampaign(ctx.state.em, deps.temporal, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/campaigns/:id/resume',
    summary: 'Resume a PAUSED campaign',
    description: 'Beyond SPEC. The rest of the audience snapshot is sent, each recipient once. Another status: 409 CAMPAIGN_STATE.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Stores the change, then signals the running workflow (campaign-steering.ts): the signal must see the committed row',
    params: CampaignIdParams,
    responses: { 200: { description: 'The campaign, SENDING', schema: CampaignSchema }, ...errorResponses(401, 404, 409, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentCampaign(await resumeCampaign(ctx.state.em, deps.temporal, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/campaigns/:id/cancel',
    summary: 'Cancel a SCHEDULED, SENDING or PAUSED campaign',
    description:
      'What was sent stays sent; the rest is not sent. The campaign becomes CANCELLED and its run is cancelled, as one unit: if Temporal is ' +
      'unreachable the answer is 503 and the campaign is unchanged (retry). Another status: 409 CAMPAIGN_STATE.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Records the cancel and tells Temporal as one unit (recordThenTell)',
    params: CampaignIdParams,
    responses: { 200: { description: 'The campaign, CANCELLED', schema: CampaignSchema }, ...errorResponses(401, 404, 409, 422, 503) },
    handler: async ({ ctx, params, principal }) => ({ body: presentCampaign(await cancelCampaign(ctx.state.em, deps.temporal, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/campaigns/:id/winner',
    summary: 'Pick the winning variant of an A/B-tested campaign',
    description:
      'Beyond SPEC. While the campaign sends its test shares or waits (SENDING or PAUSED) and no winner is decided: the variant (0 is A) is ' +
      'sent to the rest of the audience, in either after-test mode; the run records the decision (`abDecision`, decidedBy manual, with the ' +
      'numbers) and sends the remainder within seconds. A campaign without variants or a variant it does not have: 422. Decided already, or ' +
      'another status: 409 CAMPAIGN_STATE.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Stores the pick, then signals the running workflow (campaign-steering.ts): the signal must see the committed row',
    params: CampaignIdParams,
    body: PickWinnerBody,
    responses: { 200: { description: 'The campaign, its pick stored', schema: CampaignSchema }, ...errorResponses(401, 404, 409, 422) },
    handler: async ({ ctx, params, body, principal }) => ({ body: presentCampaign(await pickWinner(ctx.state.em, deps.temporal, principal.projectId, params.id, body.variant)) }),
  });

  routes.add({
    method: 'post',
    path: '/campaigns/:id/test',
    summary: 'Send one test message of the campaign to an address',
    description:
      'In any status. The subject starts with "[Test] " and the message has the header `X-Mailwright-Test: true`. It is rendered with the data ' +
      "of the project's contact with that address, if there is one (no contact is created or changed), is sent as transactional mail (it " +
      "reaches an unsubscribed contact too), tracks no opens or clicks, and counts in no campaign's stats. Needs sendable content (422) and " +
      'a verified sender domain (403). It counts toward the emails cap like any send: 402 BILLING_LIMIT_EXCEEDED at the cap. 503 when ' +
      'delivery cannot be queued. An address on the suppression list gets no message: the test email is stored SUPPRESSED and the answer says so.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Hands the test email to the email intake, which stores and starts it as one unit',
    params: CampaignIdParams,
    body: TestCampaignBody,
    responses: { 200: { description: 'The test email, queued for delivery', schema: TestCampaignResponse }, ...errorResponses(401, 402, 403, 404, 422, 503) },
    handler: async ({ ctx, params, body, principal }) => {
      const { suppressed, ...sent } = await sendTestEmail(ctx.state.em, deps.intake, principal.projectId, params.id, body.email, billing);
      return { body: { ...sent, status: suppressed ? ('SUPPRESSED' as const) : ('QUEUED' as const), ...(suppressed ? { suppression: { reason: suppressed } } : {}) } };
    },
  });

  routes.add({
    method: 'get',
    path: '/campaigns/:id/stats',
    summary: "A campaign's send, delivery, open, click, bounce, complaint and unsubscribe counts, and their rates",
    description:
      'Zeros before sending started. Engagement counts follow their events through the event outbox (usually well under a second). ' +
      'An A/B-tested campaign also has `abTest`: each variant\'s and the final send\'s counts, and the decision with its metric values, ' +
      'sample sizes and a pooled two-proportion z-test (within noise when p >= 0.05).',
    tags: TAGS,
    auth: 'secret',
    params: CampaignIdParams,
    responses: { 200: { description: 'Counters and rates', schema: CampaignSendStatsSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({
      body: presentCampaignSendStats(
        await getCampaignStats(ctx.state.em, principal.projectId, params.id),
        await getCampaignAbStats(ctx.state.em, principal.projectId, params.id),
      ),
    }),
  });
}
