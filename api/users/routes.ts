import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { CreateProjectBody, UpdateProjectBody } from './schema';
import { IdParams, errorResponses } from '../common.schema';
import { UserSchema, presentUser } from '../presenters/user.presenter';
import { KeysSchema, ProjectSchema, ProjectWithKeysSchema, presentKeys, presentProject } from '../presenters/project.presenter';
import { getUser } from '../../domain/users/user.service';
import {
  createProject,
  deleteProject,
  listProjectsForUser,
  rotateKeys,
  updateProject,
} from '../../domain/projects/project.service';
import { deleteProjectUploads } from '../../domain/uploads/upload.service';
import { listProjectResets, requestProjectReset, type ProjectResetRow } from '../../domain/projects/project-reset';
import { RESET_KINDS } from '../../domain/projects/reset-kinds';
import { uploadStorageFor } from '../../domain/uploads/upload-storage';

export function userRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/users/@me',
    summary: 'The logged-in user',
    tags: ['Dashboard'],
    auth: 'session',
    responses: { 200: { description: 'Current user', schema: UserSchema }, ...errorResponses(401) },
    handler: async ({ ctx, userId }) => ({ body: presentUser(await getUser(ctx.state.em, userId)) }),
  });

  routes.add({
    method: 'get',
    path: '/users/@me/projects',
    summary: "The user's projects",
    tags: ['Dashboard'],
    auth: 'session',
    responses: { 200: { description: 'Projects with the user role', schema: z.array(ProjectSchema) }, ...errorResponses(401) },
    handler: async ({ ctx, userId }) => ({
      body: (await listProjectsForUser(ctx.state.em, userId)).map((p) => presentProject(p.project, p.role)),
    }),
  });

  routes.add({
    method: 'post',
    path: '/users/@me/projects',
    summary: 'Create a project (the caller becomes its owner)',
    description: 'The response carries the key pair; the secret key is never shown again (only rotated).',
    tags: ['Dashboard'],
    auth: 'session',
    body: CreateProjectBody,
    responses: { 201: { description: 'Project created', schema: ProjectWithKeysSchema }, ...errorResponses(401, 422) },
    handler: async ({ ctx, body, userId }) => {
      await getUser(ctx.state.em, userId);
      const { project, keys } = await createProject(ctx.state.em, { name: body.name, ownerId: userId });
      return { status: 201, body: { ...presentProject(project, 'OWNER'), keys: presentKeys(keys) } };
    },
  });

  routes.add({
    method: 'patch',
    path: '/users/@me/projects/:id',
    summary: 'Update project name and settings (ADMIN or OWNER)',
    tags: ['Dashboard'],
    auth: 'session',
    permission: 'project.update',
    params: IdParams,
    body: UpdateProjectBody,
    responses: { 200: { description: 'Updated project', schema: ProjectSchema }, ...errorResponses(401, 403, 404, 422) },
    handler: async ({ ctx, params, body, member, afterCommit }) => {
      const { project, role } = await member(params.id);
      const updated = await updateProject(ctx.state.em, project, body);
      // The keys' cached principal carries the settings: once committed, this process reads them afresh (others on
      // the change feed's notification).
      afterCommit(() => deps.caches.keys?.forgetProject(project.id));
      return { body: presentProject(updated, role) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/users/@me/projects/:id',
    summary: 'Delete the project and all its data (OWNER)',
    tags: ['Dashboard'],
    auth: 'session',
    permission: 'project.delete',
    params: IdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 403, 404) },
    handler: async ({ ctx, params, member, afterCommit }) => {
      const { project } = await member(params.id);
      // Uploads first: their rows would go with the project (cascade), leaving their bytes in storage.
      await deleteProjectUploads(ctx.state.em, uploadStorageFor(deps.config.uploads), project.id);
      await deleteProject(ctx.state.em, project);
      // Its keys stop working at once in this process (others on the change feed's notification).
      afterCommit(() => deps.caches.keys?.forgetProject(project.id));
      return {};
    },
  });

  const ResetSchema = z
    .object({
      id: z.string(),
      status: z.enum(['RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED']),
      workflowId: z.string().meta({ description: 'The Temporal workflow (`project-reset/<projectId>`), to watch or cancel in Temporal Web UI.' }),
      deleted: z.record(z.string(), z.number().int()).meta({ description: `Rows deleted so far, per kind (${RESET_KINDS.join(', ')}).` }),
      error: z.string().nullable(),
      createdAt: z.iso.datetime(),
      finishedAt: z.iso.datetime().nullable(),
    })
    .meta({ id: 'ProjectReset' });
  const presentReset = (r: ProjectResetRow) => ({
    id: r.id,
    status: r.status,
    workflowId: r.workflowId,
    deleted: Object.fromEntries(Object.entries(r.deleted).map(([k, v]) => [k, Number(v)])),
    error: r.error,
    createdAt: new Date(r.createdAt).toISOString(),
    finishedAt: r.finishedAt ? new Date(r.finishedAt).toISOString() : null,
  });

  routes.add({
    method: 'post',
    path: '/users/@me/projects/:id/reset',
    summary: "Delete the project's data, keeping its keys, members, domains and settings (OWNER)",
    description:
      "Confirmed by the project's name in `confirm`. Starts the workflow `project-reset/<projectId>`: it disables the project's automations, cancels its " +
      'active campaigns and automation runs, then deletes its events, emails, contacts, campaigns, workflows, segments, templates, uploads and analytics, ' +
      'a chunk at a time. Watch it with `GET .../resets`. 409 `RESET_RUNNING` while one runs.',
    tags: ['Dashboard'],
    auth: 'session',
    ownTransactions: 'Stores and starts its workflow as one unit (persistThenStart): the row commits before the start',
    permission: 'project.reset',
    params: IdParams,
    body: z.object({ confirm: z.string().max(200).meta({ description: "The project's name, exactly." }) }),
    responses: { 202: { description: 'The reset started', schema: ResetSchema }, ...errorResponses(401, 403, 404, 409, 422, 503) },
    handler: async ({ ctx, params, body, userId, member }) => {
      const { project } = await member(params.id);
      const reset = await requestProjectReset(ctx.state.em, deps.temporal, { projectId: project.id, projectName: project.name, userId, confirm: body.confirm });
      return { status: 202, body: presentReset(reset) };
    },
  });

  routes.add({
    method: 'get',
    path: '/users/@me/projects/:id/resets',
    summary: "The project's resets, newest first (the last 20; OWNER)",
    tags: ['Dashboard'],
    auth: 'session',
    permission: 'project.reset',
    params: IdParams,
    responses: { 200: { description: 'Resets, newest first', schema: z.object({ data: z.array(ResetSchema) }).meta({ id: 'ProjectResetList' }) }, ...errorResponses(401, 403, 404) },
    handler: async ({ ctx, params, member }) => {
      const { project } = await member(params.id);
      return { body: { data: (await listProjectResets(ctx.state.em, project.id)).map(presentReset) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/users/@me/projects/:id/regenerate-keys',
    summary: 'Rotate both API keys (ADMIN or OWNER)',
    description: 'The old keys stop working immediately; there is no grace period.',
    tags: ['Dashboard'],
    auth: 'session',
    permission: 'project.rotateKeys',
    params: IdParams,
    responses: { 200: { description: 'The new keys', schema: KeysSchema }, ...errorResponses(401, 403, 404) },
    handler: async ({ ctx, params, member, afterCommit }) => {
      const { project } = await member(params.id);
      const keys = await rotateKeys(ctx.state.em, project);
      // The old keys stop working at once: once committed, this process forgets them (others on the change feed's notification).
      afterCommit(() => deps.caches.keys?.forgetProject(project.id));
      return { body: presentKeys(keys) };
    },
  });
}
