import { createHash } from 'node:crypto';
import { config } from '../config';
import { emailDomain } from '../contacts/email-address';
import { messageIdFor } from '../emails/message-id';
import type { Address, EmailKind } from '../emails/email.entity';
import type { NewEmail } from '../emails/email-intake';
import { validationError } from '../errors';
import { uuidv7 } from '../ids';
import { returnPathAddress } from '../inbound/return-path';
import type { MimeAttachment, MimeMessage } from '../mail/mime';
import { expandDefaults } from '../rendering/defaults-sugar';
import { LruCache } from '../cache/lru';
import {
  assertRenderedSize,
  compileBody,
  compileExpandedHtml,
  compileSubject,
  htmlToText,
  renderCompiledSubject,
  renderPieces,
  renderTemplate,
  type CompiledBody,
  type CompiledSubject,
} from '../rendering/render';
import { applyTracking, contactLinks, listUnsubscribeHeaders, ownLinkPrefixes, type LinkConfig } from '../tracking/links';
import { finishTracking, planLinks, slotTargets, stripMarkers, trackPieces, type LinkPlan, type SlotTargets } from './link-plan';
import type { HtmlSegments } from '../mail/wire-writer';
import { renderTextPart, textSkeletonOf, type TextSkeleton } from './text-skeleton';

/**
 * One email composer for /v1/send, campaigns and automation steps. No HTTP, no database: the API stores what it
 * composes (newEmailOf, then insertEmails through the email intake) for the delivery workflow; a campaign activity
 * composes at send time and hands the result to MIME assembly (mimeMessageOf + buildMime) and the pooled transport,
 * storing no rendered body.
 *
 * Two stages, so a 100,000-recipient campaign pays the recipient-independent work once:
 * - prepareContent (cached per content) and prepareMessage (once per send, campaign or step): MJML compiled, Liquid
 *   of body and subject parsed, the links to track found and marked (link-plan.ts), static links' targets checked,
 *   the plain-text part's skeleton converted and parsed (text-skeleton.ts);
 * - composeEmail, per recipient: Liquid substitution, the contact's signed links and each tracked link's token, and
 *   the plain-text part from the skeleton (or, for a body without one, html-to-text of each recipient's HTML).
 */

export interface MessageContent {
  subject: string;
  body: string;
}

/** Subject and body compiled for many recipients (recipient-independent; shared by every message with this content). */
export interface PreparedContent {
  readonly subject: CompiledSubject;
  /** The body to render: with link markers when `plan` is set, else the plain compiled body. */
  readonly body: CompiledBody;
  /** Where the tracked links are; null when this body's links must be found in each rendered message. */
  readonly plan: LinkPlan | null;
  /** The plain-text part to render per recipient; null when each rendered body goes through html-to-text. */
  readonly text: TextSkeleton | null;
}

/**
 * Prepared contents by content hash (subject and body), so a template's new version, which is new content, is a new
 * entry and can never be served stale; an old version ages out. domain/rendering/lru.ts (bounded by count and by
 * weight, about the characters kept alive) rather than the lru-cache package: it is what the render caches already
 * use, and holding a pending promise and dropping it on failure is all this needs.
 */
const contentCache = new LruCache<Promise<PreparedContent>>({ maxEntries: 500, maxWeight: 64 * 1024 * 1024 });
const contentStats = { hits: 0, misses: 0 };

/** Hits, misses (= preparations actually run) and the size of the content cache. */
export function composeCacheStats(): { hits: number; misses: number; entries: number; weight: number } {
  return { ...contentStats, entries: contentCache.size, weight: contentCache.totalWeight };
}

/**
 * Compiles a subject and body for many recipients, once per content (cached). Throws TemplateError (422) for the
 * body, then the subject, as the fields' own checks do; a failure is not cached.
 */
