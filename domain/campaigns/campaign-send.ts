import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, transaction, statement, type Sql } from '../db/sql';
import type { Config } from '../config';
import { isDatabaseUnavailable } from '../db/unavailable';
import { SQL_UUIDV7, uuidv7 } from '../ids';
import { logger } from '../logger';
import { emailOutcomes, type EmailOutcomeStatus } from '../metrics';
import type { SmtpPipelinePool, SmtpSent } from '../mail/smtp-pipeline';
import { eventDataSql, insertEventsSql, sqlName } from '../events/event-writer';
import { AppError, validationError } from '../errors';
import { emailDomain } from '../contacts/email-address';
import { DEFAULT_PROJECT_SETTINGS, type ProjectSettings } from '../projects/project.entity';
import { assertSenderDomain } from '../domains/domain.service';
import type { SecretBox } from '../domains/secret-box';
import { dkimFor, isPermanentSmtpFailure, relayMessageIdSql, type SealedDkimKey, type SmtpError } from '../emails/delivery';
import { suppressedReasonSql, upsertSuppressionsSql } from '../suppressions/suppression.repository';
import { smtpRefusalSuppresses, suppressedError } from '../suppressions/suppression.service';
import type { SuppressionReason } from '../suppressions/suppression.entity';
import type { DkimSigningKey } from '../mail/dkim-sign';
import { resolveMessage, type MessageInput, type ResolvedMessage, type TemplateParts } from '../compose/composer';
import { compiledMjml, isMjml } from '../rendering/render';
import type { RenderPool } from './render-pool';
import type { RenderedMessage } from './render-task';
import { audienceWhere, countAudience } from './audience';
import type { BillingGuard } from '../billing/billing.service';
import { isSuspended } from '../reputation/suspension';
import { CAMPAIGN_SELECT, type CampaignRow, type CampaignStatus } from './campaign.entity';
import { shareProblem, testShareSize, withPreheader, type AbTest, type AbVariant } from './ab-test';

/**
 * The send engine of a campaign, as the `campaign-send/<id>` workflow's activities call it.
 *
 * - `beginCampaignSend` (once the scheduled time is reached): fixes what is sent (`send_content`) and snapshots the
 *   audience as one QUEUED `emails` row per contact (no body), in one transaction. Idempotent: a retry finds the
 *   snapshot taken.
 * - `sendCampaignPartition` walks one share of the snapshot in contact order, a chunk at a time: it reads the chunk
 *   with each contact's current subscription, renders each message in the render threads (which read the contacts'
 *   current data themselves; the per-template work was done once by `prepareMessage`), sends it over the pipelined SMTP connections (smtp-pipeline.ts) and records the outcomes within milliseconds of each
 *   SMTP reply. A row leaves QUEUED only when its outcome is recorded, and only one activity walks a share at a time,
 *   so a retried activity (a killed worker) sends again exactly the rows whose outcome was not recorded: the
 *   messages in flight at the crash, and those answered in the last few milliseconds. They carry the same
 *   Message-ID (from the row id), so receivers can de-duplicate them.
 * - `finishCampaignSend` settles the rows left over and the campaign's final status.
 */

/** What the campaign sends, fixed when sending starts (`campaigns.send_content`). */
interface SendContent {
  subject: string;
  body: string;
  templateId: string | null;
  fromEmail: string;
  fromName: string | null;
  replyTo: string | null;
  trackOpens: boolean;
  trackClicks: boolean;
  /** An A/B-tested campaign: each variant's content, fixed with the rest (the test shares and the remainder use them). */
  variants?: Omit<SendContent, 'variants'>[];
}

/** What the run needs to know of an A/B test (absent for a campaign without variants). */
export interface BegunAbTest {
  variants: number;
  testDurationSeconds: number;
  afterTest: AbTest['afterTest'];
}

export type BeginResult =
  | { state: 'started'; audience: number; ab?: BegunAbTest }
  /** Not yet: the (moved) time to wait for. */
  | { state: 'wait'; scheduledAt: string }
  /** Nothing to send: the campaign is cancelled, failed or already finished. */
  | { state: 'ended'; status: CampaignStatus };

/**
 * Starts sending once the time has come: SCHEDULED (time reached) becomes SENDING, and the content and audience are
 * fixed. A campaign that can no longer be sent (its template deleted, its sender domain no longer verified) becomes
 * FAILED with the reason.
 */
