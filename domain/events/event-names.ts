import { CONTROL, SPACE, caseInsensitive } from '../text';

/**
 * Names the service emits itself; clients cannot track them (SPEC.md › Events): `email.*`, `contact.subscribed`,
 * `contact.unsubscribed`, `segment.<slug>.entry`, `segment.<slug>.exit`.
 */
const RESERVED = [/^email\./i, /^contact\.(subscribed|unsubscribed)$/i, /^segment\.[^.]+\.(entry|exit)$/i];

export function isReservedEventName(name: string): boolean {
  return RESERVED.some((re) => re.test(name));
}

const NAME_BODY = `[^${SPACE}${CONTROL}](?:[^${CONTROL}]{0,198}[^${SPACE}${CONTROL}])?`;

/** Event names: 1-200 printable characters without surrounding space. */
export const EVENT_NAME_RE = new RegExp(`^${NAME_BODY}$`);

/**
 * The names a client may track (or delete), as one portable pattern for the OpenAPI document: EVENT_NAME_RE without
 * the reserved names (case-insensitive, spelled without flags).
 */
export const TRACKABLE_EVENT_NAME_PATTERN =
  `^(?!${caseInsensitive('email.')}|${caseInsensitive('contact.')}(?:${caseInsensitive('subscribed')}|${caseInsensitive('unsubscribed')})$|` +
  `${caseInsensitive('segment.')}[^.]+\\.(?:${caseInsensitive('entry')}|${caseInsensitive('exit')})$)${NAME_BODY}$`;
