import type { MikroORM } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';
import type { DomainCheckSettings } from '../../domain/domains/domain.service';
import type { Config } from '../../domain/config';
import type { RenderPool } from '../../domain/campaigns/render-pool';
import type { SmtpPipelinePool } from '../../domain/mail/smtp-pipeline';
import type { AutomationRunControl } from '../../domain/automations/execution.service';
import type { CampaignSendControl } from '../../domain/campaigns/campaign-steering';
import type { TemporalGateway } from '../client';

/** What activities need from the outside world; the worker builds it once, tests may build their own. */
export interface ActivityDeps {
  orm: MikroORM;
  transport: Transporter;
  /** The process configuration, parsed once by the worker: activities read settings from here, never from the environment. */
  config: Config;
  /** DNS resolver and check intervals of domain verification (default: from `config`). */
  domainChecks?: DomainCheckSettings;
  /** Where campaign messages are rendered (the worker's thread pool); inline when absent. */
  renderPool?: RenderPool;
  /** The pipelined SMTP connections campaigns send over (the worker's, closed with it); one of their own when absent. */
  campaignSmtp?: SmtpPipelinePool;
  /** The worker's Temporal client, for activities that steer other runs (cancel-all, a project reset). */
  temporal: () => Pick<AutomationRunControl, 'cancelAutomationRun'> &
    Pick<CampaignSendControl, 'cancelCampaignSend' | 'wakeCampaignSend'> &
    Pick<TemporalGateway, 'runsClosedOutside' | 'startInboundMail'>;
}