export async function beginCampaignSend(em: EntityManager, campaignId: string, now = new Date(), billing?: BillingGuard): Promise<BeginResult> {
  const failure = await transaction(em, async (tx): Promise<BeginResult | { fail: string }> => {
    const c = await tx.one<CampaignRow>(`select ${CAMPAIGN_SELECT} from campaigns where id = $1 for update`, [campaignId]);
    if (!c) return { state: 'ended', status: 'CANCELLED' }; // deleted: there is nothing to send
    if (c.status === 'SCHEDULED') {
      const at = c.scheduledAt;
      if (at && at.getTime() > now.getTime()) return { state: 'wait', scheduledAt: at.toISOString() };
      // Due while the project is suspended (domain/reputation): the snapshot is taken, but the campaign waits PAUSED
      // until an owner lifts the suspension and resumes it.
      if (await isSuspended(tx, c.projectId)) {
        await tx.run(`update campaigns set status = 'PAUSED', status_reason = $2, updated_at = now() where id = $1`, [campaignId, 'Paused: the project is suspended (sending reputation)']);
        c.status = 'PAUSED';
      }
    } else if (c.status !== 'SENDING' && c.status !== 'PAUSED') {
      return { state: 'ended', status: c.status };
    }
    if (c.sendContent) return { state: 'started', audience: c.audienceSize ?? 0, ...begunAb(c) };
    let content: SendContent;
    try {
      content = await resolveSendContent(em, c);
      // A scheduled campaign's audience against the emails cap as it is now (checked when it was scheduled, too).
      if (c.status === 'SCHEDULED') await billing?.assertEmails(em, c.projectId, () => countAudience(em, c));
    } catch (err) {
      if (err instanceof AppError) return { fail: err.message };
      throw err;
    }
    const where = await audienceWhere(em, c);
    // Parameters $1-$6, then the audience's own.
    const inserted = await tx.one<{ n: number }>(
      `with ins as (
         insert into emails (id, project_id, contact_id, campaign_id, kind, to_email, from_email, from_name, reply_to, subject, html, status, template_id, created_at, updated_at)
         select ${SQL_UUIDV7}, c.project_id, c.id, $1::uuid, 'MARKETING', c.email, $2, $3, $4, $5, '', 'QUEUED', $6::uuid, now(), now()
         from contacts c where ${where.at(7)}
         on conflict (campaign_id, contact_id) where campaign_id is not null do nothing
         returning 1
       ) select count(*)::int as n from ins`,
      [campaignId, content.fromEmail, content.fromName, content.replyTo, content.subject.slice(0, 998), content.templateId, ...where.params],
    );
    const audience = inserted!.n;
    if (c.abTest) {
      const problem = await splitAudience(tx, campaignId, c.abTest as unknown as AbTest);
      // Thrown, so the snapshot rolls back with it: the campaign ends FAILED with no recipient rows.
      if (problem) throw new SplitRefused(problem);
    }
    await tx.run(
      `update campaigns set status = case when status = 'SCHEDULED' then 'SENDING' else status end, send_content = $2, audience_size = $3,
         started_at = now(), updated_at = now() where id = $1`,
      [campaignId, JSON.stringify(content), audience],
    );
    await tx.run(
      `insert into campaign_stats (campaign_id, audience) values ($1, $2)
       on conflict (campaign_id) do update set audience = excluded.audience, updated_at = now()`,
      [campaignId, audience],
    );
    return { state: 'started', audience, ...begunAb(c) };
  }).catch((err: unknown) => {
    if (err instanceof SplitRefused) return { fail: err.message };
    throw err;
  });
  if (!('fail' in failure)) return failure;
  await settleCampaign(em, campaignId, { outcome: 'failed', reason: failure.fail });
  return { state: 'ended', status: 'FAILED' };
}

const CAMPAIGN_TEMPLATE = statement('campaign_template', `select id, type, subject, body, from_email as "from", from_name as "fromName", reply_to as "replyTo" from templates where id = $1 and project_id = $2`);

/**
 * The message a campaign sends: its template (if any) under its own subject, body and sender, with the sender domain
 * checked (403 when it is no longer verified). Shared by the send and the test send.
 */
export async function resolveCampaignMessage(em: EntityManager, c: CampaignRow): Promise<ResolvedMessage> {
  let template: TemplateParts | undefined;
  if (c.templateId) {
    const [t] = await sql(em).query<TemplateParts>(
      CAMPAIGN_TEMPLATE,
      [c.templateId, c.projectId],
    );
    if (!t) throw validationError([{ field: 'templateId', message: "The campaign's template no longer exists", code: 'not_found' }]);
    template = t;
  }
  const resolved = resolveMessage(template, {
    from: { email: c.fromEmail, name: c.fromName ?? undefined },
    replyTo: c.replyTo ?? undefined,
    subject: c.subject ?? undefined,
    body: c.body ?? undefined,
  });
  await assertSenderDomain(em, c.projectId, resolved.from.email);
  return resolved;
}

/** The audience snapshot is too small for the A/B test's shares. */
class SplitRefused extends Error {}

function begunAb(c: CampaignRow): { ab?: BegunAbTest } {
  if (!c.abTest) return {};
  const t = c.abTest as unknown as AbTest;
  return { ab: { variants: t.variants.length, testDurationSeconds: t.testDurationSeconds, afterTest: t.afterTest } };
}

/**
 * The reproducible random split of an A/B test: the snapshot's sendable rows (not suppressed) in the order of
 * md5(campaign id, contact id), the first `each * variants` of them dealt to the variants in turn. Runs in the
 * snapshot's transaction, so a retry finds it done. The rest (variant null) waits for the winner. The error when the
 * audience is too small for the shares.
 */
async function splitAudience(tx: Sql, campaignId: string, test: AbTest): Promise<string | null> {
  const sendable = `e.campaign_id = $1 and ${suppressedReasonSql('e.project_id', 'e.to_email')} is null`;
  const counted = await tx.one<{ n: number }>(`select count(*)::int as n from emails e where ${sendable}`, [campaignId]);
  const problem = shareProblem(test, counted!.n);
  if (problem) return problem.message;
  await tx.run(
    `with ranked as (
       select e.id, row_number() over (order by md5($1::text || e.contact_id::text), e.contact_id) - 1 as rn from emails e where ${sendable}
     )
     update emails e set variant = (r.rn % $2)::smallint from ranked r where e.id = r.id and r.rn < $3`,
    [campaignId, test.variants.length, testShareSize(test, counted!.n) * test.variants.length],
  );
  return null;
}

