import type { FieldError } from '../errors';

/**
 * A/B-tested campaigns (issue 30): the rules, as pure functions. A campaign with `abTest` sends each variant to a test
 * share of its audience snapshot, waits `testDurationSeconds`, picks the variant with the best `metric` (or lets a
 * person pick), and sends the winner to everyone else. The workflow (campaign-send.workflow.ts) orchestrates; the send
 * engine (campaign-send.ts) splits and sends; this module sizes the shares and makes the decision.
 */

export const AB_METRICS = ['unique_opens', 'unique_clicks', 'click_to_open'] as const;
export type AbMetric = (typeof AB_METRICS)[number];
export const AB_AFTER_TEST = ['auto', 'manual'] as const;
export const MIN_VARIANTS = 2;
export const MAX_VARIANTS = 5;

/** What a variant changes of the campaign's content; a field left out (or null) keeps the campaign's own. */
export interface AbVariant {
  subject?: string | null;
  body?: string | null;
  templateId?: string | null;
  fromName?: string | null;
  /** The preview line mail clients show after the subject (a hidden first line of the body). */
  preheader?: string | null;
}

export interface AbTest {
  variants: AbVariant[];
  /** Per variant: a percentage of the audience snapshot (rounded down), or a fixed number of recipients. */
  testShare: { percent: number } | { count: number };
  metric: AbMetric;
  testDurationSeconds: number;
  /** auto: the best variant is sent when the test ends; manual: the remainder waits for POST /campaigns/:id/winner. */
  afterTest: (typeof AB_AFTER_TEST)[number];
}

/** A variant's letter (0 -> A), as the API and the README name them. */
export const variantLabel = (i: number): string => String.fromCharCode(65 + i);

/** Recipients each variant's test share gets from an audience of `audience`. */
export function testShareSize(test: Pick<AbTest, 'testShare'>, audience: number): number {
  return 'count' in test.testShare ? test.testShare.count : Math.floor((audience * test.testShare.percent) / 100);
}

/**
 * Why the audience is too small for the shares, or null: every variant needs at least one recipient, and at least one
 * recipient must be left for the winner.
 */
export function shareProblem(test: AbTest, audience: number): FieldError | null {
  const each = testShareSize(test, audience);
  const k = test.variants.length;
  if (each >= 1 && each * k < audience) return null;
  return {
    field: 'abTest.testShare',
    message:
      `The audience (${audience}) is too small for ${k} test shares of ${each} recipient${each === 1 ? '' : 's'}: ` +
      'each variant needs at least one recipient and at least one must be left for the winner',
    code: 'audience_too_small',
  };
}

/** The hidden preview line before a body (HTML, or MJML where it goes first in mj-body). */
export function withPreheader(body: string, preheader: string | null | undefined): string {
  if (!preheader) return body;
  const text = preheader.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
  const div = `<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">${text}</div>`;
  const mjBody = /<mj-body[^>]*>/i.exec(body);
  if (mjBody) return body.slice(0, mjBody.index + mjBody[0].length) + `<mj-raw>${div}</mj-raw>` + body.slice(mjBody.index + mjBody[0].length);
  return div + body;
}

/** One variant's test numbers. */
export interface VariantSample {
  sent: number;
  opens: number;
  clicks: number;
}

interface VariantResult extends VariantSample {
  variant: number;
  label: string;
  /** The metric: successes / trials (0 when there are no trials). */
  value: number;
  successes: number;
  trials: number;
}

const AB_TEST_NAME = 'two-proportion z-test (pooled variance, two-sided), the winner against the best other variant';

export interface AbDecision {
  winner: number;
  winnerLabel: string;
  decidedBy: 'auto' | 'manual';
  decidedAt: string;
  metric: AbMetric;
  variants: VariantResult[];
  test: string;
  z: number | null;
  pValue: number | null;
  /** p >= 0.05 (or no test possible): the difference may be chance. */
  withinNoise: boolean;
  /** Another variant had the same value: the lowest variant index among the best won. */
  tie: boolean;
  /** No variant had a single success of the metric: variant A was sent. */
  noData: boolean;
  note: string;
}

function successesAndTrials(metric: AbMetric, s: VariantSample): { successes: number; trials: number } {
  if (metric === 'unique_opens') return { successes: s.opens, trials: s.sent };
  if (metric === 'unique_clicks') return { successes: s.clicks, trials: s.sent };
  return { successes: s.clicks, trials: s.opens };
}

