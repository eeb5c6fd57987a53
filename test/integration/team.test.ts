import { createHash, randomUUID } from 'node:crypto';
import type { ParsedMail } from 'mailparser';
import { api, sessionCookie, type ApiResponse } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { addVerifiedDomain, uniqueDomain } from '../helpers/fixtures';
import { waitForMail } from '../helpers/mailbox';
import { fetchDocumentSync, jsonBodyOf, operationsOf, resolveSchema, type Operation } from '../helpers/openapi';
import { stackEnv } from '../stack-env';
import { PERMISSIONS, roleAllows, type ProjectAction } from '../../domain/projects/policy';
import type { Role } from '../../domain/projects/membership.entity';

/**
 * Teams (README › Teams and permissions): the role matrix over every dashboard route that takes a project (read from
 * the served OpenAPI document, so a route added later is in it), invitations to new and existing users through the
 * real invitation email, the last OWNER, removal, and the onboarding state.
 */

const PASSWORD = 'correct horse battery staple';
const SENDER = { name: 'Mailwright Accounts', address: 'accounts@mailwright.test' };
const uniqueEmail = (tag: string) => `team-${tag}-${randomUUID().slice(0, 8)}@example.com`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Account {
  id: string;
  email: string;
  cookie: string;
}

async function signup(tag: string): Promise<Account> {
  const email = uniqueEmail(tag);
  const res = await api('POST', '/auth/signup', { body: { email, password: PASSWORD } });
  if (res.status !== 201) throw new Error(`signup: ${res.status} ${res.text}`);
  return { id: res.body.id, email, cookie: sessionCookie(res) };
}

async function expectOk(res: Promise<ApiResponse>, status: number): Promise<any> {
  const r = await res;
  expect({ status: r.status, body: r.body }).toMatchObject({ status });
  return r.body;
}

async function createProject(owner: Account, name = `Team ${randomUUID().slice(0, 8)}`): Promise<{ id: string; name: string }> {
  const body = await expectOk(api('POST', '/users/@me/projects', { cookie: owner.cookie, body: { name } }), 201);
  return { id: body.id, name };
}

const invite = (by: Account, projectId: string, email: string, role?: Role) => api('POST', `/projects/${projectId}/members`, { cookie: by.cookie, body: { email, role } });
const setRole = (by: Account, projectId: string, userId: string, role: Role) => api('PATCH', `/projects/${projectId}/members/${userId}`, { cookie: by.cookie, body: { role } });
const remove = (by: Account, projectId: string, userId: string) => api('DELETE', `/projects/${projectId}/members/${userId}`, { cookie: by.cookie });

function expectError(res: ApiResponse, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
}

let owner: Account;
let admin: Account;
let member: Account;
let target: Account;
let outsider: Account;

beforeAll(async () => {
  [owner, admin, member, target, outsider] = await Promise.all(['owner', 'admin', 'member', 'target', 'outsider'].map(signup));
}, 60_000);
afterAll(closeDb);

/** A fresh project of `owner` with `admin` as ADMIN and `member` and `target` as MEMBERs (added at once: they have accounts). */
async function team(): Promise<{ id: string; name: string }> {
  const project = await createProject(owner);
  for (const [who, role] of [[admin, 'ADMIN'], [member, 'MEMBER'], [target, 'MEMBER']] as const) {
    const added = await expectOk(invite(owner, project.id, who.email, role), 201);
    expect(added).toMatchObject({ status: 'ADDED', member: { userId: who.id, role } });
  }
  return project;
}

// ---------------------------------------------------------------------------------------------------------------
// The role matrix, from the served document.

const DOC = fetchDocumentSync();
const bodySchema = (op: Operation) => resolveSchema(DOC, op.raw.requestBody?.content?.['application/json']?.schema);
/** Dashboard routes that act on a project: a project id in the path, or `projectId` in the body. */
const PROJECT_ROUTES = operationsOf(DOC).filter((op) => op.auth === 'session' && (/\/projects\/\{id\}/.test(op.path) || bodySchema(op).properties?.projectId));

