import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { GIF_1X1, WEBP_1X1, makeJpeg, makePng, pngText } from '../helpers/images';
import { stackEnv } from '../stack-env';

const MAX = 5 * 1024 * 1024; // UPLOADS_MAX_SIZE's default, which the test stack keeps
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
let seed = Math.floor(Math.random() * 1000);
/** A PNG no other test (or run) has uploaded. */
const freshPng = (w = 3, h = 2) => makePng(w, h, seed++, [pngText('Comment', randomUUID())]);

async function upload(p: TestProject, content: Buffer | string, fileName = 'image.png', type = 'image/png', field = 'file') {
  const form = new FormData();
  form.append(field, new Blob([content], { type }), fileName);
  const res = await fetch(`${stackEnv().apiUrl}/uploads/image`, { method: 'POST', headers: { authorization: `Bearer ${p.secretKey}` }, body: form });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A public URL as a browser or mail client fetches it: no credentials. */
async function fetchPublic(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

const storedFile = (sha: string, ext: string) => path.join(stackEnv().dataDir, 'uploads', sha.slice(0, 2), `${sha}.${ext}`);
const rowsOf = async (projectId: string) => (await db().query('select * from uploads where project_id = $1', [projectId])).rows;

let a: TestProject;
let b: TestProject;
beforeAll(async () => {
  [a, b] = await Promise.all([createTestProject('Uploads A'), createTestProject('Uploads B')]);
});
afterAll(closeDb);

describe('POST /uploads/image', () => {
  test('a PNG is stored byte for byte (its text metadata kept), under its SHA-256 in the data folder, and answered with a public URL', async () => {
    const png = freshPng(7, 5);
    const res = await upload(a, png, 'logo.png');
    expect(res.status).toBe(201);
    const sha = sha256(png);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      url: `${stackEnv().apiUrl}/uploads/files/${sha}.png`,
      sha256: sha,
      contentType: 'image/png',
      size: png.length,
      width: 7,
      height: 5,
      fileName: 'logo.png',
      createdAt: expect.any(String),
    });
    expect(fs.readFileSync(storedFile(sha, 'png')).equals(png)).toBe(true);
    expect((await api('GET', `/uploads/${res.body.id}`, { key: a.secretKey })).body).toEqual(res.body);
  });

  test('the public URL serves the bytes without credentials, with long cache headers, its type, nosniff and an ETag (304 on If-None-Match)', async () => {
    const png = freshPng();
    const { body } = await upload(a, png);
    const got = await fetchPublic(body.url);
    expect(got.status).toBe(200);
    expect(got.bytes.equals(png)).toBe(true);
    expect(got.headers.get('content-type')).toBe('image/png');
    expect(got.headers.get('content-length')).toBe(String(png.length));
    expect(got.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(got.headers.get('x-content-type-options')).toBe('nosniff');
    expect(got.headers.get('content-security-policy')).toContain('sandbox');
    expect(got.headers.get('etag')).toBe(`"${body.sha256}"`);
    const again = await fetchPublic(body.url, { 'if-none-match': `"${body.sha256}"` });
    expect(again.status).toBe(304);
    expect(again.bytes.length).toBe(0);
    const head = await fetch(body.url, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(png.length));
  });

  test('the type comes from the bytes, not from the name or the Content-Type sent: JPEG, GIF and WebP under misleading names', async () => {
    const cases = [
      { bytes: makeJpeg(640, 480), name: 'photo.png', type: 'image/png', contentType: 'image/jpeg', ext: 'jpg', width: 640, height: 480 },
      { bytes: GIF_1X1, name: 'anim.webp', type: 'application/octet-stream', contentType: 'image/gif', ext: 'gif', width: 1, height: 1 },
      { bytes: WEBP_1X1, name: 'x.jpg', type: 'image/jpeg', contentType: 'image/webp', ext: 'webp', width: 1, height: 1 },
    ];
    for (const c of cases) {
      const res = await upload(a, c.bytes, c.name, c.type);
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ contentType: c.contentType, width: c.width, height: c.height, url: expect.stringMatching(new RegExp(`\\.${c.ext}$`)) });
      const got = await fetchPublic(res.body.url);
      expect(got.headers.get('content-type')).toBe(c.contentType);
      expect(got.bytes.equals(c.bytes)).toBe(true);
    }
  });

  describe('spoofed, dangerous and malformed files are refused, and nothing is stored', () => {
    const cases: [string, string, () => Buffer, string, string][] = [
      ['a script renamed .png (sent as image/png)', 'unsupported_image_type', () => Buffer.from('<script>alert(document.cookie)</script>\n'), 'evil.png', 'image/png'],
      ['a shell script renamed .jpg', 'unsupported_image_type', () => Buffer.from('#!/bin/sh\nrm -rf /\n'), 'evil.jpg', 'image/jpeg'],
      [
        'an SVG with a script',
        'svg_not_allowed',
        () => Buffer.from('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>'),
        'logo.svg',
        'image/svg+xml',
      ],
      ['an SVG renamed .png', 'svg_not_allowed', () => Buffer.from('\uFEFF<svg onload="alert(1)"></svg>'), 'logo.png', 'image/png'],
      ['HTML behind a PNG signature (no image header)', 'invalid_image', () => Buffer.concat([makePng(1, 1).subarray(0, 8), Buffer.from('<html><script>alert(1)</script></html>')]), 'x.png', 'image/png'],
      ['a zero-byte file', 'empty_file', () => Buffer.alloc(0), 'empty.png', 'image/png'],
    ];
    test.each(cases)('%s: 422 with code %s', async (_name, code, bytes, fileName, type) => {
      const p = await createTestProject('Uploads refused');
      const res = await upload(p, bytes(), fileName, type);
      expect(res.status).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', errors: [{ field: 'file', code }] });
      expect(await rowsOf(p.projectId)).toEqual([]);
      expect((await api('GET', '/uploads/usage', { key: p.secretKey })).body).toEqual({ uploads: 0, bytes: 0 });
    });

    test('an oversized file (5 MB + 1 byte): 413 PAYLOAD_TOO_LARGE, also when the image is valid; exactly 5 MB is accepted', async () => {
      const p = await createTestProject('Uploads oversized');
      const big = makePng(1, 1, seed++, [pngText('Pad', 'x'.repeat(MAX))]);
      expect(big.length).toBeGreaterThan(MAX);
      const res = await upload(p, big);
      expect(res.status).toBe(413);
      expect(res.body.error.code).toBe('PAYLOAD_TOO_LARGE');
      expect(await rowsOf(p.projectId)).toEqual([]);
      const s = seed++;
      const bare = makePng(1, 1, s);
      // The text chunk adds its length, type and CRC (12 bytes) and "Pad\0" (4) to the padding.
      const exact = makePng(1, 1, s, [pngText('Pad', 'x'.repeat(MAX - bare.length - 12 - 4))]);
      expect(exact.length).toBe(MAX);
      expect((await upload(p, exact)).status).toBe(201);
    });

    test('no file part, or the image in a text field: 422 on `file`', async () => {
      const form = new FormData();
      form.append('file', 'not a file');
      const res = await fetch(`${stackEnv().apiUrl}/uploads/image`, { method: 'POST', headers: { authorization: `Bearer ${a.secretKey}` }, body: form });
      expect(res.status).toBe(422);
      expect(((await res.json()) as any).error.errors[0].field).toBe('file');
      expect((await upload(a, freshPng(), 'x.png', 'image/png', 'image')).status).toBe(422);
    });
  });

  test('the public key, no key and a session cannot upload (401)', async () => {
    const form = () => {
      const f = new FormData();
      f.append('file', new Blob([freshPng()]), 'x.png');
      return f;
    };
    for (const headers of [{ authorization: `Bearer ${a.publicKey}` }, {}, { cookie: a.cookie }] as Record<string, string>[]) {
      const res = await fetch(`${stackEnv().apiUrl}/uploads/image`, { method: 'POST', headers, body: form() });
      expect(res.status).toBe(401);
    }
  });
});

