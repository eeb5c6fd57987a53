import { api } from '../helpers/api';
import { createTestProject, type TestProject } from '../helpers/fixtures';

/** SPEC.md › Versioning: the earlier response variant, chosen per request (header) or per project (setting). */
const HEADER = 'mailwright-response-variant';

interface Operation {
  parameters?: { in: string; name: string }[];
  responses: Record<string, { content?: Record<string, { schema?: { anyOf?: unknown[] } }> }>;
}

let project: TestProject;
let contactId: string;
let workflowId: string;
let endpointId: string;
let listPaths: string[];

/** The cursor lists, found in the document: GET operations whose earlier variant has `data.items` and `data.nextCursor`. */
function cursorLists(doc: { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, unknown> } }): string[] {
  const isEarlierList = (s: unknown) => {
    const data = (s as { properties?: { data?: { properties?: Record<string, unknown> } } }).properties?.data?.properties;
    return Boolean(data && 'items' in data && 'nextCursor' in data);
  };
  return Object.entries(doc.paths)
    .filter(([, ops]) => (ops.get?.responses['200']?.content?.['application/json']?.schema?.anyOf ?? []).some(isEarlierList))
    .map(([path]) => path);
}

const fill = (path: string) => path.replace('/users/@me/projects/{id}/', `/users/@me/projects/${project.projectId}/`).replace('{contactId}', contactId).replace('{field}', 'plan').replace('/workflows/{id}/', `/workflows/${workflowId}/`)
    .replace('/webhook-endpoints/{id}/', `/webhook-endpoints/${endpointId}/`);

beforeAll(async () => {
  project = await createTestProject('variants');
  for (const [i, email] of ['v1@example.com', 'v2@example.com', 'v3@example.com'].entries()) {
    const res = await api('POST', '/v1/track', { key: project.secretKey, body: { email, event: 'seen', data: { plan: i % 2 ? 'pro' : 'free' } } });
    contactId = res.body.data.contact;
  }
  await api('POST', '/templates', { key: project.secretKey, body: { name: 'T', subject: 'S', body: '<p>b</p>', type: 'TRANSACTIONAL' } });
  workflowId = (await api('POST', '/workflows', { key: project.secretKey, body: { name: 'W' } })).body.id;
  // After the tracked events: the endpoint has no deliveries, and its list answers empty in both variants.
  endpointId = (await api('POST', '/webhook-endpoints', { key: project.secretKey, body: { url: 'https://hooks.example.com/in', eventTypes: ['email.sent'] } })).body.id;
  listPaths = cursorLists((await api('GET', '/openapi.json')).body);
});

test('the document names the cursor lists (both variants documented)', () => {
  expect(listPaths).toEqual(expect.arrayContaining(['/contacts', '/templates', '/events', '/events/contact/{contactId}', '/contacts/fields/{field}/values']));
});

/**
 * Lists that need a payment provider: the stack runs without Stripe (409 BILLING_DISABLED); billing.test.ts walks the
 * invoices against stripe-mock.
 */
const NEEDS_STRIPE = ['/users/@me/projects/{id}/billing-invoices'];

test('every cursor list answers in both variants, with the same items', async () => {
  for (const path of listPaths.filter((p) => !NEEDS_STRIPE.includes(p))) {
    const url = `${fill(path)}${path.includes('?') ? '&' : '?'}limit=2`;
    // Dashboard lists take the session; the others the secret key.
    const creds = path.startsWith('/users/@me') || path.startsWith('/projects/') ? { cookie: project.cookie } : { key: project.secretKey };
    const current = await api('GET', url, { ...creds, headers: { [HEADER]: 'current' } });
    const earlier = await api('GET', url, { ...creds, headers: { [HEADER]: 'earlier' } });
    expect({ path, status: current.status, keys: Object.keys(current.body).sort() }).toEqual({ path, status: 200, keys: ['cursor', 'data', 'hasMore', 'total'] });
    expect({ path, status: earlier.status, keys: Object.keys(earlier.body).sort(), success: earlier.body.success }).toEqual({ path, status: 200, keys: ['data', 'success'], success: true });
    expect(Object.keys(earlier.body.data).sort()).toEqual(['hasMore', 'items', 'nextCursor', 'total']);
    expect(earlier.body.data.items).toEqual(current.body.data);
    expect(earlier.body.data.hasMore).toBe(current.body.hasMore);
    expect(earlier.body.data.total).toBe(current.body.total);
    // The earlier cursor walks the same list.
    if (current.body.hasMore) {
      const next = await api('GET', `${url}&cursor=${encodeURIComponent(earlier.body.data.nextCursor)}`, { ...creds, headers: { [HEADER]: 'earlier' } });
      expect(next.status).toBe(200);
      expect(next.body.data.items.length).toBeGreaterThan(0);
    }
  }
});

test('a single resource is wrapped; /v1 responses and errors are the same in both', async () => {
  const earlier = await api('GET', `/contacts/${contactId}`, { key: project.secretKey, headers: { [HEADER]: 'earlier' } });
  expect(earlier.body).toEqual({ success: true, data: expect.objectContaining({ id: contactId, email: 'v3@example.com' }) });
  const tracked = await api('POST', '/v1/track', { key: project.secretKey, headers: { [HEADER]: 'earlier' }, body: { email: 'v4@example.com', event: 'x' } });
  expect(Object.keys(tracked.body.data).sort()).toEqual(['contact', 'event', 'timestamp']);
  const missing = await api('GET', '/contacts/00000000-0000-7000-8000-000000000000', { key: project.secretKey, headers: { [HEADER]: 'earlier' } });
  expect(missing.status).toBe(404);
  expect(missing.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
  const me = await api('GET', '/users/@me', { cookie: project.cookie, headers: { [HEADER]: 'earlier' } });
  expect(me.body).toEqual({ success: true, data: expect.objectContaining({ email: project.userEmail }) });
});

test('an unknown or empty variant is 422', async () => {
  for (const value of ['v0', '']) {
    const res = await api('GET', '/contacts', { key: project.secretKey, headers: { [HEADER]: value } });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0]).toMatchObject({ field: `headers.Mailwright-Response-Variant` });
  }
});

test("the project's setting chooses the variant of requests without the header; the header still wins", async () => {
  const patched = await api('PATCH', `/users/@me/projects/${project.projectId}`, { cookie: project.cookie, body: { settings: { responseVariant: 'earlier' } } });
  expect(patched.status).toBe(200);
  expect(patched.body.settings.responseVariant).toBe('earlier');
  // The key cache follows the change feed (milliseconds); wait for it rather than race it.
  const deadline = Date.now() + 5_000;
  let res = await api('GET', '/contacts', { key: project.secretKey });
  while (res.body.success !== true && Date.now() < deadline) res = await api('GET', '/contacts', { key: project.secretKey });
  expect(Object.keys(res.body.data).sort()).toEqual(['hasMore', 'items', 'nextCursor', 'total']);
  const current = await api('GET', '/contacts', { key: project.secretKey, headers: { [HEADER]: 'current' } });
  expect(Array.isArray(current.body.data)).toBe(true);
  await api('PATCH', `/users/@me/projects/${project.projectId}`, { cookie: project.cookie, body: { settings: { responseVariant: 'current' } } });
});