interface Case {
  project: { id: string; name: string };
}

/** Path parameters beside the project's id, and bodies the document cannot give (a value that depends on the case). */
const PATH_VALUES: Record<string, (c: Case) => Promise<string> | string> = {
  userId: () => target.id,
  invitationId: async (c) => (await expectOk(invite(owner, c.project.id, uniqueEmail('pending')), 202)).invitation.id,
};
const BODIES: Record<string, (c: Case) => unknown> = {
  'POST /users/@me/projects/{id}/reset': (c) => ({ confirm: c.project.name }),
  'PATCH /projects/{id}/members/{userId}': () => ({ role: 'ADMIN' }),
  'POST /projects/{id}/members': () => ({ email: uniqueEmail('invitee'), role: 'MEMBER' }),
};

interface PermissionDoc {
  action: ProjectAction;
  minimumRole: Role;
  /** The action for the caller's own userId (leaving). */
  self?: PermissionDoc;
}
const permissionOf = (op: Operation): PermissionDoc => op.raw['x-permission'];

async function callAs(op: Operation, who: Account, c: Case): Promise<ApiResponse> {
  let url = op.path.replace('{id}', c.project.id);
  for (const name of op.pathParams.filter((p) => p !== 'id')) {
    const value = PATH_VALUES[name];
    if (!value) throw new Error(`${op.label}: no value for path parameter "${name}": add one to PATH_VALUES in team.test.ts`);
    url = url.replace(`{${name}}`, encodeURIComponent(await value(c)));
  }
  const derived = jsonBodyOf(DOC, op);
  if (derived.problem && !BODIES[op.label]) throw new Error(derived.problem);
  let body = BODIES[op.label] ? BODIES[op.label]!(c) : derived.body;
  if (bodySchema(op).properties?.projectId) body = { ...(body as object), projectId: c.project.id };
  return api(op.method, url, { cookie: who.cookie, body });
}

describe('the permission table is declared on every dashboard route that takes a project', () => {
  test('there are such routes (project settings, keys, reset, members, setup-state, ...)', () => {
    expect(PROJECT_ROUTES.map((op) => op.label)).toEqual(
      expect.arrayContaining([
        'PATCH /users/@me/projects/{id}',
        'DELETE /users/@me/projects/{id}',
        'POST /users/@me/projects/{id}/regenerate-keys',
        'POST /users/@me/projects/{id}/reset',
        'GET /projects/{id}/members',
        'POST /projects/{id}/members',
        'PATCH /projects/{id}/members/{userId}',
        'DELETE /projects/{id}/members/{userId}',
        'GET /projects/{id}/setup-state',
        'POST /events/track',
      ]),
    );
  });

  test.each(PROJECT_ROUTES.map((op) => [op.label, op] as const))('%s names an action of the table (x-permission)', (_label, op) => {
    const permission = permissionOf(op);
    if (!permission) throw new Error(`${op.label} takes a project but declares no permission: give its route a \`permission\` (domain/projects/policy.ts)`);
    for (const p of [permission, ...(permission.self ? [permission.self] : [])]) {
      expect(Object.keys(PERMISSIONS)).toContain(p.action);
      expect(p.minimumRole).toBe(PERMISSIONS[p.action][0]);
    }
  });
});

