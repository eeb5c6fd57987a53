import type { EntityManager } from '@mikro-orm/postgresql';

/** Something that references a contact field or an event name. */
export interface UsageReference {
  id: string;
  name: string;
  /** Where inside it (e.g. "condition", "step 3", "audienceFilter"). */
  where?: string;
}

export type UsageKind = 'segments' | 'campaigns' | 'workflows' | 'templates';

export interface Usage {
  segments: UsageReference[];
  campaigns: UsageReference[];
  workflows: UsageReference[];
  templates: UsageReference[];
}

type Finder = (em: EntityManager, projectId: string, name: string) => Promise<UsageReference[]>;

const fieldFinders: { kind: UsageKind; find: Finder }[] = [];
const eventFinders: { kind: UsageKind; find: Finder }[] = [];

/**
 * The one place features register what they reference: segments, campaigns and workflows each add a finder for
 * contact fields and one for event names. Usage endpoints and deletion guards ask here.
 */
export const usageRegistry = {
  registerFieldFinder(kind: UsageKind, find: Finder): void {
    fieldFinders.push({ kind, find });
  },
  registerEventFinder(kind: UsageKind, find: Finder): void {
    eventFinders.push({ kind, find });
  },
  fieldUsage: (em: EntityManager, projectId: string, field: string) => collect(fieldFinders, em, projectId, field),
  eventUsage: (em: EntityManager, projectId: string, eventName: string) => collect(eventFinders, em, projectId, eventName),
};

async function collect(finders: { kind: UsageKind; find: Finder }[], em: EntityManager, projectId: string, name: string): Promise<Usage> {
  const usage: Usage = { segments: [], campaigns: [], workflows: [], templates: [] };
  for (const { kind, find } of finders) usage[kind].push(...(await find(em, projectId, name)));
  return usage;
}
