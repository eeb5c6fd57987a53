import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContactData } from './contact.entity';
import { applyDataChanges, splitContactData } from './contact-data';
import { normalizeEmail } from './email-address';
import { uuidv7 } from '../ids';

export interface ContactRow {
  id: string;
  email: string;
  subscribed: boolean;
  data: ContactData;
  createdAt: Date;
  updatedAt: Date;
}

export interface UpsertResult {
  contact: ContactRow;
  isNew: boolean;
  /** True when an existing contact changed (data or subscription). */
  isUpdate: boolean;
  /** Set when an existing contact's subscription changed. */
  subscriptionChange?: 'subscribed' | 'unsubscribed';
  /** Stored data plus this call's non-persistent values: the template variables of this call. */
  variables: ContactData;
}

const COLUMNS = 'id, email, subscribed, data, created_at as "createdAt", updated_at as "updatedAt"';

/**
 * Creates or updates a contact by (project, email), applying the contact data rules. Runs inside the caller's
 * transaction; the row lock makes concurrent upserts of one email serialize instead of losing data.
 */
export async function upsertContact(
  em: EntityManager,
  input: { projectId: string; email: string; subscribed?: boolean; data?: ContactData; defaultSubscribed: boolean },
): Promise<UpsertResult> {
  const email = normalizeEmail(input.email);
  const changes = splitContactData(input.data);
  for (let attempt = 0; attempt < 3; attempt++) {
    const [existing] = await em.execute<ContactRow[]>(
      `select ${COLUMNS} from contacts where project_id = ? and email = ? for update`,
      [input.projectId, email],
    );
    if (existing) {
      const data = applyDataChanges(existing.data, changes);
      const subscribed = input.subscribed ?? existing.subscribed;
      const changed = data !== existing.data || subscribed !== existing.subscribed;
      let contact = existing;
      if (changed) {
        [contact] = await em.execute<ContactRow[]>(
          `update contacts set data = ?, subscribed = ?, updated_at = now() where id = ? returning ${COLUMNS}`,
          [JSON.stringify(data), subscribed, existing.id],
        );
      }
      return {
        contact: contact!,
        isNew: false,
        isUpdate: changed,
        subscriptionChange:
          subscribed === existing.subscribed ? undefined : subscribed ? 'subscribed' : 'unsubscribed',
        variables: { ...contact!.data, ...changes.transient },
      };
    }
    const data = applyDataChanges({}, changes);
    const [inserted] = await em.execute<ContactRow[]>(
      `insert into contacts (id, project_id, email, subscribed, data) values (?, ?, ?, ?, ?)
       on conflict (project_id, email) do nothing returning ${COLUMNS}`,
      [uuidv7(), input.projectId, email, input.subscribed ?? input.defaultSubscribed, JSON.stringify(data)],
    );
    if (inserted) {
      return { contact: inserted, isNew: true, isUpdate: false, variables: { ...inserted.data, ...changes.transient } };
    }
    // Another transaction inserted the same email between our select and insert: read it again, locked.
  }
  throw new Error(`Could not upsert contact ${email} after 3 attempts`);
}
