import type { Pool } from 'pg';
import type { EventConsumer, OutboxEvent } from '../events/event-consumer';
import { compileFilter, asFilter } from '../filters';
import { LruCache } from '../cache/lru';
import { uuidv7 } from '../ids';
import type { AutomationGraph } from './graph';
import type { ExecutionRow } from './automation.entity';
import { EXECUTION_SELECT } from './automation.entity';
import { sql } from '../db/sql';
import { runStartOf, type AutomationRunControl } from './execution.service';
import { automationRunIdSql } from '../../temporal/workflow-ids';

/** What the consumer needs of Temporal: starting runs and signalling waiting ones. */
export interface AutomationTriggerControl extends Pick<AutomationRunControl, 'startAutomationRun'> {
  signalAutomationEvent(input: { workflowId: string; event: { id: string; name: string; data: Record<string, unknown>; createdAt: string } }): Promise<void>;
}

interface TriggerRow {
  id: string;
  projectId: string;
  triggerEvent: string;
  triggerFilter: Record<string, unknown> | null;
  allowReentry: boolean;
  publishedVersion: number;
}

interface WaitingRow {
  workflowId: string;
  contactId: string;
  waitingEvent: string;
  waitSince: Date;
}

/** Frozen graph versions never change: cached by automation and version. */
const graphs = new LruCache<Promise<AutomationGraph>>({ maxEntries: 1_000, maxWeight: 64 * 1024 * 1024 });

function graphOf(pool: Pool, automationId: string, version: number): Promise<AutomationGraph> {
  const key = `${automationId}:${version}`;
  const hit = graphs.get(key);
  if (hit) return hit;
  const pending = sql(pool)
    .one<{ graph: AutomationGraph }>('select graph from automation_versions where automation_id = $1 and version = $2', [automationId, version])
    .then((row) => {
      if (!row) throw new Error(`automation ${automationId} has no version ${version}`);
      return row.graph;
    });
  graphs.set(key, pending, 1);
  pending.then(
    (g) => graphs.reweigh(key, pending, JSON.stringify(g).length),
    () => graphs.delete(key, pending),
  );
  return pending;
}

/** Whether the event's data matches a trigger's filter (the filter language over `data.*`, evaluated by Postgres). */
async function matchesFilter(pool: Pool, projectId: string, eventId: string, filter: Record<string, unknown>): Promise<boolean> {
  const f = compileFilter(asFilter(filter), { projectId, alias: 'e' });
  return (await sql(pool).one(`select 1 from events e where e.id = $1 and (${f.at(2)})`, [eventId, ...f.params])) !== undefined;
}

/**
 * The automations' outbox consumer (`automations`): every recorded event of the project (tracked, or emitted by the
 * service: contact.subscribed, email.open, segment.<slug>.entry, ...) is matched against the enabled automations'
 * triggers, and each match stores an execution row and starts its run, `automation/<automationId>/<contactId>/<n>`.
 * A contact enters an automation once, unless it allows re-entry, and then never while a run of it is active (a
 * partial unique index says so). The row carries the event's id: a redelivered event finds its row and starts the
 * same run again, which Temporal refuses as already started (ids are never reused), so an event starts at most one
 * run per automation. The same events wake runs waiting in WAIT_FOR_EVENT for them (a signal to the run).
 */