export function prepareContent(content: MessageContent): Promise<PreparedContent> {
  const key = createHash('sha256').update(`${content.subject.length}:`).update(content.subject).update(content.body).digest('base64url');
  const hit = contentCache.get(key);
  if (hit) {
    contentStats.hits++;
    return hit;
  }
  contentStats.misses++;
  const pending = buildContent(content);
  const weight = content.subject.length + content.body.length;
  contentCache.set(key, pending, weight);
  pending.then(
    // The text skeleton (a parsed template about the size of the text part, far smaller than the body) rides on the
    // body's share of the weight.
    (prepared) => contentCache.reweigh(key, pending, weight + prepared.body.html.length * 2),
    () => contentCache.delete(key, pending),
  );
  return pending;
}

async function buildContent(content: MessageContent): Promise<PreparedContent> {
  // The unmarked body is compiled (and cached) first: its errors are the ones a template save reports.
  const body = await compileBody(content.body);
  const subject = compileSubject(content.subject);
  const expanded = expandDefaults(body.html);
  const plan = planLinks(expanded);
  // From the unmarked body: what the text part is converted from today is its rendering without markers.
  const text = textSkeletonOf(expanded);
  return { subject, body: plan ? compileExpandedHtml(plan.marked, body.mjml) : body, plan, text };
}

/** What a template supplies to a message; explicit values override it (SPEC: `/v1/send` with a template). */
export interface TemplateParts {
  id: string;
  type: EmailKind;
  subject: string;
  body: string;
  from: string | null;
  fromName: string | null;
  replyTo: string | null;
}

export interface ResolvedMessage {
  content: MessageContent;
  kind: EmailKind;
  templateId: string | null;
  from: Address;
  replyTo: string | null;
}

/**
 * A template merged with explicit values: subject, body, sender and reply-to from the template unless given; the kind
 * is the template's (TRANSACTIONAL without one). 422 when no sender, subject or body remains.
 */
export function resolveMessage(
  template: TemplateParts | undefined,
  explicit: { from?: Address; replyTo?: string; subject?: string; body?: string },
): ResolvedMessage {
  const from: Address | undefined = explicit.from ?? (template?.from ? { email: template.from, name: template.fromName ?? undefined } : undefined);
  const subject = explicit.subject ?? template?.subject;
  const body = explicit.body ?? template?.body;
  if (!from) throw validationError([{ field: 'from', message: 'Required: the template has no sender', code: 'required' }]);
  // Without a template the request schemas require both; a template's own checks keep them non-empty.
  if (!subject || !body) throw validationError([{ field: subject ? 'body' : 'subject', message: 'The template has none', code: 'required' }]);
  return {
    content: { subject, body },
    kind: template?.type ?? 'TRANSACTIONAL',
    templateId: template?.id ?? null,
    from,
    replyTo: explicit.replyTo ?? template?.replyTo ?? null,
  };
}

export interface MessageInput extends ResolvedMessage {
  /** Custom headers, already validated; marketing mail adds List-Unsubscribe and List-Unsubscribe-Post. */
  headers?: Record<string, string>;
  tracking: { opens: boolean; clicks: boolean };
  /** Public URL and link secret; `config()` by default (activities pass theirs). */
  links?: LinkConfig;
  /**
   * The sender domain's bounce host when its return path is ACTIVE (`domains.return_path_host`, read with the domain
   * by each send path): each email's envelope sender is then a signed address on it, and so is the List-Unsubscribe
   * mailto: of marketing mail. Absent or null: the From address is the envelope sender, as before.
   */
  returnPathHost?: string | null;
}

/** Everything about one message that does not depend on the recipient: build once per send, campaign or step. */
export interface PreparedMessage {
  readonly content: PreparedContent;
  readonly kind: EmailKind;
  readonly templateId: string | null;
  readonly from: Address;
  readonly replyTo: string | null;
  readonly headers: Readonly<Record<string, string>>;
  readonly tracking: { readonly opens: boolean; readonly clicks: boolean };
  /** The domain of `from`: the Message-ID's domain (the DKIM key is the sender domain's, applied where the raw message is built). */
  readonly senderDomain: string;
  readonly links: LinkConfig;
  readonly returnPathHost: string | null;
  /** @internal the static links' targets under `links` */
  readonly targets: SlotTargets | null;
}

