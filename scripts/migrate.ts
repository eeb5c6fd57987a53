// `npm run migrate`: applies pending migrations to DATABASE_URL (production deploys run it before the API).
import { config } from '../domain/config';
import { initOrm, migrate } from '../domain/orm';

async function main() {
  const orm = await initOrm(config().database.url, 2);
  try {
    const applied = await migrate(orm);
    console.log(applied.length ? `Applied: ${applied.join(', ')}` : 'Database is up to date.');
  } finally {
    await orm.close();
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
