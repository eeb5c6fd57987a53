import http from 'node:http';
import net from 'node:net';
import { randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { api, sessionCookie } from '../helpers/api';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';
import { loadConfig } from '../../domain/config';

/**
 * Issue 12's findings, one test each: hostile input gets a clear 4xx in the envelope, never a 500.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let project: TestProject;
beforeAll(async () => {
  project = await createTestProject('Hostile');
});

/** A request through node:http, which (unlike fetch) sends any method and any raw body. */
function rawRequest(method: string, path: string, opts: { headers?: Record<string, string>; body?: string | Buffer } = {}) {
  const url = new URL(path, stackEnv().apiUrl);
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }>((resolve, reject) => {
    const req = http.request(url, { method, headers: opts.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: any = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode!, headers: res.headers, body });
      });
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

function expectFieldError(res: { status: number; body: any }, status: number, code: string, field?: string) {
  expect(res.status).toBe(status);
  expect(res.body.success).toBe(false);
  expect(res.body.error.requestId).toMatch(UUID);
  const errors: { field: string; code: string }[] = res.body.error.errors ?? [];
  expect(errors).toEqual(expect.arrayContaining([expect.objectContaining({ code, ...(field ? { field } : {}) })]));
}

describe('1. NUL characters and lone surrogates are refused with 422 invalid_characters', () => {
  const auth = () => ({ authorization: `Bearer ${project.secretKey}`, 'content-type': 'application/json' });

  test.each([
    ['contact search', '/contacts?search=a%00b', 'query.search'],
    ['template search', '/templates?search=a%00b', 'query.search'],
    ['event name filter', '/events?name=a%00b', 'query.name'],
    ['field name in a path', '/contacts/fields/a%00b/values', 'params.field'],
    ['field usage path', '/contacts/fields/a%00b/usage', 'params.field'],
  ])('%s', async (_what, path, field) => {
    expectFieldError(await rawRequest('GET', path, { headers: auth() }), 422, 'invalid_characters', field);
  });

  test('a field name with NUL on DELETE', async () => {
    expectFieldError(await rawRequest('DELETE', '/contacts/fields/a%00b', { headers: auth() }), 422, 'invalid_characters', 'params.field');
  });

  test.each([
    ['POST /contacts data value', 'POST', '/contacts', '{"email":"nul1@example.com","data":{"k":"a\\u0000b"}}', 'data.k'],
    ['POST /contacts data key', 'POST', '/contacts', '{"email":"nul2@example.com","data":{"a\\u0000b":1}}', 'data.a\u0000b'],
    ['POST /contacts lone surrogate', 'POST', '/contacts', '{"email":"nul3@example.com","data":{"k":"\\ud800"}}', 'data.k'],
    ['nested data value', 'POST', '/contacts', '{"email":"nul4@example.com","data":{"a":{"b":["\\udfff"]}}}', 'data.a.b.0'],
    ['/v1/track data', 'POST', '/v1/track', '{"email":"nul5@example.com","event":"e","data":{"k":"\\ud800"}}', 'data.k'],
    ['segment name', 'POST', '/segments', '{"name":"a\\u0000","type":"STATIC"}', 'name'],
    ['template subject', 'POST', '/templates', '{"name":"t","subject":"s\\u0000","body":"<p>b</p>","type":"TRANSACTIONAL"}', 'subject'],
  ])('%s', async (_what, method, path, body, field) => {
    expectFieldError(await rawRequest(method, path, { headers: auth(), body }), 422, 'invalid_characters', field);
  });

  test('PATCH /contacts/:id data', async () => {
    const created = await api('POST', '/contacts', { key: project.secretKey, body: { email: 'patch-nul@example.com' } });
    const res = await rawRequest('PATCH', `/contacts/${created.body.id}`, { headers: auth(), body: '{"data":{"k":"\\ud83d"}}' });
    expectFieldError(res, 422, 'invalid_characters', 'data.k');
  });

  test('project name and signup name (dashboard)', async () => {
    const res = await rawRequest('POST', '/users/@me/projects', { headers: { cookie: project.cookie, 'content-type': 'application/json' }, body: '{"name":"p\\u0000"}' });
    expectFieldError(res, 422, 'invalid_characters', 'name');
    const signup = await rawRequest('POST', '/auth/signup', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: `nul-${randomUUID()}@example.com`, password: 'long enough password' }).replace('}', ',"name":"\\ud800"}'),
    });
    expectFieldError(signup, 422, 'invalid_characters', 'name');
  });

  test('the CSV column mapping of an import', async () => {
    const form = new FormData();
    form.append('file', new Blob(['email,plan\na@example.com,pro\n'], { type: 'text/csv' }), 'c.csv');
    form.append('mapping', '{"plan":"data.p\\u0000"}');
    const res = await fetch(`${stackEnv().apiUrl}/contacts/import`, { method: 'POST', headers: { authorization: `Bearer ${project.secretKey}` }, body: form });
    expectFieldError({ status: res.status, body: await res.json() }, 422, 'invalid_mapping', 'mapping');
  });

  test('nothing was stored by the refused requests', async () => {
    for (const email of ['nul1@example.com', 'nul2@example.com', 'nul3@example.com', 'nul5@example.com']) {
      const res = await api('POST', '/contacts/lookup', { key: project.secretKey, body: { emails: [email] } });
      expect(res.body.results[0].exists).toBe(false);
    }
  });
});

