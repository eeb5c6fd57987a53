import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';
import type { Config } from '../config';
import { AppError, conflict } from '../errors';
import { uuidv7 } from '../ids';
import { logger } from '../logger';
import { pauseCampaign, type CampaignSendControl } from '../campaigns/campaign-steering';
import { sendSystemEmail } from '../auth/account-emails';
import { escapeAttribute } from '../tracking/links';
import { sql } from '../db/sql';

/**
 * Sending reputation. Relays (SES, Postmark) suspend a sender whose bounce or complaint rate passes a threshold; the
 * service notices first. The rates are those of the analytics rollup (`analytics_hourly`: `sent`, permanent
 * `bounced`, `complained`) over a window (7 days) of whole UTC hours, counted only from the hour after the project's
 * last lifted suspension, and judged only once the window holds `minSent` emails. The `reputation-check` schedule
 * evaluates every sending project: past a suspend threshold, the project is suspended (its SENDING campaigns are
 * paused, campaign sends, schedules coming due and resumes are refused with 403 PROJECT_SUSPENDED) and its owners
 * are emailed; an owner lifts it.
 */

export type ReputationSettings = Config['reputation'];

interface Figures {
  sent: number;
  bounced: number;
  complained: number;
}

export interface Suspension {
  id: string;
  reason: 'BOUNCE_RATE' | 'COMPLAINT_RATE';
  sent: number;
  bounced: number;
  complained: number;
  bounceRate: number;
  complaintRate: number;
  windowFrom: Date;
  createdAt: Date;
  notifiedAt: Date | null;
  liftedAt: Date | null;
  liftedBy: string | null;
}

export interface Reputation {
  status: 'OK' | 'WARNING' | 'SUSPENDED';
  window: { from: string; to: string };
  sent: number;
  bounced: number;
  complained: number;
  /** Per email sent, to 4 decimals; null below `minSent` emails (too few to judge). */
  bounceRate: number | null;
  complaintRate: number | null;
  thresholds: { bounce: { warn: number; suspend: number }; complaint: { warn: number; suspend: number }; minSent: number; windowDays: number };
  suspension: Suspension | null;
  recentSuspensions: Suspension[];
}

const SUSPENSION_COLUMNS = `id, reason, sent, bounced, complained, bounce_rate as "bounceRate", complaint_rate as "complaintRate", window_from as "windowFrom",
  created_at as "createdAt", notified_at as "notifiedAt", lifted_at as "liftedAt", lifted_by as "liftedBy"`;

/** The window's start: `windowMs` ago (its hour), or the hour after the last lift when that is later ($1: windowMs, $2: the project). */
const WINDOW_FROM = `greatest(date_trunc('hour', now() - $1::double precision * interval '1 millisecond', 'UTC'),
  coalesce((select date_trunc('hour', max(s.lifted_at), 'UTC') + interval '1 hour' from project_suspensions s where s.project_id = $2 and s.lifted_at is not null), '-infinity'))`;

const ratio = (n: number, d: number) => (d > 0 ? Math.round((n / d) * 10_000) / 10_000 : 0);

function judge(f: Figures, cfg: ReputationSettings): { status: 'OK' | 'WARNING' | 'SUSPEND'; reason?: Suspension['reason'] } {
  if (f.sent < cfg.minSent) return { status: 'OK' };
  const bounce = f.bounced / f.sent;
  const complaint = f.complained / f.sent;
  if (bounce >= cfg.bounce.suspend) return { status: 'SUSPEND', reason: 'BOUNCE_RATE' };
  if (complaint >= cfg.complaint.suspend) return { status: 'SUSPEND', reason: 'COMPLAINT_RATE' };
  if (bounce >= cfg.bounce.warn || complaint >= cfg.complaint.warn) return { status: 'WARNING' };
  return { status: 'OK' };
}

/** Bigint columns come from the driver as text. */
const suspension = (r: Suspension): Suspension => ({
  ...r,
  sent: Number(r.sent),
  bounced: Number(r.bounced),
  complained: Number(r.complained),
  bounceRate: Number(r.bounceRate),
  complaintRate: Number(r.complaintRate),
});

