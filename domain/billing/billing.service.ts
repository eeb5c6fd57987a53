import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config';
import { AppError } from '../errors';
import { sql, statement } from '../db/sql';
import { ProjectScopedCache } from '../cache/lookup-cache';
import type { ChangeFeed } from '../cache/change-feed';
import { countContacts } from '../contacts/contact-counts';
import { normalizeEmail } from '../contacts/email-address';

export type BillingConfig = Config['billing'];

/** Per-category caps; null: no cap. Emails and events are per billing period, contacts at any time. */
export interface Caps {
  emails: number | null;
  contacts: number | null;
  events: number | null;
}
type CapCategory = keyof Caps;
const NO_CAPS: Caps = { emails: null, contacts: null, events: null };

/** The billing period: the calendar month (UTC) that contains `now`, from its first instant up to the next month's. */
export function billingPeriod(now = new Date()): { start: Date; end: Date } {
  return { start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)), end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)) };
}

interface BillingState {
  plan: string;
  /** The caps the project set itself. */
  own: Caps;
  stripeCustomerId: string | null;
  stripeSubscriptionId: string | null;
  subscriptionStatus: string | null;
}

interface BillingRow {
  plan: string;
  emails: string | null;
  contacts: string | null;
  events: string | null;
  customer: string | null;
  subscription: string | null;
  status: string | null;
}

const num = (v: string | number | null) => (v === null ? null : Number(v));

const BILLING_STATE = statement(
  'billing_state',
  `select plan, emails_per_month as emails, contacts, events_per_month as events, stripe_customer_id as customer,
         stripe_subscription_id as subscription, subscription_status as status
  from project_billing where project_id = $1`,
);

/** The project's billing row, or the default (default plan, no caps of its own, no customer). */
export async function billingState(em: EntityManager, config: BillingConfig, projectId: string): Promise<BillingState> {
  const row = await sql(em).one<BillingRow>(
    BILLING_STATE,
    [projectId],
  );
  if (!row) return { plan: config.defaultPlan, own: { ...NO_CAPS }, stripeCustomerId: null, stripeSubscriptionId: null, subscriptionStatus: null };
  return {
    plan: row.plan,
    own: { emails: num(row.emails), contacts: num(row.contacts), events: num(row.events) },
    stripeCustomerId: row.customer,
    stripeSubscriptionId: row.subscription,
    subscriptionStatus: row.status,
  };
}

/** The caps of a plan (BILLING_PLANS); a plan the configuration no longer names has none. */
export function planCaps(config: BillingConfig, plan: string): Caps {
  const p = config.plans[plan];
  return p ? { emails: p.emails, contacts: p.contacts, events: p.events } : { ...NO_CAPS };
}

/** What is enforced: per category the lower of the plan's cap and the project's own (null when neither caps it). */
export function effectiveCaps(plan: Caps, own: Caps): Caps {
  const lower = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.min(a, b));
  return { emails: lower(plan.emails, own.emails), contacts: lower(plan.contacts, own.contacts), events: lower(plan.events, own.events) };
}

/** The caps enforced for a project now, read without a cache (the worker's jobs read them once per run). */
export async function capsInForce(em: EntityManager, config: BillingConfig, projectId: string): Promise<Caps> {
  const state = await billingState(em, config, projectId);
  return effectiveCaps(planCaps(config, state.plan), state.own);
}

/** Sets the project's own caps (all three: null removes one). */
export async function setOwnCaps(em: EntityManager, projectId: string, caps: Caps): Promise<void> {
  await sql(em).run(
    `insert into project_billing (project_id, emails_per_month, contacts, events_per_month) values ($1, $2, $3, $4)
     on conflict (project_id) do update set emails_per_month = excluded.emails_per_month, contacts = excluded.contacts,
       events_per_month = excluded.events_per_month, updated_at = now()`,
    [projectId, caps.emails, caps.contacts, caps.events],
  );
}

