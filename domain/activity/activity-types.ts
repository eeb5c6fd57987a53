/**
 * The activity feed's types: what happened, across resources. Events (the service's own and tracked ones) map to a
 * type by name; campaigns give their start and end; automation runs give each step they finished. One catalogue for
 * the feed's filter and labels (SQL generated from it), `/activity/types` and the counts of `/activity/stats`.
 */

export type ActivitySource = 'event' | 'campaign' | 'automation';

interface ActivityTypeDef {
  type: string;
  source: ActivitySource;
  description: string;
  /** Events: the service event names of this type. */
  names?: readonly string[];
  /** Events: a service event name pattern (POSIX regex) of this type. */
  pattern?: string;
  /** Events: every tracked event (any name). */
  tracked?: true;
}

export const ACTIVITY_TYPES = [
  { type: 'email.sent', source: 'event', names: ['email.sent'], description: 'A transactional or automation email was accepted by the relay.' },
  { type: 'email.delivered', source: 'event', names: ['email.delivered'], description: 'The provider reported the email delivered.' },
  { type: 'email.opened', source: 'event', names: ['email.open'], description: 'The email was opened (tracking pixel).' },
  { type: 'email.clicked', source: 'event', names: ['email.click'], description: 'A tracked link in the email was clicked.' },
  { type: 'email.bounced', source: 'event', names: ['email.bounced'], description: 'The email bounced (`data.transient` true for a soft bounce the provider retries; `data.source` says who reported it: `smtp`, `ses`, `dsn`).' },
  { type: 'email.complained', source: 'event', names: ['email.complained'], description: 'The recipient marked the email as spam.' },
  { type: 'email.replied', source: 'event', names: ['email.replied'], description: 'The recipient replied (inbound mail: `data.from`, `data.subject`, `data.excerpt`).' },
  { type: 'email.auto_replied', source: 'event', names: ['email.auto_replied'], description: 'An automatic answer came back (out of office, vacation; RFC 3834), never counted as a bounce.' },
  { type: 'email.failed', source: 'event', names: ['email.failed'], description: 'Delivery failed for good (relay refusal or retries exhausted).' },
  { type: 'contact.subscribed', source: 'event', names: ['contact.subscribed'], description: 'The contact subscribed.' },
  { type: 'contact.unsubscribed', source: 'event', names: ['contact.unsubscribed'], description: 'The contact unsubscribed.' },
  { type: 'segment.entered', source: 'event', pattern: '^segment\\.[^.]+\\.entry$', description: 'The contact entered a segment (`name` is `segment.<slug>.entry`).' },
  { type: 'segment.exited', source: 'event', pattern: '^segment\\.[^.]+\\.exit$', description: 'The contact left a segment (`name` is `segment.<slug>.exit`).' },
  { type: 'event.tracked', source: 'event', tracked: true, description: 'An event tracked through the API (`name` is its name).' },
  { type: 'campaign.started', source: 'campaign', description: 'A campaign started sending (its audience was fixed).' },
  { type: 'campaign.sent', source: 'campaign', description: 'A campaign finished sending.' },
  { type: 'campaign.cancelled', source: 'campaign', description: 'A campaign was cancelled.' },
  { type: 'campaign.failed', source: 'campaign', description: 'A campaign failed.' },
  { type: 'automation.step', source: 'automation', description: 'An automation run finished a step (`name` is the step type).' },
] as const satisfies readonly ActivityTypeDef[];

export type ActivityType = (typeof ACTIVITY_TYPES)[number]['type'];
export const ACTIVITY_TYPE_NAMES = ACTIVITY_TYPES.map((t) => t.type) as [ActivityType, ...ActivityType[]];

const EVENT_TYPES: readonly ActivityTypeDef[] = ACTIVITY_TYPES.filter((t) => t.source === 'event');

/** The activity type of an event, by its name and whether the service emitted it. */
export function activityTypeOfEvent(name: string, system: boolean): ActivityType | undefined {
  if (!system) return 'event.tracked';
  const def = EVENT_TYPES.find((t) => t.names?.includes(name) || (t.pattern !== undefined && new RegExp(t.pattern).test(name)));
  return def?.type as ActivityType | undefined;
}

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** SQL: the activity type of the events row `e` (null for a service event the feed does not show). */
export function eventTypeSql(e: string): string {
  const arms = EVENT_TYPES.map((t) => {
    if (t.tracked) return `when ${e}.source = 'TRACKED' then ${quote(t.type)}`;
    if (t.pattern) return `when ${e}.name ~ ${quote(t.pattern)} then ${quote(t.type)}`;
    return `when ${e}.name in (${t.names!.map(quote).join(', ')}) then ${quote(t.type)}`;
  });
  return `(case ${arms.join(' ')} end)`;
}

/** SQL: the events row `e` is of one of these types (event types only; null when every event type is wanted). */
export function eventTypeFilterSql(e: string, types: readonly string[]): string | null {
  const wanted = EVENT_TYPES.filter((t) => types.includes(t.type));
  if (wanted.length === EVENT_TYPES.length) return null;
  if (wanted.length === 0) return 'false';
  const names = wanted.flatMap((t) => t.names ?? []);
  const parts: string[] = [];
  if (names.length) parts.push(`(${e}.source = 'SYSTEM' and ${e}.name in (${names.map(quote).join(', ')}))`);
  for (const t of wanted) {
    if (t.pattern) parts.push(`(${e}.source = 'SYSTEM' and ${e}.name ~ ${quote(t.pattern)})`);
    if (t.tracked) parts.push(`${e}.source = 'TRACKED'`);
  }
  return `(${parts.join(' or ')})`;
}

/** The campaign activity type of a finished campaign's status. */
export const CAMPAIGN_END_TYPE: Readonly<Record<string, ActivityType>> = { SENT: 'campaign.sent', CANCELLED: 'campaign.cancelled', FAILED: 'campaign.failed' };

export function sourcesOf(types: readonly string[]): Set<ActivitySource> {
  return new Set(ACTIVITY_TYPES.filter((t) => types.includes(t.type)).map((t) => t.source));
}