/** What the send fixes: the resolved message, tracking settled against the project's settings; each variant's too. */
async function resolveSendContent(em: EntityManager, c: CampaignRow): Promise<SendContent> {
  const content = await resolveOneContent(em, c);
  if (!c.abTest) return content;
  // A variant's fields replace the campaign's; the result follows the campaign's rules (explicit subject and body
  // override a template's).
  const variants = [];
  for (const v of (c.abTest as unknown as AbTest).variants) {
    const one = await resolveOneContent(em, variantCampaign(c, v));
    variants.push({ ...one, body: withPreheader(one.body, v.preheader) });
  }
  return { ...content, variants };
}

/** The campaign as one variant of its A/B test sends it: the variant's fields in place of the campaign's. */
export function variantCampaign(c: CampaignRow, v: AbVariant): CampaignRow {
  return { ...c, subject: v.subject ?? c.subject, body: v.body ?? c.body, templateId: v.templateId ?? c.templateId, fromName: v.fromName ?? c.fromName };
}

async function resolveOneContent(em: EntityManager, c: CampaignRow): Promise<SendContent> {
  const resolved = await resolveCampaignMessage(em, c);
  const settings = await projectSettings(em, c.projectId);
  return {
    subject: resolved.content.subject,
    body: resolved.content.body,
    templateId: resolved.templateId,
    fromEmail: resolved.from.email,
    fromName: resolved.from.name ?? null,
    replyTo: resolved.replyTo,
    trackOpens: c.trackOpens ?? settings.trackOpens,
    trackClicks: c.trackClicks ?? settings.trackClicks,
  };
}

const CAMPAIGN_PROJECT_SETTINGS = statement('campaign_project_settings', 'select settings from projects where id = $1');

async function projectSettings(em: EntityManager, projectId: string): Promise<ProjectSettings> {
  const [row] = await sql(em).query<{ settings: Partial<ProjectSettings> }>(CAMPAIGN_PROJECT_SETTINGS, [projectId]);
  return { ...DEFAULT_PROJECT_SETTINGS, ...row?.settings };
}

export interface PartitionInput {
  campaignId: string;
  /** This share of the recipients (0-based), of `partitions`. */
  partition: number;
  partitions: number;
  /** Contact id after which to continue (null: from the start). */
  cursor: string | null;
  /**
   * An A/B-tested campaign: the variant whose content is sent. With `remainder` the rows are those of no test share
   * (the winner's send); without, that variant's test share. Absent: every row, the campaign's content.
   */
  variant?: number;
  remainder?: boolean;
}

export interface PartitionResult {
  /** The share has no QUEUED row after `cursor` left (transient failures aside, see `retry`). */
  done: boolean;
  cursor: string | null;
  /** Set when the campaign was no longer SENDING (PAUSED, CANCELLED, ...): the activity stopped at a chunk boundary. */
  stopped: CampaignStatus | null;
  sent: number;
  skipped: number;
  /** Not sent because the address was put on the suppression list after the snapshot (SUPPRESSED). */
  suppressed?: number;
  rejected: number;
  /** Not sent because the message could not be made for the recipient (FAILED). */
  invalid: number;
  /** Transient failures (4xx, connection): left QUEUED for the next pass. */
  retry: number;
}

export interface SendEngineDeps {
  em: EntityManager;
  /** The worker's pipelined SMTP connections (campaign mail only: the rest goes through nodemailer's transport). */
  smtp: SmtpPipelinePool;
  config: Config;
  secretBox: SecretBox;
  /** Where messages are rendered (worker threads, or inline). */
  renderPool: RenderPool;
}

export interface PartitionHooks {
  /** Records progress (the activity heartbeat); cancellation shows in `cancelled()` afterwards. */
  heartbeat(cursor: string | null): void;
  cancelled(): boolean;
  /** How long the call may run before it returns to the workflow (a round). */
  budgetMs: number;
}

interface RecipientRow {
  id: string;
  contactId: string;
  email: string | null;
  subscribed: boolean | null;
  /** Why the address is on the suppression list now, if it is. */
  suppressed: SuppressionReason | null;
}

/** A row's outcome waiting to be recorded. */
type Outcome =
  | { kind: 'sent'; id: string; subject: string; messageId: string; response: string }
  /** `suppressed`: the refusal was about the address, which goes on the suppression list (hard_bounce). */
  | { kind: 'rejected'; id: string; response: string; suppressed: boolean }
  | { kind: 'retry'; id: string; error: string }
  | { kind: 'skipped'; id: string; reason: string }
  /** The address was put on the suppression list after the snapshot: SUPPRESSED, never sent. */
  | { kind: 'suppressed'; id: string; reason: string }
  /** The message could not be made for this recipient (their data makes it invalid): FAILED, never sent. */
  | { kind: 'invalid'; id: string; reason: string };

/** Outcomes wait at most this long (or for FLUSH_COUNT of them) before they are recorded: the re-send window of a crash. */
const FLUSH_MS = 25;
const FLUSH_COUNT = 200;

/** Sends in flight per SMTP connection of the pool (see maxInFlight in sendCampaignPartition). */
export const SENDS_PER_CONNECTION = 4;

/** Recipients rendered per task of the render pool: large enough to amortize the hand-over, small enough to overlap. */
const RENDER_BATCH = 50;
/** Render batches dispatched ahead of the one being sent. */
const RENDER_AHEAD = 4;

/**
 * `e.status = 'QUEUED'` as the per-row statements test it, out of the status index's reach. Right after a snapshot
 * the table's statistics still say that almost no row is QUEUED (autoanalyze runs a minute or more later), so the
 * planner read every QUEUED row of the table through `emails_status_index` and hash-joined a batch of ids against
 * them: about 50 ms a batch by 60,000 rows, growing with the campaign, and most of Postgres' CPU in a 100,000 send
 * (BENCHMARKS.md › Issue 28, third stop). The rows are found by their keys (the primary key, or the campaign and
 * contact index) and this tests each.
 */
