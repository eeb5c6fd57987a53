import { z } from 'zod';
import type { SegmentRow } from '../../domain/segments/segment.service';

export const SegmentSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string().meta({ description: 'Unique in the project; names the events segment.<slug>.entry / segment.<slug>.exit. Fixed at creation.' }),
    description: z.string().nullable(),
    type: z.enum(['DYNAMIC', 'STATIC']),
    condition: z.record(z.string(), z.unknown()).nullable().meta({ description: 'The filter (dynamic segments); null for static ones.' }),
    filters: z.record(z.string(), z.unknown()).optional().meta({ description: 'Only when created with the variant body { name, filters }: the same filter.' }),
    trackMembership: z.boolean(),
    memberCount: z.number().int().meta({ description: 'Cached count, as of countedAt.' }),
    countedAt: z.iso.datetime().nullable(),
    computedAt: z.iso.datetime().nullable().meta({ description: 'Last membership compute (tracked dynamic segments).' }),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Segment' });

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export function presentSegment(s: SegmentRow, opts: { echoFilters?: boolean } = {}): z.infer<typeof SegmentSchema> {
  return {
    id: s.id,
    name: s.name,
    slug: s.slug,
    description: s.description,
    type: s.type,
    condition: (s.condition as unknown as Record<string, unknown>) ?? null,
    ...(opts.echoFilters && s.condition ? { filters: s.condition as unknown as Record<string, unknown> } : {}),
    trackMembership: s.trackMembership,
    memberCount: s.memberCount,
    countedAt: iso(s.countedAt),
    computedAt: iso(s.computedAt),
    createdAt: iso(s.createdAt)!,
    updatedAt: iso(s.updatedAt)!,
  };
}
