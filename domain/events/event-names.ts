import { CONTROL, SPACE } from '../text';

/**
 * Names the service emits itself; clients cannot track them (SPEC.md › Events): `email.*`, `contact.subscribed`,
 * `contact.unsubscribed`, `segment.<slug>.entry`, `segment.<slug>.exit`.
 */
const RESERVED = [/^email\./i, /^contact\.(subscribed|unsubscribed)$/i, /^segment\.[^.]+\.(entry|exit)$/i];

export function isReservedEventName(name: string): boolean {
  return RESERVED.some((re) => re.test(name));
}

/** Event names: 1-200 printable characters without surrounding space. */
export const EVENT_NAME_RE = new RegExp(`^[^${SPACE}${CONTROL}](?:[^${CONTROL}]{0,198}[^${SPACE}${CONTROL}])?$`);