const STILL_QUEUED = `(e.status || '') = 'QUEUED'`;

const CAMPAIGN_CHUNK = statement(
  'campaign_chunk',
  `select e.id, e.contact_id as "contactId", c.email, c.subscribed, ${suppressedReasonSql('e.project_id', 'c.email')} as suppressed
  from emails e left join contacts c on c.id = e.contact_id
  where e.campaign_id = $1 and e.contact_id > $2::uuid and ${STILL_QUEUED} and get_byte(uuid_send(e.contact_id), 15) % $3 = $4
    and coalesce(e.variant, -1) = $6
  order by e.contact_id limit $5`,
);

/** Sends one share of a campaign's snapshot, from `cursor`, until it is done, the campaign stops, or the budget is spent. */
export async function sendCampaignPartition(deps: SendEngineDeps, input: PartitionInput, hooks: PartitionHooks): Promise<PartitionResult> {
  const { em } = deps;
  const result: PartitionResult = { done: false, cursor: input.cursor, stopped: null, sent: 0, skipped: 0, rejected: 0, invalid: 0, retry: 0 };
  const head = await campaignHead(em, input.campaignId);
  if (head?.status !== 'SENDING' || !head.sendContent) {
    result.stopped = head?.status ?? 'CANCELLED';
    return result;
  }
  const stored = head.sendContent as unknown as SendContent;
  const content = input.variant === undefined ? stored : stored.variants![input.variant]!;
  const rowsOf = input.variant === undefined || input.remainder ? -1 : input.variant;
  const sender = await senderDomain(deps, head.projectId, content.fromEmail);
  const spec = { ...renderSpec(deps.config, head, content), returnPathHost: sender.returnPathHost };
  const { dkim } = sender;
  // An MJML body is compiled here, once per worker (cached; in the worker's MJML thread), and its HTML handed to the
  // render threads with each batch: otherwise every thread loads MJML and compiles it cold (render.ts `compiledMjml`,
  // mjml-thread.ts). A body that fails to compile is left to the threads, which report it as they always did.
  const mjmlHtml = isMjml(content.body) ? await compiledMjml(content.body).catch(() => undefined) : undefined;
  // Non-ASCII parts go as UTF-8 octets when the relay takes them (8BITMIME), not quoted-printable. A relay that cannot
  // be reached now fails this round's sends as transient, as before.
  const eightBit = await deps.smtp.capabilities().then(
    (caps) => caps.has('8BITMIME'),
    () => false,
  );
  const rate = (head.settings.campaignSendRate ?? deps.config.campaigns.sendRate) / input.partitions;
  const throttle = rate > 0 ? new Throttle(rate) : null;
  // A throttled share reads about a second's worth per chunk, so a pause or cancel still takes effect within a second.
  const chunkSize = throttle ? Math.max(1, Math.min(deps.config.campaigns.chunkSize, Math.ceil(rate))) : deps.config.campaigns.chunkSize;
  const recorder = new OutcomeRecorder(em, input.campaignId);
  // Four sends a connection: one whose content awaits its reply, one whose envelope awaits DATA's 354, and the next
  // ones queued, so a connection writes a message's content together with the next envelope (smtp-pipeline.ts). With
  // two, the next send was usually not there yet when 354 came: two writes a message instead of one (BENCHMARKS.md ›
  // Issue 28, fifth stop). It is also what a crash can send twice (test/faults/campaign-kill.test.ts).
  const maxInFlight = Math.max(2, deps.config.smtp.poolSize * SENDS_PER_CONNECTION);
  const deadline = Date.now() + hooks.budgetMs;
  // The planner estimates the chunk's filters (the share's byte of the contact id, the variant, the status: each an
  // expression it cannot measure) at a few rows in all, and then reads every remaining row of the campaign by bitmap
  // or sequentially, joins each to its contact and sorts: 670-800 ms a chunk at 60,000 recipients, growing with the
  // campaign, and most of Postgres' CPU in a large send (BENCHMARKS.md › Issue 28, third stop). The campaign's
  // (campaign_id, contact_id) index read in order stops after `chunkSize` rows; these settings, for this statement's
  // transaction only, leave the planner that plan.
  const readChunk = (after: string | null) =>
    transaction(em, async (tx) => {
      await tx.run(`select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)`);
      return tx.query<RecipientRow>(
        CAMPAIGN_CHUNK,
        [input.campaignId, after ?? '00000000-0000-0000-0000-000000000000', input.partitions, input.partition, chunkSize, rowsOf],
      );
    });
  let next = readChunk(result.cursor);
  // A chunk can take longer than the heartbeat timeout behind a slow relay: beat on a timer too (with the cursor of
  // the last finished chunk), so a live activity is never taken for dead and run twice.
  const beat = setInterval(() => hooks.heartbeat(result.cursor), 5_000);
  try {
    for (;;) {
      const rows = await next;
      if (rows.length === 0) {
        result.done = true;
        break;
      }
      // The next chunk is read while this one renders and sends (rows are only read: a chunk left unsent is simply
      // read again by whoever continues).
      next = readChunk(rows[rows.length - 1]!.contactId);
      next.catch(() => undefined);
      const sendable: RecipientRow[] = [];
      for (const row of rows) {
        // The snapshot's suppressed addresses were ended right after it; this catches those suppressed since.
        if (row.suppressed) recorder.add({ kind: 'suppressed', id: row.id, reason: suppressedError(row.suppressed) });
        else if (row.subscribed === true) sendable.push(row);
        else recorder.add({ kind: 'skipped', id: row.id, reason: row.subscribed === false ? 'Unsubscribed after the audience snapshot' : 'The contact was deleted' });
      }
      // Batches are rendered at most RENDER_AHEAD ahead of the one being sent: enough to keep the threads busy, and
      // only that many rendered messages are held in memory.
      const render = (i: number) => {
        const recipients = sendable.slice(i, i + RENDER_BATCH).map((r) => ({ id: r.id, contactId: r.contactId, email: r.email! }));
        // The key names the return path too: a render thread keeps the prepared message per key across rounds.
        const pending = deps.renderPool.render({ key: `${input.campaignId}/${input.variant ?? ''}/${spec.returnPathHost ?? ''}`, spec, mjmlHtml, dkim, eightBit, recipients });
        pending.catch(() => undefined);
        return pending;
      };
      const ahead: Promise<RenderedMessage[]>[] = [];
      let nextBatch = 0;
      const fill = () => {
        for (; ahead.length < RENDER_AHEAD && nextBatch < sendable.length; nextBatch += RENDER_BATCH) ahead.push(render(nextBatch));
      };
      fill();
      const inFlight = new InFlight();
      while (ahead.length) {
        const batch = ahead.shift()!;
        fill();
        for (const message of await batch) {
          if ('invalid' in message) {
            recorder.add({ kind: 'invalid', id: message.id, reason: message.invalid });
            continue;
          }
          if ('retry' in message) {
            recorder.add({ kind: 'retry', id: message.id, error: message.retry });
            continue;
          }
          if (throttle) await throttle.take();
          const room = inFlight.below(maxInFlight);
          if (room) await room;
          deliver(deps.smtp, message, inFlight, recorder);
        }
      }
      const drained = inFlight.below(1);
      if (drained) await drained;
      await recorder.flush();
      result.cursor = rows[rows.length - 1]!.contactId;
      hooks.heartbeat(result.cursor);
      if (hooks.cancelled()) break;
      const status = (await campaignHead(em, input.campaignId))?.status ?? 'CANCELLED';
      if (status !== 'SENDING') {
        result.stopped = status;
        break;
      }
      if (Date.now() >= deadline) break;
    }
  } finally {
    clearInterval(beat);
    await recorder.close();
    Object.assign(result, recorder.counts);
  }
  return result;
}

