import { initOrm, type EntityManager, type MikroORM } from '../../domain/orm';
import { AppError } from '../../domain/errors';
import { usageRegistry, type TemplateReference } from '../../domain/usage/usage-registry';
import { createTemplate, deleteTemplate, findTemplate, getTemplateUsage } from '../../domain/templates/template.service';
import { stackEnv } from '../stack-env';
import { closeDb, db } from '../helpers/db';
import { createTestProject, type TestProject } from '../helpers/fixtures';

/**
 * The delete guard of templates, against the real database: campaigns and workflows do not exist yet, so the
 * finders they will register are played here by test finders.
 */
let orm: MikroORM;
let project: TestProject;
const unregister: (() => void)[] = [];
const em = (): EntityManager => orm.em.fork();

async function newTemplate(name: string): Promise<string> {
  const t = await createTemplate(em(), project.projectId, { name, subject: 'Hi {{ first_name }}', body: '<p>Hello</p>', type: 'MARKETING' });
  return t.id;
}

async function exists(id: string): Promise<boolean> {
  const { rows } = await db().query('select 1 from templates where id = $1', [id]);
  return rows.length === 1;
}

/** A finder that reports `refs` for one template only, and records how it was called. */
function finderFor(templateId: string, refs: TemplateReference[], calls: { projectId: string; templateId: string; inTransaction: boolean }[] = []) {
  return async (e: EntityManager, projectId: string, id: string) => {
    calls.push({ projectId, templateId: id, inTransaction: e.isInTransaction() });
    return id === templateId ? refs : [];
  };
}

beforeAll(async () => {
  orm = await initOrm(stackEnv().databaseUrl, 2);
  project = await createTestProject('template-guard');
});
afterEach(() => {
  while (unregister.length) unregister.pop()!();
});
afterAll(async () => {
  await orm.close();
  await closeDb();
});

describe('template usage registry', () => {
  test('templateUsage collects every registered finder by kind; unregistering removes a finder', async () => {
    const id = await newTemplate('Collected');
    unregister.push(usageRegistry.registerTemplateFinder('campaigns', finderFor(id, [{ id: 'c1', name: 'Spring sale', active: false }])));
    unregister.push(usageRegistry.registerTemplateFinder('campaigns', finderFor(id, [{ id: 'c2', name: 'Summer sale', active: true }])));
    const removeWorkflow = usageRegistry.registerTemplateFinder('workflows', finderFor(id, [{ id: 'w1', name: 'Onboarding', where: 'step 2', active: false }]));
    unregister.push(removeWorkflow);
    expect(await getTemplateUsage(em(), project.projectId, id)).toEqual({
      campaigns: [{ id: 'c1', name: 'Spring sale', active: false }, { id: 'c2', name: 'Summer sale', active: true }],
      workflows: [{ id: 'w1', name: 'Onboarding', where: 'step 2', active: false }],
    });
    removeWorkflow();
    expect((await getTemplateUsage(em(), project.projectId, id)).workflows).toEqual([]);
  });

  test('usage of a template of another project is 404 before any finder runs', async () => {
    const id = await newTemplate('Mine');
    const other = await createTestProject('template-guard-other');
    const calls: { projectId: string; templateId: string; inTransaction: boolean }[] = [];
    unregister.push(usageRegistry.registerTemplateFinder('campaigns', finderFor(id, [], calls)));
    await expect(getTemplateUsage(em(), other.projectId, id)).rejects.toMatchObject({ statusCode: 404, code: 'NOT_FOUND' });
    expect(calls).toEqual([]);
  });
});

describe('DELETE guard', () => {
  test('an active campaign blocks the delete with 409 TEMPLATE_IN_USE naming it; the template stays', async () => {
    const id = await newTemplate('Guarded by a campaign');
    const calls: { projectId: string; templateId: string; inTransaction: boolean }[] = [];
    unregister.push(usageRegistry.registerTemplateFinder('campaigns', finderFor(id, [{ id: 'c1', name: 'Black Friday', active: true }], calls)));
    const err = await deleteTemplate(em(), project.projectId, id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ statusCode: 409, code: 'TEMPLATE_IN_USE' });
    expect((err as AppError).message).toContain('campaign "Black Friday"');
    expect((err as AppError).options.suggestion).toContain('/usage');
    // The finder ran inside the delete's transaction, for this project and template.
    expect(calls).toEqual([{ projectId: project.projectId, templateId: id, inTransaction: true }]);
    expect(await exists(id)).toBe(true);
  });

  test('an enabled workflow blocks it too, with the step it is used in', async () => {
    const id = await newTemplate('Guarded by a workflow');
    unregister.push(usageRegistry.registerTemplateFinder('workflows', finderFor(id, [{ id: 'w1', name: 'Welcome series', where: 'step "Send welcome"', active: true }])));
    await expect(deleteTemplate(em(), project.projectId, id)).rejects.toMatchObject({
      statusCode: 409,
      code: 'TEMPLATE_IN_USE',
      message: expect.stringContaining('workflow "Welcome series" (step "Send welcome")'),
    });
    expect(await exists(id)).toBe(true);
  });

  test('inactive references (draft campaign, disabled workflow) do not block: the template is deleted', async () => {
    const id = await newTemplate('Only drafts use it');
    unregister.push(usageRegistry.registerTemplateFinder('campaigns', finderFor(id, [{ id: 'c1', name: 'Draft', active: false }])));
    unregister.push(usageRegistry.registerTemplateFinder('workflows', finderFor(id, [{ id: 'w1', name: 'Disabled', active: false }])));
    await deleteTemplate(em(), project.projectId, id);
    expect(await exists(id)).toBe(false);
    await expect(findTemplate(em(), project.projectId, id)).rejects.toMatchObject({ statusCode: 404 });
  });

  test('a reference to another template does not block this one', async () => {
    const used = await newTemplate('Used');
    const free = await newTemplate('Free');
    unregister.push(usageRegistry.registerTemplateFinder('campaigns', finderFor(used, [{ id: 'c1', name: 'Live', active: true }])));
    await deleteTemplate(em(), project.projectId, free);
    expect(await exists(free)).toBe(false);
    await expect(deleteTemplate(em(), project.projectId, used)).rejects.toMatchObject({ statusCode: 409 });
  });

  test('many active references are summarized in the message', async () => {
    const id = await newTemplate('Popular');
    const refs = Array.from({ length: 7 }, (_, i) => ({ id: `c${i}`, name: `Campaign ${i}`, active: true }));
    unregister.push(usageRegistry.registerTemplateFinder('campaigns', finderFor(id, refs)));
    const err = (await deleteTemplate(em(), project.projectId, id).catch((e: unknown) => e)) as AppError;
    expect(err.message).toContain('campaign "Campaign 4"');
    expect(err.message).not.toContain('Campaign 5"');
    expect(err.message).toContain('and 2 more');
  });

  test("another project's template: 404, the finders are not asked and nothing is deleted", async () => {
    const id = await newTemplate('Not yours');
    const other = await createTestProject('template-guard-other-2');
    const calls: { projectId: string; templateId: string; inTransaction: boolean }[] = [];
    unregister.push(usageRegistry.registerTemplateFinder('campaigns', finderFor(id, [], calls)));
    await expect(deleteTemplate(em(), other.projectId, id)).rejects.toMatchObject({ statusCode: 404, code: 'NOT_FOUND' });
    expect(calls).toEqual([]);
    expect(await exists(id)).toBe(true);
  });
});
