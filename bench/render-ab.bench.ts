// `BASE=<another checkout> npm run bench:render-ab`: a campaign message's render (renderPacked: compose, the wire
// bytes, no stack) in this checkout against another, in process. Within one process the two trees alternate round by
// round, so the host's swing falls on both alike; but the tree whose modules load first runs a few percent faster (an
// A/A run gave 0.92-0.98 that way and 1.035 the other: BENCHMARKS.md › Issue 28, nineteenth stop). So it runs in child
// processes, half with this checkout loaded first and half with BASE first, and reports the median ratio of each order
// and their geometric mean, which is the figure to quote. Both trees must write the same bytes (checked every round).
// The other checkout needs this one's dependencies: `git worktree add <dir> <commit>` and a symlink of node_modules.
// Options (env): BASE (required), BODY=html|campaign (html: the digest), ROUNDS (300 per process), RUNS (2 per order).
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { RenderTask } from '../domain/campaigns/render-task';
import { CAMPAIGN_BODY, HTML_BODY } from './bodies';

type RenderPacked = (task: RenderTask) => Promise<{ bytes: ArrayBuffer }>;

const HERE = path.resolve(__dirname, '..');
const BASE = process.env.BASE ? path.resolve(process.env.BASE) : '';
const BODY = process.env.BODY === 'campaign' ? 'campaign' : 'html';
const ROUNDS = Number(process.env.ROUNDS ?? 300);
const RUNS = Number(process.env.RUNS ?? 2);

const spec: RenderTask['spec'] = {
  content: { subject: '{{ first_name ?? "Hello" }}, the November issue for {{ plan }}', body: BODY === 'campaign' ? CAMPAIGN_BODY : HTML_BODY },
  kind: 'MARKETING',
  templateId: null,
  from: { email: 'news@bench.example.test', name: 'Example News' },
  replyTo: null,
  headers: { Precedence: 'bulk', 'List-Id': '"November" <abc.campaigns.bench.example.test>' },
  tracking: { opens: true, clicks: true },
  links: { publicUrl: 'http://127.0.0.1:3000', appSecret: 'bench-app-secret-0123456789-abcdefghij' },
};

/** 200 recipients with data as the campaign benchmark seeds it (a name, a plan, credits, orders, six article picks), as JSON text. */
function recipients(): RenderTask['recipients'] {
  return Array.from({ length: 200 }, (_, i) => ({
    id: randomUUID(),
    contactId: randomUUID(),
    email: `reader-${i}@example.com`,
    data: JSON.stringify({
      first_name: i % 5 ? `Reader ${i}` : null,
      plan: ['free', 'pro', 'team'][i % 3],
      credits: i % 100,
      month: 'November',
      orders: i % 2 ? [{ id: 1000 + i, items: 1 + (i % 3), total: 19.9 + i }] : [],
      recommendations: Array.from({ length: 6 }, (_, k) => ({
        url: `https://blog.example.com/posts/${k}?ref=${i}`,
        title: `A story worth reading, number ${k}, about something <interesting> & new`,
        blurb: `<p>Short <b>summary</b> ${k} with enough words to be truncated somewhere around here, eventually, maybe.</p>`,
      })),
    }),
  }));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * q)]!;

/** One process: both trees loaded in `order`, ROUNDS alternating rounds; prints one JSON line. */
async function child(order: 'here-first' | 'base-first'): Promise<void> {
  const load = async (root: string) => ((await import(path.join(root, 'domain/campaigns/render-task.ts'))) as { renderPacked: RenderPacked }).renderPacked;
  let here: RenderPacked;
  let base: RenderPacked;
  if (order === 'here-first') {
    here = await load(HERE);
    base = await load(BASE);
  } else {
    base = await load(BASE);
    here = await load(HERE);
  }
  const list = recipients();
  const round = async (render: RenderPacked): Promise<[number, number]> => {
    const t0 = process.hrtime.bigint();
    let bytes = 0;
    for (let i = 0; i < list.length; i += 50) bytes += (await render({ key: 'ab', spec, eightBit: true, recipients: list.slice(i, i + 50) })).bytes.byteLength;
    return [Number(process.hrtime.bigint() - t0) / 1000 / list.length, bytes];
  };
  for (let i = 0; i < 30; i++) {
    await round(here);
    await round(base);
  }
  const ratios: number[] = [];
  const hereUs: number[] = [];
  const baseUs: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Which tree goes first in a round alternates too.
    let h: number, hb: number, x: number, xb: number;
    if (r % 2) {
      [h, hb] = await round(here);
      [x, xb] = await round(base);
    } else {
      [x, xb] = await round(base);
      [h, hb] = await round(here);
    }
    if (hb !== xb) throw new Error(`the two trees wrote different bytes (${hb} and ${xb} for the same 200 messages)`);
    ratios.push(h / x);
    hereUs.push(h);
    baseUs.push(x);
  }
  console.log(JSON.stringify({ order, ratio: median(ratios), q1: quantile(ratios, 0.25), q3: quantile(ratios, 0.75), hereUs: median(hereUs), baseUs: median(baseUs) }));
}

function main(): void {
  if (!BASE) throw new Error('BASE: the other checkout (e.g. `git worktree add /tmp/base HEAD~1` with node_modules linked)');
  // One checkout's modules load once: an A/A run needs a second checkout of the same commit.
  if (BASE === HERE) throw new Error('BASE is this checkout');
  const runs: { order: string; ratio: number; q1: number; q3: number; hereUs: number; baseUs: number }[] = [];
  for (let i = 0; i < 2 * RUNS; i++) {
    const order = i % 2 ? 'base-first' : 'here-first';
    const result = spawnSync(process.execPath, ['--import', 'tsx', __filename], { env: { ...process.env, RENDER_AB_ORDER: order }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (result.status !== 0) throw new Error(`the ${order} process failed (exit ${result.status})`);
    const run = JSON.parse(result.stdout.trim().split('\n').pop()!) as (typeof runs)[number];
    runs.push(run);
    console.error(`${order}: ratio ${run.ratio.toFixed(3)} (quartiles ${run.q1.toFixed(3)}-${run.q3.toFixed(3)}), ${run.hereUs.toFixed(1)} against ${run.baseUs.toFixed(1)} us a message`);
  }
  const of = (order: string) => runs.filter((r) => r.order === order).map((r) => Number(r.ratio.toFixed(3)));
  const hereFirst = median(of('here-first'));
  const baseFirst = median(of('base-first'));
  console.log(
    JSON.stringify(
      { body: BODY, base: BASE, rounds: ROUNDS, hereFirst: of('here-first'), baseFirst: of('base-first'), ratio: Number(Math.sqrt(hereFirst * baseFirst).toFixed(3)) },
      null,
      2,
    ),
  );
}

const order = process.env.RENDER_AB_ORDER;
if (order === 'here-first' || order === 'base-first') void child(order);
else main();