interface CampaignHead {
  status: CampaignStatus;
  projectId: string;
  name: string;
  sendContent: Record<string, unknown> | null;
  settings: Partial<ProjectSettings>;
}

const CAMPAIGN_HEAD = statement(
  'campaign_head',
  `select c.status, c.project_id as "projectId", c.name, c.send_content as "sendContent", p.settings
  from campaigns c join projects p on p.id = c.project_id where c.id = $1`,
);

/** The campaign's send rate (messages a second, the project's setting or CAMPAIGN_SEND_RATE); 0: unthrottled. */
export async function campaignSendRate(em: EntityManager, campaignId: string, config: Config): Promise<number> {
  const head = await campaignHead(em, campaignId);
  return head?.settings.campaignSendRate ?? config.campaigns.sendRate;
}

async function campaignHead(em: EntityManager, campaignId: string): Promise<CampaignHead | undefined> {
  const [row] = await sql(em).query<CampaignHead>(
    CAMPAIGN_HEAD,
    [campaignId],
  );
  return row;
}

/**
 * The recipient-independent part of every message of the campaign, and the headers of marketing mail: one-click
 * List-Unsubscribe (the composer adds it to MARKETING mail), `Precedence: bulk`, and a `List-Id` naming the campaign.
 */
function renderSpec(cfg: Config, head: CampaignHead, content: SendContent): MessageInput {
  return {
    content: { subject: content.subject, body: content.body },
    kind: 'MARKETING',
    templateId: content.templateId,
    from: { email: content.fromEmail, name: content.fromName ?? undefined },
    replyTo: content.replyTo,
    headers: { Precedence: 'bulk', 'List-Id': listId(head.name, head.projectId, emailDomain(content.fromEmail)) },
    tracking: { opens: content.trackOpens, clicks: content.trackClicks },
    links: { publicUrl: cfg.publicUrl, appSecret: cfg.appSecret, unsubscribeMailto: cfg.unsubscribeMailto },
  };
}

const CAMPAIGN_SENDER_DOMAIN = statement(
  'campaign_sender_domain',
  `select id as "dkimDomainId", name as "dkimDomain", dkim_selector as "dkimSelector", dkim_private_key as "dkimPrivateKey",
    return_path_host as "returnPathHost"
  from domains where project_id = $1 and name = $2 and status = 'VERIFIED' and dkim_private_key is not null`,
);

/**
 * The sender domain as each round of a send reads it: its DKIM key (the render threads sign each message with it), if
 * it has one, and its return path's bounce host when ACTIVE (each message's envelope sender and List-Unsubscribe
 * mailto: are made on it). A domain without a key has no records to check, so no return path either.
 */
async function senderDomain(deps: SendEngineDeps, projectId: string, fromEmail: string): Promise<{ dkim: DkimSigningKey | undefined; returnPathHost: string | null }> {
  const [row] = await sql(deps.em).query<SealedDkimKey & { returnPathHost: string | null }>(
    CAMPAIGN_SENDER_DOMAIN,
    [projectId, emailDomain(fromEmail)],
  );
  return row ? { dkim: dkimFor(row, deps.secretBox), returnPathHost: row.returnPathHost } : { dkim: undefined, returnPathHost: null };
}