describe('uploads per project', () => {
  test('the same bytes uploaded twice by a project are one upload (200 the second time), counted once in its storage figure', async () => {
    const p = await createTestProject('Uploads dedupe');
    const png = freshPng(4, 4);
    const first = await upload(p, png, 'one.png');
    const second = await upload(p, png, 'two.png');
    expect([first.status, second.status]).toEqual([201, 200]);
    expect(second.body).toEqual(first.body);
    const other = freshPng(2, 9);
    await upload(p, other);
    expect((await api('GET', '/uploads/usage', { key: p.secretKey })).body).toEqual({ uploads: 2, bytes: png.length + other.length });
  });

  test('GET /uploads lists newest first with a cursor', async () => {
    const p = await createTestProject('Uploads list');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await upload(p, freshPng())).body.id);
    const page1 = await api('GET', '/uploads?limit=2', { key: p.secretKey });
    expect(page1.body).toMatchObject({ hasMore: true, total: 3 });
    expect(page1.body.data.map((u: any) => u.id)).toEqual([ids[2], ids[1]]);
    const page2 = await api('GET', `/uploads?limit=2&cursor=${page1.body.cursor}`, { key: p.secretKey });
    expect(page2.body).toMatchObject({ hasMore: false, cursor: null });
    expect(page2.body.data.map((u: any) => u.id)).toEqual([ids[0]]);
    expect((await api('GET', '/uploads?cursor=bogus', { key: p.secretKey })).status).toBe(422);
  });

  test("isolation: another project cannot read, list or delete an upload; the same bytes are its own upload; the file lives until the last upload of it is deleted", async () => {
    const png = freshPng(6, 6);
    const sha = sha256(png);
    const mine = await upload(a, png);
    expect(mine.status).toBe(201);
    // B sees nothing of A's.
    expect((await api('GET', `/uploads/${mine.body.id}`, { key: b.secretKey })).status).toBe(404);
    expect((await api('DELETE', `/uploads/${mine.body.id}`, { key: b.secretKey })).status).toBe(404);
    const listB = await api('GET', '/uploads?limit=100', { key: b.secretKey });
    expect(listB.text).not.toContain(mine.body.id);
    expect(listB.text).not.toContain(sha);
    expect(await rowsOf(a.projectId)).toEqual(expect.arrayContaining([expect.objectContaining({ id: mine.body.id })]));
    // B uploads the same bytes: its own upload (201, another id), the same public URL, its own storage figure.
    const usageBefore = (await api('GET', '/uploads/usage', { key: b.secretKey })).body;
    const theirs = await upload(b, png);
    expect(theirs.status).toBe(201);
    expect(theirs.body.id).not.toBe(mine.body.id);
    expect(theirs.body.url).toBe(mine.body.url);
    expect((await api('GET', '/uploads/usage', { key: b.secretKey })).body).toEqual({ uploads: usageBefore.uploads + 1, bytes: usageBefore.bytes + png.length });
    // A deletes its upload: B's still serves.
    expect((await api('DELETE', `/uploads/${mine.body.id}`, { key: a.secretKey })).status).toBe(204);
    expect((await api('GET', `/uploads/${mine.body.id}`, { key: a.secretKey })).status).toBe(404);
    expect((await fetchPublic(theirs.body.url)).status).toBe(200);
    expect(fs.existsSync(storedFile(sha, 'png'))).toBe(true);
    // B deletes the last one: the file goes, the URL answers 404 without cache headers.
    expect((await api('DELETE', `/uploads/${theirs.body.id}`, { key: b.secretKey })).status).toBe(204);
    const gone = await fetchPublic(theirs.body.url);
    expect(gone.status).toBe(404);
    expect(gone.headers.get('cache-control')).toBeNull();
    expect(fs.existsSync(storedFile(sha, 'png'))).toBe(false);
  });

  test("deleting a project deletes its uploads' bytes, except content another project still has", async () => {
    const doomed = await createTestProject('uploads-doomed');
    const own = freshPng(7, 7);
    const shared = freshPng(8, 8);
    expect((await upload(doomed, own)).status).toBe(201);
    expect((await upload(doomed, shared)).status).toBe(201);
    const kept = await upload(b, shared);
    expect(kept.status).toBe(201);
    expect(fs.existsSync(storedFile(sha256(own), 'png'))).toBe(true);
    expect((await api('DELETE', `/users/@me/projects/${doomed.projectId}`, { cookie: doomed.cookie })).status).toBe(204);
    expect(await rowsOf(doomed.projectId)).toEqual([]);
    expect(fs.existsSync(storedFile(sha256(own), 'png'))).toBe(false);
    expect(fs.existsSync(storedFile(sha256(shared), 'png'))).toBe(true);
    expect((await fetchPublic(kept.body.url)).status).toBe(200);
  });

  test('the public route serves only names of stored uploads: an unknown hash, another extension, a bad name; and /uploads/image answers only POST', async () => {
    const { body } = await upload(a, freshPng());
    expect((await fetchPublic(`${stackEnv().apiUrl}/uploads/files/${'0'.repeat(64)}.png`)).status).toBe(404);
    expect((await fetchPublic(body.url.replace(/\.png$/, '.gif'))).status).toBe(404);
    expect((await fetchPublic(`${stackEnv().apiUrl}/uploads/files/..%2F..%2Fetc%2Fpasswd`)).status).toBe(422);
    expect((await fetchPublic(body.url.replace(/\.png$/, '.svg'))).status).toBe(422);
    const get = await api('GET', '/uploads/image', { key: a.secretKey });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toContain('POST');
  });
});

test('/openapi.json describes the upload as multipart/form-data with a binary `file`, and the public route without security', async () => {
  const doc = (await api('GET', '/openapi.json')).body;
  const body = doc.paths['/uploads/image'].post.requestBody.content['multipart/form-data'].schema;
  const schema = body.$ref ? doc.components.schemas[body.$ref.split('/').pop()] : body;
  expect(schema.properties.file).toMatchObject({ type: 'string', format: 'binary' });
  expect(schema.required).toContain('file');
  expect(doc.paths['/uploads/image'].post.security).toEqual([{ secretKey: [] }]);
  expect(doc.paths['/uploads/files/{file}'].get.security).toEqual([]);
  expect(Object.keys(doc.paths['/uploads/files/{file}'].get.responses['200'].content)).toEqual(['image/*']);
});
