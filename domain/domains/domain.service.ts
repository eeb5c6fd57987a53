import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, conflict, notFound, serviceUnavailable } from '../errors';
import type { Config } from '../config';
import { logger } from '../logger';
import { uuidv7 } from '../ids';
import { persistThenStart } from '../workflow-start';
import { Domain, type DomainStatus } from './domain.entity';
import { generateDkimKeyPair, type DkimKeyBits } from './dkim';
import { dkimKeyContext, type SecretBox } from './secret-box';
import { createDnsResolver, type DnsSettings } from './dns-lookup';
import {
  buildDnsRecords,
  decideDomainState,
  decideReturnPath,
  evaluateRecord,
  newVerificationToken,
  withReturnPathRecords,
  type DnsLookup,
  type DomainRecord,
  type DomainState,
  type RecordPurpose,
  type RecordStatus,
  type ReturnPathSettings,
} from './dns-records';
import { emailDomain } from '../contacts/email-address';
import { ProjectScopedCache } from '../cache/lookup-cache';
import type { ChangeFeed } from '../cache/change-feed';
import { sql } from '../db/sql';

/** A sender domain as the send paths need it: its status and its return path (null: NOT_CONFIGURED). */
interface SenderDomainRow {
  status: string | null;
  returnPathHost: string | null;
}

/**
 * Sender domains cached per process, invalidated by the `domains:<projectId>` change feed (whose trigger fires on a
 * change of status or of the return path).
 */
export type DomainStatusCache = ProjectScopedCache<SenderDomainRow>;
export const createDomainStatusCache = (feed: ChangeFeed | undefined): DomainStatusCache =>
  new ProjectScopedCache<SenderDomainRow>(feed, 'domains', 60_000);

/** A verified sender domain: the bounce host of its return path when ACTIVE, else null (the From address is the envelope sender). */
export interface SenderDomain {
  returnPathHost: string | null;
}

/**
 * Refuses a sender address unless its domain is verified for the project. The message names the domain and says
 * what to do next. Returns the domain's return path, which the composer needs for the List-Unsubscribe mailto:.
 */
export async function assertSenderDomain(
  em: EntityManager,
  projectId: string,
  fromEmail: string,
  opts: { field?: string; cache?: DomainStatusCache } = {},
): Promise<SenderDomain> {
  const field = opts.field ?? 'from';
  const domain = emailDomain(fromEmail);
  const load = async () => {
    const row = await sql(em).one<SenderDomainRow>(
      'select status, return_path_host as "returnPathHost" from domains where project_id = $1 and name = $2 limit 1',
      [projectId, domain],
    );
    return { value: { status: row?.status ?? null, returnPathHost: row?.returnPathHost ?? null }, projectId };
  };
  let found = (opts.cache ? await opts.cache.get(`${projectId}:${domain}`, load) : (await load()).value)!;
  // A refusal is read again from the database: a cached answer may predate a verification whose change notification
  // has not reached this process yet (refusals are rare; a verified domain stays a cache hit).
  if (found.status !== 'VERIFIED' && opts.cache) found = (await load()).value;
  const { status } = found;
  if (status === 'VERIFIED') return { returnPathHost: found.returnPathHost };
  const pending = status === 'PENDING';
  throw new AppError(
    403,
    'DOMAIN_NOT_VERIFIED',
    pending
      ? `The sender domain "${domain}" is not verified yet`
      : `The sender domain "${domain}" has not been added to this project`,
    {
      errors: [{ field, message: `${domain} is not a verified sender domain`, code: 'unverified_domain' }],
      suggestion: pending
        ? `Create the DNS records returned when the domain was added, then run GET /domains/<id>/verify.`
        : `Add it with POST /domains { "domain": "${domain}" }, create the DNS records it returns, then verify it.`,
    },
  );
}

/** What a verification check reports to its workflow (kept small: it is recorded in the workflow history). */
export interface DomainCheckResult {
  /** False when the domain row is gone: the workflow ends. */
  exists: boolean;
  status: DomainStatus | null;
  records: { purpose: RecordPurpose; status: RecordStatus }[];
  /** When the workflow should check again (from the worker's configuration). */
  nextCheckInMs: number;
}

/** Starts, runs and stops verification workflows (TemporalGateway implements it). */
export interface VerificationRunner {
  startDomainVerification(input: { projectId: string; domainId: string }): Promise<string>;
  checkDomainNow(input: { projectId: string; domainId: string }): Promise<DomainCheckResult>;
  stopDomainVerification(input: { domainId: string }): Promise<void>;
}

export interface DomainCheckSettings {
  dns: DnsSettings;
  checkIntervalMs: number;
  recheckIntervalMs: number;
  demoteAfterMs: number;
  /** The bounce host's records are checked as this configuration asks for them (withReturnPathRecords). */
  returnPath: ReturnPathSettings;
}

