import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { usageRegistry, type TemplateReference, type UsageReference } from '../usage/usage-registry';
import { segmentDeletionGuards } from '../segments/segment-guards';
import { pgTextArray } from '../filters';
import { ACTIVE_CAMPAIGN_STATUSES } from './campaign.entity';

/*
 * These run inside the callers' transactions (the template delete holds its row lock while it asks), hence em.execute
 * on the caller's EntityManager rather than prepared statements on a pool connection of their own.
 */

const ACTIVE = pgTextArray(ACTIVE_CAMPAIGN_STATUSES);

/** Every campaign of the project on the template; an active one (scheduled, sending, paused) blocks the template's delete. */
async function findByTemplate(em: EntityManager, projectId: string, templateId: string): Promise<TemplateReference[]> {
  const rows = await sql(em).query<{ id: string; name: string; active: boolean }>(
    'select id, name, status = any($1::text[]) as active from campaigns where project_id = $2 and template_id = $3 order by id',
    [ACTIVE, projectId, templateId],
  );
  return rows.map((r) => ({ id: r.id, name: r.name, active: r.active }));
}

/**
 * Filtered campaigns whose `audienceFilter` has a condition matching `predicate` at any depth (a JSON path over the
 * stored filter, so nothing is loaded to be walked in JavaScript). `vars` are the path's variables.
 */
async function findByFilter(em: EntityManager, projectId: string, predicate: string, vars: Record<string, string>): Promise<UsageReference[]> {
  const rows = await sql(em).query<{ id: string; name: string }>(
    `select id, name from campaigns
     where project_id = $1 and audience_type = 'FILTERED' and jsonb_path_exists(audience_filter, $2::jsonpath, $3::jsonb)
     order by id`,
    [projectId, `$.** ? (${predicate})`, JSON.stringify(vars)],
  );
  return rows.map((r) => ({ id: r.id, name: r.name, where: 'audienceFilter' }));
}

/** A field condition on the custom field `name` (`data.<name>`) or anything nested below it. */
const findByField = (em: EntityManager, projectId: string, name: string) =>
  findByFilter(em, projectId, '@.field == $field || @.field starts with $nested', { field: `data.${name}`, nested: `data.${name}.` });

/** An event condition on the event `name`. */
const findByEvent = (em: EntityManager, projectId: string, name: string) => findByFilter(em, projectId, '@.event == $event', { event: name });

/** `DELETE /segments/:id` is refused while a SCHEDULED, SENDING or PAUSED campaign sends to the segment. */
async function segmentGuard(em: EntityManager, projectId: string, segmentId: string): Promise<string | undefined> {
  const [row] = await sql(em).query<{ name: string; status: string }>(
    'select name, status from campaigns where project_id = $1 and segment_id = $2 and status = any($3::text[]) order by id limit 1',
    [projectId, segmentId, ACTIVE],
  );
  return row ? `it is the audience of the ${row.status} campaign "${row.name}"` : undefined;
}

let registered = false;

/**
 * Lets the usage endpoints list campaigns (template, contact field and event usage), and the template and segment
 * deletes refuse while an active campaign depends on them; idempotent.
 */
export function registerCampaignUsage(): void {
  if (registered) return;
  registered = true;
  usageRegistry.registerTemplateFinder('campaigns', findByTemplate);
  usageRegistry.registerFieldFinder('campaigns', findByField);
  usageRegistry.registerEventFinder('campaigns', findByEvent);
  segmentDeletionGuards.register(segmentGuard);
}
