import type { ContactData } from './contact.entity';

/** Keys the service owns; clients' values for them are silently dropped (SPEC.md › Contact, rule 5). */
export const RESERVED_DATA_KEYS: ReadonlySet<string> = new Set([
  'id',
  'mailwright_id',
  'mailwright_email',
  'email',
  'unsubscribeUrl',
  'subscribeUrl',
  'manageUrl',
]);

export interface DataChanges {
  /** Keys to store (rule 1). */
  set: ContactData;
  /** Keys to delete (rule 2: null). */
  unset: string[];
  /** Values for this call only, never stored (rule 4: `{ value, persistent: false }`). */
  transient: ContactData;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;
}

/** `{ value, persistent }` with nothing else is a wrapper, not data to store as an object. */
function isWrapper(v: Record<string, unknown>): v is { value: unknown; persistent: boolean } {
  const keys = Object.keys(v);
  return keys.length === 2 && 'value' in v && typeof v.persistent === 'boolean';
}

/**
 * Splits a call's `data` into what to store, delete and use once, by SPEC.md › Contact rules 1-5. Arrays are
 * stored like primitives (tags and lists are the common case).
 */
export function splitContactData(input: ContactData | undefined): DataChanges {
  const changes: DataChanges = { set: {}, unset: [], transient: {} };
  if (!input) return changes;
  for (const [key, raw] of Object.entries(input)) {
    if (RESERVED_DATA_KEYS.has(key) || raw === undefined) continue;
    if (raw === null) {
      changes.unset.push(key);
      continue;
    }
    if (raw === '') continue;
    if (isPlainObject(raw) && isWrapper(raw)) {
      if (raw.persistent) {
        if (raw.value === null) changes.unset.push(key);
        else if (raw.value !== '' && raw.value !== undefined) changes.set[key] = raw.value;
      } else if (raw.value !== undefined) {
        changes.transient[key] = raw.value;
      }
      continue;
    }
    changes.set[key] = raw;
  }
  return changes;
}
