import { Liquid } from 'liquidjs';
import type { EntityManager } from '@mikro-orm/postgresql';
import { usageRegistry, type UsageReference } from '../usage/usage-registry';
import { likeEscape } from '../pagination';
import { sql } from '../db/sql';

// Static analysis only (never renders), and partials are not followed, so no file is ever read.
const analyzer = new Liquid({ relativeReference: false });

/**
 * Whether a Liquid source reads the contact field `name` (`plan`, or nested `address.city`): contact data is
 * top-level in templates, so `{{ plan }}` and `{{ address.city }}` count, and so does anything below the field.
 */
function templateUsesVariable(source: string, name: string): boolean {
  if (!source.includes('{{') && !source.includes('{%')) return false;
  let paths: (string | number)[][];
  try {
    paths = analyzer.globalVariableSegmentsSync(analyzer.parse(source), { partials: false }) as (string | number)[][];
  } catch {
    return false; // stored templates passed the syntax check; one that no longer parses references nothing
  }
  return paths.some((segments) => {
    const path = segments.join('.');
    return path === name || path.startsWith(`${name}.`);
  });
}

async function findByField(em: EntityManager, projectId: string, field: string): Promise<UsageReference[]> {
  // Cheap text pre-filter on the top-level key; the Liquid analysis decides.
  const like = `%${likeEscape(field.split('.')[0]!)}%`;
  const rows = await sql(em).query<{ id: string; name: string; subject: string; body: string }>(
    `select id, name, subject, body from templates where project_id = $1 and (subject like $2 or body like $3) order by id`,
    [projectId, like, like],
  );
  const refs: UsageReference[] = [];
  for (const r of rows) {
    const where = (['subject', 'body'] as const).filter((part) => templateUsesVariable(r[part], field));
    if (where.length) refs.push({ id: r.id, name: r.name, where: where.join(', ') });
  }
  return refs;
}

let registered = false;

/** Lets `GET /contacts/fields/:field/usage` list the templates that read a field; idempotent. */
export function registerTemplateUsage(): void {
  if (registered) return;
  registered = true;
  usageRegistry.registerFieldFinder('templates', findByField);
}