interface Consumption {
  period: { start: Date; end: Date };
  /** Emails sent in the period (the `sent` rollup), and those of running or paused campaigns still to be sent. */
  emails: { sent: number; pending: number };
  /** Contacts now (the trigger-kept counters). */
  contacts: number;
  /** Tracked events recorded in the period (the per-name rollup, the service's own events left out). */
  events: number;
}

const BILLING_EMAILS_SENT = statement('billing_emails_sent', `select coalesce(sum(count), 0) as n from analytics_hourly where project_id = $1 and metric = 'sent' and hour >= $2 and hour < $3`);

/** Emails sent in the period, from the hourly rollup. */
async function emailsSent(em: EntityManager, projectId: string, period: { start: Date; end: Date }): Promise<number> {
  const row = await sql(em).one<{ n: string }>(
    BILLING_EMAILS_SENT,
    [projectId, period.start, period.end],
  );
  return Number(row!.n);
}

const BILLING_EMAILS_PENDING = statement(
  'billing_emails_pending',
  `select coalesce(sum(greatest(s.audience - s.sent - s.failed - s.skipped, 0)), 0) as n
  from campaigns c join campaign_stats s on s.campaign_id = c.id where c.project_id = $1 and c.status in ('SENDING', 'PAUSED')`,
);

/** Recipients of the project's SENDING and PAUSED campaigns not yet sent, failed or skipped (their counters row). */
async function emailsPending(em: EntityManager, projectId: string): Promise<number> {
  const row = await sql(em).one<{ n: string }>(
    BILLING_EMAILS_PENDING,
    [projectId],
  );
  return Number(row!.n);
}

const BILLING_EVENTS_TRACKED = statement('billing_events_tracked', `select coalesce(sum(count), 0) as n from event_name_hourly where project_id = $1 and not system and hour >= $2 and hour < $3`);

/** Tracked events in the period, from the per-name hourly rollup (service events are `system` there). */
async function eventsTracked(em: EntityManager, projectId: string, period: { start: Date; end: Date }): Promise<number> {
  const row = await sql(em).one<{ n: string }>(
    BILLING_EVENTS_TRACKED,
    [projectId, period.start, period.end],
  );
  return Number(row!.n);
}

/** The current period's consumption, from the rollups and the contact counters (no scan of emails or events). */
export async function consumption(em: EntityManager, projectId: string, now = new Date()): Promise<Consumption> {
  const period = billingPeriod(now);
  const [sent, pending, contacts, events] = await Promise.all([
    emailsSent(em, projectId, period),
    emailsPending(em, projectId),
    countContacts(em, projectId),
    eventsTracked(em, projectId, period),
  ]);
  return { period, emails: { sent, pending }, contacts, events };
}

/**
 * The emails cap in force from a project's billing row as a caller read it with its own query (`plan` and
 * `emails_per_month`; null without a row): the automation SEND_EMAIL step reads it with the rest of what it needs.
 */
export function emailsCapOf(config: BillingConfig, row: { plan: string; emails: string | number | null } | null): number | null {
  return effectiveCaps(planCaps(config, row?.plan ?? config.defaultPlan), { ...NO_CAPS, emails: row ? num(row.emails) : null }).emails;
}

/** Refuses (402) `count` more emails this period against a known cap: what was sent, plus what running campaigns owe. */
export async function assertEmailsUnder(em: EntityManager, projectId: string, cap: number, count: number | (() => Promise<number>)): Promise<void> {
  const [sent, pending, adding] = await Promise.all([emailsSent(em, projectId, billingPeriod()), emailsPending(em, projectId), typeof count === 'number' ? count : count()]);
  refuseOver('emails', cap, sent + pending, adding);
}

