import type { Branch, StepType } from './automation.entity';

/*
 * The step graph as a run carries it: pure data and pure functions, so the Temporal workflow bundle imports this
 * module too (no Node APIs, no database).
 */

export type DurationUnit = 'seconds' | 'minutes' | 'hours' | 'days' | 'weeks';
interface StepDuration {
  amount: number;
  unit: DurationUnit;
}

const UNIT_MS: Record<DurationUnit, number> = { seconds: 1_000, minutes: 60_000, hours: 3_600_000, days: 86_400_000, weeks: 604_800_000 };
/** The longest DELAY or WAIT_FOR_EVENT timeout: a year. */
export const MAX_DURATION_MS = 366 * 86_400_000;

function durationMs(d: StepDuration): number {
  return d.amount * UNIT_MS[d.unit];
}

/** Each step type's config as stored (validated by the API's schemas on write). */
export interface StepConfigs {
  SEND_EMAIL: {
    templateId: string;
    /** Overrides of the template's own; absent: the template's. */
    from?: string;
    fromName?: string;
    replyTo?: string;
    subject?: string;
    /** Absent: the project's tracking settings. */
    trackOpens?: boolean;
    trackClicks?: boolean;
  };
  DELAY: { duration: StepDuration };
  WAIT_FOR_EVENT: { event: string; timeout: StepDuration };
  CONDITION: { filter: Record<string, unknown> };
  WEBHOOK: { url: string; headers?: Record<string, string> };
  UPDATE_CONTACT: { data?: Record<string, unknown>; subscribed?: boolean };
  EXIT: Record<string, never>;
}

export type GraphStep = {
  [T in StepType]: {
    id: string;
    type: T;
    name: string | null;
    config: StepConfigs[T];
    /** DELAY: its duration; WAIT_FOR_EVENT: its timeout, in ms (set when frozen: the workflow code needs no conversion). */
    waitMs?: number;
  };
}[StepType];

/** Where a step leads: `next` for single-exit steps, the labelled branches for CONDITION and WAIT_FOR_EVENT. */
export type StepExits = Partial<Record<Branch | 'next', string>>;

/** A frozen graph version (automation_versions.graph, and the input of every run started on it). */
export interface AutomationGraph {
  version: number;
  entry: string;
  steps: Record<string, GraphStep>;
  exits: Record<string, StepExits>;
}

/** The out-edges a step type has: `next` for most, two labelled branches for CONDITION and WAIT_FOR_EVENT, none for EXIT. */
export function exitLabels(type: StepType): (Branch | 'next')[] {
  if (type === 'CONDITION') return ['yes', 'no'];
  if (type === 'WAIT_FOR_EVENT') return ['event', 'timeout'];
  if (type === 'EXIT') return [];
  return ['next'];
}

export interface GraphProblem {
  /** Where: `entryStepId`, `steps.<id>`, `steps.<id>.config.templateId`, `transitions.<id>`. */
  field: string;
  message: string;
  code: string;
}

export interface DraftGraph {
  entry: string | null;
  steps: GraphStep[];
  transitions: { id: string; from: string; to: string; branch: Branch | null }[];
}

/** The draft as a graph runs can take (call only once `validateGraphShape` found no problem). */
export function freezeGraph(draft: DraftGraph, version: number): AutomationGraph {
  const steps: Record<string, GraphStep> = {};
  const exits: Record<string, StepExits> = {};
  for (const s of draft.steps) {
    const waitMs = s.type === 'DELAY' ? durationMs(s.config.duration) : s.type === 'WAIT_FOR_EVENT' ? durationMs(s.config.timeout) : undefined;
    steps[s.id] = waitMs === undefined ? s : { ...s, waitMs };
    exits[s.id] = {};
  }
  for (const t of draft.transitions) exits[t.from]![t.branch ?? 'next'] = t.to;
  return { version, entry: draft.entry!, steps, exits };
}

