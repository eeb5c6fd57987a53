import { z } from 'zod';
import type { Domain } from '../../domain/domains/domain.entity';
import { RECORD_PURPOSES, RECORD_STATUSES } from '../../domain/domains/dns-records';
import { iso } from './time';

const DnsRecordSchema = z
  .object({
    type: z.literal('TXT'),
    name: z.string().meta({ description: 'Fully qualified name of the record', example: '_mailwright.example.com' }),
    value: z.string().meta({ description: 'The exact TXT value to publish' }),
    purpose: z.enum(RECORD_PURPOSES),
    required: z.boolean().meta({ description: 'OWNERSHIP and DKIM are required for verification; SPF and DMARC are recommended' }),
    status: z.enum(RECORD_STATUSES).meta({
      description:
        'PENDING (not checked yet), VERIFIED, NOT_FOUND, MISMATCH (other TXT values are published there), LOOKUP_FAILED (the DNS lookup failed; inconclusive)',
    }),
    lastCheckedAt: z.iso.datetime().nullable(),
    found: z.array(z.string()).optional().meta({ description: 'On MISMATCH: what is published instead' }),
    error: z.string().optional().meta({ description: 'On LOOKUP_FAILED: the resolver error code' }),
  })
  .meta({ id: 'DnsRecord' });

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
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Domain' });

export function presentDomain(domain: Domain): z.infer<typeof DomainSchema> {
  return {
    id: domain.id,
    projectId: domain.project.id,
    name: domain.name,
    status: domain.status,
    statusReason: domain.statusReason ?? null,
    records: domain.records.map((r) => ({
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
    createdAt: iso(domain.createdAt),
    updatedAt: iso(domain.updatedAt),
  };
}
