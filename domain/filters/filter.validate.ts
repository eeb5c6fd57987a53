import {
  EVENT_OPERATORS,
  FIELD_OPERATORS,
  FILTER_LIMITS,
  GROUP_OPERATORS,
  type Filter,
  type FieldOperator,
} from './filter.types';

export interface FilterIssue {
  path: (string | number)[];
  message: string;
  code: string;
}

type FieldKind = 'text' | 'boolean' | 'timestamp' | 'data';

/** How a filter field is read: a standard column or a path into contact data. */
export type ResolvedField = { kind: 'text' | 'boolean' | 'timestamp'; column: 'email' | 'subscribed' | 'created_at' | 'updated_at' } | { kind: 'data'; path: string[] };

const STANDARD: Record<string, ResolvedField> = {
  email: { kind: 'text', column: 'email' },
  subscribed: { kind: 'boolean', column: 'subscribed' },
  createdAt: { kind: 'timestamp', column: 'created_at' },
  updatedAt: { kind: 'timestamp', column: 'updated_at' },
};

/** Operators each kind of field accepts. */
const OPERATORS_BY_KIND: Record<FieldKind, readonly FieldOperator[]> = {
  text: ['equals', 'notEquals', 'contains', 'notContains', 'startsWith', 'endsWith', 'in', 'notIn'],
  boolean: ['equals', 'notEquals'],
  timestamp: ['before', 'after', 'gt', 'gte', 'lt', 'lte', 'withinLastDays'],
  data: FIELD_OPERATORS,
};

/** `email`, `subscribed`, `createdAt`, `updatedAt` or `data.<key>[.<key>...]`; undefined when it is none of them. */
export function resolveField(field: string): ResolvedField | undefined {
  const standard = STANDARD[field];
  if (standard) return standard;
  if (!field.startsWith('data.')) return undefined;
  const path = field.slice(5).split('.');
  if (path.some((s) => s.length === 0) || path.length > FILTER_LIMITS.maxPathSegments) return undefined;
  return { kind: 'data', path };
}

const ISO_DATE_RE = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
const isIsoDate = (v: unknown): v is string => typeof v === 'string' && ISO_DATE_RE.test(v) && !Number.isNaN(Date.parse(v));

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isPositiveInt = (v: unknown, max: number): v is number => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= max;

const describe = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function checkValue(kind: FieldKind, op: FieldOperator, value: unknown): { message: string; code: string } | undefined {
  const bad = (expected: string) => ({ message: `${op} needs ${expected}; got ${describe(value)}`, code: 'invalid_value' });
  const tooLong = (s: unknown) => typeof s === 'string' && s.length > FILTER_LIMITS.maxStringLength;
  switch (op) {
    case 'equals':
    case 'notEquals':
      if (kind === 'boolean') return typeof value === 'boolean' ? undefined : bad('a boolean value');
      if (kind === 'text') return typeof value === 'string' && !tooLong(value) ? undefined : bad(`a string value (at most ${FILTER_LIMITS.maxStringLength} characters)`);
      if ((typeof value === 'string' && !tooLong(value)) || isFiniteNumber(value) || typeof value === 'boolean') return undefined;
      return bad('a string, number or boolean value (use exists / notExists for missing values)');
    case 'contains':
    case 'notContains':
    case 'startsWith':
    case 'endsWith':
      return typeof value === 'string' && value.length > 0 && !tooLong(value) ? undefined : bad(`a non-empty string value (at most ${FILTER_LIMITS.maxStringLength} characters)`);
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      if (kind === 'timestamp') return isIsoDate(value) ? undefined : bad('an ISO 8601 date or date-time string');
      return isFiniteNumber(value) || (typeof value === 'string' && value.length > 0 && !tooLong(value)) ? undefined : bad('a number or a non-empty string');
    case 'in':
    case 'notIn': {
      const itemOk = (v: unknown) => (kind === 'text' ? typeof v === 'string' && !tooLong(v) : (typeof v === 'string' && !tooLong(v)) || isFiniteNumber(v));
      if (!Array.isArray(value) || value.length === 0 || value.length > FILTER_LIMITS.maxListItems || !value.every(itemOk)) {
        return bad(`a list of 1 to ${FILTER_LIMITS.maxListItems} ${kind === 'text' ? 'strings' : 'strings or numbers'}`);
      }
      return undefined;
    }
    case 'exists':
    case 'notExists':
      return value === undefined || value === null || value === true ? undefined : { message: `${op} takes no value`, code: 'invalid_value' };
    case 'before':
    case 'after':
      return isIsoDate(value) ? undefined : bad('an ISO 8601 date or date-time string');
    case 'withinLastDays':
      return isPositiveInt(value, FILTER_LIMITS.maxDays) ? undefined : bad(`a whole number of days from 1 to ${FILTER_LIMITS.maxDays}`);
  }
}

/**
 * Checks a filter and reports every problem with its path (`conditions.2.operator`). A filter that passes can be
 * compiled. Limits: groups nest at most 5 deep, at most 100 conditions and groups in all.
 */
