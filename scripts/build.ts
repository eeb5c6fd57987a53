// Compiles what the API, the worker, the inbound server and the production scripts run from TypeScript to JavaScript
// (`npm run build` writes dist/). The processes then start with plain Node instead of tsx's loader, which cost each
// process about 40 MB of memory (BENCHMARKS.md › Issue 28, fourteenth stop). esbuild transforms each file on its own,
// as tsx does at run time, so the compiled code behaves as the TypeScript ran; `npm run typecheck` checks the types.
import fs from 'node:fs';
import path from 'node:path';
import { buildSync } from 'esbuild';

const ROOT = path.resolve(__dirname, '..');
/** Folders compiled whole, and the script production runs besides them (the migration job). */
const FOLDERS = ['api', 'domain', 'temporal', 'migrations'];
const SCRIPTS = ['scripts/migrate.ts'];

function typescriptFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) return typescriptFiles(p);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** Whether an entry point (relative to the repository, e.g. `temporal/worker.ts`) is part of the compiled runtime. */
export function isCompiled(entry: string): boolean {
  const rel = entry.split(path.sep).join('/');
  return SCRIPTS.includes(rel) || FOLDERS.some((f) => rel.startsWith(`${f}/`));
}

/** Writes the compiled runtime into `outDir` (its layout mirrors the repository's: `temporal/worker.ts` → `temporal/worker.js`). */
export function buildRuntime(outDir: string): void {
  const entryPoints = [...FOLDERS.flatMap((f) => typescriptFiles(path.join(ROOT, f))), ...SCRIPTS.map((s) => path.join(ROOT, s))];
  buildSync({
    entryPoints,
    outdir: outDir,
    outbase: ROOT,
    absWorkingDir: ROOT,
    tsconfig: path.join(ROOT, 'tsconfig.json'),
    bundle: false,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // Stack traces name the TypeScript lines when Node runs with --enable-source-maps (`npm start` and the tests do;
    // the image's serve:* scripts and the benchmarks do not, README › Production).
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'error',
  });
}

if (require.main === module) {
  const out = path.resolve(process.argv[2] ?? path.join(ROOT, 'dist'));
  fs.rmSync(out, { recursive: true, force: true });
  buildRuntime(out);
  console.log(`compiled the runtime into ${path.relative(process.cwd(), out) || '.'}`);
}
