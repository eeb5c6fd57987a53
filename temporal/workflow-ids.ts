/**
 * Workflow ids, derived from business ids so a repeated start is recognised. Pure (no imports): the client, the
 * workflows (through definitions.ts) and the domain's SQL all take ids from here, so no id is built by hand elsewhere.
 */
export const workflowIds = {
  /** A delivery batch, named after its first email; stored with the emails so the sweeper restarts the same id. */
  emailDelivery: (firstEmailId: string) => `email-delivery/${firstEmailId}`,
  domainVerification: (domainId: string) => `domain-verification/${domainId}`,
  contactImport: (jobId: string) => `contact-import/${jobId}`,
  contactBulk: (jobId: string) => `contact-bulk/${jobId}`,
  campaignSend: (campaignId: string) => `campaign-send/${campaignId}`,
  /** The compute of a segment: one at a time per segment, a new run under the same id for each compute. */
  segmentCompute: (segmentId: string) => `segment-compute/${segmentId}`,
  /** A contact's n-th run of an automation (never reused: a second start of an ended id is refused). */
  automationRun: (automationId: string, contactId: string, n: number) => `${AUTOMATION_RUN_ID_PREFIX}${automationId}/${contactId}/${n}`,
  /** One cancel-all request of an automation. */
  automationCancelAll: (automationId: string, requestId: string) => `automation-cancel-all/${automationId}/${requestId}`,
  /** One verification or password reset email, named after the API request that asked for it. */
  accountEmail: (requestId: string) => `account-email/${requestId}`,
  /** One project invitation email, named after the API request that asked for it. */
  invitationEmail: (requestId: string) => `invitation-email/${requestId}`,
  /** The processing of a batch of messages the inbound SMTP server stored, named after its first (inbound_messages.id). */
  inboundMail: (firstInboundId: string) => `inbound-mail/${firstInboundId}`,
  /** A project's reset: one at a time per project (a new run under the same id for each reset). */
  projectReset: (projectId: string) => `project-reset/${projectId}`,
  /** One endpoint's batch of webhook deliveries, named after its first; a retry by the API adds `/retry-<attempts>`. */
  webhookDelivery: (endpointId: string, firstDeliveryId: string) => `webhook-delivery/${endpointId}/${firstDeliveryId}`,
  /** One replay of an endpoint's events (POST /webhook-endpoints/:id/replay), named after its replay id. */
  webhookReplay: (endpointId: string, replayId: string) => `webhook-replay/${endpointId}/${replayId}`,
};

/** What every automation run id starts with (`automation/...`; a cancel-all's id does not). */
export const AUTOMATION_RUN_ID_PREFIX = 'automation/';

/**
 * `workflowIds.automationRun` as a SQL expression, for statements that number the run as they insert it: the arguments
 * are SQL expressions (columns or casts) for the automation id, the contact id and n.
 */
export const automationRunIdSql = (automationId: string, contactId: string, n: string): string =>
  `'${AUTOMATION_RUN_ID_PREFIX}' || ${automationId} || '/' || ${contactId} || '/' || ${n}`;

/** The campaign of a `campaign-send/<campaignId>` id; null for any other id. */
export function campaignOfWorkflowId(workflowId: string): string | null {
  const prefix = workflowIds.campaignSend('');
  return workflowId.startsWith(prefix) ? workflowId.slice(prefix.length) : null;
}

/** The automation of an `automation/<automationId>/<contactId>/<n>` run id; null for any other id. */
export function automationOfRunId(workflowId: string): string | null {
  if (!workflowId.startsWith(AUTOMATION_RUN_ID_PREFIX)) return null;
  const parts = workflowId.slice(AUTOMATION_RUN_ID_PREFIX.length).split('/');
  return parts.length === 3 ? parts[0]! : null;
}
