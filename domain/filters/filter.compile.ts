import { likeEscape } from '../pagination';
import { isEventCondition, isGroup, type EventCondition, type FieldCondition, type Filter, type FilterNode, type Scalar } from './filter.types';
import { resolveField, type ResolvedField } from './filter.validate';

/**
 * A WHERE expression over the `contacts` table (aliased) and its values in order. `at(first)` is the expression with
 * its placeholders numbered from `$first`: the values go at that position of the statement's values.
 */
export interface CompiledFilter {
  at(first: number): string;
  params: unknown[];
}

export interface CompileOptions {
  /** Alias of the contacts table in the surrounding query (default `c`). Must be a plain identifier. */
  alias?: string;
  /** The project whose events event conditions read. */
  projectId: string;
}

/**
 * A Postgres array literal (`{"a","b"}`) for a `$n::text[]` parameter: arrays travel as one bound text value, so the
 * query builder never expands them and field paths are never part of the SQL text.
 */
export function pgTextArray(items: readonly string[]): string {
  return `{${items.map((s) => `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`).join(',')}}`;
}

class Builder {
  readonly params: unknown[] = [];
  constructor(
    private readonly c: string,
    private readonly projectId: string,
  ) {}

  /** Adds a value; returns its placeholder. */
  p(value: unknown, cast = ''): string {
    return `$${this.params.push(value)}${cast}`;
  }

  node(n: FilterNode): string {
    if (isGroup(n)) {
      if (n.conditions.length === 0) return n.operator === 'AND' ? 'true' : 'false';
      return `(${n.conditions.map((child) => this.node(child)).join(n.operator === 'AND' ? ' and ' : ' or ')})`;
    }
    if (isEventCondition(n)) return this.event(n);
    return this.field(n);
  }

  private event(n: EventCondition): string {
    const c = this.c;
    const min = n.minCount ?? 1;
    // Placeholders are added in the order they appear in the SQL text.
    const window = () => (n.withinDays ? ` and e.created_at >= now() - make_interval(days => ${this.p(n.withinDays, '::int')})` : '');
    if (n.operator === 'hasDone') {
      // Uncorrelated: the planner hashes the project's matching contacts once (a semi-join), not a lookup per contact.
      const head = `${c}.id in (select e.contact_id from events e where e.project_id = ${this.p(this.projectId, '::uuid')} and e.name = ${this.p(n.event)}`;
      const w = window();
      const having = min > 1 ? ` group by e.contact_id having count(*) >= ${this.p(min, '::int')}` : '';
      return `${head}${w}${having})`;
    }
    const head = `not exists (select 1 from events e where e.project_id = ${this.p(this.projectId, '::uuid')} and e.contact_id = ${c}.id and e.name = ${this.p(n.event)}`;
    const w = window();
    if (min === 1) return `${head}${w})`;
    // "Fewer than N times": no N-th event exists for the contact (an index range read per contact, stops at N).
    return `${head}${w} offset ${this.p(min - 1, '::int')} limit 1)`;
  }

  private field(n: FieldCondition): string {
    const f = resolveField(n.field) as ResolvedField;
    if (f.kind === 'data') return this.dataField(f.path, n);
    const col = `${this.c}.${f.column}`;
    const v = n.value;
    switch (f.kind) {
      case 'boolean':
        return n.operator === 'equals' ? `${col} = ${this.p(v, '::boolean')}` : `${col} <> ${this.p(v, '::boolean')}`;
      case 'timestamp':
        return this.timestamp(col, n);
      case 'text': {
        // Emails are stored lowercased: comparing lowercased values makes every email operator case-insensitive.
        const s = typeof v === 'string' ? v.toLowerCase() : v;
        switch (n.operator) {
          case 'equals':
            return `${col} = ${this.p(s)}`;
          case 'notEquals':
            return `${col} <> ${this.p(s)}`;
          case 'in':
            return `${col} = any(${this.p(pgTextArray((v as string[]).map((x) => x.toLowerCase())), '::text[]')})`;
          case 'notIn':
            return `${col} <> all(${this.p(pgTextArray((v as string[]).map((x) => x.toLowerCase())), '::text[]')})`;
          default:
            return this.like(col, n.operator, s as string, false);
        }
      }
    }
  }

