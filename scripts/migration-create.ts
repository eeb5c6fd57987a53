// Creates a migration from the difference between the entities and the last snapshot: `npm run migration:create`.
// `-- --refresh-snapshot` only rewrites the snapshot from the entities (after a hand-written migration, once the
// entities match the migrated schema). Needs DATABASE_URL (or the dev database from `npm start`).
import { initOrm } from '../domain/orm';

async function main() {
  const url = process.env.DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5433/mailwright';
  const orm = await initOrm(url, 2, { snapshot: true });
  try {
    if (process.argv.includes('--refresh-snapshot')) {
      const diff = await orm.getSchemaGenerator().getUpdateSchemaSQL({ wrap: false });
      if (diff.trim()) throw new Error(`The entities do not match the migrated database; write a migration first:\n${diff}`);
      // storeCurrentSchema is not public API in MikroORM 6, but it is what createMigration calls to write the snapshot.
      await (orm.getMigrator() as unknown as { storeCurrentSchema(): Promise<void> }).storeCurrentSchema();
      console.log('Snapshot refreshed.');
      return;
    }
    const initial = process.argv.includes('--initial');
    const result = await orm.getMigrator().createMigration(undefined, false, initial);
    console.log(result.fileName ? `Created ${result.fileName}` : 'No changes: entities match the last migration.');
  } finally {
    await orm.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
