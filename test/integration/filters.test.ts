import { randomUUID } from 'node:crypto';
import { closeDb, db } from '../helpers/db';
import { createTestProject } from '../helpers/fixtures';
import { seedContacts } from '../helpers/seed';
import { compileFilter, parseFilter, validateFilter, type Filter, type FilterNode } from '../../domain/filters';
import { uuidv7 } from '../../domain/ids';

// Compiler semantics checked by running the compiled SQL against the test database.
let projectId: string;
const tag = randomUUID().slice(0, 6);
const mail = (k: string) => `${k}-${tag}@example.com`;

beforeAll(async () => {
  ({ projectId } = await createTestProject('filters'));
  const ids = await seedContacts(projectId, 5, (i) => [
    { email: mail('a'), data: { plan: 'pro', age: 30, score: '42', country: 'DE', vip: true, address: { city: 'Berlin', zip: '10115' }, signup: new Date(Date.now() - 2 * 86400_000).toISOString(), quote: "O'Brien %_" } },
    { email: mail('b'), data: { plan: 'free', age: 17, score: '7', country: 'US', vip: false, address: { city: 'Oslo' }, signup: '2020-01-01' } },
    { email: mail('c'), data: { plan: 'team', age: '45', score: 'abc', vip: 'true', address: { city: 'berlin' }, signup: 'not a date', empty: null } },
    { email: mail('d'), subscribed: false, data: {} },
    { email: mail('e'), data: { plan: 'Pro Plus', age: 30.5, score: '42.0', country: 'de', tags: ['x', 'y'] } },
  ][i]!);
  const [a, b, , d] = ids;
  await db().query(`update contacts set created_at = now() - interval '100 days', updated_at = now() - interval '50 days' where id = $1`, [b]);
  const ev = (contact: string, name: string, daysAgo: number) => [uuidv7(), projectId, contact, name, daysAgo];
  const rows = [ev(a!, 'purchase', 0), ev(a!, 'purchase', 10), ev(a!, 'purchase', 40), ev(b!, 'purchase', 60), ev(d!, 'login', 1)];
  for (const r of rows) {
    await db().query(`insert into events (id, project_id, contact_id, name, data, source, created_at) values ($1, $2, $3, $4, '{}', 'TRACKED', now() - make_interval(days => $5))`, r);
  }
});
afterAll(closeDb);

async function run(filter: Filter, pid = projectId): Promise<string[]> {
  const problems = validateFilter(filter);
  if (problems.length) throw new Error(`invalid filter: ${JSON.stringify(problems)}`);
  const compiled = compileFilter(filter, { projectId: pid });
  const { rows } = await db().query<{ email: string }>(`select c.email from contacts c where c.project_id = $1 and (${compiled.at(2)}) order by c.email`, [pid, ...compiled.params]);
  return rows.map((r) => r.email.split('-')[0]!);
}
const one = (node: FilterNode): Filter => ({ operator: 'AND', conditions: [node] });
const f = (field: string, operator: string, value?: unknown) => one({ field, operator, value } as FilterNode);