  private like(expr: string, op: FieldCondition['operator'], value: string, ci: boolean): string {
    const e = likeEscape(value);
    const pattern = op === 'startsWith' ? `${e}%` : op === 'endsWith' ? `%${e}` : `%${e}%`;
    const test = `${expr} ${ci ? 'ilike' : 'like'} ${this.p(pattern)} escape '\\'`;
    return op === 'notContains' ? `not coalesce(${test}, false)` : test;
  }

  private timestamp(expr: string, n: FieldCondition): string {
    const cmp: Partial<Record<FieldCondition['operator'], string>> = { before: '<', lt: '<', lte: '<=', after: '>', gt: '>', gte: '>=' };
    if (n.operator === 'withinLastDays') {
      // `expr` may hold a placeholder, so it appears once in the text.
      return `${expr} between now() - make_interval(days => ${this.p(n.value, '::int')}) and now()`;
    }
    return `${expr} ${cmp[n.operator]!} ${this.p(n.value, '::timestamptz')}`;
  }

  private dataField(path: string[], n: FieldCondition): string {
    const text = () => `(${this.c}.data #>> ${this.p(pgTextArray(path), '::text[]')})`;
    const num = () => `mailwright_to_numeric${text()}`;
    const v = n.value;
    const negate = (sql: string) => `not coalesce(${sql}, false)`;
    const equals = (value: Scalar): string => {
      if (typeof value === 'number') return `${num()} = ${this.p(String(value), '::numeric')}`;
      // JSON true/false and the strings "true"/"false" read the same as text.
      return `${text()} = ${this.p(String(value))}`;
    };
    const inList = (items: Scalar[]): string => {
      const strings = items.filter((x): x is string => typeof x === 'string');
      const numbers = items.filter((x): x is number => typeof x === 'number');
      const parts: string[] = [];
      if (strings.length) parts.push(`${text()} = any(${this.p(pgTextArray(strings), '::text[]')})`);
      if (numbers.length) parts.push(`${num()} = any(${this.p(pgTextArray(numbers.map(String)), '::numeric[]')})`);
      return parts.length === 1 ? parts[0]! : `(${parts.join(' or ')})`;
    };
    switch (n.operator) {
      case 'equals':
        return equals(v as Scalar);
      case 'notEquals':
        return negate(equals(v as Scalar));
      case 'contains':
      case 'notContains':
      case 'startsWith':
      case 'endsWith':
        return this.like(text(), n.operator, v as string, true);
      case 'gt':
      case 'gte':
      case 'lt':
      case 'lte': {
        const op = { gt: '>', gte: '>=', lt: '<', lte: '<=' }[n.operator];
        // A number compares numerically with values stored as numbers or as numeric text; a string compares as text.
        if (typeof v === 'number') return `${num()} ${op} ${this.p(String(v), '::numeric')}`;
        return `${text()} collate "C" ${op} ${this.p(v)}`;
      }
      case 'in':
        return inList(v as Scalar[]);
      case 'notIn':
        return negate(inList(v as Scalar[]));
      case 'exists':
        return `${text()} is not null`;
      case 'notExists':
        return `${text()} is null`;
      case 'before':
      case 'after':
      case 'withinLastDays':
        return this.timestamp(`mailwright_to_timestamptz${text()}`, n);
    }
  }
}

/**
 * Compiles a validated filter to a parameterized WHERE expression over the contacts table. Field names, JSON paths
 * and values are always bound parameters; the SQL text is built from this module's constants only.
 */
export function compileFilter(filter: Filter, opts: CompileOptions): CompiledFilter {
  const alias = opts.alias ?? 'c';
  if (!/^[a-z_][a-z0-9_]*$/.test(alias)) throw new Error(`invalid alias ${alias}`);
  const b = new Builder(alias, opts.projectId);
  return fixedFilter(b.node(filter), b.params);
}

/**
 * A condition written by hand (placeholders `$1..$n` for `params`) as a CompiledFilter. Its text must hold no `$`
 * but its placeholders, as compiled filters never do (values, paths and names are bound): renumbering relies on it.
 */
export function fixedFilter(sql: string, params: unknown[]): CompiledFilter {
  return { params, at: (first) => (first === 1 ? sql : sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + first - 1}`)) };
}

/** Both conditions. */
export function andFilters(a: CompiledFilter, b: CompiledFilter): CompiledFilter {
  return { params: [...a.params, ...b.params], at: (first) => `${a.at(first)} and (${b.at(first + a.params.length)})` };
}