/** The bounce hosts' records as this process is configured: RETURN_PATH_LABEL, INBOUND_MX_HOST, SPF_INCLUDE. */
export const returnPathSettings = (cfg: Pick<Config, 'inbound' | 'domains'>): ReturnPathSettings => ({
  label: cfg.inbound.returnPathLabel,
  mxHost: cfg.inbound.mxHost,
  spfInclude: cfg.domains.spfInclude,
});

export const domainCheckSettings = (cfg: Config): DomainCheckSettings => ({
  returnPath: returnPathSettings(cfg),
  dns: { servers: cfg.domains.dnsServers, timeoutMs: cfg.domains.dnsTimeoutMs },
  checkIntervalMs: cfg.domains.checkIntervalMs,
  recheckIntervalMs: cfg.domains.recheckIntervalMs,
  demoteAfterMs: cfg.domains.demoteAfterMs,
});

/**
 * Adds a domain to a project: a DKIM key pair of its own (private key sealed with APP_SECRET), an ownership token,
 * the DNS records to create, and its verification workflow. A name already in the project, or VERIFIED by another
 * project, is a 409. If the workflow cannot be started the domain is not kept (503).
 */
export async function addDomain(
  em: EntityManager,
  deps: { runner: VerificationRunner; secretBox: SecretBox; spfInclude: string; dkimKeyBits: DkimKeyBits; returnPath: ReturnPathSettings },
  input: { projectId: string; name: string },
): Promise<Domain> {
  const { projectId, name } = input;
  const existing = await em.findOne(Domain, { project: projectId, name }, { fields: ['id'] });
  if (existing) throw domainExists(name, existing.id);
  const taken = await sql(em).one<{ id: string }>(`select id from domains where name = $1 and status = 'VERIFIED' and project_id <> $2 limit 1`, [name, projectId]);
  if (taken) {
    throw conflict(
      'DOMAIN_TAKEN',
      `The domain "${name}" is verified by another project`,
      'A domain can be verified by one project only. Remove it from the other project first, or use a subdomain (e.g. mail.' + name + ').',
    );
  }
  const keys = await generateDkimKeyPair(deps.dkimKeyBits);
  const id = uuidv7();
  const verificationToken = newVerificationToken();
  const domain = em.create(Domain, {
    id,
    project: projectId,
    name,
    status: 'PENDING',
    dkimSelector: keys.selector,
    dkimPublicKey: keys.publicKeyBase64,
    dkimPrivateKey: deps.secretBox.encrypt(keys.privateKeyPem, dkimKeyContext(id)),
    verificationToken,
    records: buildDnsRecords({
      domain: name,
      dkimSelector: keys.selector,
      dkimPublicKeyBase64: keys.publicKeyBase64,
      verificationToken,
      spfInclude: deps.spfInclude,
      returnPath: deps.returnPath,
    }),
  });
  return persistThenStart({
    persist: async () => {
      try {
        await em.flush();
      } catch (err) {
        if (err instanceof UniqueConstraintViolationException) throw domainExists(name);
        throw err;
      }
      return domain;
    },
    start: () => deps.runner.startDomainVerification({ projectId, domainId: id }),
    compensate: () => em.nativeDelete(Domain, { id }),
    unavailable: 'The domain could not be added: the verification service is unavailable. Nothing was saved; try again.',
    log: { projectId, domainId: id },
  });
}

function domainExists(name: string, id?: string) {
  return conflict(
    'DOMAIN_EXISTS',
    `The domain "${name}" has already been added to this project`,
    id ? `Its id is ${id}; GET /domains/${id}/verify checks its DNS records now.` : 'List the project\'s domains with GET /domains/project/<projectId>.',
  );
}