export function validateFilter(input: unknown): FilterIssue[] {
  const issues: FilterIssue[] = [];
  let count = 0;
  const add = (path: (string | number)[], message: string, code: string) => issues.push({ path, message, code });

  const visitGroup = (node: Record<string, unknown>, path: (string | number)[], depth: number) => {
    if (depth > FILTER_LIMITS.maxDepth) {
      add(path, `Groups nest at most ${FILTER_LIMITS.maxDepth} levels deep`, 'too_deep');
      return;
    }
    if (typeof node.operator !== 'string' || !(GROUP_OPERATORS as readonly string[]).includes(node.operator)) {
      add([...path, 'operator'], `A group's operator is AND or OR; got ${JSON.stringify(node.operator ?? null)}`, 'unknown_operator');
    }
    if (!Array.isArray(node.conditions)) {
      add([...path, 'conditions'], 'conditions must be an array of conditions or groups', 'invalid_type');
      return;
    }
    for (const key of Object.keys(node)) if (key !== 'operator' && key !== 'conditions') add([...path, key], `Unknown key "${key}" in a group`, 'unrecognized_keys');
    node.conditions.forEach((child, i) => visitNode(child, [...path, 'conditions', i], depth));
  };

  const visitNode = (node: unknown, path: (string | number)[], parentDepth: number) => {
    count++;
    if (count === FILTER_LIMITS.maxConditions + 1) add(path, `A filter has at most ${FILTER_LIMITS.maxConditions} conditions`, 'too_many_conditions');
    if (count > FILTER_LIMITS.maxConditions) return;
    if (!isObject(node)) {
      add(path, `A condition is an object; got ${describe(node)}`, 'invalid_type');
      return;
    }
    if ('conditions' in node) return visitGroup(node, path, parentDepth + 1);
    if ('event' in node) return visitEvent(node, path);
    if ('field' in node) return visitField(node, path);
    add(path, 'A condition needs `field` (contact field), `event` (event condition) or `conditions` (nested group)', 'invalid_condition');
  };

  const visitField = (node: Record<string, unknown>, path: (string | number)[]) => {
    for (const key of Object.keys(node)) if (key !== 'field' && key !== 'operator' && key !== 'value') add([...path, key], `Unknown key "${key}" in a field condition`, 'unrecognized_keys');
    const field = typeof node.field === 'string' ? resolveField(node.field) : undefined;
    if (!field) {
      add([...path, 'field'], 'Unknown field: use email, subscribed, createdAt, updatedAt or data.<key> (nested: data.<key>.<key>, at most 10 levels)', 'unknown_field');
    }
    const op = node.operator;
    if (typeof op !== 'string' || !(FIELD_OPERATORS as readonly string[]).includes(op)) {
      add([...path, 'operator'], `Unknown operator ${JSON.stringify(op ?? null)}; one of ${FIELD_OPERATORS.join(', ')}`, 'unknown_operator');
      return;
    }
    if (!field) return;
    if (!OPERATORS_BY_KIND[field.kind].includes(op as FieldOperator)) {
      add([...path, 'operator'], `${node.field as string} takes ${OPERATORS_BY_KIND[field.kind].join(', ')}; not ${op}`, 'unsupported_operator');
      return;
    }
    const problem = checkValue(field.kind, op as FieldOperator, node.value);
    if (problem) add([...path, 'value'], problem.message, problem.code);
  };

  const visitEvent = (node: Record<string, unknown>, path: (string | number)[]) => {
    for (const key of Object.keys(node)) {
      if (!['event', 'operator', 'withinDays', 'minCount'].includes(key)) add([...path, key], `Unknown key "${key}" in an event condition`, 'unrecognized_keys');
    }
    if (typeof node.event !== 'string' || node.event.length < 1 || node.event.length > 200) add([...path, 'event'], 'event is an event name of 1 to 200 characters', 'invalid_value');
    if (typeof node.operator !== 'string' || !(EVENT_OPERATORS as readonly string[]).includes(node.operator)) {
      add([...path, 'operator'], `Unknown event operator ${JSON.stringify(node.operator ?? null)}; one of ${EVENT_OPERATORS.join(', ')}`, 'unknown_operator');
    }
    if (node.withinDays !== undefined && !isPositiveInt(node.withinDays, FILTER_LIMITS.maxDays)) {
      add([...path, 'withinDays'], `withinDays is a whole number from 1 to ${FILTER_LIMITS.maxDays}`, 'invalid_value');
    }
    if (node.minCount !== undefined && !isPositiveInt(node.minCount, 1_000_000)) add([...path, 'minCount'], 'minCount is a whole number from 1 to 1000000', 'invalid_value');
  };

  if (!isObject(input) || !('conditions' in input)) {
    add([], 'A filter is a group: { operator: "AND" | "OR", conditions: [...] }', 'invalid_type');
    return issues;
  }
  visitGroup(input, [], 1);
  return issues;
}

/** The filter, typed, or the first problems found. */
export function parseFilter(input: unknown): { ok: true; filter: Filter } | { ok: false; issues: FilterIssue[] } {
  const issues = validateFilter(input);
  return issues.length ? { ok: false, issues } : { ok: true, filter: input as Filter };
}
