import type { EntityManager } from '@mikro-orm/postgresql';
import { Project, DEFAULT_PROJECT_SETTINGS, type ProjectSettings } from './project.entity';
import { Membership, type Role } from './membership.entity';
import { generateKeyPair, hashSecretKey, secretKeyHint, keyKind, type KeyPair, type KeyKind } from './api-keys';
import { forbidden, unauthorized } from '../errors';
import { ProjectScopedCache } from '../cache/lookup-cache';
import type { ChangeFeed } from '../cache/change-feed';
import { sql } from '../db/sql';

export interface ProjectWithKeys {
  project: Project;
  keys: KeyPair;
}

/** Creates a project with its one key pair and makes `userId` its owner. */
export async function createProject(em: EntityManager, input: { name: string; ownerId: string }): Promise<ProjectWithKeys> {
  const keys = generateKeyPair();
  const project = em.create(Project, {
    name: input.name,
    publicKey: keys.publicKey,
    secretKeyHash: hashSecretKey(keys.secretKey),
    secretKeyHint: secretKeyHint(keys.secretKey),
    keysRotatedAt: new Date(),
    settings: { ...DEFAULT_PROJECT_SETTINGS },
  });
  em.create(Membership, { project, user: input.ownerId, role: 'OWNER' });
  await em.flush();
  return { project, keys };
}

/** Replaces both keys at once; the old ones stop working with this commit (no grace period). */
export async function rotateKeys(em: EntityManager, project: Project): Promise<KeyPair> {
  const keys = generateKeyPair();
  project.publicKey = keys.publicKey;
  project.secretKeyHash = hashSecretKey(keys.secretKey);
  project.secretKeyHint = secretKeyHint(keys.secretKey);
  project.keysRotatedAt = new Date();
  await em.flush();
  return keys;
}

export interface ApiPrincipal {
  projectId: string;
  keyKind: KeyKind;
  /** The project's settings (tracking defaults), fresh through the same cache invalidation as the key. */
  settings: ProjectSettings;
}

interface KeyLookup {
  id: string;
  disabled: boolean;
  disabled_reason: string | null;
  settings: ProjectSettings;
}

/** Key lookups cached per process, invalidated by the `project:<id>` change feed (rotation, disabling, deletion). */
export type KeyLookupCache = ProjectScopedCache<KeyLookup>;
export const createKeyLookupCache = (feed: ChangeFeed | undefined): KeyLookupCache => new ProjectScopedCache<KeyLookup>(feed, 'project', 60_000);

/**
 * Resolves an API key to its project. Unknown keys -> 401 INVALID_API_KEY; a public key where a secret key is
 * required -> 401 INVALID_API_KEY; a disabled project -> 403.
 */
export async function authenticateApiKey(
  em: EntityManager,
  key: string | undefined,
  opts: { allowPublic: boolean; cache?: KeyLookupCache },
): Promise<ApiPrincipal> {
  if (!key) {
    throw unauthorized('UNAUTHORIZED', 'Missing API key', 'Send the header "Authorization: Bearer <API_KEY>".');
  }
  const kind = keyKind(key);
  if (!kind) throw unauthorized('INVALID_API_KEY', 'Invalid API key format', 'API keys start with "sk_" or "pk_".');
  if (kind === 'public' && !opts.allowPublic) {
    throw unauthorized(
      'INVALID_API_KEY',
      'This endpoint requires a secret key (sk_); public keys (pk_) may only call POST /v1/track',
      'Use your secret key from the project settings, on your server only.',
    );
  }
  const where = kind === 'secret' ? 'secret_key_hash = $1' : 'public_key = $1';
  const value = kind === 'secret' ? hashSecretKey(key) : key;
  const load = async () => {
    const found = await sql(em).one<KeyLookup>(`select id, disabled, disabled_reason, settings from projects where ${where} limit 1`, [value]);
    return found && { value: found, projectId: found.id };
  };
  const row = opts.cache ? await opts.cache.get(`${kind}:${value}`, load) : (await load())?.value;
  if (!row) throw unauthorized('INVALID_API_KEY', 'Invalid API key', 'Keys stop working at once when they are rotated.');
  if (row.disabled) {
    throw forbidden('PROJECT_DISABLED', `This project is disabled${row.disabled_reason ? `: ${row.disabled_reason}` : ''}`);
  }
  return { projectId: row.id, keyKind: kind, settings: { ...DEFAULT_PROJECT_SETTINGS, ...row.settings } };
}

export async function listProjectsForUser(em: EntityManager, userId: string): Promise<{ project: Project; role: Role }[]> {
  const memberships = await em.find(Membership, { user: userId }, { populate: ['project'], orderBy: { createdAt: 'asc' } });
  return memberships.map((m) => ({ project: m.project as unknown as Project, role: m.role }));
}

export async function updateProject(
  em: EntityManager,
  project: Project,
  patch: { name?: string; settings?: Partial<ProjectSettings> },
): Promise<Project> {
  if (patch.name !== undefined) project.name = patch.name;
  if (patch.settings) project.settings = { ...project.settings, ...patch.settings };
  await em.flush();
  return project;
}

/**
 * Deletes the project; its rows go with it through the foreign keys' ON DELETE CASCADE. One statement rather than
 * `em.remove`: inside the request's transaction the ORM, holding the caller's membership (loaded with its project),
 * removed the membership and kept the project.
 */
export async function deleteProject(em: EntityManager, project: Project): Promise<void> {
  await sql(em).run('delete from projects where id = $1', [project.id]);
}
