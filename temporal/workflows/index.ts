// Every workflow the worker runs; this file is the bundle entry (pure code: @temporalio/workflow and types only).
export { emailDelivery } from './email-delivery.workflow';
export { emailSweeper } from './email-sweeper.workflow';
export { domainVerification } from './domain-verification.workflow';
export { contactImport } from './contact-import.workflow';
export { contactBulk } from './contact-bulk.workflow';
export { campaignSend } from './campaign-send.workflow';
export { segmentCompute } from './segment-compute.workflow';
export { segmentRecomputeSweep } from './segment-recompute-sweep.workflow';
export { automationRun } from './automation-run.workflow';
export { automationCancelAll } from './automation-cancel-all.workflow';
export { accountEmail, invitationEmail } from './account-email.workflow';
export { projectReset } from './project-reset.workflow';
export { reputationCheck } from './reputation-check.workflow';
export { inboundMail } from './inbound-mail.workflow';
export { bounceMailboxPoll } from './bounce-mailbox.workflow';
export { webhookDelivery } from './webhook-delivery.workflow';
export { webhookReplay } from './webhook-replay.workflow';
