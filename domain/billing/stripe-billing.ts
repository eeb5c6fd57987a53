import type { EntityManager } from '@mikro-orm/postgresql';
import Stripe from 'stripe';
import { AppError, conflict, validationError } from '../errors';
import { logger } from '../logger';
import { sql, statement } from '../db/sql';
import { billingState, type BillingConfig } from './billing.service';

type StripeSettings = NonNullable<BillingConfig['stripe']>;

/** 409 BILLING_DISABLED: what the Stripe routes answer on a deployment without STRIPE_SECRET_KEY. */
export const billingDisabled = () =>
  conflict('BILLING_DISABLED', 'Billing is not enabled on this deployment', 'Set STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET (README › Billing); caps work without them.');

/** The official client, pointed at STRIPE_API_URL when set (stripe-mock in tests). */
function stripeClient(settings: StripeSettings): Stripe {
  const config: Stripe.StripeConfig = { maxNetworkRetries: 1, timeout: 10_000, appInfo: { name: 'Mailwright' } };
  if (settings.apiUrl) {
    const url = new URL(settings.apiUrl);
    config.protocol = url.protocol === 'http:' ? 'http' : 'https';
    config.host = url.hostname;
    config.port = Number(url.port || (url.protocol === 'http:' ? 80 : 443));
  }
  return new Stripe(settings.secretKey, config);
}

/** Stripe's failures (refused, unreachable) as 503: nothing was changed on our side. */
async function callStripe<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof Stripe.errors.StripeError)) throw err;
    logger.warn({ err, type: err.type, code: err.code }, `stripe: ${what} failed`);
    throw new AppError(503, 'SERVICE_UNAVAILABLE', `Stripe could not ${what} (${err.type}); nothing was changed`);
  }
}

interface Invoice {
  id: string;
  number: string | null;
  status: string | null;
  currency: string;
  total: number;
  amountDue: number;
  amountPaid: number;
  created: Date;
  periodStart: Date;
  periodEnd: Date;
  hostedInvoiceUrl: string | null;
  invoicePdf: string | null;
}

const at = (seconds: number) => new Date(seconds * 1000);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Subscription states in which the plan paid for applies; any other (canceled, unpaid, ...) is the default plan. */
const PAYING = new Set(['active', 'trialing', 'past_due']);
const idOf = (v: string | { id: string } | null | undefined) => (typeof v === 'string' ? v : (v?.id ?? null));

/** A plan change from a webhook: for `projectId`, or the project of the Stripe customer. */
interface PlanChange {
  projectId: string | null;
  customer: string | null;
  plan: string;
  subscription: string | null;
  status: string | null;
  eventAt: Date;
}

const BILLING_CUSTOMER_PROJECT = statement('billing_customer_project', 'select project_id from project_billing where stripe_customer_id = $1');

const BILLING_APPLY_PLAN = statement(
  'billing_apply_plan',
  `insert into project_billing (project_id, plan, stripe_customer_id, stripe_subscription_id, subscription_status, stripe_event_at)
  select $1, $2, $3, $4, $5, $6 where exists (select 1 from projects where id = $1)
  on conflict (project_id) do update set plan = excluded.plan,
    stripe_customer_id = coalesce(project_billing.stripe_customer_id, excluded.stripe_customer_id),
    stripe_subscription_id = excluded.stripe_subscription_id, subscription_status = excluded.subscription_status,
    stripe_event_at = excluded.stripe_event_at, updated_at = now()
  where project_billing.stripe_event_at is null or project_billing.stripe_event_at <= excluded.stripe_event_at
  returning project_id`,
);

const BILLING_SET_CUSTOMER = statement(
  'billing_set_customer',
  `insert into project_billing (project_id, plan, stripe_customer_id) values ($1, $2, $3)
  on conflict (project_id) do update set stripe_customer_id = coalesce(project_billing.stripe_customer_id, excluded.stripe_customer_id), updated_at = now()
  returning stripe_customer_id as customer`,
);

/** Checkout, the billing portal, invoices and the webhook: Stripe through its official package. */
export class StripeBilling {
  private readonly stripe: Stripe;

  constructor(
    private readonly config: BillingConfig,
    private readonly settings: StripeSettings,
  ) {
    this.stripe = stripeClient(settings);
  }

  /** The project's Stripe customer, created on first use (idempotent per project on Stripe's side too). */
  private async customer(em: EntityManager, project: { id: string; name: string }, email?: string): Promise<string> {
    const state = await billingState(em, this.config, project.id);
    if (state.stripeCustomerId) return state.stripeCustomerId;
    const created = await callStripe('create the customer', () =>
      this.stripe.customers.create({ name: project.name, email, metadata: { projectId: project.id } }, { idempotencyKey: `mailwright-customer-${project.id}` }),
    );
    // A concurrent request may have stored one first: the stored one wins.
    const row = await sql(em).one<{ customer: string }>(
      BILLING_SET_CUSTOMER,
      [project.id, this.config.defaultPlan, created.id],
    );
    return row!.customer;
  }

  /** A Checkout session subscribing the project to `plan`; the plan applies when Stripe's webhook says it is paid. */
  async checkout(em: EntityManager, project: { id: string; name: string }, plan: string, email?: string): Promise<{ id: string; url: string | null }> {
    const price = this.config.plans[plan]?.price;
    if (!price) {
      const offered = Object.entries(this.config.plans).filter(([, p]) => p.price).map(([name]) => name);
      throw validationError([{ field: 'plan', message: `No plan "${plan}" to subscribe to; plans: ${offered.join(', ') || 'none'}`, code: 'unknown_plan' }]);
    }
    const customer = await this.customer(em, project, email);
    const back = `${this.config.returnUrl}?project=${encodeURIComponent(project.id)}`;
    const session = await callStripe('create the checkout session', () =>
      this.stripe.checkout.sessions.create({
        mode: 'subscription',
        customer,
        client_reference_id: project.id,
        line_items: [{ price, quantity: 1 }],
        metadata: { projectId: project.id, plan },
        subscription_data: { metadata: { projectId: project.id, plan } },
        success_url: `${back}&checkout=success`,
        cancel_url: `${back}&checkout=cancelled`,
      }),
    );
    return { id: session.id, url: session.url };
  }

