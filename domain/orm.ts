import path from 'node:path';
import { MikroORM, defineConfig, type Options, type EntityManager } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { entities } from './entities';

/**
 * ORM options for a database URL. Schema changes only ever come from migrations/ (never schema sync). The migration
 * snapshot is read and written only by the tools that create migrations (`snapshot: true`): the migrator rewrites it
 * from the database after every `up()`, which in the API, the worker, `npm start` and the tests would dirty the
 * working tree with whatever schema that database happens to have.
 */
export function ormOptions(databaseUrl: string, poolMax = 20, opts: { snapshot?: boolean } = {}): Options {
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
      snapshot: opts.snapshot ?? false,
      snapshotName: '.snapshot-mailwright',
    },
  });
}

export async function initOrm(databaseUrl: string, poolMax?: number, opts?: { snapshot?: boolean }): Promise<MikroORM> {
  return MikroORM.init(ormOptions(databaseUrl, poolMax, opts));
}

/** Applies pending migrations; returns the names applied. */
export async function migrate(orm: MikroORM): Promise<string[]> {
  const applied = await orm.getMigrator().up();
  return applied.map((m) => m.name);
}

export type { EntityManager, MikroORM };