describe('field operators (table-driven, run against Postgres)', () => {
  const cases: [string, Filter, string[]][] = [
    // strings
    ['equals string is exact', f('data.plan', 'equals', 'pro'), ['a']],
    ['notEquals matches contacts without the field too', f('data.plan', 'notEquals', 'pro'), ['b', 'c', 'd', 'e']],
    ['contains is case-insensitive', f('data.plan', 'contains', 'PRO'), ['a', 'e']],
    ['notContains includes missing values', f('data.plan', 'notContains', 'pro'), ['b', 'c', 'd']],
    ['startsWith', f('data.plan', 'startsWith', 'Pro '), ['e']],
    ['endsWith', f('data.plan', 'endsWith', 'am'), ['c']],
    ['LIKE wildcards in values are literal', f('data.quote', 'endsWith', '%_'), ['a']],
    ['a quote in a value is data', f('data.quote', 'startsWith', "O'Brien"), ['a']],
    ['in (strings)', f('data.plan', 'in', ['pro', 'team']), ['a', 'c']],
    ['notIn includes missing values', f('data.plan', 'notIn', ['pro', 'team']), ['b', 'd', 'e']],
    ['exists', f('data.country', 'exists'), ['a', 'b', 'e']],
    ['notExists', f('data.country', 'notExists'), ['c', 'd']],
    ['JSON null counts as missing', f('data.empty', 'exists'), []],
    ['JSON null counts as missing (notExists)', f('data.empty', 'notExists'), ['a', 'b', 'c', 'd', 'e']],
    ['string gt compares text', f('data.country', 'gt', 'DE'), ['b', 'e']],
    // numbers, including numbers stored as strings
    ['equals number matches numbers and numeric strings', f('data.age', 'equals', 45), ['c']],
    ['equals number: "42.0" equals 42', f('data.score', 'equals', 42), ['a', 'e']],
    ['gt number compares numerically (numbers and numeric text)', f('data.age', 'gt', 29), ['a', 'c', 'e']],
    ['gte', f('data.age', 'gte', 30.5), ['c', 'e']],
    ['lt: numeric text "7" < 10 (not text order)', f('data.score', 'lt', 10), ['b']],
    ['lte: non-numeric text never compares', f('data.score', 'lte', 1000), ['a', 'b', 'e']],
    ['in (numbers) compares numerically', f('data.age', 'in', [17, 45]), ['b', 'c']],
    ['in mixing strings and numbers', f('data.age', 'in', [17, 'x']), ['b']],
    ['notEquals number', f('data.age', 'notEquals', 30), ['b', 'c', 'd', 'e']],
    // booleans
    ['equals true matches JSON true and the string "true"', f('data.vip', 'equals', true), ['a', 'c']],
    ['equals false', f('data.vip', 'equals', false), ['b']],
    ['subscribed equals false', f('subscribed', 'equals', false), ['d']],
    ['subscribed notEquals false', f('subscribed', 'notEquals', false), ['a', 'b', 'c', 'e']],
    // nested paths
    ['nested data path', f('data.address.city', 'equals', 'Berlin'), ['a']],
    ['nested contains', f('data.address.city', 'contains', 'berlin'), ['a', 'c']],
    ['nested exists', f('data.address.zip', 'exists'), ['a']],
    // dates
    ['data date after', f('data.signup', 'after', '2021-01-01'), ['a']],
    ['data date before (unparseable dates never match)', f('data.signup', 'before', '2021-01-01'), ['b']],
    ['data date withinLastDays', f('data.signup', 'withinLastDays', 7), ['a']],
    ['createdAt withinLastDays', f('createdAt', 'withinLastDays', 30), ['a', 'c', 'd', 'e']],
    ['createdAt before', f('createdAt', 'before', new Date(Date.now() - 30 * 86400_000).toISOString()), ['b']],
    ['updatedAt lt', f('updatedAt', 'lt', new Date(Date.now() - 40 * 86400_000).toISOString().slice(0, 10)), ['b']],
    ['createdAt gte', f('createdAt', 'gte', new Date(Date.now() - 30 * 86400_000).toISOString()), ['a', 'c', 'd', 'e']],
    // email
    ['email equals is case-insensitive', f('email', 'equals', mail('A').toUpperCase()), ['a']],
    ['email startsWith', f('email', 'startsWith', 'B-'), ['b']],
    ['email in', f('email', 'in', [mail('c'), mail('d')]), ['c', 'd']],
    ['email notContains', f('email', 'notContains', 'a-'), ['b', 'c', 'd', 'e']],
  ];
  test.each(cases)('%s', async (_name, filter, expected) => {
    expect(await run(filter)).toEqual(expected);
  });
});

