import type { ActivityDeps } from './deps';
import { createEmailActivities } from './email.activities';
import { createDomainActivities } from './domain.activities';
import { createContactJobActivities } from './contact-jobs.activities';
import { createCampaignActivities } from './campaign.activities';

/** All activities, bound to their dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createEmailActivities(deps),
    ...createDomainActivities(deps),
    ...createContactJobActivities(deps),
    ...createCampaignActivities(deps),
  };
}

export type { ActivityDeps };