export type BillingCache = ProjectScopedCache<Caps>;
/** Enforced caps per project, dropped on the `billing:<id>` notification of any change to the project's billing row. */
export const createBillingCache = (feed: ChangeFeed | undefined): BillingCache => new ProjectScopedCache<Caps>(feed, 'billing', 60_000);

/** How long a read of a project's tracked events serves the events cap of /v1/track in this process. */
const EVENTS_READ_TTL_MS = 1_000;

const UNIT: Record<CapCategory, string> = { emails: 'emails this month', contacts: 'contacts', events: 'tracked events this month' };

const BILLING_EXISTING_CONTACTS = statement('billing_existing_contacts', 'select count(*)::int as n from contacts where project_id = $1 and email = any($2::text[])');

/**
 * Refuses, before anything is done, a request that would take the project past one of its caps (402
 * BILLING_LIMIT_EXCEEDED). Projects without caps cost one cached lookup. The caps are read through a cache the change
 * feed keeps fresh; tracked events (the hot path of /v1/track) are read at most once a second per project and process
 * and counted on from there.
 */
export class BillingGuard {
  private readonly events = new Map<string, { at: number; used: number }>();

  constructor(
    private readonly config: BillingConfig,
    private readonly cache?: BillingCache,
  ) {}

  /** The caps in force for the project. */
  async caps(em: EntityManager, projectId: string): Promise<Caps> {
    const load = async () => ({ value: await capsInForce(em, this.config, projectId), projectId });
    return (this.cache ? await this.cache.get(projectId, load) : (await load()).value) ?? { ...NO_CAPS };
  }

  /** `count` more emails this period (a send's recipients; a campaign's audience, counted only when a cap applies). */
  async assertEmails(em: EntityManager, projectId: string, count: number | (() => Promise<number>)): Promise<void> {
    const cap = (await this.caps(em, projectId)).emails;
    if (cap !== null) await assertEmailsUnder(em, projectId, cap, count);
  }

  /** Contacts for these addresses, those not in the project yet being created. */
  async assertContacts(em: EntityManager, projectId: string, emails: string[]): Promise<void> {
    const cap = (await this.caps(em, projectId)).contacts;
    if (cap === null || emails.length === 0) return;
    const used = await countContacts(em, projectId);
    const unique = [...new Set(emails.map(normalizeEmail))];
    if (used + unique.length <= cap) return; // even if every one were new
    const row = await sql(em).one<{ n: number }>(
      BILLING_EXISTING_CONTACTS,
      [projectId, unique],
    );
    refuseOver('contacts', cap, used, unique.length - row!.n);
  }

  /** One more tracked event (and, for a new address, one more contact). */
  async assertTrack(em: EntityManager, projectId: string, email: string): Promise<void> {
    const caps = await this.caps(em, projectId);
    if (caps.contacts !== null) await this.assertContacts(em, projectId, [email]);
    if (caps.events === null) return;
    const now = Date.now();
    let read = this.events.get(projectId);
    if (!read || now - read.at > EVENTS_READ_TTL_MS) {
      read = { at: now, used: await eventsTracked(em, projectId, billingPeriod()) };
      this.events.set(projectId, read);
    }
    refuseOver('events', caps.events, read.used, 1);
    read.used++;
  }
}

function refuseOver(category: CapCategory, cap: number, used: number, adding: number): void {
  if (used + adding <= cap) return;
  const period = billingPeriod();
  const restarts = category === 'contacts' ? '' : ` The period restarts on ${period.end.toISOString().slice(0, 10)} (UTC).`;
  throw new AppError(402, 'BILLING_LIMIT_EXCEEDED', `This would take the project to ${used + adding} ${UNIT[category]}; its cap is ${cap} (${used} used).`, {
    errors: [{ field: category, message: `Cap ${cap}, used ${used}, this request adds ${adding}`, code: 'cap_exceeded' }],
    suggestion: `Raise the cap (PUT /users/@me/projects/:id/billing-limits) or move to a larger plan.${restarts}`,
  });
}
