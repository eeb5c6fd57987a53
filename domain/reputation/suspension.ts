import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../errors';
import { sql, type Sql } from '../db/sql';

/** True while the project has an active (not lifted) suspension of its marketing sends (domain/reputation). */
export async function isSuspended(db: Sql, projectId: string): Promise<boolean> {
  return (await db.one('select 1 from project_suspensions where project_id = $1 and lifted_at is null', [projectId])) !== undefined;
}

/** 403 PROJECT_SUSPENDED while the project has an active suspension (marketing sends: campaigns). */
export async function assertNotSuspended(em: EntityManager, projectId: string): Promise<void> {
  const row = await sql(em).one<{ reason: string }>(`select reason from project_suspensions where project_id = $1 and lifted_at is null`, [projectId]);
  if (row) {
    throw new AppError(403, 'PROJECT_SUSPENDED', `The project's marketing sends are suspended (${row.reason === 'BOUNCE_RATE' ? 'bounce' : 'complaint'} rate over the threshold)`, {
      suggestion: 'Clean the list, then an owner lifts the suspension (POST /users/@me/projects/:id/security/lift).',
    });
  }
}

