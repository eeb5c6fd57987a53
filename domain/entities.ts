import { User } from './users/user.entity';
import { Project, ProjectReset } from './projects/project.entity';
import { Membership } from './projects/membership.entity';
import { Invitation } from './projects/invitation.entity';
import { Contact } from './contacts/contact.entity';
import { Event } from './events/event.entity';
import { Email, EmailAttachment, IdempotencyKey } from './emails/email.entity';
import { Domain } from './domains/domain.entity';
import { ContactCount, ContactCountDelta } from './contacts/contact-count.entity';
import { Segment, SegmentMembership } from './segments/segment.entity';
import { Job, ContactImportFile, JobChunk } from './jobs/job.entity';
import { Template } from './templates/template.entity';
import { ProcessedSnsMessage } from './webhooks/processed-sns-message.entity';
import { ProcessedProviderEvent } from './webhooks/processed-provider-event.entity';
import { RateLimitWindow } from './rate-limit/rate-limit-window.entity';
import { Campaign, CampaignStats } from './campaigns/campaign.entity';
import { CampaignEmailMark, CampaignEventReceipt } from './campaigns/campaign-stats.entity';
import { EventTally, OutboxConsumer, OutboxEntry, ProbeReceipt } from './events/outbox.entity';
import { InboundMessage } from './inbound/inbound-message.entity';
import { ProjectSuspension } from './reputation/reputation.entity';
import { AnalyticsHourly, ContactLastEvent, ContactLastEventHourly, EventNameHourly } from './analytics/analytics.entity';
import { Upload } from './uploads/upload.entity';
import { AccountToken, LoginThrottleWindow, OAuthAccount } from './auth/account.entities';
import { ProjectBilling } from './billing/billing.entity';
import { Suppression, SuppressionSoftBounce } from './suppressions/suppression.entity';
import { Automation, AutomationExecution, AutomationExecutionStep, AutomationStep, AutomationTransition, AutomationVersion } from './automations/automation.entity';

/** Every entity the ORM knows; the migrations are generated from this list. */
export const entities = [User, Project, Membership, Invitation, Contact, Event, Email, EmailAttachment, IdempotencyKey, Domain, ContactCount, ContactCountDelta, Segment, SegmentMembership, Job, ContactImportFile, JobChunk, Template, ProcessedSnsMessage, ProcessedProviderEvent, RateLimitWindow, OutboxConsumer, OutboxEntry, ProbeReceipt, EventTally, InboundMessage, Campaign, CampaignStats, CampaignEmailMark, CampaignEventReceipt, Automation, AutomationStep, AutomationTransition, AutomationVersion, AutomationExecution, AutomationExecutionStep, AnalyticsHourly, EventNameHourly, ContactLastEvent, ContactLastEventHourly, Upload, ProjectReset, ProjectSuspension, AccountToken, OAuthAccount, LoginThrottleWindow, ProjectBilling, Suppression, SuppressionSoftBounce];