describe('2. deeply nested JSON is refused with 422 too_deep', () => {
  const deep = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

  test('contact data 4,100 levels deep (25 KB)', async () => {
    const res = await api('POST', '/contacts', { key: project.secretKey, raw: `{"email":"deep@example.com","data":${deep(4100)}}` });
    expectFieldError(res, 422, 'too_deep');
  });

  test('/v1/track data', async () => {
    const res = await api('POST', '/v1/track', { key: project.secretKey, raw: `{"email":"deep@example.com","event":"e","data":${deep(4100)}}` });
    expectFieldError(res, 422, 'too_deep');
  });

  test('/v1/send with an Idempotency-Key', async () => {
    const res = await api('POST', '/v1/send', {
      key: project.secretKey,
      headers: { 'idempotency-key': randomUUID() },
      raw: `{"to":"deep@example.com","from":"a@example.com","subject":"s","body":"b","data":${deep(4100)}}`,
    });
    expectFieldError(res, 422, 'too_deep');
  });

  test('data nested 20 levels is still accepted', async () => {
    const res = await api('POST', '/contacts', { key: project.secretKey, raw: `{"email":"deep20@example.com","data":${deep(20)}}` });
    expect(res.status).toBe(201);
  });
});

describe('3. unknown HTTP methods get 405 in the envelope, with Allow', () => {
  test.each(['TRACE', 'PROPFIND', 'PURGE', 'LINK'])('%s on a known path', async (method) => {
    const res = await rawRequest(method, '/contacts', { headers: { authorization: `Bearer ${project.secretKey}` } });
    expect(res.status).toBe(405);
    expect(res.body.error.code).toBe('METHOD_NOT_ALLOWED');
    expect(res.headers.allow).toBe('HEAD, GET, POST, OPTIONS');
  });

  test('an unknown method on an unknown path is 404', async () => {
    const res = await rawRequest('PROPFIND', '/no/such/path');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
  });

  test('OPTIONS answers 204 with Allow', async () => {
    const res = await rawRequest('OPTIONS', '/v1/send');
    expect(res.status).toBe(204);
    expect(res.headers.allow).toBe('POST, OPTIONS');
  });

  test('/contacts/lookup is its own path, not a contact id: GET is 405 with Allow: POST', async () => {
    for (const path of ['/contacts/lookup', '/contacts/import', '/contacts/bulk-delete']) {
      const res = await api('GET', path, { key: project.secretKey });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST, OPTIONS');
    }
    // A contact id that is not a UUID is still the contact route's 422.
    expect((await api('GET', '/contacts/not-a-uuid', { key: project.secretKey })).status).toBe(422);
    // The same method on both: the fixed path wins.
    expect((await api('GET', '/contacts/fields', { key: project.secretKey })).status).toBe(200);
  });
});

