import type { ActivityDeps } from './deps';
import { domainCheckSettings, runDomainCheck, type DomainCheckResult, type DomainCheckSettings } from '../../domain/domains/domain.service';

export function createDomainActivities(deps: ActivityDeps) {
  const settings: DomainCheckSettings = deps.domainChecks ?? domainCheckSettings(deps.config);
  return {
    /**
     * One verification check of a domain: DNS lookups (DNS_SERVERS, DNS_TIMEOUT per lookup), each record's status and
     * the domain's state stored on its row. Returns `exists: false` once the domain is deleted.
     */
    async checkDomain(input: { domainId: string }): Promise<DomainCheckResult> {
      return runDomainCheck(deps.orm.em.fork(), settings, input.domainId);
    },
  };
}

export type DomainActivities = ReturnType<typeof createDomainActivities>;
