import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';
import { ApplicationFailure } from '@temporalio/common';
import { uuidFromName } from '../ids';
import { AppError } from '../errors';
import { composeEmail, newEmailOf, prepareMessage, resolveMessage, type TemplateParts } from '../compose/composer';
import { insertEmails } from '../emails/email-intake';
import { sql, statement } from '../db/sql';
import { deliverBatch, markEmailsFailed } from '../emails/delivery';
import { suppressedError } from '../suppressions/suppression.service';
import type { SecretBox } from '../domains/secret-box';
import { DEFAULT_PROJECT_SETTINGS, type ProjectSettings } from '../projects/project.entity';
import { compileFilter, asFilter } from '../filters';
import { updateContact } from '../contacts/contact.service';
import type { ContactData } from '../contacts/contact.entity';
import { callWebhook, WebhookError } from './webhook';
import type { StepConfigs } from './graph';
import type { StepType } from './automation.entity';
import type { LinkConfig } from '../tracking/links';
import { assertEmailsUnder, emailsCapOf, type BillingConfig } from '../billing/billing.service';

/*
 * What each step of an automation run does, as the run's activities call it (temporal/activities/automation.activities.ts).
 * Every function is safe to repeat: a retried step writes the same rows (ids derived from the run and the step's
 * number) and sends no second email.
 */

/** What a step did, stored with the step in `automation_execution_steps.outcome` and shown by the execution API. */
export interface StepOutcome {
  /** The contact no longer exists: the run ends (CANCELLED). */
  contactGone?: boolean;
  [key: string]: unknown;
}

export interface RunRef {
  executionId: string;
  projectId: string;
  contactId: string;
}

export interface ProgressInput extends RunRef {
  /** The step that just ended (written once: repeats are ignored). */
  finished: { stepId: string; type: StepType; seq: number; startedAt: number; outcome: StepOutcome } | null;
  /** The step the run goes on with. */
  next?: { stepId: string; status: 'RUNNING' | 'WAITING'; wakeInMs?: number; waitingEvent?: string };
  /** Or the run's end. */
  end?: { status: 'COMPLETED' | 'CANCELLED' | 'FAILED'; reason: string | null };
}

interface WaitedEvent {
  id: string;
  name: string;
  data: Record<string, unknown>;
  createdAt: string;
}

export interface ProgressResult {
  contactGone: boolean;
  /** WAIT_FOR_EVENT: when the wait began (database time; events recorded from then on count). */
  waitSince?: string;
  /** WAIT_FOR_EVENT: an event that was recorded since the wait began, before the consumer could signal it. */
  waitedEvent?: WaitedEvent;
}

const AUTOMATION_PROGRESS = statement(
  'automation_progress',
  `with fin as (
    insert into automation_execution_steps (execution_id, seq, step_id, type, started_at, finished_at, outcome, project_id, automation_id)
    select $1::uuid, $2::int, $3::uuid, $4::text, to_timestamp($5::double precision / 1000), now(), $6::jsonb, x.project_id, x.automation_id
    from automation_executions x where x.id = $1::uuid and $7::boolean
    on conflict (execution_id, seq) do nothing
  ),
  upd as (
    update automation_executions set status = $8::text, current_step_id = $9::uuid, waiting_event = $10::text,
      -- A repeated record of the same wait (a retried activity) keeps its start: events since then still count. A
      -- repeat is told apart from a new pass through the same step (a loop) by the finished step's row, which exists
      -- only on a repeat (this statement's own insert is not visible here).
      wait_since = case when $10::text is null then null
                        when waiting_event = $10::text and current_step_id = $9::uuid and wait_since is not null
                             and (not $7::boolean or exists (select 1 from automation_execution_steps s
                                                              where s.execution_id = automation_executions.id and s.seq = $2::int))
                        then wait_since else now() end,
      next_wake_at = case when $11::bigint is null then null else now() + $11::bigint * interval '1 millisecond' end,
      status_reason = $12::text, finished_at = case when $13::boolean then now() end, updated_at = now()
    where id = $1::uuid and status in ('RUNNING', 'WAITING')
    returning wait_since
  )
  select exists (select 1 from contacts where id = $14::uuid and project_id = $15::uuid) as "contactExists", (select wait_since from upd) as "waitSince"`,
);

/**
 * Records the step that ended and where the run goes on (or its end) in one statement: the execution row is the API's
 * view of the run. A run already ended (a repeated end, or a row the API marked after Temporal said terminated)
 * is left as it is. For a WAIT_FOR_EVENT, also looks for an event that arrived since the wait began: the outbox
 * consumer signals only runs whose row says they wait, so an event committed before this row did is found here.
 */