export function createAutomationConsumer(control: () => Promise<AutomationTriggerControl>): EventConsumer {
  return {
    name: 'automations',
    timeoutMs: 120_000,
    async handle(events: OutboxEvent[], { pool }) {
      const names = [...new Set(events.map((e) => e.name))];
      const projects = [...new Set(events.map((e) => e.projectId))];
      const contacts = [...new Set(events.map((e) => e.contactId))];
      const [triggers, waiting] = await Promise.all([
        sql(pool).query<TriggerRow>(
          `select id, project_id as "projectId", trigger_event as "triggerEvent", trigger_filter as "triggerFilter", allow_reentry as "allowReentry",
                  published_version as "publishedVersion"
           from automations where enabled and published_version is not null and project_id = any($1::uuid[]) and trigger_event = any($2::text[])`,
          [projects, names],
        ),
        sql(pool).query<WaitingRow>(
          `select workflow_id as "workflowId", contact_id as "contactId", waiting_event as "waitingEvent", wait_since as "waitSince"
           from automation_executions where contact_id = any($1::uuid[]) and waiting_event = any($2::text[]) and status = 'WAITING'`,
          [contacts, names],
        ),
      ]);
      if (triggers.length === 0 && waiting.length === 0) return;
      const temporal = await control();

      // Runs to start: the first matching event of each (automation, contact) pair in this batch (a later one could
      // only meet the run the first one starts: no second entry while it is active).
      const starts = new Map<string, { event: OutboxEvent; trigger: TriggerRow }>();
      for (const event of events) {
        for (const t of triggers) {
          if (t.projectId !== event.projectId || t.triggerEvent !== event.name) continue;
          const key = `${t.id}:${event.contactId}`;
          if (starts.has(key)) continue;
          if (t.triggerFilter && !(await matchesFilter(pool, event.projectId, event.id, t.triggerFilter))) continue;
          starts.set(key, { event, trigger: t });
        }
      }
      if (starts.size) await startRuns(pool, temporal, [...starts.values()]);

      const signals: Promise<void>[] = [];
      for (const w of waiting) {
        const since = w.waitSince.getTime();
        for (const e of events) {
          if (e.contactId !== w.contactId || e.name !== w.waitingEvent || e.createdAt.getTime() < since) continue;
          signals.push(temporal.signalAutomationEvent({ workflowId: w.workflowId, event: { id: e.id, name: e.name, data: e.data, createdAt: e.createdAt.toISOString() } }));
        }
      }
      await Promise.all(signals);
    },
  };
}

/**
 * Stores one execution per match (skipped where the contact may not enter), in one statement, then starts the runs of
 * every row these events own, including rows stored by an earlier delivery whose start did not happen.
 */
async function startRuns(pool: Pool, temporal: AutomationTriggerControl, matches: { event: OutboxEvent; trigger: TriggerRow }[]): Promise<void> {
  const graphsByVersion = new Map<string, AutomationGraph>();
  for (const { trigger } of matches) {
    const key = `${trigger.id}:${trigger.publishedVersion}`;
    if (!graphsByVersion.has(key)) graphsByVersion.set(key, await graphOf(pool, trigger.id, trigger.publishedVersion));
  }
  const entries = matches.map(({ trigger }) => graphsByVersion.get(`${trigger.id}:${trigger.publishedVersion}`)!.entry);
  await sql(pool).run(
    `insert into automation_executions (id, project_id, automation_id, contact_id, n, version, workflow_id, status, current_step_id, context, trigger_event_id)
     select t.id, t.project_id, t.automation_id, t.contact_id, m.n + 1, t.version, ${automationRunIdSql('t.automation_id', 't.contact_id', '(m.n + 1)')},
            'RUNNING', t.entry, e.data, t.event_id
     from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::int[], $6::uuid[], $7::uuid[], $8::boolean[])
       as t(id, project_id, automation_id, contact_id, version, entry, event_id, reentry)
     join events e on e.id = t.event_id
     cross join lateral (select coalesce(max(x.n), 0) as n from automation_executions x where x.automation_id = t.automation_id and x.contact_id = t.contact_id) m
     where (t.reentry or m.n = 0)
       and not exists (select 1 from automation_executions x where x.automation_id = t.automation_id and x.trigger_event_id = t.event_id)
     on conflict do nothing`,
    [
      matches.map(() => uuidv7()),
      matches.map((m) => m.event.projectId),
      matches.map((m) => m.trigger.id),
      matches.map((m) => m.event.contactId),
      matches.map((m) => m.trigger.publishedVersion),
      entries,
      matches.map((m) => m.event.id),
      matches.map((m) => m.trigger.allowReentry),
    ],
  );
  const rows = await sql(pool).query<ExecutionRow>(
    `select ${EXECUTION_SELECT} from automation_executions
     where trigger_event_id = any($1::uuid[]) and automation_id = any($2::uuid[]) and status in ('RUNNING', 'WAITING')`,
    [[...new Set(matches.map((m) => m.event.id))], [...new Set(matches.map((m) => m.trigger.id))]],
  );
  await Promise.all(
    rows.map(async (r) => {
      const graph = graphsByVersion.get(`${r.automationId}:${r.version}`) ?? (await graphOf(pool, r.automationId, r.version));
      await temporal.startAutomationRun(runStartOf(r, graph));
    }),
  );
}
