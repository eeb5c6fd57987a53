import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { IdParams, errorResponses } from '../common.schema';
import {
  BillingConsumptionSchema,
  BillingLimitsSchema,
  CheckoutBody,
  CheckoutSchema,
  InvoiceListSchema,
  InvoicesQuery,
  PortalSchema,
  StripeWebhookBody,
  StripeWebhookResult,
  UpdateBillingLimitsBody,
} from './schema';
import { getUser } from '../../domain/users/user.service';
import { billingDisabled, stripeBillingFor, type StripeBilling } from '../../domain/billing/stripe-billing';
import { billingPeriod, billingState, consumption, effectiveCaps, planCaps, setOwnCaps, type Caps } from '../../domain/billing/billing.service';
import { iso } from '../presenters/time';

const TAGS = ['Billing'];
const MAX_STRIPE_BODY = 512 * 1024;
const DISABLED = 'Without STRIPE_SECRET_KEY: 409 `BILLING_DISABLED`.';

const remaining = (limit: number | null, used: number) => (limit === null ? null : Math.max(0, limit - used));

export function billingRoutes(routes: Routes, deps: ApiDeps): void {
  const billing = deps.config.billing;
  const stripe = stripeBillingFor(billing);
  const requireStripe = (): StripeBilling => stripe ?? (() => { throw billingDisabled(); })();

  routes.add({
    method: 'get',
    path: '/users/@me/projects/:id/billing-limits',
    summary: "The project's plan and caps per category",
    description:
      'Caps: emails per billing period (the calendar month, UTC), contacts at any time, tracked events per period; null: no cap. ' +
      "Enforced (`effective`): per category the lower of the plan's cap (BILLING_PLANS) and the project's own (`limits`, set with PUT). " +
      'A request that would pass one is refused with 402 `BILLING_LIMIT_EXCEEDED` before anything is done.',
    tags: TAGS,
    auth: 'session',
    permission: 'project.read',
    params: IdParams,
    responses: { 200: { description: 'Plan and caps', schema: BillingLimitsSchema }, ...errorResponses(401, 403, 404) },
    handler: async ({ ctx, params, member }) => {
      const { project } = await member(params.id);
      return { body: await limitsView(ctx.state.em, project.id) };
    },
  });

  routes.add({
    method: 'put',
    path: '/users/@me/projects/:id/billing-limits',
    summary: "Set the project's own caps",
    description:
      'A key left out keeps its cap, null removes it, 0 refuses every request of the category. The plan\'s caps still apply ' +
      '(the lower cap is enforced). Takes effect at once in every API process.',
    tags: TAGS,
    auth: 'session',
    permission: 'project.update',
    params: IdParams,
    body: UpdateBillingLimitsBody,
    responses: { 200: { description: 'Plan and caps as now set', schema: BillingLimitsSchema }, ...errorResponses(401, 403, 404, 422) },
    handler: async ({ ctx, params, body, member, afterCommit }) => {
      const { project } = await member(params.id);
      const { own } = await billingState(ctx.state.em, billing, project.id);
      await setOwnCaps(ctx.state.em, project.id, { emails: body.emails === undefined ? own.emails : body.emails, contacts: body.contacts === undefined ? own.contacts : body.contacts, events: body.events === undefined ? own.events : body.events });
      afterCommit(() => deps.caches?.billing?.forgetProject(project.id));
      return { body: await limitsView(ctx.state.em, project.id) };
    },
  });

  routes.add({
    method: 'get',
    path: '/users/@me/projects/:id/billing-consumption',
    summary: 'Consumption in the current billing period, against the caps',
    description:
      'From the hourly rollups and the contact counters (no scan): emails sent (`email.sent`, and campaign sends) and tracked events ' +
      'in the calendar month (UTC), and contacts now. The rollups follow the event outbox, so a send or an event shows within seconds.',
    tags: TAGS,
    auth: 'session',
    permission: 'project.read',
    params: IdParams,
    responses: { 200: { description: 'Consumption', schema: BillingConsumptionSchema }, ...errorResponses(401, 403, 404) },
    handler: async ({ ctx, params, member }) => {
      const { project } = await member(params.id);
      const [used, view] = await Promise.all([consumption(ctx.state.em, project.id), limitsView(ctx.state.em, project.id)]);
      const caps = view.effective;
      return {
        body: {
          period: { start: iso(used.period.start), end: iso(used.period.end) },
          emails: { used: used.emails.sent, pending: used.emails.pending, limit: caps.emails, remaining: remaining(caps.emails, used.emails.sent + used.emails.pending) },
          contacts: { used: used.contacts, limit: caps.contacts, remaining: remaining(caps.contacts, used.contacts) },
          events: { used: used.events, limit: caps.events, remaining: remaining(caps.events, used.events) },
        },
      };
    },
  });

  routes.add({
    method: 'get',
    path: '/users/@me/projects/:id/billing-invoices',
    summary: "The project's invoices from Stripe, newest first",
    description: `Cursor pages (\`cursor\`: the last invoice id of the previous page). Empty until the project has a Stripe customer. ${DISABLED}`,
    tags: TAGS,
    auth: 'session',
    permission: 'project.read',
    params: IdParams,
    query: InvoicesQuery,
    responses: { 200: { description: 'Invoices', schema: InvoiceListSchema }, ...errorResponses(401, 403, 404, 409, 422, 503) },
    handler: async ({ ctx, params, query, member }) => {
      const stripeBilling = requireStripe();
      const { project } = await member(params.id);
      const page = await stripeBilling.invoices(ctx.state.em, project.id, { limit: query.limit, cursor: query.cursor });
      const data = page.data.map((i) => ({ ...i, created: iso(i.created), periodStart: iso(i.periodStart), periodEnd: iso(i.periodEnd) }));
      return { body: { ...page, data } };
    },
  });

  routes.add({
    method: 'post',
    path: '/users/@me/projects/:id/checkout',
    summary: 'A Stripe Checkout session subscribing the project to a plan',
    description:
      'Creates the project\'s Stripe customer on first use. The plan (and its caps) applies when Stripe reports the payment ' +
      `(\`checkout.session.completed\` on POST /webhooks/incoming/stripe). Stripe sends the browser back to BILLING_RETURN_URL. ${DISABLED}`,
    tags: TAGS,
    auth: 'session',
    ownTransactions: 'Calls Stripe, which must not hold a pooled connection open; its one write (the customer id, idempotent) commits alone',
    permission: 'project.update',
    params: IdParams,
    body: CheckoutBody,
    responses: { 200: { description: 'The session', schema: CheckoutSchema }, ...errorResponses(401, 403, 404, 409, 422, 503) },
    handler: async ({ ctx, params, body, userId, member }) => {
      const stripeBilling = requireStripe();
      const { project } = await member(params.id);
      const user = await getUser(ctx.state.em, userId);
      return { body: await stripeBilling.checkout(ctx.state.em, project, body.plan, user.email) };
    },
  });

  routes.add({
    method: 'post',
    path: '/users/@me/projects/:id/billing-portal',
    summary: "A session of Stripe's billing portal for the project",
    description: `Payment methods, invoices, plan changes and cancellation happen there; changes come back through the webhook. ${DISABLED}`,
    tags: TAGS,
    auth: 'session',
    ownTransactions: 'Calls Stripe, which must not hold a pooled connection open; its one write (the customer id, idempotent) commits alone',
    permission: 'project.update',
    params: IdParams,
    responses: { 200: { description: 'The session', schema: PortalSchema }, ...errorResponses(401, 403, 404, 409, 503) },
    handler: async ({ ctx, params, userId, member }) => {
      const stripeBilling = requireStripe();
      const { project } = await member(params.id);
      const user = await getUser(ctx.state.em, userId);
      return { body: await stripeBilling.portal(ctx.state.em, project, user.email) };
    },
  });

  routes.add({
    method: 'post',
    path: '/webhooks/incoming/stripe',
    summary: "Stripe's webhook: plan changes (internal receiver)",
    description:
      'Verified with STRIPE_WEBHOOK_SECRET over the raw body (`Stripe-Signature`; 403 `INVALID_SIGNATURE` otherwise). ' +
      '`checkout.session.completed` and `customer.subscription.created|updated` set the plan (by the subscription\'s price), ' +
      '`customer.subscription.deleted` (or a subscription no longer active, trialing or past due) returns the project to BILLING_DEFAULT_PLAN. ' +
      `An event older than the last one applied changes nothing. Other events are acknowledged and ignored. ${DISABLED}`,
    tags: ['Webhooks'],
    auth: 'none',
    body: StripeWebhookBody,
    rawBody: { maxBytes: MAX_STRIPE_BODY },
    responses: { 200: { description: 'Received', schema: StripeWebhookResult }, ...errorResponses(403, 409, 413) },
    handler: async ({ ctx, body }) => {
      const stripeBilling = requireStripe();
      const result = await stripeBilling.webhook(ctx.state.em, body, ctx.get('stripe-signature') || undefined);
      return { body: { received: true as const, ...result } };
    },
  });

  async function limitsView(em: Parameters<typeof billingState>[0], projectId: string) {
    const state = await billingState(em, billing, projectId);
    const plan: Caps = planCaps(billing, state.plan);
    const period = billingPeriod();
    return {
      plan: state.plan,
      planLimits: plan,
      limits: state.own,
      effective: effectiveCaps(plan, state.own),
      period: { start: iso(period.start), end: iso(period.end) },
      billingEnabled: Boolean(stripe),
      subscription: state.stripeSubscriptionId || state.subscriptionStatus ? { id: state.stripeSubscriptionId, status: state.subscriptionStatus } : null,
    };
  }
}