async function suspensions(em: EntityManager, projectId: string, limit: number): Promise<Suspension[]> {
  const rows = await sql(em).query<Suspension>(`select ${SUSPENSION_COLUMNS} from project_suspensions where project_id = $1 order by id desc limit $2`, [projectId, limit]);
  return rows.map(suspension);
}

/** The project's rates over the window, the thresholds, its active suspension and its last ten. */
export async function reputationOf(em: EntityManager, projectId: string, cfg: ReputationSettings): Promise<Reputation> {
  const w = await sql(em).one<{ from: Date; to: Date; sent: string; bounced: string; complained: string }>(
    `with w as (select ${WINDOW_FROM} as "from")
     select w."from", now() as "to",
            coalesce(sum(h.count) filter (where h.metric = 'sent'), 0)::text as sent,
            coalesce(sum(h.count) filter (where h.metric = 'bounced'), 0)::text as bounced,
            coalesce(sum(h.count) filter (where h.metric = 'complained'), 0)::text as complained
     from w left join analytics_hourly h on h.project_id = $3 and h.metric in ('sent', 'bounced', 'complained') and h.hour >= w."from"
     group by w."from"`,
    [cfg.windowMs, projectId, projectId],
  );
  const f: Figures = { sent: Number(w!.sent), bounced: Number(w!.bounced), complained: Number(w!.complained) };
  const recent = await suspensions(em, projectId, 10);
  const active = recent.find((s) => s.liftedAt === null) ?? null;
  const judged = judge(f, cfg);
  const enough = f.sent >= cfg.minSent;
  return {
    status: active ? 'SUSPENDED' : judged.status === 'OK' ? 'OK' : 'WARNING',
    window: { from: w!.from.toISOString(), to: w!.to.toISOString() },
    ...f,
    bounceRate: enough ? ratio(f.bounced, f.sent) : null,
    complaintRate: enough ? ratio(f.complained, f.sent) : null,
    thresholds: { bounce: cfg.bounce, complaint: cfg.complaint, minSent: cfg.minSent, windowDays: Math.round((cfg.windowMs / 86_400_000) * 100) / 100 },
    suspension: active,
    recentSuspensions: recent,
  };
}

/** Lifts the active suspension (409 NOT_SUSPENDED when there is none). Paused campaigns stay paused: resume them. */
export async function liftSuspension(em: EntityManager, projectId: string, userId: string): Promise<Suspension> {
  const row = await sql(em).one<Suspension>(
    `update project_suspensions set lifted_at = now(), lifted_by = $1 where project_id = $2 and lifted_at is null returning ${SUSPENSION_COLUMNS}`,
    [userId, projectId],
  );
  if (!row) throw conflict('NOT_SUSPENDED', 'The project is not suspended');
  logger.info({ projectId, suspensionId: row.id }, 'suspension lifted');
  return suspension(row);
}

/**
 * Evaluates every project that sent in the window: each past a suspend threshold and not suspended yet is
 * suspended, its SENDING campaigns are paused, and its owners are emailed (also retried here for a suspension whose
 * email did not go out). Returns the projects suspended now.
 */