describe('groups and event conditions', () => {
  const cases: [string, Filter, string[]][] = [
    ['AND', { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'contains', value: 'pro' }, { field: 'data.country', operator: 'equals', value: 'DE' }] }, ['a']],
    ['OR', { operator: 'OR', conditions: [{ field: 'data.plan', operator: 'equals', value: 'free' }, { field: 'subscribed', operator: 'equals', value: false }] }, ['b', 'd']],
    [
      'nested groups: (plan in [pro,team]) AND (age > 40 OR country = DE)',
      {
        operator: 'AND',
        conditions: [
          { field: 'data.plan', operator: 'in', value: ['pro', 'team'] },
          { operator: 'OR', conditions: [{ field: 'data.age', operator: 'gt', value: 40 }, { field: 'data.country', operator: 'equals', value: 'DE' }] },
        ],
      },
      ['a', 'c'],
    ],
    ['empty AND matches everyone', { operator: 'AND', conditions: [] }, ['a', 'b', 'c', 'd', 'e']],
    ['empty OR matches no one', { operator: 'OR', conditions: [] }, []],
    ['hasDone', one({ event: 'purchase', operator: 'hasDone' }), ['a', 'b']],
    ['hasDone withinDays', one({ event: 'purchase', operator: 'hasDone', withinDays: 30 }), ['a']],
    ['hasDone minCount', one({ event: 'purchase', operator: 'hasDone', minCount: 3 }), ['a']],
    ['hasDone minCount within a window', one({ event: 'purchase', operator: 'hasDone', minCount: 3, withinDays: 30 }), []],
    ['hasDone minCount 2 within 30 days', one({ event: 'purchase', operator: 'hasDone', minCount: 2, withinDays: 30 }), ['a']],
    ['hasNotDone', one({ event: 'purchase', operator: 'hasNotDone' }), ['c', 'd', 'e']],
    ['hasNotDone withinDays', one({ event: 'purchase', operator: 'hasNotDone', withinDays: 30 }), ['b', 'c', 'd', 'e']],
    ['hasNotDone minCount: fewer than 2', one({ event: 'purchase', operator: 'hasNotDone', minCount: 2 }), ['b', 'c', 'd', 'e']],
    ['event and field together', { operator: 'AND', conditions: [{ event: 'login', operator: 'hasDone' }, { field: 'subscribed', operator: 'equals', value: false }] }, ['d']],
  ];
  test.each(cases)('%s', async (_name, filter, expected) => {
    expect(await run(filter)).toEqual(expected);
  });

  test("event conditions read only the given project's events", async () => {
    const other = await createTestProject('filters-other');
    const [x] = await seedContacts(other.projectId, 1, () => ({ email: mail('x') }));
    await db().query(`insert into events (id, project_id, contact_id, name, data, source) values ($1, $2, $3, 'purchase', '{}', 'TRACKED')`, [uuidv7(), other.projectId, x]);
    expect(await run(one({ event: 'purchase', operator: 'hasDone' }), other.projectId)).toEqual(['x']);
    expect(await run(one({ event: 'purchase', operator: 'hasDone' }))).toEqual(['a', 'b']);
  });
});

