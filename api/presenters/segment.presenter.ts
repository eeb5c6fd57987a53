import { z } from 'zod';
import type { SegmentRow } from '../../domain/segments/segment.service';
import type { SegmentCompute } from '../../domain/segments/segment-compute';
import { workflowIds } from '../../temporal/definitions';
import { iso } from './time';

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
    createdAt: iso(s.createdAt),
    updatedAt: iso(s.updatedAt),
  };
}

const SegmentComputeResultSchema = z
  .object({
    entered: z.number().int().meta({ description: 'Contacts that entered (one segment.<slug>.entry event each).' }),
    exited: z.number().int().meta({ description: 'Contacts that left (one segment.<slug>.exit event each).' }),
    memberCount: z.number().int(),
  })
  .meta({ id: 'SegmentComputeResult' });

export const SegmentComputeSchema = z
  .object({
    id: z.string().meta({ description: 'The compute: the Temporal run id of its workflow.' }),
    segmentId: z.string(),
    workflowId: z.string().meta({ description: 'segment-compute/<segmentId>: the workflow in Temporal Web UI (one run per compute).' }),
    status: z.enum(['RUNNING', 'COMPLETED', 'FAILED']),
    result: SegmentComputeResultSchema.nullable().meta({ description: 'Once COMPLETED.' }),
    error: z.string().nullable().meta({ description: 'Once FAILED: why.' }),
    startedAt: z.iso.datetime(),
    finishedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'SegmentCompute' });

export function presentSegmentCompute(c: SegmentCompute): z.infer<typeof SegmentComputeSchema> {
  return {
    id: c.runId,
    segmentId: c.segmentId,
    workflowId: workflowIds.segmentCompute(c.segmentId),
    status: c.status,
    result: c.result ? { entered: c.result.entered, exited: c.result.exited, memberCount: c.result.memberCount } : null,
    error: c.error,
    startedAt: iso(c.startedAt),
    finishedAt: iso(c.finishedAt),
  };
}
