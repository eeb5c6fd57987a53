import { z } from 'zod';
import { validateFilter } from './filter.validate';
import type { Filter, FilterNode } from './filter.types';
import { EVENT_OPERATORS, FIELD_OPERATORS, FILTER_LIMITS, GROUP_OPERATORS, STANDARD_FILTER_FIELDS, isEventCondition, isGroup } from './filter.types';

/**
 * The filter's shape as JSON Schema for the OpenAPI document (recursive through the `Filter` component): groups,
 * field conditions and event conditions with their keys, operators and field names. The validator also checks what
 * a schema states poorly: which operators a field takes, each operator's value, the depth and the total count.
 */
function filterDoc(component: string, opts: { fieldPattern: string; eventConditions: boolean }) {
  return {
    type: 'object',
    required: ['operator', 'conditions'],
    additionalProperties: false,
    properties: {
      operator: { type: 'string', enum: [...GROUP_OPERATORS] },
      conditions: {
        type: 'array',
        maxItems: FILTER_LIMITS.maxConditions,
        items: {
          anyOf: [
            { $ref: `#/components/schemas/${component}` },
            {
              type: 'object',
              title: 'Field condition',
              required: ['field', 'operator'],
              additionalProperties: false,
              properties: {
                field: { type: 'string', pattern: opts.fieldPattern },
                operator: { type: 'string', enum: [...FIELD_OPERATORS] },
                value: { description: 'A string, number or boolean, or a list of them for in / notIn; none for exists / notExists.' },
              },
            },
            ...(opts.eventConditions
              ? [
                  {
                    type: 'object',
                    title: 'Event condition',
                    required: ['event', 'operator'],
                    additionalProperties: false,
                    properties: {
                      event: { type: 'string', minLength: 1, maxLength: 200 },
                      operator: { type: 'string', enum: [...EVENT_OPERATORS] },
                      withinDays: { type: 'integer', minimum: 1, maximum: FILTER_LIMITS.maxDays },
                      minCount: { type: 'integer', minimum: 1, maximum: 1_000_000 },
                    },
                  },
                ]
              : []),
          ],
        },
      },
    },
  };
}

const DATA_FIELD = `data(?:\\.[^.]+){1,${FILTER_LIMITS.maxPathSegments}}`;
const FILTER_DOC = filterDoc('Filter', { fieldPattern: `^(?:${STANDARD_FILTER_FIELDS.join('|')}|${DATA_FIELD})$`, eventConditions: true });

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
    ...FILTER_DOC,
    example: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'in', value: ['pro', 'team'] }, { event: 'purchase', operator: 'hasDone', withinDays: 30 }] },
  });

export const asFilter = (v: Record<string, unknown>): Filter => v as unknown as Filter;

/**
 * A filter over an event's own data (automation triggers): `data.<key>` field conditions and groups only. Validated
 * by the filter validator, then for those two rules; the document states both.
 */
export const EventDataFilterSchema = z
  .record(z.string(), z.unknown(), { error: 'A filter is an object: { operator: "AND" | "OR", conditions: [...] }' })
  .superRefine((value, ctx) => {
    const issues = validateFilter(value);
    for (const issue of issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path, params: { code: issue.code } });
    if (issues.length) return;
    const walk = (n: FilterNode, path: (string | number)[]): void => {
      if (isGroup(n)) return n.conditions.forEach((c, i) => walk(c, [...path, 'conditions', i]));
      if (isEventCondition(n)) {
        ctx.addIssue({ code: 'custom', message: "A trigger filter tests the event's data only (no event conditions)", path, params: { code: 'invalid_field' } });
      } else if (!n.field.startsWith('data.')) {
        ctx.addIssue({ code: 'custom', message: "A trigger filter tests the event's data: fields are data.<key>", path: [...path, 'field'], params: { code: 'invalid_field' } });
      }
    };
    walk(value as unknown as FilterNode, []);
  })
  .meta({
    id: 'EventDataFilter',
    description:
      "A filter on an event's data: a group `{ operator: \"AND\" | \"OR\", conditions: [...] }` of field conditions `{ field: \"data.<key>\", operator, value }` " +
      '(the operators of the filter language) and nested groups.',
    ...filterDoc('EventDataFilter', { fieldPattern: `^${DATA_FIELD}$`, eventConditions: false }),
    example: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] },
  });
