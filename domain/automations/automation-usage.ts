import type { EntityManager } from '@mikro-orm/postgresql';
import { usageRegistry, type TemplateReference, type UsageReference } from '../usage/usage-registry';
import { sql } from '../db/sql';

/*
 * What automations reference, for the usage endpoints and the template delete guard. Steps are read as clients edit
 * them (`automation_steps`); runs under way carry frozen versions, whose SEND_EMAIL steps fail on a deleted template
 * and go on (the guard makes that rare: an enabled automation's templates cannot be deleted).
 */

/** SEND_EMAIL steps on the template; an enabled automation's step blocks the template's delete. */
async function findByTemplate(em: EntityManager, projectId: string, templateId: string): Promise<TemplateReference[]> {
  const rows = await sql(em).query<{ id: string; name: string; stepId: string; active: boolean }>(
    `select a.id, a.name, s.id as "stepId", a.enabled as active from automation_steps s join automations a on a.id = s.automation_id
     where a.project_id = $1 and s.type = 'SEND_EMAIL' and s.config ->> 'templateId' = $2 order by a.id, s.id`,
    [projectId, templateId],
  );
  return rows.map((r) => ({ id: r.id, name: r.name, where: `step ${r.stepId}`, active: r.active }));
}

/** CONDITION steps whose filter has a condition matching `predicate` at any depth (a JSON path over the stored filter). */
async function findInConditions(em: EntityManager, projectId: string, predicate: string, vars: Record<string, string>): Promise<UsageReference[]> {
  const rows = await sql(em).query<{ id: string; name: string; stepId: string }>(
    `select a.id, a.name, s.id as "stepId" from automation_steps s join automations a on a.id = s.automation_id
     where a.project_id = $1 and s.type = 'CONDITION' and jsonb_path_exists(s.config -> 'filter', $2::jsonpath, $3::jsonb) order by a.id, s.id`,
    [projectId, `$.** ? (${predicate})`, JSON.stringify(vars)],
  );
  return rows.map((r) => ({ id: r.id, name: r.name, where: `step ${r.stepId}` }));
}

const findByField = (em: EntityManager, projectId: string, name: string) =>
  findInConditions(em, projectId, '@.field == $field || @.field starts with $nested', { field: `data.${name}`, nested: `data.${name}.` });

/** Triggers on the event, WAIT_FOR_EVENT steps waiting for it, CONDITION steps testing it. */
async function findByEvent(em: EntityManager, projectId: string, name: string): Promise<UsageReference[]> {
  const triggers = await sql(em).query<{ id: string; name: string }>('select id, name from automations where project_id = $1 and trigger_event = $2 order by id', [projectId, name]);
  const waits = await sql(em).query<{ id: string; name: string; stepId: string }>(
    `select a.id, a.name, s.id as "stepId" from automation_steps s join automations a on a.id = s.automation_id
     where a.project_id = $1 and s.type = 'WAIT_FOR_EVENT' and s.config ->> 'event' = $2 order by a.id, s.id`,
    [projectId, name],
  );
  return [
    ...triggers.map((r) => ({ id: r.id, name: r.name, where: 'trigger' })),
    ...waits.map((r) => ({ id: r.id, name: r.name, where: `step ${r.stepId}` })),
    ...(await findInConditions(em, projectId, '@.event == $event', { event: name })),
  ];
}

let registered = false;

/** Lets the usage endpoints list workflows, and the template delete refuse while an enabled workflow sends it; idempotent. */
export function registerAutomationUsage(): void {
  if (registered) return;
  registered = true;
  usageRegistry.registerTemplateFinder('workflows', findByTemplate);
  usageRegistry.registerFieldFinder('workflows', findByField);
  usageRegistry.registerEventFinder('workflows', findByEvent);
}