/** RFC 2919: a phrase and a dot-atom id under a domain the sender controls; the project's id keeps lists apart. */
function listId(name: string, projectId: string, domain: string): string {
  const phrase = name.replace(/["\\\r\n]/g, '').slice(0, 100);
  return `"${phrase}" <${projectId}.campaigns.${domain}>`;
}

/** One SMTP transaction over the pipelined connections (the message was signed where it was rendered); its outcome, never a throw. */
/**
 * Sends one rendered message and records its outcome when the relay has answered (a callback, not a promise: see
 * SmtpPipelinePool#sendWith). A recorder that throws fails the chunk's next wait.
 */
function deliver(smtp: SmtpPipelinePool, m: Extract<RenderedMessage, { wire: Buffer }>, inFlight: InFlight, recorder: { add(o: Outcome): void }): void {
  inFlight.begin();
  smtp.sendWith({ from: m.envelope.from, to: m.envelope.to, eightBit: m.eightBit, data: m.wire }, (err, sent) => {
    try {
      recorder.add(outcomeOf(m, err, sent));
    } catch (thrown) {
      inFlight.fail(thrown);
    }
    inFlight.settle();
  });
}

/** What a send's end means for its email: sent, refused for good (a bounce), or to be tried again in a later pass. */
function outcomeOf(m: Extract<RenderedMessage, { wire: Buffer }>, err: SmtpError | null, sent: SmtpSent | null): Outcome {
  if (!err) return { kind: 'sent', id: m.id, subject: m.subject, messageId: m.messageId, response: sent!.response };
  const detail = err.response ?? err.message;
  if (isPermanentSmtpFailure(err)) return { kind: 'rejected', id: m.id, response: detail, suppressed: smtpRefusalSuppresses(err) };
  return { kind: 'retry', id: m.id, error: detail };
}

/**
 * The sends of a chunk that are on the wire: a count and one waiter, where a set of promises raced for a free place
 * attached a reaction to every send in flight for each message (and each promise pays Node's promise hooks, which
 * Temporal's AsyncLocalStorage turns on). A handler that throws fails the wait, as a rejected send did before.
 */
class InFlight {
  private count = 0;
  private waiter: { limit: number; resolve: () => void; reject: (err: unknown) => void } | null = null;
  private failure: { err: unknown } | null = null;

  /** A send is on the wire. */
  begin(): void {
    this.count++;
  }

  /** What its outcome's handler threw: the next wait rejects with it. */
  fail(err: unknown): void {
    this.failure ??= { err };
  }

  /** Resolves once fewer than `limit` are in flight (at once if so); rejects with a handler's error. */
  below(limit: number): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure.err);
    if (this.count < limit) return undefined;
    return new Promise<void>((resolve, reject) => (this.waiter = { limit, resolve, reject }));
  }

  /** A send has ended (after its outcome was handled). */
  settle(): void {
    this.count--;
    const w = this.waiter;
    if (!w) return;
    if (this.failure) {
      this.waiter = null;
      w.reject(this.failure.err);
    } else if (this.count < w.limit) {
      this.waiter = null;
      w.resolve();
    }
  }
}

/** The status an outcome leaves its email in, as /metrics counts it. */
const CAMPAIGN_OUTCOME_STATUS: Record<Outcome['kind'], EmailOutcomeStatus> = { sent: 'sent', rejected: 'bounced', retry: 'retry', skipped: 'cancelled', suppressed: 'suppressed', invalid: 'failed' };

/** How long a batch of outcomes is retried while the database is away before the activity gives up (and resends). */
const RECORD_RETRY_MS = 60_000;

const CAMPAIGN_RECORD_RETRY = statement(
  'campaign_record_retry',
  `update emails e set error = v.err, attempts = e.attempts + 1, updated_at = now()
  from unnest($1::uuid[], $2::text[]) as v(id, err) where e.id = v.id and ${STILL_QUEUED}`,
);

// A refusal about the address (`suppress`) puts it on the suppression list in the statement that records the bounce.
const CAMPAIGN_RECORD_REJECTED = statement('campaign_record_rejected', `with v as (select * from unnest($1::uuid[], $2::text[], $3::uuid[], $5::bool[]) as v(id, resp, event_id, suppress)),
         upd as (
           update emails e set status = 'BOUNCED', smtp_response = v.resp, error = 'Rejected by the SMTP server', attempts = e.attempts + 1, updated_at = now()
           from v where e.id = v.id and ${STILL_QUEUED}
           returning e.id, e.project_id, e.contact_id, e.to_email, v.resp, v.event_id, v.suppress
         ),
         suppressed as (
           ${upsertSuppressionsSql(`select project_id, to_email as email, 'hard_bounce'::text as reason, 'smtp'::text as source, resp as detail, id as email_id from upd where suppress`)}
         ),
         ev as (
           ${insertEventsSql(
             {
               id: 'event_id',
               projectId: 'project_id',
               contactId: 'contact_id',
               name: sqlName('email.bounced'),
               data: eventDataSql('email.bounced', { source: `'smtp'`, bounceType: `'Permanent'`, response: 'resp', campaignId: '$4::uuid' }),
               source: 'SYSTEM',
               emailId: 'id',
             },
             'from upd where contact_id is not null',
           )}
         ),
         n as (select count(*)::int as n from upd),
         -- Handed to the relay, like every sent message: bounced / sent stays a rate of what was sent.
         st as (update campaign_stats set sent = sent + n.n, updated_at = now() from n where campaign_id = $4::uuid and n.n > 0)
         select n from n`);

