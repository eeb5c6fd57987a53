import { randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../../domain/config';
import { api, type ApiResponse } from '../helpers/api';
import { closeDb, db, waitForEmailStatus } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';
import { exampleOf, fetchDocumentSync, jsonBodyOf, operationsOf, resolveSchema, type JsonSchema, type Operation } from '../helpers/openapi';

/**
 * The isolation matrix, generated from the route registry: the served /openapi.json is produced from the one list of
 * routes in api/route.ts (`Routes`), so every route and its security and path parameters come from there. A route
 * added later is covered without editing this file; a route whose path parameter is of a kind this file does not
 * know fails loudly (add a factory to PARAMS below).
 *
 * - Every route with an id: project A's secret key (a route for API keys) or a session of A's account (a dashboard
 *   route) gets 404 on project B's real resource, and nothing of B changes (B's rows compared before and after).
 * - Every secret-key route: B's public key gets 401 INVALID_API_KEY.
 * - Every dashboard route: no cookie, a forged cookie (wrong signature), an expired cookie, and an unsigned one
 *   (`alg: none`) get 401.
 */

// ---------------------------------------------------------------------------------------------------------------
// The route registry, as served. Read synchronously so that every route becomes its own named test.

const DOC = fetchDocumentSync();
const OPERATIONS: Operation[] = operationsOf(DOC);

/** `contacts/{id}`, `import/{jobId}`, `fields/{field}`: a path parameter together with the segment before it. */
function paramKey(path: string, name: string): string {
  const segments = path.split('/');
  const at = segments.indexOf(`{${name}}`);
  return `${segments[at - 1] ?? ''}/{${name}}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Project B's resources, one of every kind, and the table of path parameters.

interface World {
  a: TestProject;
  b: TestProject;
  bUserId: string;
  contactId: string;
  contactEmail: string;
  emailId: string;
  templateId: string;
  segmentId: string;
  campaignId: string;
  workflowId: string;
  stepId: string;
  transitionId: string;
  executionId: string;
  domainId: string;
  importJobId: string;
  bulkJobId: string;
  uploadId: string;
  invitationId: string;
  fieldName: string;
  eventName: string;
  suppressedEmail: string;
  webhookEndpointId: string;
  webhookDeliveryId: string;
  webhookReplayId: string;
  /** Strings only B may ever be shown. */
  secrets: string[];
}

type ParamKind =
  /** An id of one of B's objects: A must get 404. */
  | { kind: 'owned'; value: (w: World) => string }
  /** A name inside B's data (a field, an event name): A sees its own (empty) namespace, never B's data. */
  | { kind: 'name'; value: (w: World) => string }
  /** Not a project resource: the route cannot take another project's key or session. */
  | { kind: 'exempt'; reason: string };

const SIGNED_TOKEN = 'signed link token (HMAC under APP_SECRET, in mail only); the route takes no key and no session';

const PARAMS: Record<string, ParamKind> = {
  'contacts/{id}': { kind: 'owned', value: (w) => w.contactId },
  'contact/{contactId}': { kind: 'owned', value: (w) => w.contactId },
  'emails/{id}': { kind: 'owned', value: (w) => w.emailId },
  'templates/{id}': { kind: 'owned', value: (w) => w.templateId },
  'segments/{id}': { kind: 'owned', value: (w) => w.segmentId },
  'campaigns/{id}': { kind: 'owned', value: (w) => w.campaignId },
  'workflows/{id}': { kind: 'owned', value: (w) => w.workflowId },
  'steps/{stepId}': { kind: 'owned', value: (w) => w.stepId },
  'transitions/{transitionId}': { kind: 'owned', value: (w) => w.transitionId },
  'executions/{executionId}': { kind: 'owned', value: (w) => w.executionId },
  'domains/{id}': { kind: 'owned', value: (w) => w.domainId },
  'project/{projectId}': { kind: 'owned', value: (w) => w.b.projectId },
  'projects/{id}': { kind: 'owned', value: (w) => w.b.projectId },
  'members/{userId}': { kind: 'owned', value: (w) => w.bUserId },
  'invitations/{invitationId}': { kind: 'owned', value: (w) => w.invitationId },
  'import/{jobId}': { kind: 'owned', value: (w) => w.importJobId },
  'bulk/{jobId}': { kind: 'owned', value: (w) => w.bulkJobId },
  'uploads/{id}': { kind: 'owned', value: (w) => w.uploadId },
  'suppressions/{email}': { kind: 'owned', value: (w) => w.suppressedEmail },
  'webhook-endpoints/{id}': { kind: 'owned', value: (w) => w.webhookEndpointId },
  'deliveries/{deliveryId}': { kind: 'owned', value: (w) => w.webhookDeliveryId },
  'replays/{replayId}': { kind: 'owned', value: (w) => w.webhookReplayId },
  'fields/{field}': { kind: 'name', value: (w) => w.fieldName },
  'events/{eventName}': { kind: 'name', value: (w) => w.eventName },
  'o/{token}': { kind: 'exempt', reason: SIGNED_TOKEN },
  'c/{token}': { kind: 'exempt', reason: SIGNED_TOKEN },
  'unsubscribe/{token}': { kind: 'exempt', reason: SIGNED_TOKEN },
  'subscribe/{token}': { kind: 'exempt', reason: SIGNED_TOKEN },
  'manage/{token}': { kind: 'exempt', reason: SIGNED_TOKEN },
  'oauth/{provider}': { kind: 'exempt', reason: 'an OAuth provider name (github, google), the same for every project; the sign-in routes take no key and no session' },
  'files/{file}': { kind: 'exempt', reason: "an uploaded image's public name (its SHA-256): for mail clients, the same for every project; the route takes no key and no session" },
};

/**
 * Request bodies that cannot be derived from the document (a non-JSON body, or one the document does not describe),
 * keyed by operation (`DELETE /segments/{id}/members`). Empty today: every id route's body is derived.
 */
const UNDOCUMENTED_BODIES: Record<string, (w: World) => unknown> = {};

function paramKinds(op: Operation): { name: string; key: string; kind: ParamKind | undefined }[] {
  return op.pathParams.map((name) => {
    const key = paramKey(op.path, name);
    return { name, key, kind: PARAMS[key] };
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Valid request bodies, derived from the document, so a refusal can only come from the ownership check.

const resolve = (schema: Parameters<typeof resolveSchema>[1]) => resolveSchema(DOC, schema);

interface BuiltRequest {
  url: string;
  body?: unknown;
  /** Set when the body cannot be derived (the test fails and says so). */
  problem?: string;
}

function buildRequest(op: Operation, w: World): BuiltRequest {
  let url = op.path;
  for (const p of paramKinds(op)) {
    const value = p.kind && p.kind.kind !== 'exempt' ? p.kind.value(w) : 'x';
    url = url.replace(`{${p.name}}`, encodeURIComponent(value));
  }
  const query = new URLSearchParams();
  for (const p of (op.raw.parameters ?? []) as { in: string; name: string; required?: boolean; schema?: JsonSchema }[]) {
    if (p.in === 'query' && p.required) query.set(p.name, String(exampleOf(DOC, p.schema)));
  }
  if (query.size) url += `?${query}`;
  if (UNDOCUMENTED_BODIES[op.label]) return { url, body: UNDOCUMENTED_BODIES[op.label]!(w) };
  const { body, problem } = jsonBodyOf(DOC, op);
  return { url, body, problem: problem && `${problem}: add one to UNDOCUMENTED_BODIES` };
}

async function call(op: Operation, w: World, creds: { key?: string; cookie?: string }, req = buildRequest(op, w)): Promise<ApiResponse> {
  if (req.problem) throw new Error(req.problem);
  return api(op.method, req.url, { ...creds, body: req.body });
}

// ---------------------------------------------------------------------------------------------------------------
// Everything of B's in the database, to prove a refused request changed nothing.

/** Tables that hold no project's data, or only bookkeeping that changes by itself; each with the reason. */
const NOT_PROJECT_DATA: Record<string, string> = {
  mikro_orm_migrations: 'schema history',
  sns_messages: 'SNS message ids seen (replay protection), global',
  provider_webhook_events: "relays' report event ids seen (replay protection), global; its varchar event_id is a provider's, not one of `events`",
  event_consumers: 'registered event consumers, global',
  rate_limit_windows: "request counts: B's own requests and a timed clean-up change them; they hold no data",
  event_outbox: "the dispatcher's queue: rows come and go as the worker delivers B's own events",
  event_probe_receipts: "the dispatcher's delivery receipts, written by the worker as it delivers",
  contact_count_deltas: 'compared as the derived count below (compaction moves deltas into the base row)',
  contact_counts: 'compared as the derived count below',
  account_tokens: "dashboard users' email tokens: belong to users, not projects",
  oauth_accounts: "dashboard users' linked sign-in accounts: belong to users, not projects",
  login_throttle_windows: 'failed-login and account-email counts per account and client address; they hold no project data',
};

/** Tables whose link to a project goes through a column not named after the table it points at. */
const LINKED: Record<string, string> = {
  automation_execution_steps: 'execution_id in (select id from automation_executions where project_id = $1)',
  webhook_attempts: 'delivery_id in (select id from webhook_deliveries where project_id = $1)',
};

interface TablePlan {
  table: string;
  where: string;
}

let tablePlans: TablePlan[] | undefined;
let unclassifiedTables: string[] = [];

/** Which rows of every table belong to project $1: a project_id column, or `<x>_id` pointing at a table that has one. */
async function planSnapshot(): Promise<TablePlan[]> {
  if (tablePlans) return tablePlans;
  const { rows } = await db().query<{ table_name: string; cols: string[] }>(
    `select table_name, array_agg(column_name::text order by ordinal_position) as cols
       from information_schema.columns where table_schema = 'public' group by table_name order by table_name`,
  );
  const columns = new Map(rows.map((r) => [r.table_name, r.cols]));
  const scoped = new Set(rows.filter((r) => r.cols.includes('project_id')).map((r) => r.table_name));
  const plans: TablePlan[] = [{ table: 'projects', where: 'id = $1' }];
  plans.push({ table: 'users', where: 'id in (select user_id from memberships where project_id = $1)' });
  unclassifiedTables = [];
  for (const [table, cols] of columns) {
    if (table === 'projects' || table === 'users' || NOT_PROJECT_DATA[table]) continue;
    if (LINKED[table]) {
      plans.push({ table, where: LINKED[table] });
      continue;
    }
    if (scoped.has(table)) {
      plans.push({ table, where: 'project_id = $1' });
      continue;
    }
    const links = cols
      .map((c) => /^(.*)_id$/.exec(c))
      .filter((m): m is RegExpExecArray => !!m && scoped.has(`${m[1]}s`))
      .map((m) => `${m[0]} in (select id from ${m[1]}s where project_id = $1)`);
    if (links.length) plans.push({ table, where: links.join(' or ') });
    else unclassifiedTables.push(table);
  }
  tablePlans = plans;
  return plans;
}

/**
 * Columns a background loop rewrites on its own schedule, left out of the comparison: a domain's verification
 * workflow records each check (`last_checked_at`, `updated_at`, each record's `lastCheckedAt`), and a GET
 * /domains/:id/verify by B itself (the control test) starts that workflow again.
 */
const BOOKKEEPING: Record<string, (row: Record<string, unknown>) => void> = {
  domains: (row) => {
    delete row.last_checked_at;
    delete row.updated_at;
    for (const record of (row.records as Record<string, unknown>[] | null) ?? []) delete record.lastCheckedAt;
  },
};

async function snapshot(projectId: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const plan of await planSnapshot()) {
    const { rows } = await db().query<{ r: string }>(`select to_jsonb(t)::text as r from ${plan.table} t where ${plan.where} order by 1`, [projectId]);
    const strip = BOOKKEEPING[plan.table];
    out[plan.table] = rows.map((x) => {
      if (!strip) return x.r;
      const row = JSON.parse(x.r) as Record<string, unknown>;
      strip(row);
      return JSON.stringify(row);
    });
  }
  const { rows } = await db().query<{ total: string; subscribed: string }>(
    `select coalesce((select total from contact_counts where project_id = $1), 0) + coalesce((select sum(total) from contact_count_deltas where project_id = $1), 0) as total,
            coalesce((select subscribed from contact_counts where project_id = $1), 0) + coalesce((select sum(subscribed) from contact_count_deltas where project_id = $1), 0) as subscribed`,
    [projectId],
  );
  out['contact count (base + deltas)'] = [JSON.stringify(rows[0])];
  return out;
}

/** Waits until B's rows stop changing (deliveries, workflows and counters of the set-up have settled). */
async function settle(projectId: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let previous = JSON.stringify(await snapshot(projectId));
  for (;;) {
    await new Promise((r) => setTimeout(r, 750));
    const now = JSON.stringify(await snapshot(projectId));
    if (now === previous) return;
    if (Date.now() > deadline) throw new Error("project B's rows keep changing; the matrix cannot compare them");
    previous = now;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Set-up: projects A and B, and one of each of B's resources.

async function ok<T = any>(res: Promise<ApiResponse<T>>, status: number, what: string): Promise<T> {
  const r = await res;
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r.body;
}

async function waitForJob(path: string, key: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await api('GET', path, { key });
    if (['COMPLETED', 'FAILED', 'CANCELLED'].includes(r.body?.status)) return;
    if (Date.now() > deadline) throw new Error(`${path} did not finish: ${r.text}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

async function buildWorld(): Promise<World> {
  const a = await createTestProject('Isolation A');
  const b = await createTestProject('Isolation B');
  const bUserId = (jwt.decode(b.cookie.slice(b.cookie.indexOf('=') + 1)) as jwt.JwtPayload).sub!;
  const fieldName = 'bsecretfield';
  const eventName = 'bsecretevent';
  const secretValue = `b-secret-${randomUUID()}`;
  const domain = uniqueDomain();
  await addVerifiedDomain(b.projectId, domain);
  const contactEmail = `secret-${randomUUID().slice(0, 8)}@${domain}`;
  const tracked = await ok(api('POST', '/v1/track', { key: b.publicKey, body: { email: contactEmail, event: eventName, data: { [fieldName]: secretValue } } }), 200, 'track');
  const contactId: string = tracked.data.contact;
  const template = await ok(
    api('POST', '/templates', { key: b.secretKey, body: { name: 'B template', subject: 'Hi', body: '<p>B</p>', type: 'TRANSACTIONAL', from: `b@${domain}` } }),
    201,
    'template',
  );
  const segment = await ok(
    api('POST', '/segments', {
      key: b.secretKey,
      body: {
        name: 'B segment',
        type: 'DYNAMIC',
        trackMembership: true,
        condition: { operator: 'AND', conditions: [{ field: `data.${fieldName}`, operator: 'exists' }, { event: eventName, operator: 'hasDone' }] },
      },
    }),
    201,
    'segment',
  );
  await ok(api('POST', `/segments/${segment.id}/compute`, { key: b.secretKey }), 202, 'segment compute');
  await waitForJob(`/segments/${segment.id}/compute`, b.secretKey);
  const campaign = await ok(
    api('POST', '/campaigns', {
      key: b.secretKey,
      body: { name: 'B campaign', subject: 'Hi', body: '<p>B</p>', from: `b@${domain}`, audienceType: 'SEGMENT', segmentId: segment.id },
    }),
    201,
    'campaign',
  );
  // A workflow with a run that waits a day (its rows stay still): DELAY -> SEND_EMAIL.
  const workflow = await ok(api('POST', '/workflows', { key: b.secretKey, body: { name: 'B workflow', triggerEvent: eventName } }), 201, 'workflow');
  const delayStep = await ok(api('POST', `/workflows/${workflow.id}/steps`, { key: b.secretKey, body: { type: 'DELAY', config: { duration: { amount: 1, unit: 'days' } } } }), 201, 'step');
  const sendStep = await ok(api('POST', `/workflows/${workflow.id}/steps`, { key: b.secretKey, body: { type: 'SEND_EMAIL', config: { templateId: template.id } } }), 201, 'step');
  const transition = await ok(api('POST', `/workflows/${workflow.id}/transitions`, { key: b.secretKey, body: { fromStepId: delayStep.id, toStepId: sendStep.id } }), 201, 'transition');
  const execution = await ok(api('POST', `/workflows/${workflow.id}/executions`, { key: b.secretKey, body: { contactId } }), 201, 'execution');
  for (let i = 0; ; i++) {
    const x = await ok(api('GET', `/workflows/${workflow.id}/executions/${execution.id}`, { key: b.secretKey }), 200, 'execution');
    if (x.status === 'WAITING') break;
    if (i > 100) throw new Error(`B's execution is ${x.status}, not WAITING`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const sent = await ok(api('POST', '/v1/send', { key: b.secretKey, body: { to: contactEmail, template: template.id } }), 200, 'send');
  const emailId: string = sent.data.emails[0].email;
  await waitForEmailStatus(emailId, 'SENT');
  const created = await ok(api('POST', '/domains', { key: b.secretKey, body: { domain: uniqueDomain() } }), 201, 'domain');
  // Its verification workflow re-checks DNS every 2 s in the test stack and writes the result; stop it, so B's rows
  // only change if a request changes them.
  const connection = await Connection.connect({ address: stackEnv().temporalAddress });
  try {
    await new Client({ connection }).workflow.getHandle(`domain-verification/${created.id}`).terminate('isolation matrix: keep the row still');
  } finally {
    await connection.close();
  }
  const form = new FormData();
  form.set('file', new Blob([`email,${fieldName}\nimported-${randomUUID().slice(0, 8)}@${domain},${secretValue}\n`], { type: 'text/csv' }), 'b.csv');
  const imported = await fetch(`${stackEnv().apiUrl}/contacts/import`, { method: 'POST', headers: { authorization: `Bearer ${b.secretKey}` }, body: form });
  if (imported.status !== 202) throw new Error(`import: ${imported.status} ${await imported.text()}`);
  const importJobId: string = ((await imported.json()) as { jobId: string }).jobId;
  await waitForJob(`/contacts/import/${importJobId}`, b.secretKey);
  const bulk = await ok(api('POST', '/contacts/bulk-subscribe', { key: b.secretKey, body: { contactIds: [contactId] } }), 202, 'bulk');
  await waitForJob(`/contacts/bulk/${bulk.jobId}`, b.secretKey);
  const image = new FormData();
  image.set('file', new Blob([Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64')], { type: 'image/gif' }), 'b.gif');
  const uploaded = await fetch(`${stackEnv().apiUrl}/uploads/image`, { method: 'POST', headers: { authorization: `Bearer ${b.secretKey}` }, body: image });
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${await uploaded.text()}`);
  const uploadId: string = ((await uploaded.json()) as { id: string }).id;
  const invited = await ok(api('POST', `/projects/${b.projectId}/members`, { cookie: b.cookie, body: { email: `invitee-${randomUUID().slice(0, 8)}@example.com` } }), 202, 'invitation');
  const invitationId: string = invited.invitation.id;
  const suppressedEmail = `suppressed-${randomUUID().slice(0, 8)}@${domain}`;
  await ok(api('POST', '/suppressions', { key: b.secretKey, body: { emails: [suppressedEmail] } }), 200, 'suppression');
  // Disabled, so nothing of B's is ever sent to it: its test delivery ends CANCELLED at once and the rows stay still.
  const hook = await ok(api('POST', '/webhook-endpoints', { key: b.secretKey, body: { url: 'https://hooks.example.com/b', eventTypes: ['*'], enabled: false } }), 201, 'webhook endpoint');
  const hookDelivery = await ok(api('POST', `/webhook-endpoints/${hook.id}/test`, { key: b.secretKey }), 202, 'webhook test');
  // A replay of a range without events: it queues nothing.
  const hookReplay = await ok(api('POST', `/webhook-endpoints/${hook.id}/replay`, { key: b.secretKey, body: { from: '2020-01-01T00:00:00Z', to: '2020-01-02T00:00:00Z' } }), 202, 'webhook replay');
  await settle(b.projectId);
  return {
    a,
    b,
    bUserId,
    contactId,
    contactEmail,
    emailId,
    templateId: template.id,
    segmentId: segment.id,
    campaignId: campaign.id,
    workflowId: workflow.id,
    stepId: sendStep.id,
    transitionId: transition.id,
    executionId: execution.id,
    domainId: created.id,
    importJobId,
    bulkJobId: bulk.jobId,
    uploadId,
    invitationId,
    fieldName,
    eventName,
    suppressedEmail,
    webhookEndpointId: hook.id,
    webhookDeliveryId: hookDelivery.id,
    webhookReplayId: hookReplay.replayId,
    secrets: [hook.id, hook.secret, hookDelivery.id, secretValue, contactId, contactEmail, segment.id, template.id, campaign.id, workflow.id, execution.id, emailId, created.id, importJobId, bulk.jobId, uploadId, invitationId, suppressedEmail],
  };
}

let w: World;
beforeAll(async () => {
  w = await buildWorld();
}, 120_000);
afterAll(closeDb);

async function expectUnchanged(before: Record<string, string[]>): Promise<void> {
  const after = await snapshot(w.b.projectId);
  for (const table of Object.keys(before)) expect({ table, rows: after[table] }).toEqual({ table, rows: before[table] });
}

// ---------------------------------------------------------------------------------------------------------------

const withParams = OPERATIONS.filter((op) => op.pathParams.length > 0);
const table = (ops: Operation[]) => ops.map((op) => [op.label, op] as const);

describe('the route registry is fully classified', () => {
  test('the document lists the routes', () => {
    expect(OPERATIONS.length).toBeGreaterThan(50);
  });

  test.each(table(withParams))('%s: every path parameter has a factory in PARAMS', (_label, op) => {
    for (const p of paramKinds(op)) {
      if (!p.kind) throw new Error(`${op.label}: no factory for path parameter "${p.key}". Add one to PARAMS in isolation-matrix.test.ts (an id of project B's, a name in B's data, or exempt with a reason).`);
      if (p.kind.kind !== 'exempt' && op.auth === 'none') throw new Error(`${op.label}: "${p.key}" names project data but the route takes no credentials`);
      if (p.kind.kind === 'exempt' && op.auth !== 'none') throw new Error(`${op.label}: "${p.key}" is exempt (${p.kind.reason}) but the route takes ${op.auth} credentials`);
    }
  });

  test("every table is either project B's data (compared) or listed in NOT_PROJECT_DATA", async () => {
    await planSnapshot();
    expect(unclassifiedTables).toEqual([]);
  });
});

describe("another project's key / another account's session gets 404 on B's resources and changes nothing", () => {
  const cases = withParams.filter((op) => op.auth !== 'none' && paramKinds(op).some((p) => p.kind?.kind === 'owned'));
  // The same reads with B's own credentials find the resource and pass validation: the 404s below are about
  // ownership. (GET /domains/{id}/verify as B may be 503: its workflow was stopped above.) Writes are not replayed
  // as B; for them a derived body that failed validation would show as 422, not 404.
  test.each(table(cases.filter((op) => op.method === 'GET')))('control: %s as B itself is found', async (_label, op) => {
    const res = await call(op, w, op.auth === 'session' ? { cookie: w.b.cookie } : { key: w.b.secretKey });
    if (res.status === 404 || res.status === 422) throw new Error(`${op.label} as B: ${res.status} ${res.text}`);
  });
  test.each(table(cases))('%s', async (_label, op) => {
    const creds = op.auth === 'session' ? { cookie: w.a.cookie } : { key: w.a.secretKey };
    const before = await snapshot(w.b.projectId);
    const res = await call(op, w, creds);
    expect({ status: res.status, body: res.body }).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    for (const secret of w.secrets) expect(res.text).not.toContain(secret);
    await expectUnchanged(before);
  });
});

describe("a name in B's data (field, event name) used with A's key shows A's own data only and changes nothing of B's", () => {
  const cases = withParams.filter((op) => op.auth !== 'none' && paramKinds(op).every((p) => p.kind?.kind === 'name'));
  test.each(table(cases))('%s', async (_label, op) => {
    const before = await snapshot(w.b.projectId);
    const res = await call(op, w, op.auth === 'session' ? { cookie: w.a.cookie } : { key: w.a.secretKey });
    expect(res.status).toBeLessThan(500);
    for (const secret of w.secrets) expect(res.text).not.toContain(secret);
    await expectUnchanged(before);
  });
});

describe('dashboard routes: a body naming another account\'s project gets 404 and changes nothing', () => {
  const cases = OPERATIONS.filter((op) => op.auth === 'session' && resolve(op.raw.requestBody?.content?.['application/json']?.schema).properties?.projectId);
  test.each(table(cases))('%s', async (_label, op) => {
    const req = buildRequest(op, w);
    const before = await snapshot(w.b.projectId);
    const res = await call(op, w, { cookie: w.a.cookie }, { ...req, body: { ...(req.body as object), projectId: w.b.projectId } });
    expect({ status: res.status, body: res.body }).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    await expectUnchanged(before);
  });
});

describe("B's public key is refused on every secret-key route (401 INVALID_API_KEY)", () => {
  test.each(table(OPERATIONS.filter((op) => op.auth === 'secret')))('%s', async (_label, op) => {
    const before = await snapshot(w.b.projectId);
    const res = await call(op, w, { key: w.b.publicKey }, { ...buildRequest(op, w), problem: undefined });
    expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status: 401, code: 'INVALID_API_KEY' });
    await expectUnchanged(before);
  });
});

describe('dashboard routes refuse a missing, forged, expired or unsigned session cookie (401)', () => {
  // The API's signing key, read the way the API reads it (JWT_SECRET, or the fixed development value).
  const secret = () => loadConfig({ ...process.env, NODE_ENV: 'test', DATABASE_URL: stackEnv().databaseUrl }).jwtSecret;
  test('control: a cookie signed with that key for the same user is accepted, so the refusals below are about the cookie', async () => {
    const token = jwt.sign({}, secret(), { algorithm: 'HS256', subject: w.bUserId, expiresIn: 3600 });
    expect((await api('GET', '/users/@me', { cookie: `mailwright_session=${token}` })).status).toBe(200);
  });
  const cookies: [string, () => string | undefined][] = [
    ['missing', () => undefined],
    ['forged (another signing key)', () => jwt.sign({}, `not-the-secret-${randomUUID()}`, { algorithm: 'HS256', subject: w.bUserId, expiresIn: 3600 })],
    ['expired', () => jwt.sign({ exp: Math.floor(Date.now() / 1000) - 60 }, secret(), { algorithm: 'HS256', subject: w.bUserId })],
    ['unsigned (alg none)', () => jwt.sign({}, '', { algorithm: 'none', subject: w.bUserId, expiresIn: 3600 })],
  ];
  const cases = OPERATIONS.filter((op) => op.auth === 'session').flatMap((op) => cookies.map(([name, make]) => [`${op.label}, ${name}`, op, make] as const));
  test.each(cases)('%s', async (_label, op, make) => {
    const token = make();
    const before = await snapshot(w.b.projectId);
    const req = buildRequest(op, w);
    const body = req.body && typeof req.body === 'object' && 'projectId' in req.body ? { ...req.body, projectId: w.b.projectId } : req.body;
    const res = await call(op, w, token ? { cookie: `mailwright_session=${token}` } : {}, { ...req, body });
    expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status: 401, code: 'UNAUTHORIZED' });
    await expectUnchanged(before);
  });
});
