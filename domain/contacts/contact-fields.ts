import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { AppError, validationError } from '../errors';
import { RESERVED_DATA_KEYS } from './contact-data';
import { alternatives } from '../text';

type FieldType = 'string' | 'number' | 'boolean' | 'date' | 'object' | 'array';

export interface FieldInfo {
  name: string;
  /** How to address it in filters: `email`, `subscribed`, `data.plan`. */
  path: string;
  standard: boolean;
  type: FieldType;
  /** Share of the project's contacts that have the field, in percent (one decimal). */
  coverage: number;
  /** Contacts per JSON type, when a custom field holds values of several types. */
  types?: Partial<Record<FieldType, number>>;
  count: number;
}

const STANDARD_FIELDS: { name: string; type: FieldType }[] = [
  { name: 'email', type: 'string' },
  { name: 'subscribed', type: 'boolean' },
  { name: 'createdAt', type: 'date' },
  { name: 'updatedAt', type: 'date' },
];

/** ISO dates and date-times are strings in JSON; the field list reports them as dates. (A bound parameter: the
 * query builder would read the regex's `?` as placeholders.) */
const ISO_DATE = String.raw`^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$`;

/** Standard and custom fields with inferred types and coverage (a full pass over the project's contact data). */
export async function listFields(em: EntityManager, projectId: string): Promise<FieldInfo[]> {
  const [count] = await sql(em).query<{ n: string }>('select count(*) as n from contacts where project_id = $1', [projectId]);
  const total = Number(count!.n);
  const rows = await sql(em).query<{ key: string; kind: string; n: string }>(
    `select e.key, case when jsonb_typeof(e.value) = 'string' and (e.value #>> '{}') ~ $1 then 'date'
                        else jsonb_typeof(e.value) end as kind, count(*) as n
     from contacts c, jsonb_each(c.data) e where c.project_id = $2 group by 1, 2`,
    [ISO_DATE, projectId],
  );
  const custom = new Map<string, Partial<Record<FieldType, number>>>();
  for (const r of rows) {
    if (r.kind === 'null') continue;
    const types = custom.get(r.key) ?? {};
    types[r.kind as FieldType] = Number(r.n);
    custom.set(r.key, types);
  }
  const pct = (n: number) => (total === 0 ? 0 : Math.round((n / total) * 1000) / 10);
  const fields: FieldInfo[] = STANDARD_FIELDS.map((f) => ({ name: f.name, path: f.name, standard: true, type: f.type, coverage: total ? 100 : 0, count: total }));
  for (const [name, types] of [...custom].sort(([a], [b]) => a.localeCompare(b))) {
    const entries = Object.entries(types) as [FieldType, number][];
    const n = entries.reduce((sum, [, c]) => sum + c, 0);
    const [type] = entries.sort((a, b) => b[1] - a[1])[0]!;
    fields.push({ name, path: `data.${name}`, standard: false, type, coverage: pct(n), count: n, ...(entries.length > 1 ? { types } : {}) });
  }
  return fields;
}

/**
 * `customFieldName`'s rule as one portable pattern for the OpenAPI document: `data.` optional, then 1-200 characters
 * that are not a standard or reserved field.
 */
export const CUSTOM_FIELD_PATTERN =
  `^(?!data\\.$)(?!(?:data\\.)?(?:${alternatives([...STANDARD_FIELDS.map((f) => f.name), ...RESERVED_DATA_KEYS])})$)(?:data\\.)?[\\s\\S]{1,200}$`;

/** Accepts `plan` or `data.plan`; refuses standard fields, which are not contact data. */
export function customFieldName(field: string): string {
  const name = field.startsWith('data.') ? field.slice(5) : field;
  if (!name || name.length > 200) throw validationError([{ field: 'params.field', message: 'Field names are 1 to 200 characters', code: 'invalid_field' }]);
  if (STANDARD_FIELDS.some((f) => f.name === name) || RESERVED_DATA_KEYS.has(name)) {
    throw new AppError(422, 'VALIDATION_ERROR', `"${name}" is a standard or reserved field, not custom contact data`, {
      errors: [{ field: 'params.field', message: 'Not a custom field', code: 'standard_field' }],
    });
  }
  return name;
}

/** Distinct values of a custom field with how many contacts have each, most common first. */
export async function fieldValues(
  em: EntityManager,
  projectId: string,
  field: string,
  page: { limit: number; offset: number },
): Promise<{ data: { value: unknown; count: number }[]; hasMore: boolean; total: number }> {
  const name = customFieldName(field);
  const rows = await sql(em).query<{ value: unknown; count: string }>(
    `select data -> $1 as value, count(*) as count from contacts
     where project_id = $2 and jsonb_exists(data, $3) and jsonb_typeof(data -> $4) <> 'null'
     group by 1 order by 2 desc, 1 limit $5 offset $6`,
    [name, projectId, name, name, page.limit + 1, page.offset],
  );
  let total = 0;
  if (page.offset === 0) {
    const [c] = await sql(em).query<{ n: string }>(
      `select count(distinct data -> $1) as n from contacts where project_id = $2 and jsonb_exists(data, $3)`,
      [name, projectId, name],
    );
    total = Number(c!.n);
  }
  const hasMore = rows.length > page.limit;
  return { data: rows.slice(0, page.limit).map((r) => ({ value: r.value, count: Number(r.count) })), hasMore, total };
}

/** Removes a custom field from every contact of the project in one statement. */
export async function deleteField(em: EntityManager, projectId: string, field: string): Promise<{ field: string; contactsUpdated: number }> {
  const name = customFieldName(field);
  const [row] = await sql(em).query<{ n: string }>(
    `with changed as (update contacts set data = data - $1, updated_at = now() where project_id = $2 and jsonb_exists(data, $3) returning 1)
     select count(*) as n from changed`,
    [name, projectId, name],
  );
  return { field: name, contactsUpdated: Number(row!.n) };
}