const CAMPAIGN_RECORD_SENT = statement(
  'campaign_record_sent',
  `with v as (select * from unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) as v(id, subject, mid, resp)),
  upd as (
    update emails e set status = 'SENT', subject = v.subject, message_id = v.mid, smtp_response = v.resp,
      provider_message_id = ${relayMessageIdSql('v.resp')}, error = null, attempts = e.attempts + 1, sent_at = now(), updated_at = now()
    from v where e.id = v.id and ${STILL_QUEUED}
    returning 1
  ),
  n as (select count(*)::int as n from upd),
  st as (update campaign_stats set sent = sent + n.n, updated_at = now() from n where campaign_id = $5 and n.n > 0),
  -- Campaign messages record no email.sent event each: the batch's sends go to the analytics rollup as one tally
  -- (the outbox's count-carrying entry, taken by the analytics consumer).
  tally as (
    insert into event_tallies (project_id, rollup, key, hour, count)
    select c.project_id, 'analytics_hourly', 'sent', date_trunc('hour', now(), 'UTC'), n.n from n, campaigns c where c.id = $5 and n.n > 0
  )
  select n from n`,
);

/** Rows that end without an SMTP transaction, by kind: the row's end state and the counter it goes to. */
const endUnsentSql = (status: 'CANCELLED' | 'FAILED' | 'SUPPRESSED', counter: 'skipped' | 'failed' | 'suppressed') => `
with v as (select * from unnest($1::uuid[], $2::text[]) as v(id, reason)),
upd as (update emails e set status = '${status}', error = v.reason, updated_at = now() from v where e.id = v.id and ${STILL_QUEUED} returning 1),
n as (select count(*)::int as n from upd),
st as (update campaign_stats set ${counter} = ${counter} + n.n, updated_at = now() from n where campaign_id = $3 and n.n > 0)
select n from n`;
const END_UNSENT = {
  skipped: statement('campaign_record_skipped', endUnsentSql('CANCELLED', 'skipped')),
  invalid: statement('campaign_record_invalid', endUnsentSql('FAILED', 'failed')),
  suppressed: statement('campaign_record_suppressed', endUnsentSql('SUPPRESSED', 'suppressed')),
};

/** Counts a batch of outcomes in /metrics (`mailwright_email_outcomes_total`), a counter step per kind. */
function countOutcomes(batch: readonly Outcome[]): void {
  const byKind = new Map<Outcome['kind'], number>();
  for (const o of batch) byKind.set(o.kind, (byKind.get(o.kind) ?? 0) + 1);
  for (const [kind, n] of byKind) emailOutcomes.inc({ source: 'campaign', status: CAMPAIGN_OUTCOME_STATUS[kind] }, n);
}

/**
 * Records outcomes in batches: at most FLUSH_MS after an SMTP reply (or FLUSH_COUNT replies), one statement per
 * kind, each guarded by `status = 'QUEUED'` so a row is counted once however often it is recorded. The counters of
 * `campaign_stats` move in the same statement as the rows.
 */