describe('SQL injection attempts are data', () => {
  const attacks = ["x'); drop table contacts; --", 'a"}\'::text[]); delete from contacts; --', "plan' or '1'='1", '{plan}', 'plan\\', '?', '$1'];
  test.each(attacks)('field path %p compiles to a bound parameter and matches nothing', async (evil) => {
    const sql = compileFilter(f(`data.${evil}`, 'equals', 'pro'), { projectId }).at(1);
    // The SQL text does not depend on the field name at all: the path is a bound parameter.
    expect(sql).toBe(compileFilter(f('data.plan', 'equals', 'pro'), { projectId }).at(1));
    expect(await run(f(`data.${evil}`, 'equals', 'pro'))).toEqual([]);
    expect(await run(f(`data.${evil}`, 'notExists'))).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
  test.each(attacks)('value %p is compared as text', async (evil) => {
    expect(await run(f('data.plan', 'equals', evil))).toEqual([]);
    expect(await run(f('data.plan', 'in', [evil, 'pro']))).toEqual(['a']);
    expect(await run(f('email', 'contains', evil))).toEqual([]);
    expect(await run(one({ event: evil, operator: 'hasNotDone' }))).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
  test('the contacts table is intact afterwards', async () => {
    const { rows } = await db().query('select count(*)::int as n from contacts where project_id = $1', [projectId]);
    expect(rows[0].n).toBe(5);
  });
});

describe('validation: precise paths and codes', () => {
  const deep = (levels: number): unknown => (levels === 1 ? { operator: 'AND', conditions: [] } : { operator: 'AND', conditions: [deep(levels - 1)] });
  const cases: [string, unknown, { path: string; code: string }[]][] = [
    ['not an object', 'x', [{ path: '', code: 'invalid_type' }]],
    ['bad group operator', { operator: 'XOR', conditions: [] }, [{ path: 'operator', code: 'unknown_operator' }]],
    ['unknown field operator', { operator: 'AND', conditions: [{ field: 'email', operator: 'equals', value: 'a' }, { field: 'data.a', operator: 'eq', value: 1 }, { field: 'data.b', operator: 'like', value: 'x' }] }, [
      { path: 'conditions.1.operator', code: 'unknown_operator' },
      { path: 'conditions.2.operator', code: 'unknown_operator' },
    ]],
    ['unknown field', { operator: 'AND', conditions: [{ field: 'name', operator: 'equals', value: 'x' }] }, [{ path: 'conditions.0.field', code: 'unknown_field' }]],
    ['empty path segment', { operator: 'AND', conditions: [{ field: 'data..x', operator: 'exists' }] }, [{ path: 'conditions.0.field', code: 'unknown_field' }]],
    ['operator not for this field', { operator: 'AND', conditions: [{ field: 'subscribed', operator: 'contains', value: 'x' }] }, [{ path: 'conditions.0.operator', code: 'unsupported_operator' }]],
    ['wrong value type: subscribed', { operator: 'AND', conditions: [{ field: 'subscribed', operator: 'equals', value: 'yes' }] }, [{ path: 'conditions.0.value', code: 'invalid_value' }]],
    ['wrong value type: in needs a list', { operator: 'AND', conditions: [{ field: 'data.a', operator: 'in', value: 'x' }] }, [{ path: 'conditions.0.value', code: 'invalid_value' }]],
    ['wrong value type: null equals', { operator: 'AND', conditions: [{ field: 'data.a', operator: 'equals', value: null }] }, [{ path: 'conditions.0.value', code: 'invalid_value' }]],
    ['wrong value type: object', { operator: 'AND', conditions: [{ field: 'data.a', operator: 'equals', value: { a: 1 } }] }, [{ path: 'conditions.0.value', code: 'invalid_value' }]],
    ['bad date', { operator: 'AND', conditions: [{ field: 'createdAt', operator: 'before', value: 'yesterday' }] }, [{ path: 'conditions.0.value', code: 'invalid_value' }]],
    ['bad days', { operator: 'AND', conditions: [{ field: 'createdAt', operator: 'withinLastDays', value: 1.5 }] }, [{ path: 'conditions.0.value', code: 'invalid_value' }]],
    ['exists with a value', { operator: 'AND', conditions: [{ field: 'data.a', operator: 'exists', value: 'x' }] }, [{ path: 'conditions.0.value', code: 'invalid_value' }]],
    ['nested path in a subgroup', { operator: 'OR', conditions: [{ operator: 'AND', conditions: [{ field: 'data.a', operator: 'gt', value: true }] }] }, [{ path: 'conditions.0.conditions.0.value', code: 'invalid_value' }]],
    ['event operator', { operator: 'AND', conditions: [{ event: 'x', operator: 'did' }] }, [{ path: 'conditions.0.operator', code: 'unknown_operator' }]],
    ['event window and count', { operator: 'AND', conditions: [{ event: 'x', operator: 'hasDone', withinDays: 0, minCount: 'two' }] }, [
      { path: 'conditions.0.withinDays', code: 'invalid_value' },
      { path: 'conditions.0.minCount', code: 'invalid_value' },
    ]],
    ['unknown key', { operator: 'AND', conditions: [{ field: 'data.a', operator: 'exists', sql: 'x' }] }, [{ path: 'conditions.0.sql', code: 'unrecognized_keys' }]],
    ['neither field, event nor group', { operator: 'AND', conditions: [{ operator: 'equals' }] }, [{ path: 'conditions.0', code: 'invalid_condition' }]],
    ['depth 5 is fine', deep(5), []],
    ['depth 6 is too deep', deep(6), [{ path: 'conditions.0.conditions.0.conditions.0.conditions.0.conditions.0', code: 'too_deep' }]],
    ['100 conditions are fine', { operator: 'AND', conditions: Array.from({ length: 100 }, () => ({ field: 'data.a', operator: 'exists' })) }, []],
    ['101 conditions are too many', { operator: 'AND', conditions: Array.from({ length: 101 }, () => ({ field: 'data.a', operator: 'exists' })) }, [{ path: 'conditions.100', code: 'too_many_conditions' }]],
  ];
  test.each(cases)('%s', (_name, input, expected) => {
    expect(validateFilter(input).map((i) => ({ path: i.path.join('.'), code: i.code }))).toEqual(expected);
    expect(parseFilter(input).ok).toBe(expected.length === 0);
  });
});
