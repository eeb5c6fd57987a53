// `npm run bench:import`: a ~5 MB CSV (ROWS rows, several data columns) uploaded to POST /contacts/import on the real
// stack, polled until COMPLETED; prints rows/s end to end (upload start to COMPLETED) and checks the contacts in
// Postgres. A small import runs first so the worker is up and its workflow bundle loaded. Each of RUNS imports goes
// into a new project (the same work each time); the median is the figure, printed with the load average, since other
// processes on the machine move single runs by ±20%. Loopback only.
// Options (env): ROWS (50000), RUNS (3).
import os from 'node:os';
import { startBenchStack, benchProject } from './stack';

const ROWS = Number(process.env.ROWS ?? 50_000);
const RUNS = Number(process.env.RUNS ?? 3);
const PLANS = ['free', 'starter', 'pro', 'team'];
const CITIES = ['Paris', 'Berlin', 'Oslo', 'Lisbon', 'Tokyo', 'Austin', 'Lagos', 'Lima'];

function csv(rows: number, prefix: string): Buffer {
  const lines = ['email,first_name,last_name,plan,seats,mrr,city,signed_up,beta,subscribed,notes'];
  for (let i = 0; i < rows; i++) {
    lines.push(
      [
        `${prefix}${i}@example.com`,
        `First${i}`,
        `Last${i % 997}`,
        PLANS[i % PLANS.length],
        1 + (i % 40),
        ((i * 37) % 10_000) / 100,
        CITIES[i % CITIES.length],
        `2024-${String(1 + (i % 12)).padStart(2, '0')}-${String(1 + (i % 28)).padStart(2, '0')}`,
        i % 3 === 0 ? 'true' : 'false',
        i % 10 === 0 ? 'no' : 'yes',
        `"Since ${2015 + (i % 10)}, ok"`,
      ].join(','),
    );
  }
  return Buffer.from(lines.join('\n') + '\n');
}

async function importFile(apiUrl: string, key: string, file: Buffer): Promise<{ ms: number; job: Record<string, unknown> }> {
  const started = performance.now();
  const form = new FormData();
  form.append('file', new Blob([file]), 'contacts.csv');
  const res = await fetch(`${apiUrl}/contacts/import`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  if (res.status !== 202) throw new Error(`upload: ${res.status} ${await res.text()}`);
  const { jobId } = (await res.json()) as { jobId: string };
  for (;;) {
    const job = (await (await fetch(`${apiUrl}/contacts/import/${jobId}`, { headers: { authorization: `Bearer ${key}` } })).json()) as Record<string, unknown>;
    if (job.status === 'COMPLETED' || job.status === 'FAILED' || job.status === 'CANCELLED') return { ms: performance.now() - started, job };
    if (performance.now() - started > 300_000) throw new Error(`import still ${String(job.status)} after 5 minutes`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ');

async function main() {
  const stack = await startBenchStack({ smtpUrl: 'smtp://127.0.0.1:9' });
  try {
    const warmProject = await benchProject(stack.apiUrl, stack.db, 'import.example.test');
    const warm = await importFile(stack.apiUrl, warmProject.secretKey, csv(100, 'warm'));
    if (warm.job.status !== 'COMPLETED') throw new Error(`warm-up import ${String(warm.job.status)}: ${String(warm.job.message)}`);
    const file = csv(ROWS, 'user');
    console.log(`file: ${ROWS} rows, ${(file.length / 1024 / 1024).toFixed(2)} MB; load average before: ${load()}`);
    const rates: number[] = [];
    for (let run = 1; run <= RUNS; run++) {
      const { secretKey, projectId } = await benchProject(stack.apiUrl, stack.db, `import${run}.example.test`);
      const { ms, job } = await importFile(stack.apiUrl, secretKey, file);
      const { rows } = await stack.db.query(`select count(*)::int as n from contacts where project_id = $1`, [projectId]);
      const ok = job.status === 'COMPLETED' && job.created === ROWS && rows[0].n === ROWS;
      if (!ok) process.exitCode = 1;
      rates.push(ROWS / (ms / 1000));
      console.log(
        `run ${run}: ${(ms / 1000).toFixed(2)} s = ${Math.round(ROWS / (ms / 1000))} rows/s end to end (upload to COMPLETED); ` +
          `job ${JSON.stringify({ status: job.status, total: job.total, processed: job.processed, created: job.created, updated: job.updated, skipped: job.skipped, failed: job.failed })}; ` +
          `contacts in Postgres ${rows[0].n} ${ok ? 'OK' : 'MISMATCH'}; load average ${load()}`,
      );
    }
    const sorted = [...rates].sort((a, b) => a - b);
    const median = RUNS % 2 ? sorted[(RUNS - 1) / 2]! : (sorted[RUNS / 2 - 1]! + sorted[RUNS / 2]!) / 2;
    console.log(`median of ${RUNS}: ${Math.round(median)} rows/s (min ${Math.round(sorted[0]!)}, max ${Math.round(sorted.at(-1)!)})`);
  } finally {
    await stack.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
