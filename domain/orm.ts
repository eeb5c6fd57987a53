import path from 'node:path';
import { MikroORM, defineConfig, type Options, type EntityManager } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { entities } from './entities';

/** ORM options for a database URL. Schema changes only ever come from migrations/ (never schema sync). */
export function ormOptions(databaseUrl: string, poolMax = 20): Options {
  return defineConfig({
    clientUrl: databaseUrl,
    entities,
    extensions: [Migrator],
    discovery: { warnWhenNoEntities: false },
    pool: { min: 0, max: poolMax },
    // Contacts and events are read as plain rows on hot paths; the identity map is per request anyway.
    forceUtcTimezone: true,
    ignoreUndefinedInQuery: true,
    migrations: {
      path: path.join(__dirname, '..', 'migrations'),
      pathTs: path.join(__dirname, '..', 'migrations'),
      glob: '!(*.d).{js,ts}',
      transactional: true,
      allOrNothing: true,
      snapshot: true,
      snapshotName: '.snapshot-mailwright',
    },
  });
}

export async function initOrm(databaseUrl: string, poolMax?: number): Promise<MikroORM> {
  return MikroORM.init(ormOptions(databaseUrl, poolMax));
}

/** Applies pending migrations; returns the names applied. */
export async function migrate(orm: MikroORM): Promise<string[]> {
  const applied = await orm.getMigrator().up();
  return applied.map((m) => m.name);
}

export type { EntityManager, MikroORM };
