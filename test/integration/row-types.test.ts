import { initOrm, type MikroORM } from '../../domain/orm';
import { stackEnv } from '../stack-env';
import { db, closeDb } from '../helpers/db';
import { columnOf, selectList } from '../../domain/db/rows';
import type { EmailRow } from '../../domain/emails/email.entity';
import type { EventColumns } from '../../domain/events/event.entity';

/**
 * Raw queries take their row types from the entities (domain/db/rows.ts). That holds only while the entities match
 * the migrated database: a column renamed in a migration but not in its entity (or the other way round) must fail here.
 */
let orm: MikroORM;
beforeAll(async () => {
  orm = await initOrm(stackEnv().databaseUrl, 2);
});
afterAll(async () => {
  await orm.close();
  await closeDb();
});

test('the entities match the migrated database (no schema difference)', async () => {
  const diff = await orm.getSchemaGenerator().getUpdateSchemaSQL({ wrap: false });
  expect(diff.trim()).toBe('');
});

test("selectList names the entity's columns: a select of every email column runs", async () => {
  const all = ['id', 'projectId', 'contactId', 'kind', 'status', 'toEmail', 'toName', 'fromEmail', 'fromName', 'replyTo', 'subject', 'html', 'text', 'headers', 'queuedAt', 'workflowId', 'messageId', 'smtpResponse', 'providerMessageId', 'error', 'attempts', 'sentAt', 'deliveredAt', 'templateId', 'campaignId', 'variant', 'firstOpenedAt', 'firstClickedAt', 'openCount', 'clickCount', 'attachmentIds', 'createdAt', 'updatedAt'] as const satisfies readonly (keyof EmailRow)[];
  const { fields } = await db().query(`select ${selectList<EmailRow>(all)} from emails limit 0`);
  expect(fields.map((f) => f.name)).toEqual([...all]);
  const { rows } = await db().query<{ column_name: string }>(`select column_name from information_schema.columns where table_name = 'emails'`);
  expect(all.map(columnOf).sort()).toEqual(rows.map((r) => r.column_name).sort());
});

test('the same for every events column', async () => {
  const all = ['id', 'projectId', 'contactId', 'name', 'data', 'source', 'emailId', 'campaignId', 'createdAt'] as const satisfies readonly (keyof EventColumns)[];
  const { fields } = await db().query(`select ${selectList<EventColumns>(all)} from events limit 0`);
  expect(fields.map((f) => f.name)).toEqual([...all]);
  const { rows } = await db().query<{ column_name: string }>(`select column_name from information_schema.columns where table_name = 'events'`);
  expect(all.map(columnOf).sort()).toEqual(rows.map((r) => r.column_name).sort());
});
