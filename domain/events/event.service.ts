import type { EntityManager } from '@mikro-orm/postgresql';
import { uuidv7 } from '../ids';

export interface NewEvent {
  projectId: string;
  contactId: string;
  name: string;
  data?: Record<string, unknown>;
  source: 'TRACKED' | 'SYSTEM';
  emailId?: string;
}

export interface RecordedEvent extends NewEvent {
  id: string;
  createdAt: Date;
}

export type EventListener = (events: RecordedEvent[]) => void | Promise<void>;
const listeners: EventListener[] = [];

/**
 * The dispatch seam: every recorded event, tracked or emitted, passes through here after it is stored. Features
 * that react to events (workflow triggers, segment membership) register a listener; listeners must hand slow work
 * to Temporal rather than run it inline.
 */
export function onEventsRecorded(listener: EventListener): void {
  listeners.push(listener);
}

/** Inserts the events in one statement. Call `dispatchEvents` once the surrounding transaction has committed. */
export async function insertEvents(em: EntityManager, events: NewEvent[]): Promise<RecordedEvent[]> {
  if (events.length === 0) return [];
  const now = new Date();
  const recorded = events.map((e) => ({ ...e, id: uuidv7(), createdAt: now }));
  const values: unknown[] = [];
  const rows = recorded.map((e) => {
    values.push(e.id, e.projectId, e.contactId, e.name, JSON.stringify(e.data ?? {}), e.source, e.emailId ?? null, now);
    return '(?, ?, ?, ?, ?, ?, ?, ?)';
  });
  await em.execute(
    `insert into events (id, project_id, contact_id, name, data, source, email_id, created_at) values ${rows.join(', ')}`,
    values,
  );
  return recorded;
}

export async function dispatchEvents(events: RecordedEvent[]): Promise<void> {
  if (events.length === 0) return;
  for (const listener of listeners) await listener(events);
}
