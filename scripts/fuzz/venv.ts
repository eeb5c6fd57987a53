import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * The project-local Python virtualenv that holds schemathesis (`.venv/`, gitignored), created on demand from the pinned
 * `scripts/fuzz/requirements.txt`. Needs only `python3` with the venv module and pip, and PyPI. A marker file records
 * the hash of the requirements it was built from; a changed file (or a half-built venv) rebuilds it from scratch.
 *
 * `node --import tsx scripts/fuzz/venv.ts` (npm run fuzz:setup) builds it and prints the schemathesis path.
 */

const ROOT = path.resolve(__dirname, '..', '..');
export const VENV_DIR = process.env.MAILWRIGHT_FUZZ_VENV ?? path.join(ROOT, '.venv');
const REQUIREMENTS = path.join(__dirname, 'requirements.txt');
const MARKER = path.join(VENV_DIR, '.mailwright-requirements.sha256');

function binDir(): string {
  return path.join(VENV_DIR, process.platform === 'win32' ? 'Scripts' : 'bin');
}

export function schemathesisBin(): string {
  return path.join(binDir(), process.platform === 'win32' ? 'schemathesis.exe' : 'schemathesis');
}

function run(command: string, args: string[], log: (line: string) => void): void {
  log(`$ ${command} ${args.join(' ')}`);
  const res = spawnSync(command, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (res.error) throw new Error(`${command} could not run: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${res.status}:\n${res.stdout}\n${res.stderr}`);
}

/** Builds the venv if it is missing or stale; returns the path of its `schemathesis` executable. */
export function ensureSchemathesis(log: (line: string) => void = (l) => process.stdout.write(`[fuzz setup] ${l}\n`)): string {
  const wanted = createHash('sha256').update(fs.readFileSync(REQUIREMENTS)).digest('hex');
  const have = fs.existsSync(MARKER) ? fs.readFileSync(MARKER, 'utf8').trim() : undefined;
  if (have === wanted && fs.existsSync(schemathesisBin())) return schemathesisBin();
  const python = process.env.PYTHON ?? 'python3';
  log(have ? 'requirements changed: rebuilding the schemathesis virtualenv' : `creating the schemathesis virtualenv in ${VENV_DIR}`);
  fs.rmSync(VENV_DIR, { recursive: true, force: true });
  run(python, ['-m', 'venv', VENV_DIR], log);
  const pip = path.join(binDir(), 'python');
  run(pip, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', REQUIREMENTS], log);
  if (!fs.existsSync(schemathesisBin())) throw new Error(`pip finished but ${schemathesisBin()} is missing`);
  // Written last: an interrupted install leaves no marker and is redone next time.
  fs.writeFileSync(MARKER, `${wanted}\n`);
  log('schemathesis installed');
  return schemathesisBin();
}

if (require.main === module) {
  try {
    process.stdout.write(`${ensureSchemathesis()}\n`);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(1);
  }
}
