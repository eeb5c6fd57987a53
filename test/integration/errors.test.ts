import { api } from '../helpers/api';
import { createTestProject, type TestProject } from '../helpers/fixtures';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let project: TestProject;
beforeAll(async () => {
  project = await createTestProject();
});

function expectEnvelope(res: { status: number; body: any; headers: Headers; text: string }, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/application\/json/);
  expect(res.body).toEqual({
    success: false,
    error: expect.objectContaining({ code, statusCode: status, message: expect.any(String), requestId: expect.stringMatching(UUID) }),
    timestamp: expect.any(String),
  });
  expect(res.headers.get('x-request-id')).toBe(res.body.error.requestId);
  expect(new Date(res.body.timestamp).toString()).not.toBe('Invalid Date');
  expect(res.text).not.toMatch(/at .*\.(ts|js):\d+/); // never a stack trace
}

describe('error envelope', () => {
  test('unknown route -> 404 NOT_FOUND', async () => {
    expectEnvelope(await api('GET', '/no/such/route'), 404, 'NOT_FOUND');
  });

  test('wrong method on a known path -> 405 METHOD_NOT_ALLOWED', async () => {
    expectEnvelope(await api('DELETE', '/v1/send', { key: project.secretKey }), 405, 'METHOD_NOT_ALLOWED');
  });

  test('malformed JSON -> 400 INVALID_JSON', async () => {
    expectEnvelope(await api('POST', '/v1/send', { key: project.secretKey, raw: '{"to": "a@b.c",' }), 400, 'INVALID_JSON');
  });

  test('a JSON body that is not an object -> 400 or 422, never 500', async () => {
    const res = await api('POST', '/v1/send', { key: project.secretKey, raw: '"just a string"' });
    expect([400, 422]).toContain(res.status);
    expect(res.body.success).toBe(false);
  });

  test('body over the limit -> 413 PAYLOAD_TOO_LARGE', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) });
    expectEnvelope(await api('POST', '/users/@me/projects', { cookie: project.cookie, raw: big }), 413, 'PAYLOAD_TOO_LARGE');
  });

  test('zod failures -> 422 VALIDATION_ERROR with field errors', async () => {
    const res = await api('POST', '/v1/send', {
      key: project.secretKey,
      body: { to: 'not-an-email', from: 'a@b.c', subject: 'x'.repeat(999), body: '' },
    });
    expectEnvelope(res, 422, 'VALIDATION_ERROR');
    const fields = res.body.error.errors.map((e: { field: string }) => e.field);
    expect(fields).toEqual(expect.arrayContaining(['to', 'subject', 'body']));
    const to = res.body.error.errors.find((e: { field: string }) => e.field === 'to');
    expect(to).toEqual({ field: 'to', message: expect.any(String), code: 'invalid_string' });
  });

  test("a client-supplied X-Request-Id is echoed as X-Client-Request-Id; the envelope's requestId stays ours", async () => {
    const res = await api('GET', '/nope', { headers: { 'x-request-id': 'client-trace-12345678' } });
    expect(res.headers.get('x-client-request-id')).toBe('client-trace-12345678');
    expect(res.body.error.requestId).toMatch(UUID);
    expect(res.headers.get('x-request-id')).toBe(res.body.error.requestId);
  });

  test('successful responses carry X-Request-Id too', async () => {
    const res = await api('GET', '/config');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toMatch(UUID);
  });
});

describe('OpenAPI', () => {
  test('GET /openapi.json is an OpenAPI 3.1 document generated from the route schemas', async () => {
    const res = await api('GET', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    const send = res.body.paths['/v1/send'].post;
    expect(send.security).toEqual([{ secretKey: [] }]);
    expect(send.responses['429'].description).toMatch(/RATE_LIMIT_EXCEEDED/);
    // Dashboard routes are not under the API-key budget; login's 429 is its own throttle of failed attempts.
    expect(res.body.paths['/users/@me'].get.responses['429']).toBeUndefined();
    expect(res.body.paths['/auth/login'].post.responses['429'].description).toMatch(/TOO_MANY_ATTEMPTS/);
    const schema = res.body.components.schemas.SendRequest;
    // subject, body and from may come from a template; only `to` is always required.
    expect(schema.required).toEqual(['to']);
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(['to', 'template', 'subject', 'body', 'from', 'headers', 'attachments', 'tracking']));
    expect(res.body.paths['/users/@me/projects/{id}/regenerate-keys'].post).toBeDefined();
  });

  test('GET /docs renders the document with Swagger UI served locally', async () => {
    const page = await api('GET', '/docs');
    expect(page.status).toBe(200);
    expect(page.text).toContain('/openapi.json');
    const asset = await api('GET', '/docs/swagger-ui-bundle.js');
    expect(asset.status).toBe(200);
    expect(asset.text.length).toBeGreaterThan(100_000);
  });
});
