/**
 * Reads a schemathesis NDJSON report and lists the documented-valid requests the server refused
 * (`positive_data_acceptance`, ST202), grouped by operation, status, `error.code` and field-error codes, with one
 * request of each group. `node --import tsx scripts/fuzz/rejected.ts <report.ndjson>`; the fuzz test writes its
 * reports to `<stack data folder>/schemathesis/` (README: Fuzzing). A run without test/fuzz/hooks.py
 * (MAILWRIGHT_FUZZ_NO_HOOKS=1) shows every such refusal; with the hooks, only those they do not excuse.
 */
import fs from 'node:fs';
import readline from 'node:readline';

interface Check {
  name: string;
  status: string;
}
interface Interaction {
  request: { method: string; uri: string; body?: { $base64?: string } };
  response?: { status_code: number; content?: { $base64?: string } };
}
interface Scenario {
  recorder: { label: string; checks?: Record<string, Check[]>; interactions?: Record<string, Interaction> };
}

const decode = (b?: { $base64?: string }) => (b?.$base64 ? Buffer.from(b.$base64, 'base64').toString('utf8') : '');

/** `error.code` and the field errors of an envelope (empty when the body is not one). */
function envelope(text: string): { code: string; fields: { field: string; code: string; message?: string }[] } {
  try {
    const error = (JSON.parse(text) as { error?: { code?: string; errors?: { field: string; code: string; message?: string }[] } }).error;
    return { code: error?.code ?? '?', fields: error?.errors ?? [] };
  } catch {
    return { code: '?', fields: [] };
  }
}

async function main(file: string): Promise<void> {
  const groups = new Map<string, { count: number; example: string }>();
  const lines = readline.createInterface({ input: fs.createReadStream(file), crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.startsWith('{"ScenarioFinished"')) continue;
    const { recorder } = (JSON.parse(line) as { ScenarioFinished: Scenario }).ScenarioFinished;
    for (const [caseId, checks] of Object.entries(recorder.checks ?? {})) {
      if (!checks.some((c) => c.name === 'positive_data_acceptance' && c.status === 'failure')) continue;
      const interaction = recorder.interactions?.[caseId];
      if (!interaction?.response) continue;
      const { code, fields } = envelope(decode(interaction.response.content));
      const fieldCodes = [...new Set(fields.map((f) => f.code))].sort().join(',');
      const key = `${recorder.label} | ${interaction.response.status_code} ${code} | ${fieldCodes}`;
      const group = groups.get(key) ?? { count: 0, example: '' };
      group.count += 1;
      if (!group.example) {
        const url = new URL(interaction.request.uri);
        const body = decode(interaction.request.body).slice(0, 300);
        group.example = `${url.pathname}${url.search}${body ? ` ${body}` : ''} -> ${fields.map((f) => `${f.field}: ${f.message ?? f.code}`).join('; ')}`.slice(0, 600);
      }
      groups.set(key, group);
    }
  }
  for (const [key, { count, example }] of [...groups].sort(([a], [b]) => a.localeCompare(b))) {
    process.stdout.write(`${key} (${count})\n    ${example}\n`);
  }
  const operations = new Set([...groups.keys()].map((k) => k.split(' | ')[0]));
  process.stdout.write(`${groups.size} groups of refused documented-valid requests over ${operations.size} operations\n`);
}

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node --import tsx scripts/fuzz/rejected.ts <schemathesis report .ndjson>\n');
  process.exit(2);
}
main(file).catch((err: unknown) => {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(1);
});
