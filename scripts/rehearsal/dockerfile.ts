// The Dockerfile as the rehearsal reads it: the image's environment, the files it copies, its install command and the
// npm scripts it runs after it (the build), so the rehearsal's app folder is built the way the image is (production
// dependencies only, then compiled).
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

export interface ImageRecipe {
  /** `ENV` lines. */
  env: Record<string, string>;
  /** `COPY` sources (relative to the build context) in order; the first copy holds the package manifests. */
  copies: { sources: string[]; dest: string }[];
  /** How many of `copies` come before the install (the manifests it installs from). */
  copiesBeforeInstall: number;
  /** The `npm install ...` / `npm ci ...` command of a `RUN` line, as argv. */
  install: string[];
  /** `npm run <script>` commands of `RUN` lines after the install, as argv, in order (e.g. `npm run build`). */
  scripts: string[][];
  /** `CMD`, the image's default command. */
  cmd: string[];
}

/** Parses the instructions the rehearsal needs; line continuations are joined, comments dropped. */
export function readImageRecipe(file = path.join(ROOT, 'Dockerfile')): ImageRecipe {
  const lines = fs
    .readFileSync(file, 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const recipe: ImageRecipe = { env: {}, copies: [], copiesBeforeInstall: 0, install: [], scripts: [], cmd: [] };
  for (const line of lines) {
    const [op, ...rest] = line.split(/\s+/);
    const args = line.slice(op!.length).trim();
    switch (op!.toUpperCase()) {
      case 'ENV':
        for (const m of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S+)/g)) recipe.env[m[1]!] = m[2]!.replace(/^"|"$/g, '');
        break;
      case 'COPY': {
        if (rest.some((r) => r.startsWith('--'))) throw new Error(`Dockerfile: COPY with flags is not supported by the rehearsal: ${line}`);
        recipe.copies.push({ sources: rest.slice(0, -1), dest: rest[rest.length - 1]! });
        break;
      }
      case 'RUN':
        for (const part of args.split('&&').map((p) => p.trim())) {
          if (/^npm (install|ci)\b/.test(part)) {
            recipe.install = part.split(/\s+/);
            recipe.copiesBeforeInstall = recipe.copies.length;
          } else if (/^npm run \S+$/.test(part)) {
            if (!recipe.install.length) throw new Error(`Dockerfile: \`${part}\` before the install is not supported by the rehearsal`);
            recipe.scripts.push(part.split(/\s+/));
          }
        }
        break;
      case 'CMD':
        recipe.cmd = JSON.parse(args) as string[];
        break;
    }
  }
  if (!recipe.install.length) throw new Error(`${file}: no RUN line with npm install or npm ci`);
  return recipe;
}