export async function recordProgress(em: EntityManager, input: ProgressInput): Promise<ProgressResult> {
  const f = input.finished;
  const status = input.end?.status ?? input.next!.status;
  const row = await sql(em).one<{ contactExists: boolean; waitSince: Date | null }>(
    AUTOMATION_PROGRESS,
    [
      input.executionId, f?.seq ?? 0, f?.stepId ?? null, f?.type ?? null, f?.startedAt ?? 0, JSON.stringify(f?.outcome ?? {}), f !== null,
      status, input.end ? null : input.next!.stepId, input.next?.waitingEvent ?? null, input.next?.wakeInMs ?? null, input.end?.reason ?? null,
      input.end !== undefined, input.contactId, input.projectId,
    ],
  );
  const result: ProgressResult = { contactGone: !row!.contactExists };
  if (input.next?.waitingEvent && row!.waitSince) {
    const since = row!.waitSince;
    result.waitSince = since.toISOString();
    const event = await sql(em).one<{ id: string; name: string; data: Record<string, unknown>; createdAt: Date }>(
      `select id, name, data, created_at as "createdAt" from events
       where project_id = $1 and contact_id = $2 and name = $3 and created_at >= $4 order by created_at, id limit 1`,
      [input.projectId, input.contactId, input.next.waitingEvent, since],
    );
    if (event) result.waitedEvent = { ...event, createdAt: event.createdAt.toISOString() };
  }
  return result;
}

/** How long a SEND_EMAIL step retries transient SMTP failures before the email is marked FAILED and the run goes on. */
const SEND_RETRY_WINDOW_MS = 24 * 3_600_000;

export interface SendStepInput extends RunRef {
  workflowId: string;
  stepId: string;
  seq: number;
  config: StepConfigs['SEND_EMAIL'];
  context: Record<string, unknown> | null;
}

export interface SendStepDeps {
  transport: Transporter;
  secretBox: SecretBox;
  links: LinkConfig;
  /** Plans and their caps: a project at its emails cap sends nothing from a step (BILLING_PLANS, project caps). */
  billing: BillingConfig;
}

const AUTOMATION_SEND_READ = statement(
  'automation_send_read',
  `select (select json_build_object('status', status, 'createdAt', created_at, 'error', error) from emails where id = $1) as existing,
  (select json_build_object('email', email, 'data', data) from contacts where id = $2 and project_id = $3) as contact,
  (select json_build_object('id', id, 'type', type, 'subject', subject, 'body', body, 'from', from_email, 'fromName', from_name, 'replyTo', reply_to)
     from templates where id = $4 and project_id = $3) as template,
  (select settings from projects where id = $3) as settings,
  (select json_build_object('plan', plan, 'emails', emails_per_month) from project_billing where project_id = $3) as billing,
  -- The return path of the sender domain: the step's own from ($5), else its template's.
  (select return_path_host from domains where project_id = $3 and status = 'VERIFIED'
     and name = rtrim(lower(substring(coalesce($5::text, (select from_email from templates where id = $4 and project_id = $3)) from '@([^@]*)$')), '.')) as "returnPathHost"`,
);

/**
 * SEND_EMAIL: the step's template through the composer (contact data, `{{ context.* }}`), stored as an `emails` row
 * under an id derived from the run and the step's number, then delivered by the same claim-and-send as /v1/send.
 * A repeat finds the row: an email already sent is never sent again. Marketing templates skip unsubscribed
 * contacts (CANCELLED); an address on the suppression list is never mailed (SUPPRESSED, found by the insert or, for one
 * suppressed since, by the delivery's claim); a 5xx reply is BOUNCED; transient failures are retried (thrown) for up
 * to a day. The run goes on after each of them.
 */
