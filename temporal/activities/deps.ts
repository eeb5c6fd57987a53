import type { MikroORM } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';
import type { DomainCheckSettings } from '../../domain/domains/domain.service';
import type { Config } from '../../domain/config';

/** What activities need from the outside world; the worker builds it once, tests may build their own. */
export interface ActivityDeps {
  orm: MikroORM;
  transport: Transporter;
  /** The process configuration, parsed once by the worker: activities read settings from here, never from the environment. */
  config: Config;
  /** DNS resolver and check intervals of domain verification (default: from `config`). */
  domainChecks?: DomainCheckSettings;
}