export async function evaluateReputation(
  em: EntityManager,
  deps: { control: Pick<CampaignSendControl, 'wakeCampaignSend'>; transport: Transporter; config: Pick<Config, 'reputation' | 'accounts' | 'publicUrl'> },
  heartbeat: () => void = () => undefined,
): Promise<string[]> {
  const cfg = deps.config.reputation;
  const candidates = await sql(em).query<{ projectId: string; from: Date; sent: string; bounced: string; complained: string }>(
    `with lifted as (select project_id, date_trunc('hour', max(lifted_at), 'UTC') + interval '1 hour' as after from project_suspensions where lifted_at is not null group by 1)
     select h.project_id as "projectId", greatest(date_trunc('hour', now() - $1::double precision * interval '1 millisecond', 'UTC'), coalesce(l.after, '-infinity')) as "from",
            sum(h.count) filter (where h.metric = 'sent')::text as sent,
            coalesce(sum(h.count) filter (where h.metric = 'bounced'), 0)::text as bounced,
            coalesce(sum(h.count) filter (where h.metric = 'complained'), 0)::text as complained
     from analytics_hourly h left join lifted l on l.project_id = h.project_id
     where h.metric in ('sent', 'bounced', 'complained') and h.hour >= date_trunc('hour', now() - $2::double precision * interval '1 millisecond', 'UTC')
       and h.hour >= coalesce(l.after, '-infinity')
       and not exists (select 1 from project_suspensions s where s.project_id = h.project_id and s.lifted_at is null)
     group by h.project_id, l.after
     having sum(h.count) filter (where h.metric = 'sent') >= $3`,
    [cfg.windowMs, cfg.windowMs, cfg.minSent],
  );
  const suspended: string[] = [];
  for (const c of candidates) {
    const f: Figures = { sent: Number(c.sent), bounced: Number(c.bounced), complained: Number(c.complained) };
    const judged = judge(f, cfg);
    if (judged.status !== 'SUSPEND') continue;
    const row = await sql(em).one<{ id: string }>(
      `insert into project_suspensions (id, project_id, reason, sent, bounced, complained, bounce_rate, complaint_rate, window_from)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9) on conflict (project_id) where lifted_at is null do nothing returning id`,
      [uuidv7(), c.projectId, judged.reason, f.sent, f.bounced, f.complained, ratio(f.bounced, f.sent), ratio(f.complained, f.sent), c.from],
    );
    if (!row) continue;
    suspended.push(c.projectId);
    logger.warn({ projectId: c.projectId, ...f, reason: judged.reason }, 'project suspended: sending reputation');
    const sending = await sql(em).query<{ id: string }>(`select id from campaigns where project_id = $1 and status = 'SENDING'`, [c.projectId]);
    for (const s of sending) {
      await pauseCampaign(em, deps.control, c.projectId, s.id).catch((err: unknown) => {
        if (!(err instanceof AppError && err.statusCode === 409)) throw err; // ended meanwhile
      });
      heartbeat();
    }
  }
  await notifyOwners(em, deps, heartbeat);
  return suspended;
}

/** Emails the owners of every active suspension not notified yet; marks it notified once every owner's email went. */
async function notifyOwners(em: EntityManager, deps: { transport: Transporter; config: Pick<Config, 'accounts' | 'publicUrl'> }, heartbeat: () => void): Promise<void> {
  const pending = await sql(em).query<{ id: string; projectId: string; projectName: string; reason: string; sent: string; bounceRate: number; complaintRate: number }>(
    `select s.id, s.project_id as "projectId", p.name as "projectName", s.reason, s.sent::text as sent, s.bounce_rate as "bounceRate", s.complaint_rate as "complaintRate"
     from project_suspensions s join projects p on p.id = s.project_id where s.lifted_at is null and s.notified_at is null`,
  );
  for (const s of pending) {
    const owners = await sql(em).query<{ email: string; name: string | null }>(
      `select u.email, u.name from memberships m join users u on u.id = m.user_id where m.project_id = $1 and m.role = 'OWNER' order by u.email`,
      [s.projectId],
    );
    const what = s.reason === 'BOUNCE_RATE' ? `bounce rate reached ${(s.bounceRate * 100).toFixed(2)} %` : `complaint rate reached ${(s.complaintRate * 100).toFixed(2)} %`;
    const subject = `Marketing sends suspended: ${s.projectName}`;
    const link = `${deps.config.publicUrl}/projects/${s.projectId}/security`;
    const text =
      `The ${what} of the last ${s.sent} emails of the project "${s.projectName}". Its campaigns are paused and new campaign sends are refused, ` +
      `so that the SMTP relay does not suspend the sender. Remove the addresses that bounce or complain, then lift the suspension: ${link}\n`;
    const html = `<p>${escapeAttribute(text.trim()).replace(escapeAttribute(link), `<a href="${escapeAttribute(link)}">${escapeAttribute(link)}</a>`)}</p>`;
    for (const o of owners) {
      await sendSystemEmail(deps.transport, deps.config, { address: o.email, name: o.name }, { subject, html, text });
      heartbeat();
    }
    await sql(em).run(`update project_suspensions set notified_at = now() where id = $1`, [s.id]);
  }
}