class OutcomeRecorder {
  private pending: Outcome[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private failure: unknown = null;
  readonly counts = { sent: 0, skipped: 0, suppressed: 0, rejected: 0, invalid: 0, retry: 0 };

  constructor(
    private readonly em: EntityManager,
    private readonly campaignId: string,
  ) {}

  add(o: Outcome): void {
    this.pending.push(o);
    if (this.pending.length >= FLUSH_COUNT) void this.flush().catch(() => undefined);
    else this.timer ??= setTimeout(() => void this.flush().catch(() => undefined), FLUSH_MS);
  }

  /** Records everything added so far; throws if a recording failed (the activity then fails and is retried). */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending;
    this.pending = [];
    countOutcomes(batch);
    this.flushing = this.flushing.then(async () => {
      if (this.failure) throw this.failure;
      if (batch.length === 0) return;
      try {
        await this.recordRetrying(batch);
      } catch (err) {
        this.failure = err;
        throw err;
      }
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    await this.flush().catch((err: unknown) => logger.error({ err, campaignId: this.campaignId }, 'could not record campaign outcomes'));
  }

  /**
   * Rows that end without an SMTP transaction: skipped (CANCELLED, counted in `skipped`), suppressed (SUPPRESSED,
   * counted in `suppressed`) or invalid (FAILED, counted in `failed`). Returns how many rows it ended.
   */
  private async endUnsent(kind: 'skipped' | 'invalid' | 'suppressed', rows: { id: string; reason: string }[]): Promise<number> {
    const [r] = await sql(this.em).query<{ n: number }>(END_UNSENT[kind], [rows.map((o) => o.id), rows.map((o) => o.reason), this.campaignId]);
    return r!.n;
  }

  /**
   * Records a batch, retrying while the database is away (a restart) for up to RECORD_RETRY_MS: these messages were
   * sent, and an outcome given up would send them again on the retry of the activity. Safe to repeat: every statement
   * is guarded by `status = 'QUEUED'`. The timer keeps heartbeating meanwhile, so the activity is not taken for dead.
   */
  private async recordRetrying(batch: Outcome[]): Promise<void> {
    const deadline = Date.now() + RECORD_RETRY_MS;
    for (let delay = 250; ; delay = Math.min(delay * 2, 2_000)) {
      try {
        return await this.record(batch);
      } catch (err) {
        if (!isDatabaseUnavailable(err) || Date.now() + delay > deadline) throw err;
        logger.warn({ err, campaignId: this.campaignId, outcomes: batch.length }, 'campaign outcomes not recorded yet: the database is away; retrying');
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  private async record(batch: Outcome[]): Promise<void> {
    const sent = batch.filter((o) => o.kind === 'sent');
    const rejected = batch.filter((o) => o.kind === 'rejected');
    const retry = batch.filter((o) => o.kind === 'retry');
    const skipped = batch.filter((o) => o.kind === 'skipped');
    const suppressed = batch.filter((o) => o.kind === 'suppressed');
    const invalid = batch.filter((o) => o.kind === 'invalid');
    if (sent.length) {
      const [r] = await sql(this.em).query<{ n: number }>(
        CAMPAIGN_RECORD_SENT,
        [sent.map((o) => o.id), sent.map((o) => o.subject), sent.map((o) => o.messageId), sent.map((o) => o.response), this.campaignId],
      );
      this.counts.sent += r!.n;
    }
    if (rejected.length) {
      const [r] = await sql(this.em).query<{ n: number }>(
        CAMPAIGN_RECORD_REJECTED,
        [rejected.map((o) => o.id), rejected.map((o) => o.response), rejected.map(() => uuidv7()), this.campaignId, rejected.map((o) => o.suppressed)],
      );
      this.counts.rejected += r!.n;
    }
    if (skipped.length) this.counts.skipped += await this.endUnsent('skipped', skipped);
    if (suppressed.length) this.counts.suppressed += await this.endUnsent('suppressed', suppressed);
    if (invalid.length) this.counts.invalid += await this.endUnsent('invalid', invalid);
    if (retry.length) {
      await sql(this.em).query(
        CAMPAIGN_RECORD_RETRY,
        [retry.map((o) => o.id), retry.map((o) => o.error)],
      );
      this.counts.retry += retry.length;
    }
  }
}

/** Spaces sends to `perSecond` on average (a token bucket of one second's worth). */
class Throttle {
  private tokens: number;
  private last = Date.now();
  constructor(private readonly perSecond: number) {
    this.tokens = Math.min(perSecond, 1);
  }
  async take(): Promise<void> {
    for (;;) {
      const now = Date.now();
      this.tokens = Math.min(Math.max(this.perSecond, 1), this.tokens + ((now - this.last) / 1000) * this.perSecond);
      this.last = now;
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return;
      }
      await new Promise((r) => setTimeout(r, Math.ceil(((1 - this.tokens) / this.perSecond) * 1000)));
    }
  }
}

export interface FinishInput {
  campaignId: string;
  /** completed: every share is done; cancelled: the run was cancelled (API or Temporal); failed: it cannot go on. */
  outcome: 'completed' | 'cancelled' | 'failed';
  reason?: string;
}

export interface FinishResult {
  status: CampaignStatus;
  /** Rows settled now: transient failures given up on (FAILED) or not sent at all (CANCELLED). */
  settled: number;
}

/**
 * Ends a campaign: rows still QUEUED are settled (FAILED after a completed send: their transient failures outlasted
 * the retries; CANCELLED after a cancel or failure), and the status becomes SENT, CANCELLED or FAILED unless it was
 * already final (a cancel through the API wins over a completion that raced it). Idempotent.
 */
export async function settleCampaign(em: EntityManager, campaignId: string, input: Omit<FinishInput, 'campaignId'>): Promise<FinishResult> {
  const leftover = input.outcome === 'completed' ? 'FAILED' : 'CANCELLED';
  const result = await transaction(em, async (tx): Promise<FinishResult> => {
    const row = await tx.one<{ status: CampaignStatus }>('select status from campaigns where id = $1 for update', [campaignId]);
    if (!row) return { status: 'CANCELLED', settled: 0 };
    const target: CampaignStatus = input.outcome === 'completed' ? 'SENT' : input.outcome === 'cancelled' ? 'CANCELLED' : 'FAILED';
    // Contacts deleted after the snapshot (their rows lost the contact) were never walked: skipped, not failed.
    await tx.run(
      `with upd as (update emails set status = 'CANCELLED', error = 'The contact was deleted', updated_at = now()
         where campaign_id = $1 and status = 'QUEUED' and contact_id is null returning 1),
       n as (select count(*)::int as n from upd)
       update campaign_stats set skipped = skipped + n.n, updated_at = now() from n where campaign_id = $1 and n.n > 0`,
      [campaignId],
    );
    const settled = await tx.one<{ n: number }>(
      `with upd as (
         update emails set status = $2, error = $3, updated_at = now() where campaign_id = $1 and status = 'QUEUED' returning 1
       ), n as (select count(*)::int as n from upd),
       st as (update campaign_stats set failed = failed + case when $2 = 'FAILED' then n.n else 0 end, updated_at = now() from n where campaign_id = $1 and n.n > 0)
       select n from n`,
      [campaignId, leftover, leftover === 'FAILED' ? (input.reason ?? 'Transient delivery failures outlasted the retries') : 'Not sent: the campaign was cancelled or stopped'],
    );
    const current = row.status;
    const active = current === 'SCHEDULED' || current === 'SENDING' || current === 'PAUSED';
    const status = active ? target : current;
    if (active) {
      const reason = input.reason ?? (target === 'CANCELLED' ? 'Cancelled in Temporal' : null);
      await tx.run(`update campaigns set status = $2, status_reason = coalesce($3, status_reason), finished_at = now(), updated_at = now() where id = $1`, [
        campaignId,
        status,
        reason,
      ]);
    }
    return { status, settled: settled!.n };
  });
  if (result.settled > 0) emailOutcomes.inc({ source: 'campaign', status: leftover === 'FAILED' ? 'failed' : 'cancelled' }, result.settled);
  return result;
}
