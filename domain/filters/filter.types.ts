/** The filter language shared by segments, campaign audiences and workflow CONDITION steps. */

export const FIELD_OPERATORS = [
  'equals',
  'notEquals',
  'contains',
  'notContains',
  'startsWith',
  'endsWith',
  'gt',
  'gte',
  'lt',
  'lte',
  'in',
  'notIn',
  'exists',
  'notExists',
  'before',
  'after',
  'withinLastDays',
] as const;
export type FieldOperator = (typeof FIELD_OPERATORS)[number];

export const EVENT_OPERATORS = ['hasDone', 'hasNotDone'] as const;
type EventOperator = (typeof EVENT_OPERATORS)[number];

export const GROUP_OPERATORS = ['AND', 'OR'] as const;
type GroupOperator = (typeof GROUP_OPERATORS)[number];

export type Scalar = string | number | boolean;

export interface FieldCondition {
  field: string;
  operator: FieldOperator;
  value?: Scalar | Scalar[] | null;
}

export interface EventCondition {
  event: string;
  operator: EventOperator;
  /** Only events of the last N days count. */
  withinDays?: number;
  /** At least N such events (default 1). With hasNotDone: fewer than N. */
  minCount?: number;
}

export interface FilterGroup {
  operator: GroupOperator;
  conditions: FilterNode[];
}

export type FilterNode = FieldCondition | EventCondition | FilterGroup;
export type Filter = FilterGroup;

export const FILTER_LIMITS = {
  /** Groups nest at most this deep (the top group is depth 1). */
  maxDepth: 5,
  /** Conditions and groups in one filter, all levels together. */
  maxConditions: 100,
  /** Items of an in / notIn list. */
  maxListItems: 1000,
  maxStringLength: 1000,
  maxPathSegments: 10,
  maxDays: 36500,
} as const;

export const STANDARD_FILTER_FIELDS = ['email', 'subscribed', 'createdAt', 'updatedAt'] as const;

export const isGroup = (n: FilterNode): n is FilterGroup => 'conditions' in n;
export const isEventCondition = (n: FilterNode): n is EventCondition => 'event' in n;
