import type { EntityManager } from '@mikro-orm/postgresql';

/** Why a segment cannot be deleted right now (e.g. "used by the active campaign Spring sale"), or undefined. */
export type SegmentDeletionGuard = (em: EntityManager, projectId: string, segmentId: string) => Promise<string | undefined>;

const guards: SegmentDeletionGuard[] = [];

/**
 * Features that depend on a segment (campaigns sending to it) register a guard here; `DELETE /segments/:id` answers
 * 409 SEGMENT_IN_USE with the first reason a guard gives. Kept apart from the service so campaigns can register
 * without importing segment internals. Part of the process registry (domain/registry.ts): guards are registered from
 * `buildRegistry`, which the API and the worker both run at start-up.
 */
export const segmentDeletionGuards = {
  register(guard: SegmentDeletionGuard): void {
    guards.push(guard);
  },
  async blocker(em: EntityManager, projectId: string, segmentId: string): Promise<string | undefined> {
    for (const guard of guards) {
      const reason = await guard(em, projectId, segmentId);
      if (reason) return reason;
    }
    return undefined;
  },
};