export async function sendEmailStep(em: EntityManager, deps: SendStepDeps, input: SendStepInput): Promise<StepOutcome> {
  const emailId = uuidFromName(`${input.workflowId}#${input.seq}`);
  // Everything the step reads, in one round trip (a prepared statement: every step of every run runs it).
  const row = await sql(em).one<{
    existing: { status: string; createdAt: string; error: string | null } | null;
    contact: { email: string; data: ContactData } | null;
    template: TemplateParts | null;
    settings: Partial<ProjectSettings> | null;
    billing: { plan: string; emails: string | null } | null;
    returnPathHost: string | null;
  }>(
    AUTOMATION_SEND_READ,
    [emailId, input.contactId, input.projectId, input.config.templateId, input.config.from ?? null],
  );
  let existing = row!.existing;
  if (!existing) {
    const { contact, template } = row!;
    if (!contact) return { contactGone: true };
    if (!template) return { status: 'FAILED', error: `The template ${input.config.templateId} no longer exists` };
    // The emails cap, as /v1/send checks it: at the cap the step sends nothing (no email stored) and the run goes on.
    const cap = emailsCapOf(deps.billing, row!.billing);
    if (cap !== null) {
      try {
        await assertEmailsUnder(em, input.projectId, cap, 1);
      } catch (err) {
        if (err instanceof AppError) return { status: 'FAILED', error: err.message };
        throw err;
      }
    }
    const settings = { ...DEFAULT_PROJECT_SETTINGS, ...row!.settings };
    const c = input.config;
    let composed;
    try {
      const resolved = resolveMessage(template, {
        from: c.from ? { email: c.from, name: c.fromName ?? template.fromName ?? undefined } : undefined,
        replyTo: c.replyTo,
        subject: c.subject,
      });
      const message = await prepareMessage({
        ...resolved,
        tracking: { opens: c.trackOpens ?? settings.trackOpens, clicks: c.trackClicks ?? settings.trackClicks },
        links: deps.links,
        returnPathHost: row!.returnPathHost,
      });
      composed = composeEmail(message, { contactId: input.contactId, email: contact.email, data: contact.data, context: input.context ?? undefined, emailId });
    } catch (err) {
      // A template that no longer renders (a Liquid error with this contact's data, a body over the size limit).
      if (err instanceof AppError) return { status: 'FAILED', error: err.message };
      throw err;
    }
    const suppressed = (await insertEmails(em, input.projectId, input.workflowId, [newEmailOf(composed, input.projectId)])).get(emailId);
    if (suppressed) return { emailId, status: 'SUPPRESSED', error: suppressedError(suppressed) };
    existing = { status: 'QUEUED', createdAt: new Date().toISOString(), error: null };
  }
  if (existing.status !== 'QUEUED' && existing.status !== 'SENDING') return { emailId, status: existing.status, ...(existing.error ? { error: existing.error } : {}) };
  const [outcome] = await deliverBatch(em, deps.transport, { emailIds: [emailId], attempt: 1, workflowId: input.workflowId }, { secretBox: deps.secretBox, appSecret: deps.links.appSecret, source: 'automation' });
  switch (outcome?.status) {
    case 'SENT':
      return { emailId, status: 'SENT' };
    case 'REJECTED':
      return { emailId, status: 'BOUNCED', error: outcome.response };
    case 'CANCELLED':
      return { emailId, status: 'CANCELLED', error: outcome.reason };
    case 'SUPPRESSED':
      return { emailId, status: 'SUPPRESSED', error: suppressedError(outcome.reason) };
    case 'RETRY':
      if (Date.now() - new Date(existing.createdAt).getTime() < SEND_RETRY_WINDOW_MS) throw new Error(outcome.error);
      await markEmailsFailed(em, [emailId], `Delivery gave up after a day: ${outcome.error}`, 'automation');
      return { emailId, status: 'FAILED', error: outcome.error };
    default: {
      // Claimed by nobody (final meanwhile, or deleted with its contact): say what it is now.
      const now = await sql(em).one<{ status: string }>('select status from emails where id = $1', [emailId]);
      return { emailId, status: now?.status ?? 'DELETED' };
    }
  }
}

/** A SEND_EMAIL step with the run's records around it (runs started since the records were folded into their steps). */
export interface SendWithRecordsInput extends SendStepInput {
  /** The record before the step (the step that ended, and this one RUNNING), unless the previous step wrote it. */
  before?: Pick<ProgressInput, 'finished' | 'next'>;
  /**
   * The record after the step, written once it is sent: this step as finished (it began at `startedAt`) and the next
   * step's state (a DELAY's wait) or the run's end.
   */
  after?: Pick<ProgressInput, 'next' | 'end'> & { startedAt: number };
}

export interface SendWithRecordsResult {
  outcome: StepOutcome;
  /** `after` was written: the run's row already shows this step finished and what comes next. */
  recorded: boolean;
  /** The contact was deleted: found by the record before the step (the step did not start) or after it. */
  gone: 'before' | 'after' | null;
}

/**
 * SEND_EMAIL with the run's progress records folded in: one local activity where there were three (the record
 * before, the send, the record after), which is most of what a run costs the worker and the Temporal server
 * (BENCHMARKS.md, issue 15). Each part is safe to repeat, so a retried activity writes the same rows and sends no
 * second email.
 */
export async function sendEmailWithRecords(
  steps: { progress(input: ProgressInput): Promise<ProgressResult>; send(input: SendStepInput): Promise<StepOutcome> },
  input: SendWithRecordsInput,
): Promise<SendWithRecordsResult> {
  const { before, after, ...send } = input;
  const ref: RunRef = { executionId: input.executionId, projectId: input.projectId, contactId: input.contactId };
  if (before && (await steps.progress({ ...ref, ...before })).contactGone) return { outcome: { contactGone: true }, recorded: false, gone: 'before' };
  const outcome = await steps.send(send);
  if (!after || outcome.contactGone) return { outcome, recorded: false, gone: null };
  const { startedAt, ...next } = after;
  const progress = await steps.progress({ ...ref, ...next, finished: { stepId: input.stepId, type: 'SEND_EMAIL', seq: input.seq, startedAt, outcome } });
  return { outcome, recorded: true, gone: progress.contactGone ? 'after' : null };
}