export async function prepareMessage(input: MessageInput): Promise<PreparedMessage> {
  const content = await prepareContent(input.content);
  const links = input.links ?? config();
  return {
    content,
    kind: input.kind,
    templateId: input.templateId,
    from: input.from,
    replyTo: input.replyTo,
    headers: input.headers ?? {},
    tracking: { opens: input.tracking.opens, clicks: input.tracking.clicks },
    senderDomain: emailDomain(input.from.email),
    links,
    returnPathHost: input.returnPathHost ?? null,
    targets: content.plan ? slotTargets(content.plan, ownLinkPrefixes(links)) : null,
  };
}

export interface ComposeRecipient {
  contactId: string;
  /** The contact's address (as stored). */
  email: string;
  /** The display name in To. */
  name?: string | null;
  /** Liquid variables: the contact's data merged with the call's data. */
  data?: Record<string, unknown>;
  /** `data` is this call's to change (parsed for it alone): the reserved variables are set on it instead of a copy. */
  dataIsOwned?: boolean;
  /** An automation run's context, as `{{ context.* }}` (not set when absent). */
  context?: Record<string, unknown>;
  /** The email's id (tracking tokens, Message-ID); a new UUIDv7 when absent. */
  emailId?: string;
}

export interface ComposedEmail {
  emailId: string;
  contactId: string;
  kind: EmailKind;
  templateId: string | null;
  to: Address;
  from: Address;
  replyTo: string | null;
  subject: string;
  /** The HTML as sent: tracked links and the open pixel when enabled. */
  html: string;
  /** The plain-text part, from the HTML before tracking (links show where they lead). */
  text: string;
  headers: Record<string, string>;
  senderDomain: string;
  messageId: string;
  /**
   * The SMTP envelope: `from` is the return path (`b-<token>@<bounce host>`, naming this email, so a bounce or
   * complaint finds it) when the sender domain's is ACTIVE, else the From address.
   */
  envelope: { from: string; to: string[] };
}

/** One recipient's email: substitution, the contact's signed links, tracking, the text part and the headers. */
export function composeEmail(message: PreparedMessage, recipient: ComposeRecipient): ComposedEmail {
  return compose(message, recipient, false).email;
}

/**
 * composeEmail for a message written straight to the wire (a campaign's render threads): when the body has a link plan
 * and a text skeleton, its HTML comes as segments (`htmlSegments`, the template's own runs prepared once per send)
 * and `email.html` is empty; otherwise as composeEmail gives it, with `htmlSegments` null. writeWireMessage
 * (mime.ts) writes either to the same bytes.
 */
export function composeWireEmail(message: PreparedMessage, recipient: ComposeRecipient): { email: ComposedEmail; htmlSegments: HtmlSegments | null } {
  return compose(message, recipient, true);
}

const isPlainRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;

