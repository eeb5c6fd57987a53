import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isIP } from 'node:net';
import { createPublicKey } from 'node:crypto';
import { z } from 'zod';
import ipaddr from 'ipaddr.js';
import type { DkimKeyBits } from './domains/dkim';

/**
 * The folder of package.json above this file: the repository, or the image's /app. This file is domain/config.ts under
 * tsx and e.g. dist/domain/config.js compiled (scripts/build.ts), so a fixed number of `..` would not do.
 */
function projectRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) return path.join(__dirname, '..');
  }
}

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const DEV_SECRET = 'mailwright-development-secret-do-not-use-in-production';
const DEV_APP_SECRET = 'mailwright-development-app-secret-do-not-use-in-production';

const DURATION_UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `500ms`, `2s`, `5m`, `6h`, `3d` -> milliseconds (a unit is required). */
export function parseDuration(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(text);
  if (!m) return undefined;
  return Math.round(Number(m[1]) * DURATION_UNITS[m[2] as keyof typeof DURATION_UNITS]);
}

/** A fraction from 0 to 1 (a rate threshold). */
const rate = z.coerce.number().min(0).max(1);

const duration = (min: number) =>
  z
    .string()
    .transform((v, ctx) => {
      const ms = parseDuration(v);
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: `"${v}" is not a duration (use e.g. 500ms, 2s, 5m, 6h, 3d)` });
        return z.NEVER;
      }
      if (ms < min) {
        ctx.addIssue({ code: 'custom', message: `must be at least ${min} ms` });
        return z.NEVER;
      }
      return ms;
    });

/** `DNS_SERVERS`: comma-separated `ip`, `ip:port` or `[ipv6]:port` (what dns.Resolver#setServers accepts). */
const dnsServers = z.string().transform((v, ctx) => {
  const servers = v.split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of servers) {
    const m = /^\[([0-9a-fA-F:.]+)\](?::(\d{1,5}))?$/.exec(s) ?? /^([0-9.]+)(?::(\d{1,5}))?$/.exec(s) ?? /^([0-9a-fA-F:]+)()$/.exec(s);
    const port = m?.[2] ? Number(m[2]) : 53;
    if (!m || isIP(m[1]!) === 0 || port < 1 || port > 65535) {
      ctx.addIssue({ code: 'custom', message: `"${s}" is not an IP address with an optional port (1.2.3.4, 1.2.3.4:53, [::1]:53)` });
    }
  }
  return servers;
});

/** `10mb`, `512kb`, `1048576` -> bytes (binary units). */
const byteSize = z.string().transform((v, ctx) => {
  const m = /^\s*(\d+)\s*(b|kb|mb|gb)?\s*$/i.exec(v);
  if (!m) {
    ctx.addIssue({ code: 'custom', message: `"${v}" is not a size (use e.g. 10mb, 512kb or a number of bytes)` });
    return z.NEVER;
  }
  return Number(m[1]) * { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(m[2] ?? 'b').toLowerCase() as 'b'];
});

/** An optional setting where an empty value (`S3_BUCKET=` from a compose file) means unset. */
const optionalText = <T extends z.ZodType>(inner: T) => z.preprocess((v) => (v === '' ? undefined : v), inner.optional());

/** SNS signing certificates and subscription URLs: https on the SNS host of an AWS region (China: `.com.cn`). */
const DEFAULT_SNS_URL_PATTERN = '^https://sns\\.[a-z0-9-]+\\.amazonaws\\.com(\\.cn)?/';

/**
 * `SENDGRID_WEBHOOK_PUBLIC_KEY`: the verification key SendGrid shows for a signed Event Webhook, base64 of an ECDSA
 * P-256 public key (DER SubjectPublicKeyInfo); PEM is accepted too. Parsed here so a bad key stops the start.
 */
