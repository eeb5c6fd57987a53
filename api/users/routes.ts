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
  projectForMember,
  rotateKeys,
  updateProject,
} from '../../domain/projects/project.service';
import { deleteProjectUploads } from '../../domain/uploads/upload.service';
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
    params: IdParams,
    body: UpdateProjectBody,
    responses: { 200: { description: 'Updated project', schema: ProjectSchema }, ...errorResponses(401, 403, 404, 422) },
    handler: async ({ ctx, params, body, userId }) => {
      const { project, role } = await projectForMember(ctx.state.em, userId, params.id, 'ADMIN');
      return { body: presentProject(await updateProject(ctx.state.em, project, body), role) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/users/@me/projects/:id',
    summary: 'Delete the project and all its data (OWNER)',
    tags: ['Dashboard'],
    auth: 'session',
    params: IdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 403, 404) },
    handler: async ({ ctx, params, userId }) => {
      const { project } = await projectForMember(ctx.state.em, userId, params.id, 'OWNER');
      // Uploads first: their rows would go with the project (cascade), leaving their bytes in storage.
      await deleteProjectUploads(ctx.state.em, uploadStorageFor(deps.config.uploads), project.id);
      await deleteProject(ctx.state.em, project);
      return {};
    },
  });

  routes.add({
    method: 'post',
    path: '/users/@me/projects/:id/regenerate-keys',
    summary: 'Rotate both API keys (ADMIN or OWNER)',
    description: 'The old keys stop working immediately; there is no grace period.',
    tags: ['Dashboard'],
    auth: 'session',
    params: IdParams,
    responses: { 200: { description: 'The new keys', schema: KeysSchema }, ...errorResponses(401, 403, 404) },
    handler: async ({ ctx, params, userId }) => {
      const { project } = await projectForMember(ctx.state.em, userId, params.id, 'ADMIN');
      const keys = await rotateKeys(ctx.state.em, project);
      // The old keys stop working at once: this process forgets them now (others on the change feed's notification).
      deps.caches.keys?.forgetProject(project.id);
      return { body: presentKeys(keys) };
    },
  });
}
