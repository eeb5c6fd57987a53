import { z } from 'zod';
import { DEFAULT_PROJECT_SETTINGS, type Project } from '../../domain/projects/project.entity';
import { RESPONSE_VARIANTS } from '../variant';
import type { Role } from '../../domain/projects/membership.entity';
import type { KeyPair } from '../../domain/projects/api-keys';
import { iso } from './time';

export const ProjectSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    role: z.enum(['OWNER', 'ADMIN', 'MEMBER']),
    publicKey: z.string().meta({ description: 'The public key (pk_...), safe to embed in browsers.' }),
    secretKeyHint: z.string().meta({ description: 'First characters of the secret key; the key itself is shown only at creation and rotation.' }),
    keysRotatedAt: z.iso.datetime(),
    disabled: z.boolean(),
    settings: z.object({
      trackOpens: z.boolean(),
      trackClicks: z.boolean(),
      responseVariant: z.enum(RESPONSE_VARIANTS),
      campaignSendRate: z.number().int().nullable().meta({ description: "Campaign emails per second; null: the deployment's CAMPAIGN_SEND_RATE." }),
      segmentRecomputeMinutes: z.number().int().nullable().meta({ description: 'Minutes between scheduled recomputes of tracked dynamic segments; null: hourly (60).' }),
    }),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Project' });

export const KeysSchema = z
  .object({ publicKey: z.string(), secretKey: z.string().meta({ description: 'Shown once; store it now.' }) })
  .meta({ id: 'ProjectKeys' });

export const ProjectWithKeysSchema = ProjectSchema.extend({ keys: KeysSchema }).meta({ id: 'ProjectWithKeys' });

export function presentProject(project: Project, role: Role): z.infer<typeof ProjectSchema> {
  return {
    id: project.id,
    name: project.name,
    role,
    publicKey: project.publicKey,
    secretKeyHint: project.secretKeyHint,
    keysRotatedAt: iso(project.keysRotatedAt),
    disabled: project.disabled,
    settings: { ...DEFAULT_PROJECT_SETTINGS, ...project.settings },
    createdAt: iso(project.createdAt),
    updatedAt: iso(project.updatedAt),
  };
}

export function presentKeys(keys: KeyPair): z.infer<typeof KeysSchema> {
  return { publicKey: keys.publicKey, secretKey: keys.secretKey };
}
