import type { MikroORM } from '@mikro-orm/postgresql';
import type { Transporter } from 'nodemailer';
import type { DomainCheckSettings } from '../../domain/domains/domain.service';

/** What activities need from the outside world; the worker builds it once, tests may build their own. */
export interface ActivityDeps {
  orm: MikroORM;
  transport: Transporter;
  /** DNS resolver and check intervals of domain verification (default: from the process configuration). */
  domainChecks?: DomainCheckSettings;
}