describe('4. concurrent signups with one email', () => {
  test('exactly one 201; the others 409 EMAIL_TAKEN', async () => {
    const email = `race-${randomUUID()}@example.com`;
    const results = await Promise.all(Array.from({ length: 4 }, () => api('POST', '/auth/signup', { body: { email, password: 'correct horse battery' } })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 409, 409, 409]);
    for (const r of results.filter((x) => x.status === 409)) expect(r.body.error.code).toBe('EMAIL_TAKEN');
  });
});

describe('5. a validly signed session whose subject is not a user id', () => {
  test.each(['/users/@me', '/users/@me/projects'])('%s -> 401', async (path) => {
    const token = jwt.sign({}, loadConfig({ ...process.env, DATABASE_URL: 'postgres://unused/x', NODE_ENV: 'test' }).jwtSecret, { algorithm: 'HS256', subject: 'not-a-uuid', expiresIn: 60 });
    const res = await api('GET', path, { cookie: `mailwright_session=${token}` });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('UNAUTHORIZED');
  });
});

describe('6. a multipart file part without its own Content-Type is a text file (RFC 7578)', () => {
  function multipart(csv: string) {
    const boundary = `----mw${randomUUID()}`;
    const body = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.csv"\r\n\r\n${csv}\r\n--${boundary}--\r\n`;
    return { body, headers: { authorization: `Bearer ${project.secretKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` } };
  }

  test('a small file is queued', async () => {
    const res = await rawRequest('POST', '/contacts/import', multipart('email\nnoct-small@example.com\n'));
    expect(res.status).toBe(202);
    expect(res.body.jobId).toMatch(UUID);
  });

  test('a file over 64 KB is queued, not refused as too large', async () => {
    const rows = Array.from({ length: 3000 }, (_, i) => `noct-${i}@example.com`).join('\n');
    const res = await rawRequest('POST', '/contacts/import', multipart(`email\n${rows}\n`));
    expect(res.status).toBe(202);
  });
});

describe('8. requestId is always our UUID', () => {
  test("a client's X-Request-Id is echoed as X-Client-Request-Id, not adopted", async () => {
    const res = await api('GET', '/nope', { headers: { 'x-request-id': 'client-chosen-id' } });
    expect(res.body.error.requestId).toMatch(UUID);
    expect(res.headers.get('x-request-id')).toBe(res.body.error.requestId);
    expect(res.headers.get('x-client-request-id')).toBe('client-chosen-id');
  });
});

describe('9. numbers JSON rounds to infinity', () => {
  test('{"data":{"x":1e400}} -> 422 invalid_number, nothing stored', async () => {
    const res = await api('POST', '/contacts', { key: project.secretKey, raw: '{"email":"inf@example.com","data":{"x":1e400}}' });
    expectFieldError(res, 422, 'invalid_number', 'data.x');
    const lookup = await api('POST', '/contacts/lookup', { key: project.secretKey, body: { emails: ['inf@example.com'] } });
    expect(lookup.body.results[0].exists).toBe(false);
  });
});

