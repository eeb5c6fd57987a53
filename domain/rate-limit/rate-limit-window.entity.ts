import { defineEntity, p } from '@mikro-orm/core';

/**
 * Shared request counts of the API rate limit, one row per project and fixed window (rate-limit.store.ts writes and
 * reads them with SQL). The table is UNLOGGED (migration 20261122014000): counters that may vanish in a crash are not
 * worth a WAL write per sync. No foreign key: rows of a deleted project expire with their window.
 */
export const RateLimitWindow = defineEntity({
  name: 'RateLimitWindow',
  tableName: 'rate_limit_windows',
  indexes: [{ properties: ['windowStart'] }],
  properties: {
    projectId: p.uuid().primary(),
    windowStart: p.datetime().primary(),
    count: p.integer().default(0),
  },
});