describe('the role matrix: each role on each dashboard route that takes a project, as the permission table says', () => {
  const callers = ['OWNER', 'ADMIN', 'MEMBER', 'not a member'] as const;
  const cases = PROJECT_ROUTES.flatMap((op) => callers.map((caller) => [`${op.label} as ${caller}`, op, caller] as const));
  test.each(cases)('%s', async (_label, op, caller) => {
    const project = await team();
    const who = { OWNER: owner, ADMIN: admin, MEMBER: member, 'not a member': outsider }[caller];
    const res = await callAs(op, who, { project });
    const { action } = permissionOf(op);
    const outcome = { route: op.label, caller, status: res.status, code: res.body?.error?.code };
    if (caller === 'not a member') expect(outcome).toEqual({ ...outcome, status: 404, code: 'NOT_FOUND' });
    else if (!roleAllows(caller, action)) expect(outcome).toEqual({ ...outcome, status: 403, code: 'FORBIDDEN' });
    else {
      // Allowed: the route did its work, or refused for a reason of its own (a state, a disabled integration), never
      // for the role or membership, and never because the request was malformed.
      expect(outcome.status).toBeLessThan(500);
      expect([404, 422]).not.toContain(outcome.status);
      expect(outcome.code).not.toBe('FORBIDDEN');
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------

const INVITE_SUBJECT = (projectName: string) => `You are invited to ${projectName} on Mailwright`;
const hashOf = (token: string) => createHash('sha256').update(token).digest('hex');

/** The invitation email to `to` (the `nth`), parsed, and the token of its link, checked in both parts. */
async function invitationMail(to: string, nth = 1): Promise<{ message: ParsedMail; token: string }> {
  const message = (await waitForMail(to, { count: nth }))[nth - 1]!;
  const link = new RegExp(`${stackEnv().apiUrl.replace(/[.:/]/g, '\\$&')}/accept-invitation\\?token=([A-Za-z0-9_-]{43})`);
  const token = link.exec(message.text ?? '')?.[1];
  expect(token).toBeDefined();
  expect(link.exec(String(message.html))?.[1]).toBe(token);
  return { message, token: token! };
}

const accept = (token: string, password = 'a brand new password', name?: string) => api('POST', '/auth/accept-invitation', { body: { token, password, name } });

describe('invitations', () => {
  test('an existing user is added at once with the role given and sees the project; no invitation is left pending', async () => {
    const project = await createProject(owner);
    const someone = await signup('existing');
    const res = await expectOk(invite(owner, project.id, someone.email.toUpperCase(), 'ADMIN'), 201);
    expect(res).toMatchObject({ status: 'ADDED', member: { userId: someone.id, email: someone.email, role: 'ADMIN' } });
    const mine = await expectOk(api('GET', '/users/@me/projects', { cookie: someone.cookie }), 200);
    expect(mine).toEqual([expect.objectContaining({ id: project.id, role: 'ADMIN' })]);
    const teamList = await expectOk(api('GET', `/projects/${project.id}/members`, { cookie: someone.cookie }), 200);
    expect(teamList.data.map((m: { userId: string; role: string }) => [m.userId, m.role])).toEqual([[owner.id, 'OWNER'], [someone.id, 'ADMIN']]);
    expect(teamList.invitations).toEqual([]);
    expectError(await invite(owner, project.id, someone.email), 409, 'ALREADY_MEMBER');
  });

  test('a new address gets an invitation email whose single-use, hashed, 7-day token creates the account in the project', async () => {
    const project = await createProject(owner);
    const email = uniqueEmail('new');
    const invited = await expectOk(invite(owner, project.id, email, 'ADMIN'), 202);
    expect(invited).toMatchObject({ status: 'INVITED', invitation: { email, role: 'ADMIN', invitedBy: owner.id } });

    const { message, token } = await invitationMail(email);
    expect(message.subject).toBe(INVITE_SUBJECT(project.name));
    expect(message.from?.value).toEqual([SENDER]);
    expect(message.headers.get('auto-submitted')).toBe('auto-generated');
    expect(message.text).toContain(owner.email);
    expect(message.text).toContain('as ADMIN');
    expect(message.text).toContain('7 days');

    const { rows } = await db().query<{ token_hash: string; expires_at: Date }>('select token_hash, expires_at from invitations where project_id = $1', [project.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).toBe(hashOf(token));
    expect(rows[0]!.expires_at.getTime() - Date.now()).toBeGreaterThan(7 * 86_400_000 - 120_000);
    expect(rows[0]!.expires_at.getTime() - Date.now()).toBeLessThanOrEqual(7 * 86_400_000);
    const pending = await expectOk(api('GET', `/projects/${project.id}/members`, { cookie: owner.cookie }), 200);
    expect(pending.invitations).toEqual([expect.objectContaining({ email, role: 'ADMIN', status: 'PENDING' })]);

    const accepted = await accept(token, 'a brand new password', 'Grace');
    expect(accepted.status).toBe(201);
    expect(accepted.body).toMatchObject({ user: { email, name: 'Grace', emailVerified: true }, projectId: project.id, role: 'ADMIN', loggedIn: true });
    const cookie = sessionCookie(accepted);
    expect(await expectOk(api('GET', '/users/@me/projects', { cookie }), 200)).toEqual([expect.objectContaining({ id: project.id, role: 'ADMIN' })]);
    expect((await api('POST', '/auth/login', { body: { email, password: 'a brand new password' } })).status).toBe(200);

    expectError(await accept(token), 403, 'INVALID_TOKEN');
    expect((await expectOk(api('GET', `/projects/${project.id}/members`, { cookie }), 200)).invitations).toEqual([]);
  });

  test('an expired, replaced or revoked invitation link is refused with 403 INVALID_TOKEN', async () => {
    const project = await createProject(owner);
    const email = uniqueEmail('expiry');
    await expectOk(invite(owner, project.id, email), 202);
    const first = (await invitationMail(email)).token;
    await expectOk(invite(owner, project.id, email), 202); // a second invitation replaces the first
    const second = (await invitationMail(email, 2)).token;
    expectError(await accept(first), 403, 'INVALID_TOKEN');

    await db().query(`update invitations set expires_at = now() - interval '1 second' where token_hash = $1`, [hashOf(second)]);
    expectError(await accept(second), 403, 'INVALID_TOKEN');
    const listed = await expectOk(api('GET', `/projects/${project.id}/members`, { cookie: owner.cookie }), 200);
    expect(listed.invitations).toEqual([expect.objectContaining({ email, status: 'EXPIRED' })]);

    await expectOk(invite(owner, project.id, email), 202);
    const third = (await invitationMail(email, 3)).token;
    const { rows } = await db().query<{ id: string }>('select id from invitations where project_id = $1', [project.id]);
    expect((await api('DELETE', `/projects/${project.id}/invitations/${rows[0]!.id}`, { cookie: owner.cookie })).status).toBe(204);
    expectError(await accept(third), 403, 'INVALID_TOKEN');
    expect((await api('POST', '/auth/login', { body: { email, password: 'a brand new password' } })).status).toBe(401);
  });

  test('an address that signed up after the invitation joins with its account, not logged in and its password unchanged', async () => {
    const project = await createProject(owner);
    const email = uniqueEmail('late');
    await expectOk(invite(owner, project.id, email, 'MEMBER'), 202);
    const { token } = await invitationMail(email);
    const signedUp = await api('POST', '/auth/signup', { body: { email, password: PASSWORD } });
    expect(signedUp.status).toBe(201);
    const res = await accept(token, 'another password entirely');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ user: { id: signedUp.body.id }, projectId: project.id, role: 'MEMBER', loggedIn: false });
    expect(res.headers.getSetCookie().some((c) => c.startsWith('mailwright_session='))).toBe(false);
    expect((await api('POST', '/auth/login', { body: { email, password: PASSWORD } })).status).toBe(200);
    const projects = await expectOk(api('GET', '/users/@me/projects', { cookie: sessionCookie(signedUp) }), 200);
    expect(projects).toEqual([expect.objectContaining({ id: project.id, role: 'MEMBER' })]);
  });

  test('an ADMIN invites MEMBERs and ADMINs but not OWNERs; an OWNER may', async () => {
    const project = await team();
    expectError(await invite(admin, project.id, uniqueEmail('owner'), 'OWNER'), 403, 'FORBIDDEN');
    expect((await invite(admin, project.id, uniqueEmail('adm'), 'ADMIN')).status).toBe(202);
    expect((await invite(owner, project.id, uniqueEmail('own'), 'OWNER')).status).toBe(202);
  });
});

describe('roles and removal', () => {
  test('an ADMIN changes and removes MEMBERs and ADMINs but not an OWNER, and cannot make one', async () => {
    const project = await team();
    expectError(await setRole(admin, project.id, owner.id, 'ADMIN'), 403, 'FORBIDDEN');
    expectError(await remove(admin, project.id, owner.id), 403, 'FORBIDDEN');
    expectError(await setRole(admin, project.id, target.id, 'OWNER'), 403, 'FORBIDDEN');
    expectError(await setRole(admin, project.id, admin.id, 'OWNER'), 403, 'FORBIDDEN');
    expect(await expectOk(setRole(admin, project.id, target.id, 'ADMIN'), 200)).toMatchObject({ userId: target.id, role: 'ADMIN' });
    expect((await remove(admin, project.id, target.id)).status).toBe(204);
    expectError(await setRole(member, project.id, admin.id, 'MEMBER'), 403, 'FORBIDDEN');
    expectError(await setRole(owner, project.id, outsider.id, 'MEMBER'), 404, 'NOT_FOUND');
  });

  test('the last OWNER cannot be demoted, removed or leave (409 LAST_OWNER); with a second OWNER it can', async () => {
    const project = await team();
    expectError(await setRole(owner, project.id, owner.id, 'ADMIN'), 409, 'LAST_OWNER');
    expectError(await remove(owner, project.id, owner.id), 409, 'LAST_OWNER');
    await expectOk(setRole(owner, project.id, admin.id, 'OWNER'), 200);
    expect(await expectOk(setRole(owner, project.id, owner.id, 'ADMIN'), 200)).toMatchObject({ role: 'ADMIN' });
    // Now `admin` is the only OWNER.
    expectError(await setRole(admin, project.id, admin.id, 'MEMBER'), 409, 'LAST_OWNER');
    expectError(await remove(admin, project.id, admin.id), 409, 'LAST_OWNER');
  });

  test('two OWNERs demoting each other at the same moment leave one OWNER', async () => {
    const project = await team();
    await expectOk(setRole(owner, project.id, admin.id, 'OWNER'), 200);
    const results = await Promise.all([setRole(owner, project.id, admin.id, 'ADMIN'), setRole(admin, project.id, owner.id, 'ADMIN')]);
    // One wins; the other is refused: 409 LAST_OWNER when both checks saw two OWNERs, or 403 when the loser's own
    // demotion had committed before its request's membership check (it is an ADMIN by then).
    const [won, lost] = results.map((r) => r.status).sort();
    expect(won).toBe(200);
    expect([403, 409]).toContain(lost);
    const { rows } = await db().query('select user_id from memberships where project_id = $1 and role = $2', [project.id, 'OWNER']);
    expect(rows).toHaveLength(1);
  });

  test("a removed member loses access at once: the same session's next request for the project is 404", async () => {
    const project = await team();
    expect((await api('GET', `/projects/${project.id}/setup-state`, { cookie: target.cookie })).status).toBe(200);
    expect((await remove(owner, project.id, target.id)).status).toBe(204);
    for (const path of [`/projects/${project.id}/setup-state`, `/projects/${project.id}/members`]) {
      expectError(await api('GET', path, { cookie: target.cookie }), 404, 'NOT_FOUND');
    }
    const mine = await expectOk(api('GET', '/users/@me/projects', { cookie: target.cookie }), 200);
    expect(mine.map((p: { id: string }) => p.id)).not.toContain(project.id);
  });

  test('a MEMBER may leave (DELETE of their own userId) but not remove anyone else', async () => {
    const project = await team();
    expectError(await remove(member, project.id, target.id), 403, 'FORBIDDEN');
    expect((await remove(member, project.id, member.id)).status).toBe(204);
    expectError(await api('GET', `/projects/${project.id}/members`, { cookie: member.cookie }), 404, 'NOT_FOUND');
  });
});

describe('GET /projects/:id/setup-state', () => {
  async function waitForState(projectId: string, key: string): Promise<Record<string, boolean>> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const state = await expectOk(api('GET', `/projects/${projectId}/setup-state`, { cookie: owner.cookie }), 200);
      if (state[key] === true) return state;
      if (Date.now() > deadline) throw new Error(`setup-state.${key} stayed false: ${JSON.stringify(state)}`);
      await sleep(200);
    }
  }

  test('each step turns true when it happens: domain added, verified, event tracked, email sent, campaign sent, team invited', async () => {
    const project = await createProject(owner);
    const keys = await expectOk(api('POST', `/users/@me/projects/${project.id}/regenerate-keys`, { cookie: owner.cookie }), 200);
    const all = { domainAdded: false, domainVerified: false, firstEmailSent: false, firstEventTracked: false, firstCampaignSent: false, teamInvited: false };
    expect(await expectOk(api('GET', `/projects/${project.id}/setup-state`, { cookie: owner.cookie }), 200)).toEqual(all);

    await db().query(`insert into domains (id, project_id, name, status) values ($1, $2, $3, 'PENDING')`, [randomUUID(), project.id, uniqueDomain()]);
    expect(await waitForState(project.id, 'domainAdded')).toEqual({ ...all, domainAdded: true });

    const domain = uniqueDomain();
    await addVerifiedDomain(project.id, domain);
    expect(await waitForState(project.id, 'domainVerified')).toEqual({ ...all, domainAdded: true, domainVerified: true });

    // A service event (a send's contact.* / email.*) is no tracked event; a /v1/track call is.
    const sent = await expectOk(api('POST', '/v1/send', { key: keys.secretKey, body: { to: `reader@${domain}`, from: `hi@${domain}`, subject: 'Hello', body: '<p>Hi</p>' } }), 200);
    await waitForEmailStatus(sent.data.emails[0].email, 'SENT');
    const afterSend = await waitForState(project.id, 'firstEmailSent');
    expect(afterSend).toMatchObject({ firstEmailSent: true, firstEventTracked: false });

    await expectOk(api('POST', '/v1/track', { key: keys.publicKey, body: { email: `reader@${domain}`, event: 'signed-up' } }), 200);
    expect(await waitForState(project.id, 'firstEventTracked')).toMatchObject({ firstEventTracked: true, firstCampaignSent: false, teamInvited: false });

    const campaign = await expectOk(
      api('POST', '/campaigns', { key: keys.secretKey, body: { name: 'Launch', subject: 'Launch', body: '<p>Launch</p>', from: `hi@${domain}`, audienceType: 'ALL' } }),
      201,
    );
    await expectOk(api('POST', `/campaigns/${campaign.id}/send`, { key: keys.secretKey, body: {} }), 200);
    expect(await waitForState(project.id, 'firstCampaignSent')).toMatchObject({ firstCampaignSent: true, teamInvited: false });

    await expectOk(invite(owner, project.id, uniqueEmail('setup')), 202);
    expect(await waitForState(project.id, 'teamInvited')).toEqual({ domainAdded: true, domainVerified: true, firstEmailSent: true, firstEventTracked: true, firstCampaignSent: true, teamInvited: true });
  });

  test('a project whose only other member was added (not invited by email) counts as a team too', async () => {
    const project = await createProject(owner);
    expect((await expectOk(api('GET', `/projects/${project.id}/setup-state`, { cookie: owner.cookie }), 200)).teamInvited).toBe(false);
    await expectOk(invite(owner, project.id, target.email), 201);
    expect((await expectOk(api('GET', `/projects/${project.id}/setup-state`, { cookie: target.cookie }), 200)).teamInvited).toBe(true);
  });
});
