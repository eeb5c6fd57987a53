import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { usageRegistry, type UsageReference } from '../usage/usage-registry';
import { isEventCondition, isGroup, type Filter, type FilterNode } from '../filters';

function walk(node: FilterNode, visit: (n: FilterNode) => void): void {
  visit(node);
  if (isGroup(node)) for (const child of node.conditions) walk(child, visit);
}

/** Whether a filter reads the custom field `name` (the data key itself or anything nested below it). */
function filterUsesField(filter: Filter, name: string): boolean {
  let found = false;
  walk(filter, (n) => {
    if (!isGroup(n) && !isEventCondition(n) && (n.field === `data.${name}` || n.field.startsWith(`data.${name}.`))) found = true;
  });
  return found;
}

function filterUsesEvent(filter: Filter, eventName: string): boolean {
  let found = false;
  walk(filter, (n) => {
    if (isEventCondition(n) && n.event === eventName) found = true;
  });
  return found;
}

async function find(em: EntityManager, projectId: string, test: (f: Filter) => boolean): Promise<UsageReference[]> {
  const rows = await sql(em).query<{ id: string; name: string; condition: Filter }>(
    'select id, name, condition from segments where project_id = $1 and condition is not null order by created_at, id',
    [projectId],
  );
  return rows.filter((r) => test(r.condition)).map((r) => ({ id: r.id, name: r.name, where: 'condition' }));
}

let registered = false;

/** Registers the segment finders of the usage endpoints; idempotent. */
export function registerSegmentUsage(): void {
  if (registered) return;
  registered = true;
  usageRegistry.registerFieldFinder('segments', (em, projectId, field) => find(em, projectId, (f) => filterUsesField(f, field)));
  usageRegistry.registerEventFinder('segments', (em, projectId, name) => find(em, projectId, (f) => filterUsesEvent(f, name)));
}