const sendgridPublicKey = z.string().transform((v, ctx) => {
  const text = v.trim();
  try {
    const key = text.startsWith('-----BEGIN')
      ? createPublicKey(text)
      : createPublicKey({ key: Buffer.from(text.replace(/\s+/g, ''), 'base64'), format: 'der', type: 'spki' });
    if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
      ctx.addIssue({ code: 'custom', message: 'must be an ECDSA P-256 public key (the verification key of a signed Event Webhook)' });
      return z.NEVER;
    }
    return key;
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not a public key (base64 DER, as SendGrid shows it, or PEM): ${(err as Error).message}` });
    return z.NEVER;
  }
});

/** `RESEND_WEBHOOK_SECRET`: a Standard Webhooks / Svix signing secret, `whsec_<base64>`; the HMAC key is the decoded bytes. */
const svixSecret = z.string().transform((v, ctx) => {
  const key = Buffer.from(v.trim().replace(/^whsec_/, ''), 'base64');
  if (key.length < 16) {
    ctx.addIssue({ code: 'custom', message: 'must be the signing secret the provider shows (whsec_ followed by base64 of at least 16 bytes)' });
    return z.NEVER;
  }
  return key;
});

/** A host name for SPF's include: mechanism. */
const spfInclude = z.string().regex(/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/i, 'must be a host name');

const PLAN_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const planCap = z.number().int().min(0).nullable().optional();
/** `BILLING_PLANS`: JSON `{ "<plan>": { "price"?: "<Stripe price id>", "emails"?, "contacts"?, "events"? } }`; a cap left out or null is none. */
const billingPlans = z.string().transform((v, ctx) => {
  let json: unknown;
  try {
    json = JSON.parse(v);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be JSON: {"pro": {"price": "price_...", "emails": 100000, "contacts": 10000, "events": null}}' });
    return z.NEVER;
  }
  const plan = z.object({ price: z.string().min(1).optional(), emails: planCap, contacts: planCap, events: planCap }).strict();
  const parsed = z.record(z.string().regex(PLAN_NAME, 'plan names are lowercase letters, digits, - and _'), plan).safeParse(json);
  if (!parsed.success) {
    for (const i of parsed.error.issues) ctx.addIssue({ code: 'custom', message: `${i.path.join('.')}: ${i.message}` });
    return z.NEVER;
  }
  return Object.fromEntries(Object.entries(parsed.data).map(([name, p]) => [name, { price: p.price, emails: p.emails ?? null, contacts: p.contacts ?? null, events: p.events ?? null }]));
});

const schema = z
  .object({
    NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
    HOST: z.string().default('127.0.0.1'),
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    PUBLIC_URL: z.url().optional(),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    DATABASE_URL: z.string().min(1),
    DATABASE_POOL_MAX: z.coerce.number().int().min(1).default(20),
    TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
    TEMPORAL_NAMESPACE: z.string().default('default'),
    TEMPORAL_TASK_QUEUE: z.string().default('mailwright'),
    // A Temporal frontend behind TLS (Temporal Cloud, or a cluster of your own): an API key, or a client certificate
    // (mTLS); either turns TLS on, as does TEMPORAL_TLS=true (server certificate checked against the system's roots, or
    // TEMPORAL_TLS_CA).
    TEMPORAL_TLS: bool.default(false),
    TEMPORAL_API_KEY: optionalText(z.string()),
    TEMPORAL_TLS_CERT: optionalText(z.string()),
    TEMPORAL_TLS_KEY: optionalText(z.string()),
    TEMPORAL_TLS_CA: optionalText(z.string()),
    TEMPORAL_TLS_SERVER_NAME: optionalText(z.string()),
    SMTP_URL: z.string().default('smtp://127.0.0.1:1025'),
    SMTP_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(5),
    JWT_SECRET: z.string().min(16).optional(),
    SIGNUP_ENABLED: bool.default(true),
    COOKIE_SECURE: bool.optional(),
    MAX_JSON_BODY: byteSize.default(1024 * 1024),
    MAX_SEND_BODY: byteSize.default(60 * 1024 * 1024),
    MAX_ATTACHMENTS_SIZE: byteSize.default(10 * 1024 * 1024),
    MAX_MESSAGE_SIZE: byteSize.default(40 * 1024 * 1024),
    APP_SECRET: z.string().min(32).optional(),
    UNSUBSCRIBE_MAILTO: z.union([z.literal('off'), z.email()]).optional(),
    DNS_SERVERS: dnsServers.optional(),
    DNS_TIMEOUT: duration(100).default(5_000),
    SPF_INCLUDE: spfInclude.default('spf.mailwright.local'),
    DKIM_KEY_BITS: z.enum(['1024', '2048'], { error: 'Must be 1024 or 2048' }).default('2048'),
    DOMAIN_CHECK_INTERVAL: duration(1_000).default(5 * 60_000),
    DOMAIN_RECHECK_INTERVAL: duration(1_000).default(6 * 3_600_000),
    DOMAIN_DEMOTE_AFTER: duration(0).default(72 * 3_600_000),
    INBOUND_SMTP_HOST: z.string().default('127.0.0.1'),
    INBOUND_SMTP_PORT: z.coerce.number().int().min(0).max(65535).default(2525),
    INBOUND_MX_HOST: spfInclude.default('mx.mailwright.local'),
    RETURN_PATH_LABEL: z.string().regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i, 'must be one DNS label').default('bounces'),
    INBOUND_MAX_MESSAGE_SIZE: byteSize.default(10 * 1024 * 1024),
    INBOUND_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(10_000).default(100),
    INBOUND_RATE_PER_MINUTE: z.coerce.number().int().min(1).max(1_000_000).default(1200),
    INBOUND_TLS_CERT: z.string().optional(),
    INBOUND_TLS_KEY: z.string().optional(),
    INBOUND_RETENTION: duration(60_000).default(30 * 24 * 3_600_000),
    // The bounce mailbox (README › Bounce mailbox (IMAP)): off while BOUNCE_MAILBOX_HOST is unset.
    BOUNCE_MAILBOX_HOST: optionalText(z.string()),
    BOUNCE_MAILBOX_PORT: optionalText(z.coerce.number().int().min(1).max(65535)),
    BOUNCE_MAILBOX_TLS: z.enum(['on', 'off', 'starttls'], { error: 'Must be on, off or starttls' }).default('on'),
    BOUNCE_MAILBOX_USER: optionalText(z.string()),
    BOUNCE_MAILBOX_PASSWORD: optionalText(z.string()),
    BOUNCE_MAILBOX_FOLDER: z.string().min(1).default('INBOX'),
    BOUNCE_MAILBOX_PROCESSED_FOLDER: z.string().min(1).default('Processed'),
    BOUNCE_MAILBOX_POLL_SECONDS: z.coerce.number().int().min(5).max(86_400).default(60),
    /** Tests only (NODE_ENV=test): a file whose presence kills the worker in the middle of a poll (test/mta/bounce-mailbox.test.ts). */
    BOUNCE_MAILBOX_TEST_CRASH_FILE: optionalText(z.string()),
    SNS_TOPIC_ARNS: z.string().transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean)).default([]),
    SNS_CERT_URL_PATTERN: z
      .string()
      .transform((v, ctx) => {
        try {
          return new RegExp(v);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: `not a regular expression: ${(err as Error).message}` });
          return z.NEVER;
        }
      })
      .default(new RegExp(DEFAULT_SNS_URL_PATTERN)),
    SNS_HTTP_TIMEOUT: duration(100).default(5_000),
    // Delivery reports by provider webhooks (README › Delivery reports by webhook): a receiver is on when its secret is set.
    SENDGRID_WEBHOOK_PUBLIC_KEY: optionalText(sendgridPublicKey),
    MAILGUN_WEBHOOK_SIGNING_KEY: optionalText(z.string().min(8)),
    POSTMARK_WEBHOOK_USER: optionalText(z.string().regex(/^[^:]+$/, 'must not contain ":" (HTTP Basic)')),
    POSTMARK_WEBHOOK_PASSWORD: optionalText(z.string().min(12)),
    RESEND_WEBHOOK_SECRET: optionalText(svixSecret),
    REPORT_WEBHOOK_TOLERANCE: duration(1_000).default(5 * 60_000),
    RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(0).max(1_000_000_000).default(1000),
    // The budget is per window; the variable's name says minute because that is the default and SPEC.md's unit.
    RATE_LIMIT_WINDOW: duration(1_000)
      .refine((ms) => ms % 1_000 === 0, 'must be a whole number of seconds (the RateLimit-Policy header counts seconds)')
      .default(60_000),
    EVENTS_PROBE: bool.default(false),
    OUTBOX_POLL_INTERVAL: duration(50).default(5_000),
    OUTBOX_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
    OUTBOX_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(1_000).default(12),
    CAMPAIGN_SEND_RATE: z.coerce.number().int().min(0).max(1_000_000).default(0),
    CAMPAIGN_PARTITIONS: z.coerce.number().int().min(1).max(64).default(2),
    CAMPAIGN_SHARES_PER_WORKER: z.coerce.number().int().min(1).max(64).default(1),
    CAMPAIGN_CHUNK_SIZE: z.coerce.number().int().min(1).max(5_000).default(1000),
    CAMPAIGN_RENDER_THREADS: z.coerce.number().int().min(0).max(64).optional(),
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: bool.default(false),
    WEBHOOK_ALLOWED_NETWORKS: z
      .string()
      .transform((v, ctx) => {
        const cidrs = v.split(',').map((c) => c.trim()).filter(Boolean);
        for (const c of cidrs) {
          if (!ipaddr.isValidCIDR(c)) ctx.addIssue({ code: 'custom', message: `${c} is not a CIDR range (e.g. 10.1.0.0/16, fd00::/8)` });
        }
        return cidrs;
      })
      .default([]),
    WEBHOOK_TIMEOUT: duration(100).default(10_000),
    WEBHOOK_ENDPOINT_DISABLE_AFTER: duration(1_000).default(48 * 3_600_000),
    CAMPAIGN_RETRY_DELAYS: z
      .string()
      .transform((v, ctx) => {
        const delays = v.split(',').map((d) => parseDuration(d.trim()));
        if (delays.some((d) => d === undefined || d < 100)) {
          ctx.addIssue({ code: 'custom', message: 'must be comma-separated durations of at least 100ms (e.g. 1m,5m,15m,1h)' });
          return z.NEVER;
        }
        return delays as number[];
      })
      .default([60_000, 300_000, 900_000, 3_600_000]),
    SEGMENT_RECOMPUTE_SWEEP_INTERVAL: duration(1_000).default(5 * 60_000),
    // Sending reputation (README › Sending reputation): rates as fractions, SES's defaults.
    REPUTATION_BOUNCE_WARN: rate.default(0.05),
    REPUTATION_BOUNCE_SUSPEND: rate.default(0.1),
    REPUTATION_COMPLAINT_WARN: rate.default(0.001),
    REPUTATION_COMPLAINT_SUSPEND: rate.default(0.005),
    REPUTATION_MIN_SENT: z.coerce.number().int().min(1).max(100_000_000).default(100),
    REPUTATION_WINDOW: duration(3_600_000).default(7 * 86_400_000),
    REPUTATION_CHECK_INTERVAL: duration(1_000).default(15 * 60_000),
    // The suppression list (README › Suppression list): transient bounces of different emails within the window that
    // suppress an address; 0 turns that off (hard bounces and complaints still suppress).
    SUPPRESS_SOFT_BOUNCES: z.coerce.number().int().min(0).max(1000).default(3),
    SUPPRESS_SOFT_BOUNCE_WINDOW_DAYS: z.coerce.number().int().min(1).max(365).default(7),
    // Metrics and health (README › Metrics and health). Empty (`${METRICS_TOKEN:-}` in a compose file) is unset, and an
    // empty WORKER_METRICS_PORT is off.
    METRICS_PORT: z.preprocess((v) => (v === '' ? undefined : v), z.coerce.number().int().min(0).max(65535).optional()),
    METRICS_HOST: z.preprocess((v) => (v === '' ? undefined : v), z.string().default('127.0.0.1')),
    METRICS_TOKEN: z.preprocess((v) => (v === '' ? undefined : v), z.string().min(16).optional()),
    WORKER_METRICS_PORT: z.preprocess((v) => (v === '' ? '0' : v), z.coerce.number().int().min(0).max(65535).default(9464)),
    INBOUND_METRICS_PORT: z.preprocess((v) => (v === '' ? '0' : v), z.coerce.number().int().min(0).max(65535).default(9465)),
    UPLOADS_MAX_SIZE: byteSize.refine((n) => n >= 1 && n <= 100 * 1024 ** 2, 'must be from 1 byte to 100mb').default(5 * 1024 ** 2),
    UPLOADS_DIR: optionalText(z.string()),
    S3_BUCKET: optionalText(z.string()),
    S3_ENDPOINT: optionalText(z.url()),
    S3_REGION: optionalText(z.string()),
    S3_ACCESS_KEY_ID: optionalText(z.string()),
    S3_SECRET_ACCESS_KEY: optionalText(z.string()),
    S3_FORCE_PATH_STYLE: bool.default(false),
    S3_PUBLIC_URL: optionalText(z.url()),
    // Account emails, login throttling and OAuth sign-in (README › Accounts and sign-in).
    SYSTEM_EMAIL_FROM: optionalText(z.string().max(400)),
    EMAIL_VERIFICATION_TTL: duration(60_000).default(48 * 3_600_000),
    PASSWORD_RESET_TTL: duration(60_000).default(3_600_000),
    INVITATION_TTL: duration(60_000).default(7 * 86_400_000),
    AUTH_THROTTLE_WINDOW: duration(1_000).default(15 * 60_000),
    LOGIN_MAX_FAILURES_PER_ACCOUNT: z.coerce.number().int().min(1).max(1_000_000).default(10),
    LOGIN_MAX_FAILURES_PER_IP: z.coerce.number().int().min(1).max(1_000_000).default(100),
    ACCOUNT_EMAILS_PER_ADDRESS: z.coerce.number().int().min(1).max(1_000_000).default(3),
    ACCOUNT_EMAILS_PER_IP: z.coerce.number().int().min(1).max(1_000_000).default(30),
    GITHUB_CLIENT_ID: optionalText(z.string()),
    GITHUB_CLIENT_SECRET: optionalText(z.string()),
    GITHUB_URL: z.preprocess((v) => (v === '' ? undefined : v), z.url().default('https://github.com')),
    GITHUB_API_URL: z.preprocess((v) => (v === '' ? undefined : v), z.url().default('https://api.github.com')),
    GOOGLE_CLIENT_ID: optionalText(z.string()),
    GOOGLE_CLIENT_SECRET: optionalText(z.string()),
    GOOGLE_AUTHORIZE_URL: z.preprocess((v) => (v === '' ? undefined : v), z.url().default('https://accounts.google.com/o/oauth2/v2/auth')),
    GOOGLE_TOKEN_URL: z.preprocess((v) => (v === '' ? undefined : v), z.url().default('https://oauth2.googleapis.com/token')),
    GOOGLE_USERINFO_URL: z.preprocess((v) => (v === '' ? undefined : v), z.url().default('https://openidconnect.googleapis.com/v1/userinfo')),
    // Billing (README › Billing): Stripe when both keys are set; plans and their caps work without it.
    STRIPE_SECRET_KEY: optionalText(z.string()),
    STRIPE_WEBHOOK_SECRET: optionalText(z.string()),
    STRIPE_API_URL: optionalText(z.url()),
    BILLING_PLANS: optionalText(billingPlans),
    BILLING_DEFAULT_PLAN: z.preprocess((v) => (v === '' ? undefined : v), z.string().regex(PLAN_NAME).default('free')),
    BILLING_RETURN_URL: optionalText(z.url()),
  })
  .superRefine((env, ctx) => {
    if (env.NODE_ENV === 'production') {
      for (const key of ['JWT_SECRET', 'PUBLIC_URL', 'APP_SECRET'] as const) {
        if (!env[key]) ctx.addIssue({ code: 'custom', path: [key], message: 'is required in production' });
      }
    }
    if (!env.S3_ACCESS_KEY_ID !== !env.S3_SECRET_ACCESS_KEY) {
      ctx.addIssue({ code: 'custom', path: [env.S3_ACCESS_KEY_ID ? 'S3_SECRET_ACCESS_KEY' : 'S3_ACCESS_KEY_ID'], message: 'S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together' });
    }
    for (const [id, secret] of [['GITHUB_CLIENT_ID', 'GITHUB_CLIENT_SECRET'], ['GOOGLE_CLIENT_ID', 'GOOGLE_CLIENT_SECRET']] as const) {
      if (!env[id] !== !env[secret]) ctx.addIssue({ code: 'custom', path: [env[id] ? secret : id], message: `${id} and ${secret} go together` });
    }
    if (env.SYSTEM_EMAIL_FROM !== undefined && !systemSender(env.SYSTEM_EMAIL_FROM)) {
      ctx.addIssue({ code: 'custom', path: ['SYSTEM_EMAIL_FROM'], message: 'must be an address, or "Name <address>"' });
    }
    if (!env.POSTMARK_WEBHOOK_USER !== !env.POSTMARK_WEBHOOK_PASSWORD) {
      ctx.addIssue({ code: 'custom', path: [env.POSTMARK_WEBHOOK_USER ? 'POSTMARK_WEBHOOK_PASSWORD' : 'POSTMARK_WEBHOOK_USER'], message: 'POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD go together' });
    }
    if (!env.TEMPORAL_TLS_CERT !== !env.TEMPORAL_TLS_KEY) {
      ctx.addIssue({ code: 'custom', path: [env.TEMPORAL_TLS_CERT ? 'TEMPORAL_TLS_KEY' : 'TEMPORAL_TLS_CERT'], message: 'TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together' });
    }
    if (!env.STRIPE_SECRET_KEY !== !env.STRIPE_WEBHOOK_SECRET) {
      ctx.addIssue({ code: 'custom', path: [env.STRIPE_SECRET_KEY ? 'STRIPE_WEBHOOK_SECRET' : 'STRIPE_SECRET_KEY'], message: 'STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET go together' });
    }
    if (env.BOUNCE_MAILBOX_HOST) {
      for (const key of ['BOUNCE_MAILBOX_USER', 'BOUNCE_MAILBOX_PASSWORD'] as const) {
        if (!env[key]) ctx.addIssue({ code: 'custom', path: [key], message: 'is required with BOUNCE_MAILBOX_HOST' });
      }
      if (env.BOUNCE_MAILBOX_PROCESSED_FOLDER === env.BOUNCE_MAILBOX_FOLDER) {
        ctx.addIssue({ code: 'custom', path: ['BOUNCE_MAILBOX_PROCESSED_FOLDER'], message: 'must differ from BOUNCE_MAILBOX_FOLDER' });
      }
    }
    for (const key of ['S3_ENDPOINT', 'S3_REGION', 'S3_ACCESS_KEY_ID', 'S3_PUBLIC_URL'] as const) {
      if (env[key] && !env.S3_BUCKET) ctx.addIssue({ code: 'custom', path: [key], message: 'has no effect without S3_BUCKET (uploads go to UPLOADS_DIR)' });
    }
  });

/** Where the Temporal frontend is and how to reach it (temporal/connection.ts). */
interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
  apiKey?: string;
  /** Files of the client certificate pair and of the server's root CA; undefined: plain TCP (a dev server, a sidecar). */
  tls?: { certFile?: string; keyFile?: string; caFile?: string; serverName?: string };
}

/** `SYSTEM_EMAIL_FROM`: `address` or `Name <address>`. */
function systemSender(value: string): { name?: string; address: string } | undefined {
  const m = /^\s*(?:(.*?)\s*<([^<>\s]+)>|([^<>\s]+))\s*$/.exec(value);
  const address = m?.[2] ?? m?.[3];
  if (!address || !z.email().safeParse(address).success) return undefined;
  const name = m?.[1]?.replace(/^"(.*)"$/, '$1').trim();
  return name ? { name, address } : { address };
}

/** The default system sender: no-reply@ the public host when it is a domain name, else a development address. */
function defaultSystemSender(publicUrl: string): { name: string; address: string } {
  const host = new URL(publicUrl).hostname;
  const domain = /^[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}$/i.test(host) ? host : 'mailwright.test';
  return { name: 'Mailwright', address: `no-reply@${domain}` };
}

export type Config = ReturnType<typeof buildConfig>;

function buildConfig(env: z.infer<typeof schema>) {
  const publicUrl = (env.PUBLIC_URL ?? `http://localhost:${env.PORT}`).replace(/\/$/, '');
  return {
    env: env.NODE_ENV,
    host: env.HOST,
    port: env.PORT,
    publicUrl,
    logLevel: env.LOG_LEVEL,
    database: { url: env.DATABASE_URL, poolMax: env.DATABASE_POOL_MAX },
    temporal: {
      address: env.TEMPORAL_ADDRESS,
      namespace: env.TEMPORAL_NAMESPACE,
      taskQueue: env.TEMPORAL_TASK_QUEUE,
      apiKey: env.TEMPORAL_API_KEY,
      tls:
        env.TEMPORAL_TLS || env.TEMPORAL_API_KEY || env.TEMPORAL_TLS_CERT
          ? { certFile: env.TEMPORAL_TLS_CERT, keyFile: env.TEMPORAL_TLS_KEY, caFile: env.TEMPORAL_TLS_CA, serverName: env.TEMPORAL_TLS_SERVER_NAME }
          : undefined,
    } as TemporalSettings,
    smtp: { url: env.SMTP_URL, poolSize: env.SMTP_POOL_SIZE },
    // Development and test get a fixed secret so a restart keeps sessions; production refuses to start without one.
    jwtSecret: env.JWT_SECRET ?? DEV_SECRET,
    signupEnabled: env.SIGNUP_ENABLED,
    cookieSecure: env.COOKIE_SECURE ?? publicUrl.startsWith('https://'),
    limits: {
      jsonBody: env.MAX_JSON_BODY,
      sendBody: env.MAX_SEND_BODY,
      /** Decoded bytes of one email's attachments together. */
      attachmentsBytes: env.MAX_ATTACHMENTS_SIZE,
      /** The whole MIME message as sent (attachments base64-encoded). */
      messageBytes: env.MAX_MESSAGE_SIZE,
    },
    // Encrypts secrets at rest (DKIM private keys). Same rule as JWT_SECRET: fixed in development, required in production.
    appSecret: env.APP_SECRET ?? DEV_APP_SECRET,
    /** The mailto: of List-Unsubscribe: unset = unsubscribe@<sender domain>, an address, or `off` (https one-click only). */
    unsubscribeMailto: env.UNSUBSCRIBE_MAILTO,
    /** The inbound SMTP server (api/inbound.ts) and the return path it receives for (README › Inbound mail). */
    inbound: {
      host: env.INBOUND_SMTP_HOST,
      /** 0: any free port (tests). */
      port: env.INBOUND_SMTP_PORT,
      /** The host the bounce hosts' MX records name: where the world reaches this server. Also its greeting name. */
      mxHost: env.INBOUND_MX_HOST.toLowerCase(),
      /** The bounce host of a sender domain is `<label>.<domain>`. */
      returnPathLabel: env.RETURN_PATH_LABEL.toLowerCase(),
      maxMessageBytes: env.INBOUND_MAX_MESSAGE_SIZE,
      maxConnections: env.INBOUND_MAX_CONNECTIONS,
      /** Messages per client address per minute. */
      ratePerMinute: env.INBOUND_RATE_PER_MINUTE,
      /** STARTTLS is offered when both are set (PEM files). */
      tls: env.INBOUND_TLS_CERT && env.INBOUND_TLS_KEY ? { certFile: env.INBOUND_TLS_CERT, keyFile: env.INBOUND_TLS_KEY } : undefined,
      /** How long a processed message's bytes are kept (what processing found stays). */
      retentionMs: env.INBOUND_RETENTION,
    },
    /**
     * The bounce mailbox polled over IMAP (domain/inbound/bounce-mailbox.ts); undefined: off. What it reads is moved
     * to `processedFolder` once stored.
     */
    bounceMailbox: env.BOUNCE_MAILBOX_HOST
      ? {
          host: env.BOUNCE_MAILBOX_HOST,
          /** 993 with TLS on, 143 otherwise. */
          port: env.BOUNCE_MAILBOX_PORT ?? (env.BOUNCE_MAILBOX_TLS === 'on' ? 993 : 143),
          /** on: TLS from the start; starttls: required upgrade; off: plain (loopback and tests only). */
          tls: env.BOUNCE_MAILBOX_TLS,
          user: env.BOUNCE_MAILBOX_USER ?? '',
          password: env.BOUNCE_MAILBOX_PASSWORD ?? '',
          folder: env.BOUNCE_MAILBOX_FOLDER,
          processedFolder: env.BOUNCE_MAILBOX_PROCESSED_FOLDER,
          pollMs: env.BOUNCE_MAILBOX_POLL_SECONDS * 1000,
          /** Tests only: see pollBounceMailbox. Ignored outside NODE_ENV=test. */
          testCrashFile: env.NODE_ENV === 'test' ? env.BOUNCE_MAILBOX_TEST_CRASH_FILE : undefined,
        }
      : undefined,
    domains: {
      /** Empty: the system resolver. */
      dnsServers: env.DNS_SERVERS ?? [],
      dnsTimeoutMs: env.DNS_TIMEOUT,
      spfInclude: env.SPF_INCLUDE.toLowerCase(),
      /** RSA modulus of the DKIM key a new domain gets (as Amazon SES offers: 1024 or 2048). */
      dkimKeyBits: Number(env.DKIM_KEY_BITS) as DkimKeyBits,
      /** Between checks of a PENDING domain. */
      checkIntervalMs: env.DOMAIN_CHECK_INTERVAL,
      /** Between re-checks of a VERIFIED domain. */
      recheckIntervalMs: env.DOMAIN_RECHECK_INTERVAL,
      /** How long a required record of a VERIFIED domain may be missing before the domain goes back to PENDING. */
      demoteAfterMs: env.DOMAIN_DEMOTE_AFTER,
    },
    /** Per-project budget of API-key requests (api/middleware/rate-limit.ts); `limit` 0 = off. */
    rateLimit: { limit: env.RATE_LIMIT_PER_MINUTE, windowMs: env.RATE_LIMIT_WINDOW },
    /** Amazon SES delivery reports through SNS (`POST /webhooks/sns`). */
    sns: {
      /** Accepted TopicArns; empty = any. */
      topicArns: env.SNS_TOPIC_ARNS,
      /** What SigningCertURL and SubscribeURL must match. */
      urlPattern: env.SNS_CERT_URL_PATTERN,
      /** Bound on fetching a signing certificate or confirming a subscription. */
      httpTimeoutMs: env.SNS_HTTP_TIMEOUT,
    },
    /**
     * Delivery reports posted by relays (`POST /webhooks/incoming/<provider>`, domain/webhooks/provider-reports.ts): a
     * receiver whose secret is unset is off (404). Per deployment: one account per relay for every project.
     */
    reportWebhooks: {
      sendgrid: env.SENDGRID_WEBHOOK_PUBLIC_KEY ? { publicKey: env.SENDGRID_WEBHOOK_PUBLIC_KEY } : undefined,
      mailgun: env.MAILGUN_WEBHOOK_SIGNING_KEY ? { signingKey: env.MAILGUN_WEBHOOK_SIGNING_KEY } : undefined,
      postmark: env.POSTMARK_WEBHOOK_USER && env.POSTMARK_WEBHOOK_PASSWORD ? { user: env.POSTMARK_WEBHOOK_USER, password: env.POSTMARK_WEBHOOK_PASSWORD } : undefined,
      resend: env.RESEND_WEBHOOK_SECRET ? { secret: env.RESEND_WEBHOOK_SECRET } : undefined,
      /** How far a signed timestamp may be from now (either way) before the report is refused as stale. */
      toleranceMs: env.REPORT_WEBHOOK_TOLERANCE,
    },
    /** Campaign sends (domain/campaigns/campaign-send.ts). */
    campaigns: {
      /** Emails per second per campaign unless the project sets `campaignSendRate`; 0 = unthrottled (self-hosting default). */
      sendRate: env.CAMPAIGN_SEND_RATE,
      /** Parallel send activities per campaign, each over its own share of the recipients (spreads over workers). */
      partitions: env.CAMPAIGN_PARTITIONS,
      /**
       * Shares this worker sends at once (its slots on the shares task queue): a worker holding no more than this leaves
       * the other shares to the other workers that poll, instead of taking them all.
       */
      sharesPerWorker: env.CAMPAIGN_SHARES_PER_WORKER,
      /** Recipients one send activity reads, renders and sends per round. */
      chunkSize: env.CAMPAIGN_CHUNK_SIZE,
      /**
       * Worker threads that render and sign campaign messages (0: on the main thread); default one per core: DKIM
       * signing (an RSA signature per message) made a single thread the limit of a signed campaign. Unsigned batches use
       * one thread fewer (render-pool.ts unsignedConcurrency).
       */
      renderThreads: env.CAMPAIGN_RENDER_THREADS ?? Math.max(1, os.availableParallelism()),
      /** Pauses before each retry pass over recipients whose send failed transiently; their count is the number of passes. */
      retryDelaysMs: env.CAMPAIGN_RETRY_DELAYS,
    },
    /** Automation runs (domain/automations/run-steps.ts). */
    automations: {
      /** WEBHOOK steps may call loopback, private and link-local addresses (off: refused, against SSRF). */
      webhookAllowPrivateNetworks: env.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
      /** Non-public networks WEBHOOK steps may call even so (CIDR ranges), for one internal receiver without opening all. */
      webhookAllowedNetworks: env.WEBHOOK_ALLOWED_NETWORKS,
      /** How long one WEBHOOK call may take before it counts as a (retryable) failure. */
      webhookTimeoutMs: env.WEBHOOK_TIMEOUT,
    },
    /** Webhooks out (domain/webhook-endpoints): calls share the WEBHOOK step's SSRF guard and timeout (`automations`). */
    webhooksOut: {
      /** An endpoint whose every attempt failed for this long is disabled. */
      disableAfterMs: env.WEBHOOK_ENDPOINT_DISABLE_AFTER,
    },
    /** Scheduled recomputes of tracked segments (domain/segments/segment-compute.ts). */
    segments: {
      /**
       * How often the `segment-recompute-sweep` schedule looks for tracked segments due for a recompute (each project
       * sets how often its segments are due: `segmentRecomputeMinutes`). Tests use seconds.
       */
      recomputeSweepIntervalMs: env.SEGMENT_RECOMPUTE_SWEEP_INTERVAL,
    },
    reputation: {
      bounce: { warn: env.REPUTATION_BOUNCE_WARN, suspend: env.REPUTATION_BOUNCE_SUSPEND },
      complaint: { warn: env.REPUTATION_COMPLAINT_WARN, suspend: env.REPUTATION_COMPLAINT_SUSPEND },
      /** Rates count only once the window holds at least this many emails sent. */
      minSent: env.REPUTATION_MIN_SENT,
      windowMs: env.REPUTATION_WINDOW,
      /** How often the `reputation-check` schedule evaluates every sending project. */
      checkIntervalMs: env.REPUTATION_CHECK_INTERVAL,
    },
    /** When transient bounces suppress an address (domain/suppressions): API (SES reports) and worker (mail reports). */
    suppression: { softBounces: env.SUPPRESS_SOFT_BOUNCES, softBounceWindowDays: env.SUPPRESS_SOFT_BOUNCE_WINDOW_DAYS },
    /** Uploaded images (domain/uploads): their size cap, and where their bytes are stored. */
    uploads: {
      maxBytes: env.UPLOADS_MAX_SIZE,
      /** The local folder (unless S3 is configured); by default in the data folder of `npm start`. */
      dir: path.resolve(env.UPLOADS_DIR ?? path.join(projectRoot(), '.data', 'uploads')),
      /** Set when S3_BUCKET is: S3 or an S3-compatible store instead of the local folder. */
      s3: env.S3_BUCKET
        ? {
            bucket: env.S3_BUCKET,
            endpoint: env.S3_ENDPOINT,
            region: env.S3_REGION ?? 'us-east-1',
            accessKeyId: env.S3_ACCESS_KEY_ID,
            secretAccessKey: env.S3_SECRET_ACCESS_KEY,
            forcePathStyle: env.S3_FORCE_PATH_STYLE,
            /** The bucket's public base URL: upload URLs point there instead of at the API. */
            publicUrl: env.S3_PUBLIC_URL?.replace(/\/$/, ''),
          }
        : undefined,
    },
    /** Prometheus metrics (domain/metrics.ts) and their listeners. */
    metrics: {
      /** Bearer token that GET /metrics requires on every listener; undefined: none. */
      token: env.METRICS_TOKEN,
      /** Where the separate metrics listeners bind (loopback unless opened on purpose, e.g. 0.0.0.0 in a container). */
      host: env.METRICS_HOST,
      /** The API's own metrics listener (METRICS_PORT); undefined: none. */
      apiPort: env.METRICS_PORT || undefined,
      /**
       * Whether the API's port serves GET /metrics: only while METRICS_PORT is unset, and in production only behind
       * METRICS_TOKEN (the API port is public there; a scrape should not be).
       */
      onApiPort: env.METRICS_PORT === undefined && (env.METRICS_TOKEN !== undefined || env.NODE_ENV !== 'production'),
      /** Production with neither METRICS_PORT nor METRICS_TOKEN: nothing serves the API's metrics (the API warns at start). */
      unservedInProduction: env.NODE_ENV === 'production' && env.METRICS_PORT === undefined && env.METRICS_TOKEN === undefined,
      /** The worker's listener for GET /metrics and GET /health (WORKER_METRICS_PORT); undefined: off. */
      workerPort: env.WORKER_METRICS_PORT || undefined,
      /** The inbound SMTP server's listener for GET /metrics and GET /health (INBOUND_METRICS_PORT); undefined: off. */
      inboundPort: env.INBOUND_METRICS_PORT || undefined,
    },
    /** Dashboard accounts (domain/auth): account emails, their tokens' lifetimes, login throttling, OAuth providers. */
    accounts: {
      /** Sender of verification and password reset emails (SYSTEM_EMAIL_FROM). */
      systemFrom: (env.SYSTEM_EMAIL_FROM !== undefined ? systemSender(env.SYSTEM_EMAIL_FROM) : undefined) ?? defaultSystemSender(publicUrl),
      verificationTtlMs: env.EMAIL_VERIFICATION_TTL,
      resetTtlMs: env.PASSWORD_RESET_TTL,
      /** How long the link of a project invitation works (INVITATION_TTL). */
      invitationTtlMs: env.INVITATION_TTL,
      /** Per `windowMs` (a sliding window): failed logins per account and per client address, account emails asked for per address and per client address. */
      throttle: {
        windowMs: env.AUTH_THROTTLE_WINDOW,
        loginsPerAccount: env.LOGIN_MAX_FAILURES_PER_ACCOUNT,
        loginsPerIp: env.LOGIN_MAX_FAILURES_PER_IP,
        emailsPerAddress: env.ACCOUNT_EMAILS_PER_ADDRESS,
        emailsPerIp: env.ACCOUNT_EMAILS_PER_IP,
      },
      oauth: {
        github: env.GITHUB_CLIENT_ID && env.GITHUB_CLIENT_SECRET
          ? { clientId: env.GITHUB_CLIENT_ID, clientSecret: env.GITHUB_CLIENT_SECRET, webUrl: env.GITHUB_URL.replace(/\/$/, ''), apiUrl: env.GITHUB_API_URL.replace(/\/$/, '') }
          : undefined,
        google: env.GOOGLE_CLIENT_ID && env.GOOGLE_CLIENT_SECRET
          ? { clientId: env.GOOGLE_CLIENT_ID, clientSecret: env.GOOGLE_CLIENT_SECRET, authorizeUrl: env.GOOGLE_AUTHORIZE_URL, tokenUrl: env.GOOGLE_TOKEN_URL, userinfoUrl: env.GOOGLE_USERINFO_URL }
          : undefined,
      },
    },
    /** Billing (domain/billing): plans with their caps, and Stripe when configured. */
    billing: {
      /** Plans by name: their caps (null: none) and, for plans one can subscribe to, the Stripe price. */
      plans: env.BILLING_PLANS ?? {},
      /** The plan of a project that never subscribed, or whose subscription ended. */
      defaultPlan: env.BILLING_DEFAULT_PLAN,
      /** Where Stripe sends the browser back after checkout or the billing portal. */
      returnUrl: (env.BILLING_RETURN_URL ?? publicUrl).replace(/\/$/, ''),
      stripe: env.STRIPE_SECRET_KEY && env.STRIPE_WEBHOOK_SECRET
        ? { secretKey: env.STRIPE_SECRET_KEY, webhookSecret: env.STRIPE_WEBHOOK_SECRET, apiUrl: env.STRIPE_API_URL }
        : undefined,
    },
    /** The event outbox (domain/events/event-dispatcher.ts) and the consumers every process registers. */
    events: {
      /** Registers the probe consumer (domain/events/event-probe.ts): tests and bench:track. */
      probe: env.EVENTS_PROBE,
      outbox: { pollIntervalMs: env.OUTBOX_POLL_INTERVAL, batchSize: env.OUTBOX_BATCH_SIZE, maxAttempts: env.OUTBOX_MAX_ATTEMPTS },
    },
  };
}

/** Parses the environment once; throws listing every bad variable. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return buildConfig(parsed.data);
}

let cached: Config | undefined;
export function config(): Config {
  cached ??= loadConfig();
  return cached;
}