function compose(message: PreparedMessage, recipient: ComposeRecipient, segmented: boolean): { email: ComposedEmail; htmlSegments: HtmlSegments | null } {
  const emailId = recipient.emailId ?? uuidv7();
  const links = contactLinks(recipient.contactId, message.links, emailId);
  // The recipient's data with the reserved variables over it: in place when the caller gave it for that (a copy of
  // each recipient's data was a few percent of a campaign message).
  const given = recipient.data;
  const variables: Record<string, unknown> = recipient.dataIsOwned && isPlainRecord(given) ? given : { ...given };
  if (recipient.context !== undefined) variables.context = recipient.context;
  variables.id = recipient.contactId;
  variables.email = recipient.email;
  variables.mailwright_id = recipient.contactId;
  variables.mailwright_email = recipient.email;
  variables.unsubscribeUrl = links.unsubscribeUrl;
  variables.subscribeUrl = links.subscribeUrl;
  variables.manageUrl = links.manageUrl;
  const { content, tracking } = message;
  const bounce = message.returnPathHost ? { emailId, host: message.returnPathHost } : undefined;
  const track = { emailId, opens: tracking.opens, clicks: tracking.clicks };
  let html = '';
  let htmlSegments: HtmlSegments | null = null;
  let plainLength = 0;
  let rendered: string | null = null;
  if (segmented && content.plan && message.targets && content.text) {
    const pieces = renderPieces(content.body, variables);
    const tracked = trackPieces(pieces, content.plan, message.targets, track, message.links);
    if (tracked) {
      htmlSegments = tracked.segments;
      plainLength = tracked.plainLength;
    } else rendered = pieces.map((p) => (typeof p === 'string' ? p : p.str)).join('');
  } else rendered = renderTemplate(content.body, variables);
  let text: string | null = null;
  if (rendered !== null) {
    let body = content.plan && message.targets ? finishTracking(rendered, content.plan, message.targets, track, message.links) : null;
    if (!body) {
      const plain = content.plan ? stripMarkers(rendered) : rendered;
      body = { html: applyTracking(plain, track, message.links), text: plain, plainLength: plain.length };
    }
    html = body.html;
    text = body.text;
    plainLength = body.plainLength;
  }
  // Marked bodies are size-checked here, without their markers, so the limit means what it always meant.
  if (content.body.marked) assertRenderedSize(plainLength, 'body');
  const email: ComposedEmail = {
    emailId,
    contactId: recipient.contactId,
    kind: message.kind,
    templateId: message.templateId,
    to: { email: recipient.email, name: recipient.name ?? undefined },
    from: message.from,
    replyTo: message.replyTo,
    subject: renderCompiledSubject(content.subject, variables),
    html,
    // Segments are only made with a skeleton, so `text` (the HTML the converter would read) is needed only without one.
    text: content.text ? renderTextPart(content.text, variables) : htmlToText(text!),
    headers: withHeaders(message.headers, message.kind === 'MARKETING' ? listUnsubscribeHeaders(links, message.from.email, message.links, bounce) : null),
    senderDomain: message.senderDomain,
    messageId: messageIdFor(emailId, message.from.email),
    envelope: { from: bounce ? returnPathAddress(emailId, bounce.host, message.links.appSecret) : message.from.email, to: [recipient.email] },
  };
  return { email, htmlSegments };
}

/**
 * `{ ...headers, ...extra }`: the same keys in the same order with the same values, copied key by key. A spread
 * that is given more properties after it takes V8's general path: 1.7-2.1 us a copy of these headers in a loop here,
 * against 0.2 us by `Object.keys` (BENCHMARKS.md › Issue 28, nineteenth stop).
 */
function withHeaders(headers: Readonly<Record<string, string>>, extra: Record<string, string> | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(headers)) out[key] = headers[key]!;
  if (extra) for (const key of Object.keys(extra)) out[key] = extra[key]!;
  return out;
}

/** The composed email as buildMime takes it (the caller adds attachments it has loaded). */
export function mimeMessageOf(email: ComposedEmail, attachments: MimeAttachment[] = []): MimeMessage {
  return {
    messageId: email.messageId,
    from: { address: email.from.email, name: email.from.name },
    to: { address: email.to.email, name: email.to.name },
    replyTo: email.replyTo,
    subject: email.subject,
    html: email.html,
    text: email.text,
    headers: email.headers,
    attachments,
  };
}

/** The `emails` row that stores a composed email for the delivery workflow (insertEmails, email-intake.ts). */
export function newEmailOf(email: ComposedEmail, projectId: string, attachmentIds: string[] = []): NewEmail {
  return {
    id: email.emailId,
    projectId,
    contactId: email.contactId,
    kind: email.kind,
    templateId: email.templateId,
    toEmail: email.to.email,
    toName: email.to.name ?? null,
    fromEmail: email.from.email,
    fromName: email.from.name ?? null,
    replyTo: email.replyTo,
    subject: email.subject,
    html: email.html,
    text: email.text,
    headers: email.headers,
    attachmentIds,
  };
}
