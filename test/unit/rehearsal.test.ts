import fs from 'node:fs';
import path from 'node:path';
import { composeService, interpolate, oneMachineEnv, translateAddresses } from '../../scripts/rehearsal/compose';
import { readImageRecipe } from '../../scripts/rehearsal/dockerfile';
import { WORKER_V8_FLAGS } from '../../scripts/services/stack';
import { SA } from '../../temporal/search-attributes';

const ROOT = path.resolve(__dirname, '..', '..');
const REQUIRED = { PUBLIC_URL: 'https://mail.example.com', JWT_SECRET: 'j'.repeat(32), APP_SECRET: 'a'.repeat(32), SMTP_URL: 'smtp://relay:25' };
const APP_SERVICES = ['migrate', 'api', 'worker', 'inbound'];

describe('compose interpolation (what the rehearsal reads from docker-compose.yml)', () => {
  it.each([
    ['${A:-d}', {}, 'd'],
    ['${A:-d}', { A: '' }, 'd'],
    ['${A:-d}', { A: 'x' }, 'x'],
    ['${A-d}', { A: '' }, ''],
    ['${A-d}', {}, 'd'],
    ['$A/${B}', { A: '1', B: '2' }, '1/2'],
    ['$${sa%%:*} costs $$5', {}, '${sa%%:*} costs $5'],
    ['${A:?set A}', { A: 'v' }, 'v'],
  ])('%s with %j is %j', (text, vars, expected) => {
    expect(interpolate(text, vars)).toBe(expected);
  });

  it('a required variable that is unset or empty fails with compose’s message', () => {
    expect(() => interpolate('${A:?set A please}', {})).toThrow('A: set A please');
    expect(() => interpolate('${A:?set A please}', { A: '' })).toThrow('set A please');
    expect(() => composeService('api', { ...REQUIRED, PUBLIC_URL: undefined })).toThrow('set PUBLIC_URL');
  });
});