/**
 * The shape rules a graph must meet before runs may start on it: an entry step; every step reachable from it; each
 * CONDITION with both a yes and a no branch and each WAIT_FOR_EVENT with an event and a timeout branch; transitions
 * labelled as their source step needs (a branch only out of CONDITION or WAIT_FOR_EVENT, none out of EXIT); and no
 * cycle that a run could go round without passing a DELAY or a WAIT_FOR_EVENT (it would loop without pause). Every
 * problem is reported, each with where it is.
 */
export function validateGraphShape(draft: DraftGraph): GraphProblem[] {
  const problems: GraphProblem[] = [];
  const byId = new Map(draft.steps.map((s) => [s.id, s]));
  if (draft.steps.length === 0) return [{ field: 'steps', message: 'The workflow has no steps', code: 'no_steps' }];
  if (!draft.entry || !byId.has(draft.entry)) {
    problems.push({ field: 'entryStepId', message: 'The workflow has no entry step (set entryStepId)', code: 'no_entry' });
  }
  const out = new Map<string, Map<string, string>>();
  for (const t of draft.transitions) {
    const from = byId.get(t.from);
    if (!from || !byId.has(t.to)) continue; // foreign keys keep these consistent; a stale read is no graph problem
    const labels = exitLabels(from.type);
    const label = t.branch ?? 'next';
    if (!labels.includes(label)) {
      const expected = labels.length === 0 ? 'an EXIT step has no outgoing transitions' : `a ${from.type} step's transitions take ${labels.map((l) => (l === 'next' ? 'no branch' : `branch "${l}"`)).join(' or ')}`;
      problems.push({ field: `transitions.${t.id}`, message: `Transition out of step ${t.from} has ${t.branch ? `branch "${t.branch}"` : 'no branch'}: ${expected}`, code: 'invalid_branch' });
      continue;
    }
    if (!out.has(t.from)) out.set(t.from, new Map());
    out.get(t.from)!.set(label, t.to);
  }
  for (const s of draft.steps) {
    if (s.type !== 'CONDITION' && s.type !== 'WAIT_FOR_EVENT') continue;
    for (const label of exitLabels(s.type)) {
      if (!out.get(s.id)?.has(label)) {
        problems.push({ field: `steps.${s.id}`, message: `${s.type} step ${s.id} has no "${label}" branch`, code: 'missing_branch' });
      }
    }
  }
  if (draft.entry && byId.has(draft.entry)) {
    const seen = new Set<string>([draft.entry]);
    const queue = [draft.entry];
    while (queue.length) {
      for (const to of out.get(queue.shift()!)?.values() ?? []) {
        if (!seen.has(to)) {
          seen.add(to);
          queue.push(to);
        }
      }
    }
    for (const s of draft.steps) {
      if (!seen.has(s.id)) problems.push({ field: `steps.${s.id}`, message: `Step ${s.id} (${s.type}) cannot be reached from the entry step`, code: 'unreachable' });
    }
  }
  // A cycle among steps that do not pause (everything but DELAY and WAIT_FOR_EVENT): depth-first search on them.
  const pauses = (id: string) => {
    const t = byId.get(id)?.type;
    return t === 'DELAY' || t === 'WAIT_FOR_EVENT';
  };
  const state = new Map<string, 1 | 2>();
  const reported = new Set<string>();
  const visit = (id: string, path: string[]): void => {
    state.set(id, 1);
    for (const to of out.get(id)?.values() ?? []) {
      if (pauses(to)) continue;
      if (state.get(to) === 1) {
        const full = [...path, id];
        const cycle = full.slice(full.indexOf(to));
        const key = [...cycle].sort().join(',');
        if (!reported.has(key)) {
          reported.add(key);
          problems.push({ field: `steps.${to}`, message: `Steps ${[...cycle, to].join(' -> ')} form a cycle without a DELAY or WAIT_FOR_EVENT`, code: 'cycle' });
        }
      } else if (!state.has(to)) visit(to, [...path, id]);
    }
    state.set(id, 2);
  };
  for (const s of draft.steps) if (!pauses(s.id) && !state.has(s.id)) visit(s.id, []);
  return problems;
}
