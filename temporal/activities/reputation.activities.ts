import { Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { evaluateReputation } from '../../domain/reputation/reputation';

export function createReputationActivities(deps: ActivityDeps) {
  return {
    /** Suspends every project past a threshold, pauses its campaigns and emails its owners; answers the projects suspended now. */
    async evaluateReputation(): Promise<string[]> {
      const ctx = Context.current();
      return evaluateReputation(deps.orm.em.fork(), { control: deps.temporal(), transport: deps.transport, config: deps.config }, () => ctx.heartbeat());
    },
  };
}

export type ReputationActivities = ReturnType<typeof createReputationActivities>;