describe('10. a __proto__ key', () => {
  // Valid JSON, refused wherever it appears: parsed into an object it would set that object's prototype. The answer
  // is the query's and the form's: 422 VALIDATION_ERROR with field code forbidden_key at the key's path.
  test('in free-form contact data -> 422 forbidden_key at data.__proto__, nothing stored', async () => {
    const res = await api('POST', '/contacts', { key: project.secretKey, raw: '{"email":"proto@example.com","data":{"__proto__":{"x":1}}}' });
    expectFieldError(res, 422, 'forbidden_key', 'data.__proto__');
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors[0].message).toContain('__proto__');
    const lookup = await api('POST', '/contacts/lookup', { key: project.secretKey, body: { emails: ['proto@example.com'] } });
    expect(lookup.body.results[0].exists).toBe(false);
  });

  test('at the top level of a body, and nested in an array -> 422 forbidden_key at each path', async () => {
    expectFieldError(await api('POST', '/v1/track', { key: project.secretKey, raw: '{"__proto__":{"admin":true},"email":"p2@example.com","event":"x"}' }), 422, 'forbidden_key', '__proto__');
    const res = await api('POST', '/contacts/lookup', { key: project.secretKey, raw: '{"emails":["a@example.com"],"x":[{"__proto__":1},{"__proto__":2}]}' });
    expectFieldError(res, 422, 'forbidden_key', 'x.0.__proto__');
    expectFieldError(res, 422, 'forbidden_key', 'x.1.__proto__');
  });

  test('as an escaped key ("\\u005f_proto__") -> the same 422', async () => {
    expectFieldError(await api('POST', '/contacts', { key: project.secretKey, raw: '{"email":"p3@example.com","data":{"\\u005f_proto__":1}}' }), 422, 'forbidden_key', 'data.__proto__');
  });

  test('other JSON that does not parse is still 400 INVALID_JSON', async () => {
    const res = await api('POST', '/contacts', { key: project.secretKey, raw: '{"email":"p4@example.com","data":{"__proto__":1}' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_JSON');
  });

  test('in a query string -> 422 forbidden_key', async () => {
    expectFieldError(await api('GET', '/contacts?__proto__=1', { key: project.secretKey }), 422, 'forbidden_key');
  });
});

describe('11. a declared Content-Length in 2^31..2^32-1', () => {
  test('is refused at once with 413, without waiting for the body', async () => {
    const { hostname, port } = new URL(stackEnv().apiUrl);
    const response = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () => {
        socket.write(
          `POST /contacts HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${project.secretKey}\r\n` +
            `Content-Type: application/json\r\nContent-Length: 3000000000\r\nConnection: close\r\n\r\n{"email":`,
        );
      });
      let text = '';
      socket.on('data', (d) => (text += d.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
      setTimeout(() => {
        socket.destroy();
        resolve(text);
      }, 10_000);
    });
    expect(response).toMatch(/^HTTP\/1\.1 413/);
    expect(response).toContain('PAYLOAD_TOO_LARGE'); // an answer: after 10 s the socket is cut and `response` is empty
  });
});

describe('sessions', () => {
  test('a cookie from signup still works (the subject check accepts real user ids)', async () => {
    const signup = await api('POST', '/auth/signup', { body: { email: `ok-${randomUUID()}@example.com`, password: 'correct horse battery' } });
    expect((await api('GET', '/users/@me', { cookie: sessionCookie(signup) })).status).toBe(200);
  });
});

describe('fixed paths own their path for every method', () => {
  test('DELETE /events/names is 405 (Allow: the GET of /events/names), and no event named "names" is deleted', async () => {
    const tracked = await api('POST', '/v1/track', { key: project.secretKey, body: { email: 'names@example.com', event: 'names' } });
    expect(tracked.status).toBe(200);
    for (const path of ['/events/names', '/events/stats']) {
      const res = await api('DELETE', path, { key: project.secretKey });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('HEAD, GET, OPTIONS');
    }
    const names = await api('GET', '/events/names', { key: project.secretKey });
    expect(names.body.data.map((n: { name: string }) => n.name)).toContain('names');
    expect((await rawRequest('OPTIONS', '/events/track')).headers.allow).toBe('POST, OPTIONS');
  });

  test('an event name that is no fixed path is still deleted through /events/:eventName', async () => {
    await api('POST', '/v1/track', { key: project.secretKey, body: { email: 'names@example.com', event: 'to-delete' } });
    const res = await api('DELETE', '/events/to-delete', { key: project.secretKey });
    expect(res.status).toBe(200);
    expect(res.body.deleted).toBe(1);
  });
});