/** The project's domains, verified and pending, oldest first. */
export async function listDomains(em: EntityManager, projectId: string): Promise<Domain[]> {
  return em.find(Domain, { project: projectId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

/** A domain of the project; another project's domain is not found (404), like a missing one. */
async function domainOfProject(em: EntityManager, projectId: string, id: string): Promise<Domain> {
  const domain = await em.findOne(Domain, { id, project: projectId });
  if (!domain) throw notFound('Domain');
  return domain;
}

/**
 * Runs a check now through the domain's workflow and returns the domain as the check left it. A domain added
 * without generated records (the dev seed) has nothing to check and is returned as it is.
 */
export async function verifyDomainNow(em: EntityManager, runner: VerificationRunner, projectId: string, id: string): Promise<Domain> {
  const domain = await domainOfProject(em, projectId, id);
  if (domain.records.length === 0) return domain;
  try {
    await runner.checkDomainNow({ projectId, domainId: id });
  } catch (err) {
    // Removed meanwhile: answer like any other missing domain.
    const still = await em.fork().findOne(Domain, { id, project: projectId }, { fields: ['id'] });
    if (!still) throw notFound('Domain');
    logger.warn({ err, domainId: id }, 'forced domain check failed');
    throw serviceUnavailable('The DNS check could not be run now; the domain is unchanged. Try again shortly.');
  }
  await em.refresh(domain);
  return domain;
}

/**
 * Deletes the domain, then ends its workflow. The row goes first: if Temporal cannot be told, the workflow still ends
 * at its next check, which finds no domain.
 */
export async function removeDomain(em: EntityManager, runner: VerificationRunner, projectId: string, id: string): Promise<void> {
  const deleted = await em.nativeDelete(Domain, { id, project: projectId });
  if (!deleted) throw notFound('Domain');
  try {
    await runner.stopDomainVerification({ domainId: id });
  } catch (err) {
    logger.warn({ err, domainId: id }, 'could not signal the domain verification workflow; it ends at its next check');
  }
}

interface DomainCheckRow {
  id: string;
  name: string;
  status: DomainStatus;
  verifiedAt: Date | null;
  failingSince: Date | null;
  returnPathHost: string | null;
  records: DomainRecord[];
}

const OTHER_PROJECT_REASON =
  'The DNS records are in place, but this domain is verified by another project. A domain can be verified by one project only.';

/**
 * One verification check (run by the workflow's activity): looks every record up, stores each one's status, the
 * domain's new state and its return path's, and says when to check next. While a verified domain has a missing record
 * it is checked at the pending interval, so its recovery or demotion is noticed promptly. The bounce host's records
 * are brought up to the configuration first (withReturnPathRecords): domains added before they existed get them here.
 */
export async function runDomainCheck(em: EntityManager, settings: DomainCheckSettings, domainId: string): Promise<DomainCheckResult> {
  const row = await sql(em).one<DomainCheckRow>(
    `select id, name, status, verified_at as "verifiedAt", failing_since as "failingSince", return_path_host as "returnPathHost", records
     from domains where id = $1`,
    [domainId],
  );
  if (!row) return { exists: false, status: null, records: [], nextCheckInMs: 0 };
  if (row.records.length === 0) return { exists: true, status: row.status, records: [], nextCheckInMs: settings.recheckIntervalMs };

  const resolver = createDnsResolver(settings.dns);
  const stored = withReturnPathRecords(row.records, row.name, settings.returnPath);
  const key = (r: DomainRecord) => `${r.type} ${r.name}`;
  let lookups: Map<string, DnsLookup>;
  try {
    // One lookup per type and name: the bounce host's name is looked up twice, for its MX and for its SPF (TXT).
    const distinct = [...new Map(stored.map((r) => [key(r), r])).values()];
    lookups = new Map(await Promise.all(distinct.map(async (r) => [key(r), await resolver.lookup(r.type, r.name)] as const)));
  } finally {
    resolver.close();
  }
  const now = new Date();
  const records = stored.map((r) => evaluateRecord(r, lookups.get(key(r))!, now));
  const previous: DomainState = { status: row.status, verifiedAt: row.verifiedAt, failingSince: row.failingSince, statusReason: null };
  let next = decideDomainState(previous, records, now, settings.demoteAfterMs);
  if (next.status === 'VERIFIED' && row.status === 'PENDING') {
    const other = await sql(em).one(`select 1 from domains where name = $1 and status = 'VERIFIED' and id <> $2 limit 1`, [row.name, row.id]);
    if (other) next = { status: 'PENDING', verifiedAt: null, failingSince: null, statusReason: OTHER_PROJECT_REASON };
  }
  const write = (state: DomainState) =>
    sql(em).run(
      `update domains set records = $1::jsonb, status = $2, verified_at = $3, failing_since = $4, status_reason = $5, last_checked_at = $6,
         return_path_host = $8, updated_at = now()
       where id = $7`,
      [
        JSON.stringify(records), state.status, state.verifiedAt, state.failingSince, state.statusReason, now, row.id,
        decideReturnPath(row.returnPathHost, state.status, records),
      ],
    );
  let updated: number;
  try {
    updated = await write(next);
  } catch (err) {
    // Another project got there first (partial unique index on verified names).
    if (!(err instanceof UniqueConstraintViolationException)) throw err;
    next = { status: 'PENDING', verifiedAt: null, failingSince: null, statusReason: OTHER_PROJECT_REASON };
    updated = await write(next);
  }
  if (updated === 0) return { exists: false, status: null, records: [], nextCheckInMs: 0 };

  let nextCheckInMs = next.status === 'VERIFIED' && !next.failingSince ? settings.recheckIntervalMs : settings.checkIntervalMs;
  if (next.failingSince) {
    const untilDemotion = next.failingSince.getTime() + settings.demoteAfterMs - now.getTime();
    nextCheckInMs = Math.max(1_000, Math.min(nextCheckInMs, untilDemotion));
  }
  return { exists: true, status: next.status, records: records.map((r) => ({ purpose: r.purpose, status: r.status })), nextCheckInMs };
}
