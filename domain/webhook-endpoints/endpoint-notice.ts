import type { Transporter } from 'nodemailer';
import type { Pool } from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config';
import { sql } from '../db/sql';
import { sendSystemEmail } from '../auth/account-emails';
import { escapeAttribute } from '../tracking/links';

export interface NoticeMailer {
  transport: Transporter;
  config: Pick<Config, 'accounts' | 'publicUrl'>;
}

interface Claimed {
  projectId: string;
  projectName: string;
  url: string;
  failingSince: Date | null;
  disabledReason: string;
}

/**
 * Emails the project's owners that the service disabled the endpoint for failing (README › Webhooks out › Disabling),
 * once per disabling: the notice is claimed (`owners_notified_at`) before it is sent and released when sending fails,
 * so the delivery activity that finds it due next sends it again. Answers whether this call sent it.
 */
export async function noticeEndpointDisabled(source: EntityManager | Pool, mailer: NoticeMailer, endpointId: string): Promise<boolean> {
  const db = sql(source);
  const e = await db.one<Claimed>(
    `update webhook_endpoints w set owners_notified_at = now() from projects p
     where w.id = $1 and p.id = w.project_id and not w.enabled and w.disabled_reason is not null and w.owners_notified_at is null
     returning w.project_id as "projectId", p.name as "projectName", w.url, w.failing_since as "failingSince", w.disabled_reason as "disabledReason"`,
    [endpointId],
  );
  if (!e) return false;
  try {
    const owners = await db.query<{ email: string; name: string | null }>(
      `select u.email, u.name from memberships m join users u on u.id = m.user_id where m.project_id = $1 and m.role = 'OWNER' order by u.email`,
      [e.projectId],
    );
    const subject = `Webhook endpoint disabled: ${e.projectName}`;
    const text =
      `Every delivery to the webhook endpoint ${e.url} of the project "${e.projectName}" failed for too long (${e.disabledReason}), so it was ` +
      `disabled: new events are no longer queued for it and its pending deliveries are cancelled. Fix the receiver, turn the endpoint on again ` +
      `(PATCH /webhook-endpoints/${endpointId} with {"enabled": true}), then send what it missed (POST /webhook-endpoints/${endpointId}/replay). ` +
      `Its deliveries and their attempts: GET ${mailer.config.publicUrl}/webhook-endpoints/${endpointId}/deliveries\n`;
    const html = `<p>${escapeAttribute(text.trim())}</p>`;
    for (const o of owners) await sendSystemEmail(mailer.transport, mailer.config, { address: o.email, name: o.name }, { subject, html, text });
    return true;
  } catch (err) {
    await db.run('update webhook_endpoints set owners_notified_at = null where id = $1', [endpointId]);
    throw err;
  }
}
