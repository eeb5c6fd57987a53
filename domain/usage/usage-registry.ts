import type { EntityManager } from '@mikro-orm/postgresql';

/** Something that references a contact field, an event name or a template. */
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

/**
 * A campaign or workflow step that uses a template. `active` (a scheduled or sending campaign, an enabled workflow)
 * means deleting the template would break something running, so the delete is refused.
 */
export interface TemplateReference extends UsageReference {
  active: boolean;
}

export type TemplateUsageKind = 'campaigns' | 'workflows';

export interface TemplateUsage {
  campaigns: TemplateReference[];
  workflows: TemplateReference[];
}

export type TemplateFinder = (em: EntityManager, projectId: string, templateId: string) => Promise<TemplateReference[]>;

const fieldFinders: { kind: UsageKind; find: Finder }[] = [];
const eventFinders: { kind: UsageKind; find: Finder }[] = [];
const templateFinders: { kind: TemplateUsageKind; find: TemplateFinder }[] = [];

/**
 * The one place features register what they reference: segments, campaigns and workflows each add a finder for
 * contact fields and one for event names, and campaigns and workflows one for templates. Usage endpoints and
 * deletion guards ask here, so a feature never imports another feature's tables. Part of the process registry
 * (domain/registry.ts): features register from `buildRegistry`, which the API and the worker both run at start-up.
 */
export const usageRegistry = {
  registerFieldFinder(kind: UsageKind, find: Finder): void {
    fieldFinders.push({ kind, find });
  },
  registerEventFinder(kind: UsageKind, find: Finder): void {
    eventFinders.push({ kind, find });
  },
  /**
   * Campaigns and workflows register how to find what uses a template (`DELETE /templates/:id` refuses while any
   * reference is active). Returns a function that removes the finder again (tests).
   */
  registerTemplateFinder(kind: TemplateUsageKind, find: TemplateFinder): () => void {
    const entry = { kind, find };
    templateFinders.push(entry);
    return () => {
      const i = templateFinders.indexOf(entry);
      if (i >= 0) templateFinders.splice(i, 1);
    };
  },
  fieldUsage: (em: EntityManager, projectId: string, field: string) => collect(fieldFinders, em, projectId, field),
  eventUsage: (em: EntityManager, projectId: string, eventName: string) => collect(eventFinders, em, projectId, eventName),
  /** Every campaign and workflow step that references the template, active or not. */
  async templateUsage(em: EntityManager, projectId: string, templateId: string): Promise<TemplateUsage> {
    const usage: TemplateUsage = { campaigns: [], workflows: [] };
    for (const { kind, find } of templateFinders) usage[kind].push(...(await find(em, projectId, templateId)));
    return usage;
  },
};

async function collect(finders: { kind: UsageKind; find: Finder }[], em: EntityManager, projectId: string, name: string): Promise<Usage> {
  const usage: Usage = { segments: [], campaigns: [], workflows: [], templates: [] };
  for (const { kind, find } of finders) usage[kind].push(...(await find(em, projectId, name)));
  return usage;
}
