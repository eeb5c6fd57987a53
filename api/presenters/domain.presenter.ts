import { z } from 'zod';
import type { Domain } from '../../domain/domains/domain.entity';
import {
  RECORD_PURPOSES,
  RECORD_STATUSES,
  RECORD_TYPES,
  RETURN_PATH_STATUSES,
  returnPathState,
  withReturnPathRecords,
  type ReturnPathSettings,
} from '../../domain/domains/dns-records';
import { iso } from './time';

const DnsRecordSchema = z
  .object({
    type: z.enum(RECORD_TYPES),
    name: z.string().meta({ description: 'Fully qualified name of the record', example: '_mailwright.example.com' }),
    value: z.string().meta({
      description:
        'The exact value to publish. TXT: the text. MX: `<preference> <exchange>` as in a zone file (`10 mx.example.net`); where a DNS host asks ' +
        'for the two separately, the number is the priority and the host name the value.',
    }),
    purpose: z.enum(RECORD_PURPOSES).meta({
      description:
        "OWNERSHIP, DKIM, SPF, DMARC: records of the domain. RETURN_PATH_MX, RETURN_PATH_SPF: its bounce host's MX (to this service's inbound " +
        'server) and SPF, which give its mail a return path (see returnPath).',
    }),
    required: z.boolean().meta({ description: 'OWNERSHIP and DKIM are required for verification; the others are recommended' }),
    status: z.enum(RECORD_STATUSES).meta({
      description:
        'PENDING (not checked yet), VERIFIED, NOT_FOUND, MISMATCH (other values of that type are published there), LOOKUP_FAILED (the DNS lookup failed; inconclusive)',
    }),
    lastCheckedAt: z.iso.datetime().nullable(),
    found: z.array(z.string()).optional().meta({ description: 'On MISMATCH: what is published instead' }),
    error: z.string().optional().meta({ description: 'On LOOKUP_FAILED: the resolver error code' }),
  })
  .meta({ id: 'DnsRecord' });

const ReturnPathSchema = z
  .object({
    host: z.string().meta({ description: "The domain's bounce host, `<RETURN_PATH_LABEL>.<domain>`", example: 'bounces.example.com' }),
    status: z.enum(RETURN_PATH_STATUSES).meta({
      description:
        'ACTIVE: the domain is verified and the MX record of its bounce host names the inbound server; every email from it has its own signed ' +
        'envelope sender on the bounce host, so bounces, complaints and List-Unsubscribe mail come back to this service. NOT_CONFIGURED: mail ' +
        'is sent as before, with the From address as envelope sender. Never affects whether the domain may send.',
    }),
    mailFrom: z.string().meta({
      description: 'The envelope sender (SMTP MAIL FROM, the Return-Path receivers record) of mail from this domain, as a pattern',
      example: 'b-<token>@bounces.example.com',
    }),
    reason: z.string().nullable().meta({ description: 'Why the return path is NOT_CONFIGURED; null when ACTIVE' }),
  })
  .meta({ id: 'DomainReturnPath' });

export const DomainSchema = z
  .object({
    id: z.string(),
    projectId: z.string(),
    name: z.string().meta({ example: 'example.com' }),
    status: z.enum(['PENDING', 'VERIFIED']),
    statusReason: z.string().nullable().meta({ description: 'Why the domain is pending, or what is wrong with a verified one' }),
    records: z.array(DnsRecordSchema),
    dkimSelector: z.string().nullable().meta({ description: 'Mail from a verified domain is DKIM-signed with this selector' }),
    verifiedAt: z.iso.datetime().nullable(),
    lastCheckedAt: z.iso.datetime().nullable(),
    failingSince: z.iso.datetime().nullable().meta({ description: 'Since when a required record of this verified domain is missing or wrong' }),
    returnPath: ReturnPathSchema,
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Domain' });

/**
 * A domain as the API shows it. Its records are shown as the next check will look them up (withReturnPathRecords), so a
 * domain stored before the bounce host's records existed lists them, PENDING, before its first check since.
 */
export function presentDomain(domain: Domain, returnPath: ReturnPathSettings): z.infer<typeof DomainSchema> {
  const records = withReturnPathRecords(domain.records, domain.name, returnPath);
  return {
    id: domain.id,
    projectId: domain.project.id,
    name: domain.name,
    status: domain.status,
    statusReason: domain.statusReason ?? null,
    records: records.map((r) => ({
      type: r.type,
      name: r.name,
      value: r.value,
      purpose: r.purpose,
      required: r.required,
      status: r.status,
      lastCheckedAt: r.lastCheckedAt,
      ...(r.found ? { found: r.found } : {}),
      ...(r.error ? { error: r.error } : {}),
    })),
    dkimSelector: domain.dkimSelector ?? null,
    verifiedAt: iso(domain.verifiedAt ?? null),
    lastCheckedAt: iso(domain.lastCheckedAt ?? null),
    failingSince: iso(domain.failingSince ?? null),
    returnPath: returnPathState({ name: domain.name, status: domain.status, returnPathHost: domain.returnPathHost ?? null, records }, returnPath),
    createdAt: iso(domain.createdAt),
    updatedAt: iso(domain.updatedAt),
  };
}