/** CONDITION: the filter evaluated against the contact and its events now. */
export async function conditionStep(em: EntityManager, input: RunRef & { filter: Record<string, unknown> }): Promise<StepOutcome & { matched: boolean }> {
  const f = compileFilter(asFilter(input.filter), { projectId: input.projectId, alias: 'c' });
  const row = await sql(em).one<{ found: boolean; matched: boolean }>(
    `select exists (select 1 from contacts c where c.id = $1 and c.project_id = $2) as found,
            exists (select 1 from contacts c where c.id = $3 and c.project_id = $4 and (${f.at(5)})) as matched`,
    [input.contactId, input.projectId, input.contactId, input.projectId, ...f.params],
  );
  if (!row!.found) return { contactGone: true, matched: false };
  return { matched: row!.matched, branch: row!.matched ? 'yes' : 'no' };
}

/** UPDATE_CONTACT: the contact data rules of PATCH /contacts/:id (merge; null deletes), and `subscribed`. */
export async function updateContactStep(em: EntityManager, input: RunRef & { config: StepConfigs['UPDATE_CONTACT'] }): Promise<StepOutcome> {
  try {
    const row = await updateContact(em, input.projectId, input.contactId, { data: input.config.data as ContactData | undefined, subscribed: input.config.subscribed });
    return { subscribed: row.subscribed, updatedKeys: Object.keys(input.config.data ?? {}) };
  } catch (err) {
    if (err instanceof AppError && err.statusCode === 404) return { contactGone: true };
    throw err;
  }
}

export interface WebhookStepInput extends RunRef {
  automationId: string;
  workflowId: string;
  stepId: string;
  seq: number;
  config: StepConfigs['WEBHOOK'];
}

/**
 * WEBHOOK: POSTs the documented payload, signed with the automation's secret (README › Workflows › WEBHOOK). A
 * refused address or a final answer (most 4xx, 3xx) fails at once (non-retryable `WebhookRefused`); timeouts,
 * network errors, 408/425/429 and 5xx throw so the activity is retried with backoff.
 */
export async function webhookStep(
  em: EntityManager,
  opts: { allowPrivateNetworks: boolean; allowedNetworks: readonly string[]; timeoutMs: number },
  input: WebhookStepInput,
): Promise<StepOutcome> {
  const row = await sql(em).one<{ secret: string; name: string; email: string | null; subscribed: boolean | null; data: ContactData | null; context: Record<string, unknown> | null }>(
    `select a.webhook_secret as secret, a.name, c.email, c.subscribed, c.data, x.context
     from automations a left join contacts c on c.id = $1 and c.project_id = a.project_id left join automation_executions x on x.id = $2
     where a.id = $3 and a.project_id = $4`,
    [input.contactId, input.executionId, input.automationId, input.projectId],
  );
  if (!row) throw ApplicationFailure.nonRetryable('The workflow no longer exists', 'WebhookRefused');
  if (row.email === null) return { contactGone: true };
  const id = `${input.workflowId}#${input.seq}`;
  const payload = {
    type: 'workflow.webhook',
    id,
    createdAt: new Date().toISOString(),
    workflow: { id: input.automationId, name: row.name },
    execution: { id: input.executionId, stepId: input.stepId },
    contact: { id: input.contactId, email: row.email, subscribed: row.subscribed, data: row.data ?? {} },
    context: row.context ?? {},
  };
  try {
    const r = await callWebhook({
      url: input.config.url,
      headers: input.config.headers,
      secret: row.secret,
      payload,
      idempotencyKey: id,
      allowPrivateNetworks: opts.allowPrivateNetworks,
      allowedNetworks: opts.allowedNetworks,
      timeoutMs: opts.timeoutMs,
    });
    return { ok: true, status: r.status, durationMs: r.durationMs, response: r.responseSnippet };
  } catch (err) {
    if (err instanceof WebhookError && !err.retryable) {
      throw ApplicationFailure.create({ message: err.message, type: 'WebhookRefused', nonRetryable: true, details: [{ status: err.status ?? null }] });
    }
    if (err instanceof WebhookError && err.retryAfterMs !== undefined) {
      throw ApplicationFailure.create({ message: err.message, type: 'WebhookRetry', nextRetryDelay: err.retryAfterMs });
    }
    throw err;
  }
}

