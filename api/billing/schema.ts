import { z } from 'zod';
import { Cursor, Limit } from '../contacts/schema';

const CAP_MAX = 1_000_000_000_000;
const capInput = (what: string) =>
  z
    .number({ error: `${what} is a whole number from 0 to ${CAP_MAX}, or null (no cap)` })
    .int(`${what} is a whole number from 0 to ${CAP_MAX}, or null (no cap)`)
    .min(0, `${what} is at least 0 (null: no cap)`)
    .max(CAP_MAX, `${what} is at most ${CAP_MAX}`)
    .nullable()
    .optional();

export const UpdateBillingLimitsBody = z
  .object({
    emails: capInput('emails').meta({ description: 'Emails per billing period (calendar month, UTC); null: no cap of your own.' }),
    contacts: capInput('contacts').meta({ description: 'Contacts in the project at any time; null: no cap of your own.' }),
    events: capInput('events').meta({ description: 'Tracked events per billing period; null: no cap of your own.' }),
  })
  .strict()
  .meta({ id: 'UpdateBillingLimitsRequest', description: 'A key left out keeps its cap; null removes it.' });

const cap = z.number().int().nullable();
const CapsSchema = z.object({ emails: cap, contacts: cap, events: cap }).meta({ id: 'BillingCaps', description: 'Per category; null: no cap.' });
const PeriodSchema = z.object({ start: z.iso.datetime(), end: z.iso.datetime() }).meta({ id: 'BillingPeriod', description: 'The calendar month (UTC): from `start` up to, not including, `end`.' });

export const BillingLimitsSchema = z
  .object({
    plan: z.string().meta({ description: 'The plan: BILLING_DEFAULT_PLAN until a Stripe subscription sets another.' }),
    planLimits: CapsSchema.meta({ description: "The plan's caps (BILLING_PLANS)." }),
    limits: CapsSchema.meta({ description: "The project's own caps (PUT)." }),
    effective: CapsSchema.meta({ description: 'What is enforced: per category the lower of the two.' }),
    period: PeriodSchema,
    billingEnabled: z.boolean().meta({ description: 'Whether this deployment bills through Stripe (checkout, portal, invoices).' }),
    subscription: z.object({ id: z.string().nullable(), status: z.string().nullable() }).nullable(),
  })
  .meta({ id: 'BillingLimits' });

const usage = (extra: z.ZodRawShape = {}) => z.object({ used: z.number().int(), limit: cap, remaining: cap, ...extra });
export const BillingConsumptionSchema = z
  .object({
    period: PeriodSchema,
    emails: usage({ pending: z.number().int().meta({ description: 'Recipients of SENDING and PAUSED campaigns not sent yet (counted against the cap, not in `used`).' }) }).meta({
      description: '`used`: emails sent this period.',
    }),
    contacts: usage().meta({ description: '`used`: contacts now.' }),
    events: usage().meta({ description: '`used`: tracked events this period (not the service\'s own email.* and contact.* events).' }),
  })
  .meta({ id: 'BillingConsumption' });

export const CheckoutBody = z
  .object({ plan: z.string().min(1).max(64).meta({ description: 'A plan of BILLING_PLANS that has a Stripe price.' }) })
  .strict()
  .meta({ id: 'CheckoutRequest' });
export const CheckoutSchema = z.object({ id: z.string(), url: z.string().nullable().meta({ description: "Stripe Checkout's page: send the browser there." }) }).meta({ id: 'CheckoutSession' });
export const PortalSchema = z.object({ url: z.string().meta({ description: "The Stripe billing portal's page." }) }).meta({ id: 'BillingPortalSession' });

export const InvoicesQuery = z.object({ limit: Limit, cursor: Cursor });
const InvoiceSchema = z
  .object({
    id: z.string(),
    number: z.string().nullable(),
    status: z.string().nullable(),
    currency: z.string(),
    total: z.number().int().meta({ description: 'In the currency\'s smallest unit (cents).' }),
    amountDue: z.number().int(),
    amountPaid: z.number().int(),
    created: z.iso.datetime(),
    periodStart: z.iso.datetime(),
    periodEnd: z.iso.datetime(),
    hostedInvoiceUrl: z.string().nullable(),
    invoicePdf: z.string().nullable(),
  })
  .meta({ id: 'Invoice' });
export const InvoiceListSchema = z.object({ data: z.array(InvoiceSchema), cursor: z.string().nullable(), hasMore: z.boolean() }).meta({ id: 'InvoiceList' });

export const StripeWebhookBody = z.string().meta({ description: 'A Stripe event as Stripe posts it, verified against its `Stripe-Signature` header.' });
export const StripeWebhookResult = z
  .object({ received: z.literal(true), type: z.string(), applied: z.boolean().meta({ description: "Whether the event changed a project's plan." }) })
  .meta({ id: 'StripeWebhookResult' });
