import { z } from 'zod';
import { validateFilter } from './filter.validate';
import type { Filter } from './filter.types';
import { FILTER_LIMITS } from './filter.types';

/**
 * The filter as a zod schema for request bodies (segment `condition`, campaign `audienceFilter`, workflow CONDITION
 * steps). Validation is the filter validator's, so field errors carry precise paths such as
 * `condition.conditions.2.operator`.
 */
export const FilterSchema = z
  .record(z.string(), z.unknown(), { error: 'A filter is an object: { operator: "AND" | "OR", conditions: [...] }' })
  .superRefine((value, ctx) => {
    for (const issue of validateFilter(value)) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path, params: { code: issue.code } });
  })
  .meta({
    id: 'Filter',
    description:
      'A group `{ operator: "AND" | "OR", conditions: [...] }`. A condition is a field condition `{ field, operator, value }` ' +
      '(fields: email, subscribed, createdAt, updatedAt, data.<key>[.<key>]; operators: equals, notEquals, contains, notContains, ' +
      'startsWith, endsWith, gt, gte, lt, lte, in, notIn, exists, notExists, before, after, withinLastDays), an event condition ' +
      '`{ event, operator: "hasDone" | "hasNotDone", withinDays?, minCount? }`, or a nested group. ' +
      `At most ${FILTER_LIMITS.maxDepth} levels and ${FILTER_LIMITS.maxConditions} conditions.`,
    example: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'in', value: ['pro', 'team'] }, { event: 'purchase', operator: 'hasDone', withinDays: 30 }] },
  });

export const asFilter = (v: Record<string, unknown>): Filter => v as unknown as Filter;
