import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';

let project: TestProject;
let domain: string;
const sendBody = () => ({ to: 'auth-matrix@example.com', from: `hi@${domain}`, subject: 'Auth', body: '<p>auth</p>' });

beforeAll(async () => {
  project = await createTestProject();
  domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
});
afterAll(closeDb);

describe('API key authentication on /v1/send', () => {
  test('no Authorization header -> 401 UNAUTHORIZED in the envelope', async () => {
    const res = await api('POST', '/v1/send', { body: sendBody() });
    expect(res.status).toBe(401);
    expect(res.body.success).toBe(false);
    expect(res.body.error.code).toBe('UNAUTHORIZED');
    expect(res.body.error.statusCode).toBe(401);
  });

  test('an unknown secret key -> 401 INVALID_API_KEY', async () => {
    const res = await api('POST', '/v1/send', { key: 'sk_doesnotexist000000000000000000', body: sendBody() });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('INVALID_API_KEY');
  });

  test('a key without a known prefix -> 401 INVALID_API_KEY', async () => {
    const res = await api('POST', '/v1/send', { key: 'hello', body: sendBody() });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('INVALID_API_KEY');
  });

  test('the public key on /v1/send -> 401 INVALID_API_KEY', async () => {
    const res = await api('POST', '/v1/send', { key: project.publicKey, body: sendBody() });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('INVALID_API_KEY');
    expect(res.body.error.message).toMatch(/secret key/);
  });

  test('the secret key is accepted', async () => {
    const res = await api('POST', '/v1/send', { key: project.secretKey, body: sendBody() });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
  });

  test('the key is checked before the body: a pk_ key with an invalid body still gets 401', async () => {
    const res = await api('POST', '/v1/send', { key: project.publicKey, body: { nonsense: true } });
    expect(res.status).toBe(401);
  });

  test('after rotation the old keys stop working at once and the new secret key works', async () => {
    const own = await createTestProject();
    const ownDomain = uniqueDomain();
    await addVerifiedDomain(own.projectId, ownDomain);
    const body = { to: 'rotated@example.com', from: `hi@${ownDomain}`, subject: 'Rotated', body: '<p>r</p>' };
    // Use the keys first, so the API has them in its lookup cache: rotation must invalidate it.
    expect((await api('POST', '/v1/send', { key: own.secretKey, body })).status).toBe(200);
    const rotated = await api('POST', `/users/@me/projects/${own.projectId}/regenerate-keys`, { cookie: own.cookie });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secretKey).toMatch(/^sk_/);
    expect(rotated.body.publicKey).toMatch(/^pk_/);
    expect(rotated.body.secretKey).not.toBe(own.secretKey);
    const old = await api('POST', '/v1/send', { key: own.secretKey, body });
    expect(old.status).toBe(401);
    expect(old.body.error.code).toBe('INVALID_API_KEY');
    const fresh = await api('POST', '/v1/send', { key: rotated.body.secretKey, body });
    expect(fresh.status).toBe(200);
  });

  test('a project disabled in the database -> 403 PROJECT_DISABLED as soon as the change feed tells the API, even with its key cached', async () => {
    const own = await createTestProject();
    expect((await api('POST', '/v1/send', { key: own.secretKey, body: sendBody() })).status).toBe(403); // domain not ours; key now cached
    await db().query(`update projects set disabled = true, disabled_reason = 'billing' where id = $1`, [own.projectId]);
    // The change feed's notification races a request sent the moment the update commits: allow it a moment, far
    // less than the cache's one-minute expiry, so only the invalidation can make this pass.
    const deadline = Date.now() + 2_000;
    let res = await api('POST', '/v1/send', { key: own.secretKey, body: sendBody() });
    while (res.body.error?.code !== 'PROJECT_DISABLED' && Date.now() < deadline) res = await api('POST', '/v1/send', { key: own.secretKey, body: sendBody() });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('PROJECT_DISABLED');
    expect(res.body.error.message).toContain('billing');
  });
});
