import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ensureSchemathesis } from '../../scripts/fuzz/venv';
import { api } from '../helpers/api';
import { closeDb } from '../helpers/db';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from '../helpers/fixtures';
import { stackEnv } from '../stack-env';

/**
 * schemathesis (property-based fuzzing from the OpenAPI document) over the running test stack: every operation, every
 * check, the examples, coverage, fuzzing and stateful phases, with a fixed seed (test/fuzz/schemathesis.toml). It
 * passes only when schemathesis finds no 5xx and no response that contradicts the document.
 *
 * Identities: two projects, each with its secret key and a dashboard session of an account of its own (not the
 * account owning the keyed project, so that the fuzzer deleting or re-keying "its" dashboard projects never revokes
 * the keys it is fuzzing with). Project A sends every request; B is A's peer for object_level_authorization.
 *
 * The reports (JUnit, NDJSON) stay in `<stack data dir>/schemathesis/` (KEEP_TEST_DATA=1 keeps the folder).
 *
 * MAILWRIGHT_FUZZ_NO_HOOKS=1 runs it without test/fuzz/hooks.py: schemathesis' own checks alone, so every refusal of a
 * documented-valid request shows (the count of how far the document and the server still disagree; the test then fails).
 */

const RUN_TIMEOUT_MS = 15 * 60_000;
const CONFIG = path.join(__dirname, 'schemathesis.toml');

interface Identity {
  name: string;
  keys: TestProject;
  dashboard: TestProject;
}

let bin: string;
let reportDir: string;
let authFile: string;
const identities: Identity[] = [];

/** A few objects of every kind, so reads by id and the stateful phase have something real to work on. */
async function seed(p: TestProject): Promise<void> {
  const domain = uniqueDomain();
  await addVerifiedDomain(p.projectId, domain);
  for (const [i, event] of ['signup', 'purchase', 'login'].entries()) {
    const res = await api('POST', '/v1/track', { key: p.secretKey, body: { email: `fuzz-${i}@${domain}`, event, data: { plan: i % 2 ? 'pro' : 'free', seats: i } } });
    if (res.status !== 200) throw new Error(`seed track: ${res.status} ${res.text}`);
  }
  const template = await api('POST', '/templates', { key: p.secretKey, body: { name: 'Welcome', subject: 'Hi {{ email }}', body: '<p>Hello</p>', type: 'TRANSACTIONAL' } });
  if (template.status !== 201) throw new Error(`seed template: ${template.status} ${template.text}`);
  const segment = await api('POST', '/segments', {
    key: p.secretKey,
    body: { name: 'Pro', type: 'DYNAMIC', condition: { operator: 'AND', conditions: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] } },
  });
  if (segment.status !== 201) throw new Error(`seed segment: ${segment.status} ${segment.text}`);
  const send = await api('POST', '/v1/send', { key: p.secretKey, body: { to: `fuzz-0@${domain}`, from: `hello@${domain}`, subject: 'Seed', body: '<p>Hi</p>' } });
  if (send.status !== 200) throw new Error(`seed send: ${send.status} ${send.text}`);
}

beforeAll(async () => {
  bin = ensureSchemathesis();
  reportDir = path.join(stackEnv().dataDir, 'schemathesis');
  fs.mkdirSync(reportDir, { recursive: true });
  for (const name of ['project-a', 'project-b']) {
    const keys = await createTestProject(`fuzz ${name}`);
    const dashboard = await createTestProject(`fuzz ${name} dashboard`);
    await seed(keys);
    identities.push({ name, keys, dashboard });
  }
  // Web Fuzzing Commons auth document: fixed headers per user. Key routes read only Authorization and dashboard
  // routes only the cookie, so each identity sends both.
  authFile = path.join(reportDir, 'auth.json');
  const doc = {
    schemaVersion: '0.2.0',
    auth: identities.map((id) => ({
      name: id.name,
      fixedHeaders: [
        { name: 'Authorization', value: `Bearer ${id.keys.secretKey}` },
        { name: 'Cookie', value: id.dashboard.cookie },
      ],
    })),
  };
  fs.writeFileSync(authFile, JSON.stringify(doc, null, 2));
}, 120_000);

afterAll(closeDb);

/** Runs schemathesis, streaming its output; resolves with its exit code and the last lines it printed. */
function runSchemathesis(): Promise<{ code: number | null; tail: string }> {
  const args = [
    '--config-file',
    CONFIG,
    'run',
    `${stackEnv().apiUrl}/openapi.json`,
    '--report',
    'junit,ndjson',
    '--report-dir',
    reportDir,
  ];
  process.stdout.write(`[fuzz] ${bin} ${args.join(' ')}\n`);
  const child = spawn(bin, args, {
    cwd: path.resolve(__dirname, '..', '..'),
    env: { ...process.env, MAILWRIGHT_FUZZ_AUTH: authFile, MAILWRIGHT_FUZZ_HOOKS: process.env.MAILWRIGHT_FUZZ_NO_HOOKS === '1' ? '' : path.join(__dirname, 'hooks.py'), NO_COLOR: '1', COLUMNS: '160', PYTHONUNBUFFERED: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Its console output goes to a file beside the reports, not to the test run's output: it closes with a pytest-style
  // banner ("==== 3 warnings in 62.19s ===="), which a CI system reading runners' closing lines takes for a pytest run
  // that executed no test. The run's outcome is printed below in one line of ours; a failure carries the tail.
  const log = fs.createWriteStream(path.join(reportDir, 'output.txt'));
  let output = '';
  const onData = (chunk: Buffer) => {
    const text = chunk.toString();
    output = (output + text).slice(-20_000);
    log.write(text);
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGTERM'), RUN_TIMEOUT_MS - 30_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      log.end(() => resolve({ code, tail: output }));
    });
  });
}

test(
  'schemathesis over /openapi.json finds no 5xx and no response that contradicts the document',
  async () => {
    const started = Date.now();
    const { code, tail } = await runSchemathesis();
    const cases = /^\s*(\d+) generated, (\d+) passed(?:, (\d+) failed)?(?:, (\d+) skipped)?/m.exec(tail);
    const figures = cases ? `${cases[1]} cases generated (${cases[2]} passing, ${cases[3] ?? 0} failing, ${cases[4] ?? 0} skipped)` : 'no case count in its output';
    process.stdout.write(`[fuzz] schemathesis exited ${code} after ${((Date.now() - started) / 1000).toFixed(0)} s, ${figures}; output and reports in ${reportDir}\n`);
    if (code !== 0) throw new Error(`schemathesis exited ${code}; reports in ${reportDir}\n${tail.slice(-6_000)}`);
  },
  RUN_TIMEOUT_MS,
);
