/**
 * What a project reset deletes, in order (domain/projects/project-reset.ts), and its chunk size. Pure: the reset
 * workflow imports it.
 */
export const RESET_KINDS = ['events', 'emails', 'contacts', 'campaigns', 'automations', 'segments', 'templates', 'uploads', 'rollups'] as const;
export type ResetKind = (typeof RESET_KINDS)[number];

/** Rows per delete: small enough that a chunk commits in well under a second, large enough to get through millions. */
export const RESET_CHUNK = 5_000;
