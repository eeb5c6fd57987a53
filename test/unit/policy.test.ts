import fs from 'node:fs';
import path from 'node:path';
import { PERMISSIONS, assertMayManage, roleAllows, type ProjectAction } from '../../domain/projects/policy';
import { ROLES, type Role } from '../../domain/projects/membership.entity';

/** README's permission table lists exactly the actions of the policy module, each with its minimum role and meaning. */
test("README's permission table is domain/projects/policy.ts's PERMISSIONS", () => {
  const readme = fs.readFileSync(path.join(__dirname, '../../README.md'), 'utf8');
  const table = /<!-- permissions:start -->([\s\S]*?)<!-- permissions:end -->/.exec(readme)?.[1];
  expect(table).toBeDefined();
  const rows = [...table!.matchAll(/^\s*\| `([a-zA-Z.]+)` \| (OWNER|ADMIN|MEMBER) \| (.+?) \|\s*$/gm)].map((m) => [m[1], m[2], m[3]]);
  const expected = Object.entries(PERMISSIONS).map(([action, [role, meaning]]) => [action, role, meaning]);
  const byAction = (a: unknown[], b: unknown[]) => String(a[0]).localeCompare(String(b[0]));
  expect(rows.sort(byAction)).toEqual(expected.sort(byAction));
});

test('a role allows the actions of its rank and below: OWNER all, ADMIN all but OWNER ones, MEMBER only MEMBER ones', () => {
  for (const [action, [min]] of Object.entries(PERMISSIONS) as [ProjectAction, readonly [Role, string]][]) {
    expect({ action, OWNER: roleAllows('OWNER', action), ADMIN: roleAllows('ADMIN', action), MEMBER: roleAllows('MEMBER', action) }).toEqual({
      action,
      OWNER: true,
      ADMIN: min !== 'OWNER',
      MEMBER: min === 'MEMBER',
    });
  }
});

test('an OWNER is made, changed or removed by an OWNER only', () => {
  const refused = (actor: Role, target: { current?: Role; next?: Role }) => {
    try {
      assertMayManage(actor, target);
      return false;
    } catch (err) {
      expect(err).toMatchObject({ statusCode: 403, code: 'FORBIDDEN' });
      return true;
    }
  };
  for (const current of [undefined, ...ROLES]) {
    for (const next of [undefined, ...ROLES]) {
      expect({ current, next, refused: refused('OWNER', { current, next }) }).toEqual({ current, next, refused: false });
      expect({ current, next, refused: refused('ADMIN', { current, next }) }).toEqual({ current, next, refused: current === 'OWNER' || next === 'OWNER' });
    }
  }
});
