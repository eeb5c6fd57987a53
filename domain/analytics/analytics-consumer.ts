import type { EventConsumer } from '../events/event-consumer';
import { engagementOutcome } from '../events/engagement';

/** Service events that count toward a metric besides the engagement outcomes (domain/events/engagement.ts). */
const DELIVERY_METRIC_OF: Readonly<Record<string, string>> = { 'email.sent': 'sent', 'email.failed': 'failed' };

/** The metrics analytics report, in a stable order. */
export const ANALYTICS_METRICS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed', 'failed'] as const;
export type AnalyticsMetric = (typeof ANALYTICS_METRICS)[number];

const hourOf = (d: Date) => {
  const t = new Date(d);
  t.setUTCMinutes(0, 0, 0);
  return t.toISOString();
};

/** Adds `n` under the key made of `parts` (joined by a character no part contains). */
function bump(counts: Map<string, number>, parts: string[]): void {
  const key = parts.join('\u0000');
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/**
 * The `analytics` consumer: counts each event into the hourly rollups, in the dispatcher's transaction (a
 * transactional consumer), so an event is counted exactly once however often it is delivered: the counts commit with
 * the outbox rows' removal, or not at all. Email metrics from the service events (a transient bounce report is not a
 * bounce: the provider retries), tracked events per name. One upsert per table per call, over arrays.
 */
export const analyticsConsumer: EventConsumer = {
  name: 'analytics',
  transactional: true,
  timeoutMs: 30_000,
  async handle(events, { tx }) {
    if (!tx) throw new Error('the analytics consumer runs in the dispatcher transaction');
    const metrics = new Map<string, number>();
    const names = new Map<string, number>();
    for (const e of events) {
      const metric = DELIVERY_METRIC_OF[e.name] ?? engagementOutcome(e);
      if (metric) bump(metrics, [e.projectId, metric, hourOf(e.createdAt)]);
      if (e.source === 'TRACKED') bump(names, [e.projectId, e.name, hourOf(e.createdAt)]);
    }
    const upsert = async (table: 'analytics_hourly' | 'event_name_hourly', column: 'metric' | 'name', counts: Map<string, number>) => {
      if (counts.size === 0) return;
      const rows = [...counts].map(([key, n]) => [...key.split('\u0000'), n] as [string, string, string, number]);
      await tx.query(
        `insert into ${table} (project_id, ${column}, hour, count)
         select * from unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::bigint[])
         on conflict (project_id, ${column}, hour) do update set count = ${table}.count + excluded.count`,
        [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2]), rows.map((r) => r[3])],
      );
    };
    await upsert('analytics_hourly', 'metric', metrics);
    await upsert('event_name_hourly', 'name', names);
  },
};