/** `a` is better than `b` (exact: cross-multiplied counts, no float rounding). */
const better = (a: VariantResult, b: VariantResult) => a.successes * b.trials > b.successes * a.trials;
const same = (a: VariantResult, b: VariantResult) => a.successes * b.trials === b.successes * a.trials;

/**
 * The decision from the test's numbers: the best value of the metric wins; equal values go to the lowest variant index
 * (flagged `tie`); no success at all in any variant sends variant A (flagged `noData`). `pick` is a person's choice,
 * which wins whatever the numbers (they are still reported). The winner is compared with the best other variant by
 * a pooled two-proportion z-test; p >= 0.05 is reported as within noise.
 */
export function decideWinner(input: { metric: AbMetric; samples: VariantSample[]; pick?: number | null; now?: Date }): AbDecision {
  const { metric } = input;
  const variants: VariantResult[] = input.samples.map((s, i) => {
    const st = successesAndTrials(metric, s);
    return { variant: i, label: variantLabel(i), ...s, ...st, value: st.trials > 0 ? round4(st.successes / st.trials) : 0 };
  });
  let best = variants[0]!;
  for (const v of variants.slice(1)) if (better(v, best)) best = v;
  const noData = variants.every((v) => v.successes === 0);
  const manual = input.pick !== undefined && input.pick !== null;
  const winner = manual ? variants[input.pick!]! : noData ? variants[0]! : best;
  const tie = !manual && !noData && variants.some((v) => v !== best && same(v, best));
  const others = variants.filter((v) => v !== winner);
  const runnerUp = others.reduce((a, b) => (better(b, a) ? b : a), others[0]!);
  const { z, pValue } = twoProportionZTest(winner.successes, winner.trials, runnerUp.successes, runnerUp.trials);
  const withinNoise = pValue === null || pValue >= 0.05;
  const what = metric === 'unique_opens' ? 'opens' : metric === 'unique_clicks' ? 'clicks' : 'clicks after an open';
  const notes: string[] = [];
  if (manual) notes.push(`Variant ${winner.label} was picked by a person.`);
  else if (noData) notes.push(`No variant had any ${what}: variant A (the first) is sent.`);
  else if (tie) notes.push(`Tie on ${metric}: the lowest variant (${winner.label}) wins.`);
  else notes.push(`Variant ${winner.label} had the best ${metric} (${winner.value}).`);
  notes.push(
    pValue === null
      ? 'No test possible (no trials or no variation): the difference is within noise.'
      : withinNoise
        ? `Within noise: p = ${pValue} against variant ${runnerUp.label} (p >= 0.05).`
        : `Significant: p = ${pValue} against variant ${runnerUp.label} (p < 0.05).`,
  );
  return {
    winner: winner.variant,
    winnerLabel: winner.label,
    decidedBy: manual ? 'manual' : 'auto',
    decidedAt: (input.now ?? new Date()).toISOString(),
    metric,
    variants,
    test: AB_TEST_NAME,
    z,
    pValue,
    withinNoise,
    tie,
    noData,
    note: notes.join(' '),
  };
}

/**
 * Two-proportion z-test with pooled variance, two-sided: z = (p1 - p2) / sqrt(p(1-p)(1/n1 + 1/n2)), p the pooled
 * proportion. Null when either sample is empty or the pooled proportion is 0 or 1 (no variance to test).
 */
export function twoProportionZTest(x1: number, n1: number, x2: number, n2: number): { z: number | null; pValue: number | null } {
  if (n1 <= 0 || n2 <= 0) return { z: null, pValue: null };
  const pooled = (x1 + x2) / (n1 + n2);
  const se = Math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2));
  if (!(se > 0)) return { z: null, pValue: null };
  const z = (x1 / n1 - x2 / n2) / se;
  return { z: round4(z), pValue: round4(erfc(Math.abs(z) / Math.SQRT2)) };
}

/** Complementary error function (Numerical Recipes' Chebyshev fit, relative error below 1.2e-7). */
function erfc(x: number): number {
  const t = 1 / (1 + 0.5 * Math.abs(x));
  const y =
    t *
    Math.exp(
      -x * x -
        1.26551223 +
        t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? y : 2 - y;
}

const round4 = (n: number) => Math.round(n * 10_000) / 10_000;
