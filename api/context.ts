import type Koa from 'koa';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../domain/config';
import type { Logger } from '../domain/logger';
import type { TemporalGateway } from '../temporal/client';
import type { EmailIntake } from '../domain/emails/email-intake';
import type { ContactIntake } from '../domain/contacts/contact-intake';
import type { ApiPrincipal, KeyLookupCache } from '../domain/projects/project.service';
import type { DomainStatusCache } from '../domain/domains/domain.service';
import type { TemplateCache } from '../domain/templates/template.service';
import type { RateLimiter } from '../domain/rate-limit/rate-limiter';
import type { BillingCache } from '../domain/billing/billing.service';

/** Long-lived dependencies of the API process. */
export interface ApiDeps {
  config: Config;
  orm: MikroORM;
  temporal: TemporalGateway;
  /** Where accepted emails are stored and handed to delivery. */
  intake: EmailIntake;
  /** Where /v1/track and /v1/send create and update contacts (batched per project). */
  contactIntake: ContactIntake;
  /** The per-project API budget; absent when RATE_LIMIT_PER_MINUTE is 0. */
  rateLimiter?: RateLimiter;
  /** Per-process lookups kept fresh by the database change feed. */
  caches: { keys?: KeyLookupCache; domains?: DomainStatusCache; templates?: TemplateCache; billing?: BillingCache };
}

export interface AppState {
  requestId: string;
  log: Logger;
  em: EntityManager;
  /** Set by API-key routes. */
  principal?: ApiPrincipal;
  /** Set by dashboard (cookie) routes. */
  userId?: string;
}

export type AppContext = Koa.ParameterizedContext<AppState>;
