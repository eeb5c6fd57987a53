import type { MikroORM } from '@mikro-orm/postgresql';
import { splitContactData, type DataChanges } from './contact-data';
import { batchItem, upsertContact, writeContactBatch, type BatchItem, type UpsertInput, type UpsertResult } from './contact.repository';
import type { ContactData } from './contact.entity';
import { sql } from '../db/sql';
import { ProjectBatcher } from '../project-batcher';

export interface TrackCall {
  email: string;
  event: string;
  subscribed?: boolean;
  data?: ContactData;
}

export interface TrackResult {
  contactId: string;
  eventId: string;
  timestamp: Date;
}

interface Item extends BatchItem {
  /** Set by the batch write. */
  result?: UpsertResult;
}

/**
 * Where the hot paths create and update contacts: /v1/track calls and /v1/send recipients. Upserts of one project that
 * arrive within `maxWaitMs` are written by one statement (one commit), which is what lets a small machine keep up
 * with a busy site; each call still answers only after its contact (and event) are committed.
 */
export class ContactIntake {
  private readonly batcher: ProjectBatcher<Item>;

  constructor(
    private readonly orm: MikroORM,
    opts: { maxBatch: number; maxWaitMs: number },
  ) {
    // One email per batch: a second call for it goes into the next one.
    this.batcher = new ProjectBatcher((projectId, items) => this.write(projectId, items), { ...opts, key: (item) => item.email });
  }

  /** The same contract as upsertContact (contact.repository.ts), batched with concurrent calls. */
  upsert(input: UpsertInput): Promise<UpsertResult> {
    return this.enqueue(input, splitContactData(input.data));
  }

  private async enqueue(input: UpsertInput, changes: DataChanges): Promise<UpsertResult> {
    const item: Item = batchItem(input, changes);
    await this.batcher.add(input.projectId, [item]);
    return item.result!;
  }

  /**
   * POST /v1/track: new contacts are subscribed unless the call says otherwise; the event carries the call's data
   * values (stored and non-persistent ones alike), the contact keeps only the persistent ones.
   */
  async track(projectId: string, call: TrackCall): Promise<TrackResult> {
    const changes = splitContactData(call.data);
    const result = await this.enqueue(
      {
        projectId,
        email: call.email,
        subscribed: call.subscribed,
        data: call.data,
        defaultSubscribed: true,
        source: { via: 'track', event: call.event },
        track: { name: call.event, data: { ...changes.set, ...changes.transient } },
      },
      changes, // split once: the same split gives the contact's changes and the event's data
    );
    const tracked = result.trackedEvent!;
    return { contactId: result.contact.id, eventId: tracked.id, timestamp: tracked.createdAt };
  }

  private async write(projectId: string, items: Item[]): Promise<void> {
    const em = this.orm.em.fork();
    const results = await writeContactBatch(sql(em), projectId, items);
    await Promise.all(
      items.map(async (item, i) => {
        // Another transaction created this contact while the batch ran: do this call alone, with its own retry.
        item.result = results[i] ?? (await upsertContact(em, item.input, item.changes));
      }),
    );
  }

  /** Writes whatever is waiting (on shutdown). */
  flushAll(): void {
    this.batcher.flushAll();
  }
}
