import { Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { deleteResetChunk, endProjectReset, stopProjectActivity } from '../../domain/projects/project-reset';
import { RESET_CHUNK, RESET_KINDS } from '../../domain/projects/reset-kinds';
import { uploadStorageFor } from '../../domain/uploads/upload-storage';

export function createProjectResetActivities(deps: ActivityDeps) {
  return {
    /** Disables the project's automations, cancels its active campaigns and automation runs. */
    async stopProjectActivity(input: { projectId: string }): Promise<{ campaigns: number; runs: number }> {
      const ctx = Context.current();
      return stopProjectActivity(deps.orm.em.fork(), deps.temporal(), input.projectId, () => ctx.heartbeat());
    },

    /**
     * Deletes the next chunk of the reset's step (an index into RESET_KINDS); answers the step to do next: the same
     * while rows of its kind are left, then the next kind's, null after the last.
     */
    async deleteResetChunk(input: { resetId: string; projectId: string; step: number }): Promise<{ deleted: number; next: number | null }> {
      const kind = RESET_KINDS[input.step];
      if (!kind) return { deleted: 0, next: null };
      const deleted = await deleteResetChunk(deps.orm.em.fork(), uploadStorageFor(deps.config.uploads), { ...input, kind });
      const more = deleted >= RESET_CHUNK && kind !== 'uploads' && kind !== 'rollups';
      const next = more ? input.step : input.step + 1 < RESET_KINDS.length ? input.step + 1 : null;
      return { deleted, next };
    },

    async endProjectReset(input: { resetId: string; status: 'COMPLETED' | 'FAILED' | 'CANCELLED'; error?: string }): Promise<void> {
      await endProjectReset(deps.orm.em.fork(), input);
    },
  };
}

export type ProjectResetActivities = ReturnType<typeof createProjectResetActivities>;
