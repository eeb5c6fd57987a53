import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { logger } from './logger';

/**
 * The process's Prometheus metrics (README › Metrics and health). One registry per process: the API and the worker
 * each serve their own at `GET /metrics`; a metric a process never touches shows only its HELP and TYPE lines.
 * Label values come from closed sets (route templates, workflow names, outcome words), never from request data.
 */
const metricsRegistry = new Registry();

const registers = [metricsRegistry];

/** Adds Node's process metrics (CPU, memory, event loop lag, GC, handles): once, when a server process starts. */
export function enableProcessMetrics(): void {
  if (processMetrics) return;
  processMetrics = true;
  collectDefaultMetrics({ register: metricsRegistry });
}
let processMetrics = false;

/** The text exposition format, and its content type. */
export async function metricsText(): Promise<{ contentType: string; body: string }> {
  return { contentType: metricsRegistry.contentType, body: await metricsRegistry.metrics() };
}

// -- API --------------------------------------------------------------------------------------------------------

export const httpRequests = new Counter({
  name: 'mailwright_http_requests_total',
  help: 'HTTP requests answered, by method, route template (unmatched: no route) and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers,
});

export const httpRequestDuration = new Histogram({
  name: 'mailwright_http_request_duration_seconds',
  help: 'Time from receiving a request to its response being ready, by method, route template and status',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers,
});

export const rateLimitRefusals = new Counter({
  name: 'mailwright_rate_limit_refusals_total',
  help: 'API-key requests refused with 429 RATE_LIMIT_EXCEEDED, by route template',
  labelNames: ['route'] as const,
  registers,
});

// -- Both processes ----------------------------------------------------------------------------------------------

export const workflowStarts = new Counter({
  name: 'mailwright_workflow_starts_total',
  help: 'Workflow starts requested from this process, by workflow type and outcome (started, already_started, error)',
  labelNames: ['workflow', 'outcome'] as const,
  registers,
});

// -- Worker ------------------------------------------------------------------------------------------------------

/** Where an email was sent from: its delivery path. */
export type EmailSource = 'transactional' | 'automation' | 'campaign';
/** What an email's delivery attempt led to (the email's status after it, or `retry`/`skipped`). */
export type EmailOutcomeStatus = 'sent' | 'bounced' | 'failed' | 'cancelled' | 'suppressed' | 'retry' | 'skipped';

export const emailOutcomes = new Counter({
  name: 'mailwright_emails_total',
  help: 'Emails by the status a delivery attempt left them in (sent, bounced, failed, cancelled, suppressed), or retry (transient failure) and skipped (already final), by source',
  labelNames: ['source', 'status'] as const,
  registers,
});

export const smtpSendDuration = new Histogram({
  name: 'mailwright_smtp_send_duration_seconds',
  help: 'Duration of one SMTP send (DKIM signing and the SMTP transaction), by outcome (sent, rejected: a 5xx reply, error)',
  labelNames: ['outcome'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers,
});

export const inboundMessages = new Counter({
  name: 'mailwright_inbound_messages_total',
  help: 'Inbound SMTP server and bounce mailbox: messages stored, duplicate (the same bytes again, or a mailbox message read again), too_large, rate_limited, store_failed; recipients refused (recipient_refused)',
  labelNames: ['outcome'] as const,
  registers,
});

export const inboundProcessed = new Counter({
  name: 'mailwright_inbound_processed_total',
  help: 'Inbound messages processed, by kind (bounce, complaint, unsubscribe, auto-reply, reply, unknown) and outcome (applied, unchanged, unmatched)',
  labelNames: ['kind', 'outcome'] as const,
  registers,
});

export const smtpSendErrors = new Counter({
  name: 'mailwright_smtp_send_errors_total',
  help: 'SMTP sends that failed, by reason: 5xx (permanent reply), 4xx (transient reply), or the connection error code (ECONNECTION, ETIMEDOUT, ...)',
  labelNames: ['reason'] as const,
  registers,
});

export const outboxLag = new Histogram({
  name: 'mailwright_outbox_lag_seconds',
  help: 'Time from an event being recorded to its hand-over to a consumer of the outbox (each attempt), by consumer',
  labelNames: ['consumer'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200],
  registers,
});

/** Outbox rows per consumer, read when /metrics is scraped (set by the process that runs a dispatcher). */
type OutboxSampler = () => Promise<{ consumer: string; pending: number; parked: number }[]>;
let outboxSampler: OutboxSampler | undefined;

/** Makes /metrics report the outbox's rows by consumer from `sampler` (the worker's event dispatcher). */
export function sampleOutboxRows(sampler: OutboxSampler): void {
  outboxSampler = sampler;
}

new Gauge({
  name: 'mailwright_outbox_rows',
  help: 'Outbox rows not yet accepted, by consumer and state (pending: due or waiting for a retry; parked: gave up), read at scrape time',
  labelNames: ['consumer', 'state'] as const,
  registers,
  async collect() {
    if (!outboxSampler) return;
    try {
      const rows = await outboxSampler();
      this.reset(); // a consumer with no rows left reports none instead of its last count
      for (const r of rows) {
        this.set({ consumer: r.consumer, state: 'pending' }, r.pending);
        this.set({ consumer: r.consumer, state: 'parked' }, r.parked);
      }
    } catch (err) {
      logger.warn({ err }, 'metrics: could not read the outbox rows; reporting the last values');
    }
  },
});

/** The reason label of a failed SMTP send: the reply's class, or the error code (nodemailer's and Node's are E + capitals). */
export function smtpErrorReason(err: unknown): string {
  const e = err as { responseCode?: unknown; code?: unknown };
  if (typeof e.responseCode === 'number' && e.responseCode >= 400 && e.responseCode < 600) return `${Math.floor(e.responseCode / 100)}xx`;
  if (typeof e.code === 'string' && /^E[A-Z_]{2,30}$/.test(e.code)) return e.code;
  return 'other';
}