describe('compose and the rehearsal cannot drift', () => {
  const scripts = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

  it.each(APP_SERVICES)('the %s service runs an npm script of package.json with NODE_ENV=production', (name) => {
    const svc = composeService(name, REQUIRED);
    expect(svc.argv.slice(0, 2)).toEqual(['npm', 'run']);
    expect(scripts[svc.argv[2]!]).toBeDefined();
    expect(svc.environment.NODE_ENV).toBe('production');
  });

  it('the Dockerfile installs production dependencies only, sets NODE_ENV=production and starts the API as compose does', () => {
    const recipe = readImageRecipe();
    expect(recipe.install.slice(0, 2)).toEqual(['npm', 'install']);
    expect(recipe.install).toContain('--omit=dev');
    expect(recipe.env.NODE_ENV).toBe('production');
    expect(recipe.cmd).toEqual(composeService('api', REQUIRED).argv);
    expect(recipe.copies.slice(0, recipe.copiesBeforeInstall).flatMap((c) => c.sources)).toEqual(['package.json', 'package-lock.json']);
  });

  it('the image compiles the runtime, and every app service runs the compiled JavaScript with plain Node', () => {
    expect(readImageRecipe().scripts).toEqual([['npm', 'run', 'build']]);
    expect(scripts.build).toContain('scripts/build.ts');
    for (const name of APP_SERVICES) {
      const script = scripts[composeService(name, REQUIRED).argv[2]!]!;
      expect(script).toMatch(/^node (--[\w-]+=\S+ )*dist\/[\w/-]+\.js$/);
      // The file it runs is one the build writes: the compiled form of a TypeScript entry the image copies.
      const entry = /dist\/(\S+)\.js$/.exec(script)![1]!;
      expect(fs.existsSync(path.join(ROOT, `${entry}.ts`))).toBe(true);
    }
    // The worker keeps its V8 flags, compiled or not, and they are those the stack starts it with (scripts/services/stack.ts).
    expect(scripts['serve:worker']!.replace(' dist/temporal/worker.js', '')).toBe(scripts.worker!.replace(' --import tsx temporal/worker.ts', ''));
    expect(scripts.worker).toBe(`node ${WORKER_V8_FLAGS.join(' ')} --import tsx temporal/worker.ts`);
  });

  it('every import of production code resolves to a production dependency', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const copied = readImageRecipe().copies.slice(readImageRecipe().copiesBeforeInstall).flatMap((c) => c.sources);
    const files = copied.flatMap((src) => {
      const abs = path.join(ROOT, src);
      return fs.statSync(abs).isDirectory() ? (fs.readdirSync(abs, { recursive: true }) as string[]).map((f) => path.join(abs, f)) : [abs];
    });
    const missing = new Set<string>();
    for (const file of files.filter((f) => f.endsWith('.ts'))) {
      for (const m of fs.readFileSync(file, 'utf8').matchAll(/^import (?!type )[^'"]*from '([^'.][^']*)'/gm)) {
        const spec = m[1]!;
        if (spec.startsWith('node:')) continue;
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        if (!pkg.dependencies[name]) missing.add(`${name} (${path.relative(ROOT, file)})`);
      }
    }
    expect([...missing]).toEqual([]);
  });

  it('the search-attribute job creates exactly the attributes the workflows carry, with their types', () => {
    const script = composeService('temporal-search-attributes', {}).argv.join(' ');
    const listed = /for sa in ([^;]+);/.exec(script)![1]!.trim().split(/\s+/);
    const expected = Object.values(SA).map((k) => `${k.name}:${k.type === 'KEYWORD_LIST' ? 'KeywordList' : 'Keyword'}`);
    expect(listed.sort()).toEqual(expected.sort());
  });

  it('the Temporal server and its schema tool come from the same release', () => {
    const tag = (name: string) => composeService(name, {}).image!.split(':')[1];
    expect(tag('temporal-search-attributes')).toBe(tag('temporal'));
  });
});

describe('one machine instead of a compose network', () => {
  const addresses = { 'postgres:5432': '127.0.0.1:15432', 'temporal:7233': '127.0.0.1:17233' };

  it('service addresses become loopback ones, and nothing that only looks like them', () => {
    expect(translateAddresses('postgres://u:p@postgres:5432/db', addresses)).toBe('postgres://u:p@127.0.0.1:15432/db');
    expect(translateAddresses('mypostgres:5432 postgres:54321 temporal:7233', addresses)).toBe('mypostgres:5432 postgres:54321 127.0.0.1:17233');
  });

  it('every server binds loopback on ports of its own; the rest of the environment is compose’s', () => {
    const svc = composeService('api', REQUIRED);
    const env = oneMachineEnv(svc, addresses, { PORT: '4001', INBOUND_SMTP_PORT: '4025' }, { DNS_TIMEOUT: '1s' });
    expect(env).toMatchObject({ HOST: '127.0.0.1', METRICS_HOST: '127.0.0.1', INBOUND_SMTP_HOST: '127.0.0.1', PORT: '4001', INBOUND_SMTP_PORT: '4025', DNS_TIMEOUT: '1s' });
    expect(env.DATABASE_URL).toBe('postgres://mailwright:mailwright@127.0.0.1:15432/mailwright');
    expect(env.TEMPORAL_ADDRESS).toBe('127.0.0.1:17233');
    const changed = Object.keys(env).filter((k) => env[k] !== svc.environment[k]);
    expect(changed.sort()).toEqual(['DATABASE_URL', 'DNS_TIMEOUT', 'HOST', 'INBOUND_SMTP_HOST', 'INBOUND_SMTP_PORT', 'METRICS_HOST', 'PORT', 'TEMPORAL_ADDRESS']);
  });

  it('an extra setting that compose sets is refused (it changes only through a compose variable)', () => {
    expect(() => oneMachineEnv(composeService('worker', REQUIRED), addresses, { PORT: '1', INBOUND_SMTP_PORT: '2' }, { LOG_LEVEL: 'debug' })).toThrow('LOG_LEVEL is set by docker-compose.yml');
  });
});
