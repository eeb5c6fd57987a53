import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import S3rver from 's3rver';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { freePort, type ManagedProcess } from '../../scripts/services/process';
import { stackEnv } from '../stack-env';
import { startExtraApi } from '../helpers/extra-api';
import { api } from '../helpers/api';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';
import { makePng, pngText } from '../helpers/images';

// An API process of its own with uploads in S3: an S3-compatible server (s3rver) on loopback, path-style addressing
// as most self-hosted stores need. It shares the stack's database; the stack's own API stays on local disk.
const BUCKET = 'mailwright-uploads';
const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }; // s3rver's fixed keys

let s3server: S3rver;
let s3: S3Client;
let apiProcess: ManagedProcess;
let apiUrl: string;
let localDir: string;
let project: TestProject;
let seed = 0;

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const freshPng = () => makePng(5, 3, seed++, [pngText('Comment', `s3-${Date.now()}-${seed}`)]);

async function upload(content: Buffer | string, fileName = 'image.png') {
  const form = new FormData();
  form.append('file', new Blob([content], { type: 'image/png' }), fileName);
  const res = await fetch(`${apiUrl}/uploads/image`, { method: 'POST', headers: { authorization: `Bearer ${project.secretKey}` }, body: form });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function objectKeys(): Promise<string[]> {
  const res = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET }));
  return (res.Contents ?? []).map((o) => o.Key!);
}

beforeAll(async () => {
  const stack = stackEnv();
  const s3Port = await freePort();
  const s3Dir = fs.mkdtempSync(path.join(stack.dataDir, 's3rver-'));
  s3server = new S3rver({ address: '127.0.0.1', port: s3Port, silent: true, directory: s3Dir, configureBuckets: [{ name: BUCKET, configs: [] }] });
  await s3server.run();
  const endpoint = `http://127.0.0.1:${s3Port}`;
  s3 = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: CREDENTIALS });

  localDir = path.join(stack.dataDir, 'uploads-unused-by-s3-api');
  const api = await startExtraApi('api-uploads-s3', {
    RATE_LIMIT_PER_MINUTE: '0',
    UPLOADS_DIR: localDir,
    S3_BUCKET: BUCKET,
    S3_ENDPOINT: endpoint,
    S3_REGION: 'us-east-1',
    S3_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
    S3_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    S3_FORCE_PATH_STYLE: 'true',
  });
  apiUrl = api.url;
  apiProcess = api.process;
  project = await createTestProject('Uploads S3');
}, 120_000);

afterAll(async () => {
  await apiProcess?.stop();
  await s3server?.close().catch(() => undefined);
  s3?.destroy();
  await closeDb();
});

describe('uploads in S3-compatible storage (S3_BUCKET set)', () => {
  test('the image is stored as object uploads/<sha256>.<ext> with its type and an immutable Cache-Control; nothing goes to the local folder', async () => {
    const png = freshPng();
    const res = await upload(png, 'banner.png');
    expect(res.status).toBe(201);
    const sha = sha256(png);
    expect(res.body).toMatchObject({ sha256: sha, contentType: 'image/png', size: png.length, width: 5, height: 3, url: `${apiUrl}/uploads/files/${sha}.png` });
    const object = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `uploads/${sha}.png` }));
    expect(Buffer.from(await object.Body!.transformToByteArray()).equals(png)).toBe(true);
    expect(object.ContentType).toBe('image/png');
    expect(object.CacheControl).toBe('public, max-age=31536000, immutable');
    expect(fs.existsSync(localDir)).toBe(false);
  });

  test('the public URL streams the object through the API, with the same headers as local storage', async () => {
    const png = freshPng();
    const { body } = await upload(png);
    const res = await fetch(body.url);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(png)).toBe(true);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('etag')).toBe(`"${body.sha256}"`);
  });

  test('a refused file (a script renamed .png) writes no object', async () => {
    const before = await objectKeys();
    const res = await upload('<script>alert(1)</script>', 'evil.png');
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0]).toMatchObject({ field: 'file', code: 'unsupported_image_type' });
    expect(await objectKeys()).toEqual(before);
  });

  test('deleting the last upload of the content deletes the object; the URL then answers 404', async () => {
    const png = freshPng();
    const { body } = await upload(png);
    const key = `uploads/${body.sha256}.png`;
    expect(await objectKeys()).toContain(key);
    expect((await api('DELETE', `/uploads/${body.id}`, { key: project.secretKey, baseUrl: apiUrl })).status).toBe(204);
    expect(await objectKeys()).not.toContain(key);
    expect((await fetch(body.url)).status).toBe(404);
  });

  test('storage down: an upload answers 503 and leaves no row; the public URL answers 503; a delete answers 503 and keeps the upload', async () => {
    const stored = (await upload(freshPng())).body;
    await s3server.close();
    const png = freshPng();
    const res = await upload(png);
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    const { rows } = await db().query('select 1 from uploads where project_id = $1 and sha256 = $2', [project.projectId, sha256(png)]);
    expect(rows).toEqual([]);
    expect((await fetch(stored.url)).status).toBe(503);
    // A delete that cannot remove the bytes keeps the upload, so it can be retried.
    const del = await api('DELETE', `/uploads/${stored.id}`, { key: project.secretKey, baseUrl: apiUrl });
    expect(del.status).toBe(503);
    expect((await api('GET', `/uploads/${stored.id}`, { key: project.secretKey, baseUrl: apiUrl })).status).toBe(200);
  });
});