  /** A billing portal session for the project's customer (created if it has none yet). */
  async portal(em: EntityManager, project: { id: string; name: string }, email?: string): Promise<{ url: string }> {
    const customer = await this.customer(em, project, email);
    const session = await callStripe('open the billing portal', () =>
      this.stripe.billingPortal.sessions.create({ customer, return_url: `${this.config.returnUrl}?project=${encodeURIComponent(project.id)}` }),
    );
    return { url: session.url };
  }

  /** The customer's invoices, newest first; none before the project has a customer. */
  async invoices(em: EntityManager, projectId: string, page: { limit: number; cursor?: string }): Promise<{ data: Invoice[]; hasMore: boolean; cursor: string | null }> {
    const { stripeCustomerId } = await billingState(em, this.config, projectId);
    if (!stripeCustomerId) return { data: [], hasMore: false, cursor: null };
    const list = await callStripe('list the invoices', () =>
      this.stripe.invoices.list({ customer: stripeCustomerId, limit: page.limit, ...(page.cursor ? { starting_after: page.cursor } : {}) }),
    );
    const data = list.data.map((i) => ({
      id: i.id!,
      number: i.number,
      status: i.status,
      currency: i.currency,
      total: i.total,
      amountDue: i.amount_due,
      amountPaid: i.amount_paid,
      created: at(i.created),
      periodStart: at(i.period_start),
      periodEnd: at(i.period_end),
      hostedInvoiceUrl: i.hosted_invoice_url ?? null,
      invoicePdf: i.invoice_pdf ?? null,
    }));
    return { data, hasMore: list.has_more, cursor: list.has_more ? (data.at(-1)?.id ?? null) : null };
  }

  /**
   * `POST /webhooks/incoming/stripe`: verifies the Stripe-Signature over the raw body (403 INVALID_SIGNATURE) and
   * applies the plan changes it carries. Returns whether the event changed a project.
   */
  async webhook(em: EntityManager, rawBody: string, signature: string | undefined): Promise<{ type: string; applied: boolean }> {
    let event: Stripe.Event;
    try {
      event = this.stripe.webhooks.constructEvent(rawBody, signature ?? '', this.settings.webhookSecret);
    } catch (err) {
      logger.warn({ err }, 'stripe webhook: signature refused');
      throw new AppError(403, 'INVALID_SIGNATURE', 'The Stripe-Signature header does not verify for this body');
    }
    const change = this.planChange(event);
    const applied = change ? await this.apply(em, change) : false;
    logger.info({ type: event.type, eventId: event.id, applied, plan: change?.plan }, 'stripe webhook');
    return { type: event.type, applied };
  }

  private planChange(event: Stripe.Event): PlanChange | undefined {
    const eventAt = at(event.created);
    if (event.type === 'checkout.session.completed') {
      const s = event.data.object;
      const plan = s.metadata?.plan;
      if (s.mode !== 'subscription' || !plan || !this.config.plans[plan]) return undefined;
      return { projectId: s.client_reference_id ?? s.metadata?.projectId ?? null, customer: idOf(s.customer), plan, subscription: idOf(s.subscription), status: 'active', eventAt };
    }
    if (event.type === 'customer.subscription.created' || event.type === 'customer.subscription.updated' || event.type === 'customer.subscription.deleted') {
      const sub = event.data.object;
      const base = { projectId: sub.metadata?.projectId ?? null, customer: idOf(sub.customer), status: sub.status, eventAt };
      if (event.type === 'customer.subscription.deleted' || !PAYING.has(sub.status)) return { ...base, plan: this.config.defaultPlan, subscription: null };
      // The price says the plan (a change in the billing portal changes the price, not the metadata).
      const price = sub.items.data[0]?.price.id;
      const plan = Object.entries(this.config.plans).find(([, p]) => p.price && p.price === price)?.[0] ?? sub.metadata?.plan;
      if (!plan || !this.config.plans[plan]) return undefined;
      return { ...base, plan, subscription: sub.id };
    }
    return undefined;
  }

  /** Sets the plan unless a later event was applied already (Stripe does not deliver in order). */
  private async apply(em: EntityManager, c: PlanChange): Promise<boolean> {
    const projectId = c.projectId && UUID.test(c.projectId) ? c.projectId : await this.projectOfCustomer(em, c.customer);
    if (!projectId) return false;
    const rows = await sql(em).query<{ project_id: string }>(
      BILLING_APPLY_PLAN,
      [projectId, c.plan, c.customer, c.subscription, c.status, c.eventAt],
    );
    return rows.length > 0;
  }

  private async projectOfCustomer(em: EntityManager, customer: string | null): Promise<string | undefined> {
    if (!customer) return undefined;
    const row = await sql(em).one<{ project_id: string }>(BILLING_CUSTOMER_PROJECT, [customer]);
    return row?.project_id;
  }
}

/** The Stripe side of billing when STRIPE_SECRET_KEY is set, else undefined (the routes answer BILLING_DISABLED). */
export const stripeBillingFor = (config: BillingConfig): StripeBilling | undefined => (config.stripe ? new StripeBilling(config, config.stripe) : undefined);
