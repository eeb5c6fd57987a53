// Creates a migration from the difference between the entities and the last snapshot: `npm run migration:create`.
// Needs DATABASE_URL (or the dev database from `npm start`).
import { initOrm } from '../domain/orm';

async function main() {
  const url = process.env.DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5433/mailwright';
  const orm = await initOrm(url, 2);
  try {
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
