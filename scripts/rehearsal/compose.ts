// docker-compose.yml as the rehearsal reads it: the services' commands and environment, with compose's variable
// interpolation, so what the rehearsal runs is what `docker compose up` runs (README › Production rehearsal).
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';

const ROOT = path.resolve(__dirname, '..', '..');
const COMPOSE_FILE = path.join(ROOT, 'docker-compose.yml');

/** One service of the compose file after interpolation: the argv it runs and its environment. */
export interface ComposeService {
  name: string;
  image?: string;
  /** entrypoint followed by command, as the container runs them (empty when the image's own command runs). */
  argv: string[];
  environment: Record<string, string>;
  replicas: number;
  /** Container ports published on the host (`"3000:3000"` -> 3000). */
  publishedPorts: number[];
}

/**
 * Compose's interpolation (https://docs.docker.com/reference/compose-file/interpolation/): `$$` is a literal `$`,
 * `${VAR}` / `$VAR` the variable (empty when unset), `${VAR:-default}` the default when unset or empty,
 * `${VAR-default}` when unset, `${VAR:?message}` / `${VAR?message}` an error. The defaults hold no nested variables
 * in our file, so none are expanded.
 */
export function interpolate(text: string, vars: Record<string, string | undefined>, where = 'docker-compose.yml'): string {
  return text.replace(/\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*)|)/g, (whole, _body, braced?: string, colon?: string, op?: string, arg?: string, bare?: string) => {
    if (whole === '$$') return '$';
    const name = braced ?? bare;
    if (!name) throw new Error(`${where}: a lone "$" in "${text}" (write $$ for a literal dollar)`);
    const value = vars[name];
    const missing = colon ? value === undefined || value === '' : value === undefined;
    if (op === '-') return missing ? arg! : value!;
    if (op === '?') {
      if (missing) throw new Error(`${where}: ${name}: ${arg || 'required'}`);
      return value!;
    }
    return value ?? '';
  });
}

function interpolateDeep(value: unknown, vars: Record<string, string | undefined>, where: string): unknown {
  if (typeof value === 'string') return interpolate(value, vars, where);
  if (Array.isArray(value)) return value.map((v) => interpolateDeep(v, vars, where));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateDeep(v, vars, `${where}.${k}`)]));
  }
  return value;
}

type RawService = {
  image?: string;
  entrypoint?: string | string[];
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  deploy?: { replicas?: number };
  ports?: (string | number)[];
};

function readServices(file: string): Record<string, RawService> {
  const doc = parse(fs.readFileSync(file, 'utf8'), { merge: true }) as { services?: Record<string, RawService> };
  if (!doc.services) throw new Error(`${file} has no services`);
  return doc.services;
}

const argvOf = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : ['sh', '-c', v]);

/** Reads one service with the variables given (what `docker compose` would take from the shell and `.env`). */
export function composeService(name: string, vars: Record<string, string | undefined>, file = COMPOSE_FILE): ComposeService {
  const raw = readServices(file)[name];
  if (!raw) throw new Error(`${path.basename(file)} has no service "${name}"`);
  const svc = interpolateDeep(raw, vars, `services.${name}`) as RawService;
  const envEntries = Array.isArray(svc.environment)
    ? svc.environment.map((line) => {
        const i = line.indexOf('=');
        return i < 0 ? [line, vars[line] ?? ''] : [line.slice(0, i), line.slice(i + 1)];
      })
    : Object.entries(svc.environment ?? {}).map(([k, v]) => [k, v === null ? (vars[k] ?? '') : String(v)]);
  const entrypoint = Array.isArray(svc.entrypoint) ? svc.entrypoint : svc.entrypoint ? [svc.entrypoint] : [];
  const command = entrypoint.length && typeof svc.command === 'string' ? [svc.command] : argvOf(svc.command);
  return {
    name,
    image: svc.image,
    argv: [...entrypoint, ...command],
    environment: Object.fromEntries(envEntries) as Record<string, string>,
    replicas: svc.deploy?.replicas ?? 1,
    publishedPorts: (svc.ports ?? []).map((p) => Number(String(p).split(':').pop()!.split('/')[0])),
  };
}

/** The tag of a service's image (`temporalio/auto-setup:1.29.1` -> `1.29.1`). */
export function imageTag(service: ComposeService): string {
  const tag = service.image?.split(':')[1];
  if (!tag) throw new Error(`service ${service.name} names no image tag in docker-compose.yml`);
  return tag;
}

/**
 * Compose's network names (`postgres:5432`, `temporal:7233`) become loopback addresses on one machine. Replaces each
 * `<service>:<container port>` in a value by the address given for it.
 */
export function translateAddresses(value: string, addresses: Record<string, string>): string {
  let out = value;
  for (const [from, to] of Object.entries(addresses)) {
    out = out.replace(new RegExp(`(?<![\\w.-])${from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?!\\d)`, 'g'), to);
  }
  return out;
}

/**
 * What differs on one machine, and nothing else: compose's network names become loopback addresses, every server
 * binds 127.0.0.1 instead of a container's 0.0.0.0, and each process gets ports of its own. `extra` may only add
 * settings compose does not set.
 */
export function oneMachineEnv(
  svc: ComposeService,
  addresses: Record<string, string>,
  ports: { PORT: string; INBOUND_SMTP_PORT: string },
  extra: Record<string, string>,
): Record<string, string> {
  const env = Object.fromEntries(Object.entries(svc.environment).map(([k, v]) => [k, translateAddresses(v, addresses)]));
  const overrides: Record<string, string> = { HOST: '127.0.0.1', METRICS_HOST: '127.0.0.1', INBOUND_SMTP_HOST: '127.0.0.1', ...ports };
  for (const [k, v] of Object.entries(overrides)) {
    if (!(k in env)) throw new Error(`docker-compose.yml no longer sets ${k} for ${svc.name}; update the rehearsal's one-machine overrides`);
    env[k] = v;
  }
  for (const [k, v] of Object.entries(extra)) {
    if (k in env) throw new Error(`${k} is set by docker-compose.yml; change it through a compose variable, not the rehearsal's extra settings`);
    env[k] = v;
  }
  return env;
}
