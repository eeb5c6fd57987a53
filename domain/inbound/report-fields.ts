/**
 * The header-like text inside mail reports: the field groups of `message/delivery-status` (RFC 3464) and
 * `message/feedback-report` (RFC 5965), and the header block of a returned original message. mailparser hands those
 * parts over as opaque attachments, so they are read here: fields unfolded, names lowercased, values trimmed, with
 * bounds on what is read because the text comes from anyone.
 */

export interface Field {
  /** Lowercased. */
  name: string;
  value: string;
}

/** Fields read from one report part at the most; real reports have a few dozen. */
const MAX_FIELDS = 500;
/** Bytes of one part read at the most (a header block or a report's fields are a few kilobytes). */
const MAX_FIELD_TEXT = 64 * 1024;
const FIELD_RE = /^([!-9;-~]+)[ \t]*:(.*)$/;

/**
 * `text` as groups of fields separated by blank lines (a DSN: per-message fields, then one group per recipient).
 * Continuation lines join their field with one space; a line that is neither is skipped, as MTAs add junk.
 */
export function fieldGroups(text: string): Field[][] {
  const groups: Field[][] = [];
  let group: Field[] = [];
  let fields = 0;
  for (const line of text.slice(0, MAX_FIELD_TEXT).split(/\r?\n/)) {
    if (line.trim() === '') {
      if (group.length) groups.push(group);
      group = [];
      continue;
    }
    const last = group[group.length - 1];
    if ((line[0] === ' ' || line[0] === '\t') && last) {
      last.value = `${last.value} ${line.trim()}`.trim();
      continue;
    }
    const m = FIELD_RE.exec(line);
    if (!m) continue;
    if (++fields > MAX_FIELDS) break;
    group.push({ name: m[1]!.toLowerCase(), value: m[2]!.trim() });
  }
  if (group.length) groups.push(group);
  return groups;
}

/** The header block of a message (everything before its first blank line): its fields and its text. */
export function headerBlock(message: string): ReturnedOriginal {
  const text = message.slice(0, MAX_FIELD_TEXT);
  const end = /\r?\n\r?\n/.exec(text);
  const headerText = end ? text.slice(0, end.index) : text;
  return { fields: fieldGroups(headerText)[0] ?? [], headerText };
}

/** The first value of field `name` (lowercase) in `fields`. */
export function field(fields: readonly Field[], name: string): string | undefined {
  return fields.find((f) => f.name === name)?.value;
}

/**
 * A typed value without its type: `rfc822; bob@example.org` -> `bob@example.org`, `dns; mx.example.org` ->
 * `mx.example.org`, `smtp; 550 5.1.1 ...` -> `550 5.1.1 ...` (RFC 3464 address-, MTA-name- and diagnostic-type).
 * Angle brackets some MTAs put around addresses go too.
 */
export function untyped(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const m = /^[A-Za-z0-9][A-Za-z0-9-]*\s*;\s*([\s\S]*)$/.exec(value);
  const v = (m ? m[1]! : value).trim();
  const bare = /^<([^<>]*)>$/.exec(v);
  return (bare ? bare[1]!.trim() : v) || undefined;
}

/** The address of a mailbox header value (`Bob <bob@example.org>`, `bob@example.org`), or undefined. */
export function addressIn(value: string | undefined): string | undefined {
  return value?.match(/<([^<>\s]+@[^<>\s]+)>/)?.[1] ?? value?.match(/[^\s<>,;:"()]+@[^\s<>,;:"()]+/)?.[0];
}

/** A message id as written, `<...>` included; the first one when a field holds several. */
export function messageId(value: string | undefined): string | undefined {
  return value?.match(/<[^<>\s]+>/)?.[0];
}

export interface ReturnedOriginal {
  fields: Field[];
  /** The header block as text, for finding a return path anywhere in it (Return-Path, Received, X- headers). */
  headerText: string;
}

/** How reports return the original message: whole (`message/rfc822`, RFC 6532's `message/global`) or headers only. */
const ORIGINAL_TYPES = new Set(['message/rfc822', 'message/global', 'text/rfc822-headers', 'message/global-headers', 'message/rfc822-headers']);

/** The header block of the original message a report or bounce returned, or null when it returned none. */
export function returnedOriginal(parts: readonly { contentType: string; content: Buffer }[]): ReturnedOriginal | null {
  const part = parts.find((p) => ORIGINAL_TYPES.has(p.contentType));
  return part ? headerBlock(part.content.subarray(0, MAX_FIELD_TEXT).toString('utf8')) : null;
}
