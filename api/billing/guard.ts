import type { ApiDeps } from '../context';
import { BillingGuard } from '../../domain/billing/billing.service';

/** The billing caps' guard of a group of routes, with the process's cache (none where deps are built without services). */
export const billingGuard = (deps: ApiDeps): BillingGuard => new BillingGuard(deps.config.billing, deps.caches?.billing);
