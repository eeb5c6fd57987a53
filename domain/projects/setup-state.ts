import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';

/** A project's onboarding checklist (GET /projects/:id/setup-state). */
export interface SetupState {
  domainAdded: boolean;
  domainVerified: boolean;
  firstEmailSent: boolean;
  firstEventTracked: boolean;
  firstCampaignSent: boolean;
  teamInvited: boolean;
}

/**
 * One statement of EXISTS probes, each on an index: domains (project_id), the hourly rollups' primary keys (emails the
 * relay accepted, transactional and campaign alike; tracked event names), campaigns (the partial index on started_at),
 * memberships (primary key: a second member) and invitations (project_id, email).
 */
export async function setupState(em: EntityManager, projectId: string): Promise<SetupState> {
  const row = await sql(em).one<Record<string, boolean>>(
    `select exists (select 1 from domains where project_id = p.id) as domain_added,
            exists (select 1 from domains where project_id = p.id and status = 'VERIFIED') as domain_verified,
            exists (select 1 from analytics_hourly where project_id = p.id and metric = 'sent' and count > 0) as first_email_sent,
            exists (select 1 from event_name_hourly where project_id = p.id and not system) as first_event_tracked,
            exists (select 1 from campaigns where project_id = p.id and started_at is not null) as first_campaign_sent,
            exists (select 1 from memberships where project_id = p.id offset 1) or exists (select 1 from invitations where project_id = p.id) as team_invited
       from (select $1::uuid as id) p`,
    [projectId],
  );
  return {
    domainAdded: row!.domain_added!,
    domainVerified: row!.domain_verified!,
    firstEmailSent: row!.first_email_sent!,
    firstEventTracked: row!.first_event_tracked!,
    firstCampaignSent: row!.first_campaign_sent!,
    teamInvited: row!.team_invited!,
  };
}
