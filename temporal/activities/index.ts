import type { ActivityDeps } from './deps';
import { createEmailActivities } from './email.activities';
import { createDomainActivities } from './domain.activities';
import { createContactJobActivities } from './contact-jobs.activities';
import { createCampaignActivities } from './campaign.activities';
import { createSegmentActivities } from './segment.activities';
import { createAutomationActivities } from './automation.activities';
import { createAccountActivities } from './account.activities';
import { createProjectResetActivities } from './project-reset.activities';
import { createReputationActivities } from './reputation.activities';
import { createInboundActivities } from './inbound.activities';
import { createWebhookOutActivities } from './webhook-out.activities';

/** All activities, bound to their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createEmailActivities(deps),
    ...createDomainActivities(deps),
    ...createContactJobActivities(deps),
    ...createCampaignActivities(deps),
    ...createSegmentActivities(deps),
    ...createAutomationActivities(deps),
    ...createAccountActivities(deps),
    ...createProjectResetActivities(deps),
    ...createReputationActivities(deps),
    ...createInboundActivities(deps),
    ...createWebhookOutActivities(deps),
  };
}

export type { ActivityDeps };
