import { QuoteType, Tokenizer } from 'htmlparser2';
import { config } from '../config';
import { linkTokens } from './tokens';
import { emailDomain } from '../contacts/email-address';
import { unsubscribeAddress } from '../inbound/return-path';

/** What link building needs from the configuration (the API and worker pass `config()`, tests their own). */
export interface LinkConfig {
  /** Base URL of the public endpoints, without a trailing slash. */
  publicUrl: string;
  appSecret: string;
  /** List-Unsubscribe mailto: unset = unsubscribe@<sender domain>; `off` = https only. */
  unsubscribeMailto?: string;
}

/** Paths of the public endpoints (api/public/routes.ts). */
const PUBLIC_PATHS = {
  open: '/t/o/',
  click: '/t/c/',
  unsubscribe: '/unsubscribe/',
  subscribe: '/subscribe/',
  manage: '/manage/',
} as const;

/** Links already pointing at us are never wrapped: unsubscribing must not depend on the click endpoint. */
const OWN_PATHS = Object.values(PUBLIC_PATHS);

export interface TrackingOptions {
  emailId: string;
  /** Add the open pixel. */
  opens: boolean;
  /** Route http(s) links through the click endpoint. */
  clicks: boolean;
}

/**
 * Adds open and click tracking to a rendered HTML body. With `clicks`, every http(s) `href` of `<a>` and `<area>`
 * becomes `<publicUrl>/t/c/<token>`, the token signing the email id and the exact URL (entities decoded), so the
 * redirect only ever goes where the message pointed. mailto:, tel:, anchors, relative links and our own
 * unsubscribe/subscribe/manage links are left alone. With `opens`, a 1x1 pixel goes before the last `</body>` (or at
 * the end). Uses htmlparser2's tokenizer, so comments, scripts and attribute quoting are handled as browsers do; every
 * byte that is not a rewritten href stays as it was.
 */
export function applyTracking(html: string, opts: TrackingOptions, cfg: LinkConfig = config()): string {
  if (!opts.opens && !opts.clicks) return html;
  const own = ownLinkPrefixes(cfg);
  const edits: { start: number; end: number; text: string }[] = [];
  let bodyClose = -1;
  let tag = '';
  // Only hrefs of links are decoded: collecting every (long, inlined) style attribute would double the cost.
  let collecting = false;
  let attrNameEnd = 0;
  let value = '';
  const noop = () => undefined;
  const tokenizer = new Tokenizer(
    { decodeEntities: true },
    {
      onopentagname(start, end) {
        tag = html.slice(start, end).toLowerCase();
      },
      onattribname(start, end) {
        collecting = opts.clicks && (tag === 'a' || tag === 'area') && end - start === 4 && html.slice(start, end).toLowerCase() === 'href';
        attrNameEnd = end;
        value = '';
      },
      onattribdata(start, end) {
        if (collecting) value += html.slice(start, end);
      },
      onattribentity(codepoint) {
        if (collecting) value += String.fromCodePoint(codepoint);
      },
      onattribend(quote, end) {
        if (!collecting || quote === QuoteType.NoValue) return;
        collecting = false;
        const url = trackableUrl(value, own);
        if (!url) return;
        edits.push(hrefEdit(html, attrNameEnd, end, quote, clickHref(opts.emailId, url, cfg)));
      },
      onclosetag(start, end) {
        if (html.slice(start, end).toLowerCase() === 'body') bodyClose = html.lastIndexOf('<', start);
      },
      onopentagend: noop,
      onselfclosingtag: noop,
      ontext: noop,
      ontextentity: noop,
      oncdata: noop,
      oncomment: noop,
      ondeclaration: noop,
      onprocessinginstruction: noop,
      onend: noop,
    },
  );
  tokenizer.write(html);
  tokenizer.end();

  if (opts.opens) {
    const at = bodyClose >= 0 ? bodyClose : html.length;
    edits.push({ start: at, end: at, text: openPixel(opts.emailId, cfg) });
  }
  if (edits.length === 0) return html;
  edits.sort((a, b) => a.start - b.start);
  let out = '';
  let pos = 0;
  for (const e of edits) {
    out += html.slice(pos, e.start) + e.text;
    pos = e.end;
  }
  return out + html.slice(pos);
}

/** Lower-cased prefixes of our own public links, which are never wrapped (see trackableUrl). */
export function ownLinkPrefixes(cfg: LinkConfig): string[] {
  return OWN_PATHS.map((p) => (cfg.publicUrl + p).toLowerCase());
}

/**
 * Public URL prefixes as they go into an attribute (escapeAttribute), by URL and path. A token is base64url, which
 * escapeAttribute leaves as it is, so an href is the escaped prefix and the token: five replaces a link fewer (a
 * campaign message has a dozen links).
 */
let prefixesOf = '';
let escapedPrefixes: Record<string, string> = {};
function escapedPrefix(cfg: LinkConfig, path: string): string {
  // One public URL in practice: the prefixes of the last one are kept (no key to build a link).
  if (cfg.publicUrl !== prefixesOf) {
    prefixesOf = cfg.publicUrl;
    escapedPrefixes = Object.create(null) as Record<string, string>;
  }
  return (escapedPrefixes[path] ??= escapeAttribute(`${cfg.publicUrl}${path}`));
}

/** The click redirect for one URL of one email, escaped for an href (`<publicUrl>/t/c/<token>`). */
export function clickHref(emailId: string, url: string, cfg: LinkConfig): string {
  return escapedPrefix(cfg, PUBLIC_PATHS.click) + linkTokens(cfg.appSecret).sign({ kind: 'click', emailId, url });
}

/** The 1x1 open pixel of one email, as the `<img>` element that goes before `</body>`. */
export function openPixel(emailId: string, cfg: LinkConfig): string {
  const src = escapedPrefix(cfg, PUBLIC_PATHS.open) + linkTokens(cfg.appSecret).sign({ kind: 'open', emailId });
  return `<img src="${src}" width="1" height="1" alt="" style="display:none">`;
}

/**
 * The URL to sign for an href (entities already decoded), or null for links that are not tracked (not http(s), not
 * a URL, or one of ours: `own` from ownLinkPrefixes). Browsers strip surrounding whitespace from URLs too.
 */
export function trackableUrl(href: string, own: string[]): string | null {
  const url = href.trim();
  if (!/^https?:\/\//i.test(url)) return null;
  const lower = url.toLowerCase();
  if (own.some((p) => lower.startsWith(p))) return null;
  return URL.canParse(url) ? url : null;
}

/** The source range of an attribute value (between its quotes), given the end of its name and the attribute's end. */
function hrefEdit(html: string, nameEnd: number, end: number, quote: QuoteType, text: string) {
  if (quote === QuoteType.Double || quote === QuoteType.Single) {
    const start = html.indexOf(quote === QuoteType.Double ? '"' : "'", nameEnd) + 1;
    return { start, end: end - 1, text };
  }
  // Unquoted: the value starts at the first non-blank after `=`; quote the replacement.
  let start = html.indexOf('=', nameEnd) + 1;
  while (/\s/.test(html[start] ?? '')) start++;
  return { start, end, text: `"${text}"` };
}

/** Text safe inside a quoted HTML attribute value. */
export function escapeAttribute(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/'/g, '&#39;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export interface ContactLinks {
  /** GET: a confirmation page; POST: unsubscribes. */
  unsubscribeUrl: string;
  /** GET: a confirmation page; POST: subscribes. */
  subscribeUrl: string;
  /** GET: the current state with a button to change it. */
  manageUrl: string;
  /** The RFC 8058 one-click target (POST `List-Unsubscribe=One-Click`); the same URL as unsubscribeUrl. */
  oneClickUrl: string;
  /** The signed contact token all of them carry. */
  token: string;
}

/**
 * A contact's signed subscription links (template variables `unsubscribeUrl`, `subscribeUrl`, `manageUrl`). Links
 * composed into an email also sign its id (`emailId`), so the subscription change they make is recorded with that
 * email (`events.email_id`) and a campaign's unsubscribes are attributed to it; still one signature per recipient.
 */
export function contactLinks(contactId: string, cfg: LinkConfig = config(), emailId?: string): ContactLinks {
  const token = linkTokens(cfg.appSecret).sign({ kind: 'contact', contactId, emailId });
  const unsubscribeUrl = `${cfg.publicUrl}${PUBLIC_PATHS.unsubscribe}${token}`;
  return {
    unsubscribeUrl,
    subscribeUrl: `${cfg.publicUrl}${PUBLIC_PATHS.subscribe}${token}`,
    manageUrl: `${cfg.publicUrl}${PUBLIC_PATHS.manage}${token}`,
    oneClickUrl: unsubscribeUrl,
    token,
  };
}

/**
 * `List-Unsubscribe` (the https one-click URL, then a mailto:) and `List-Unsubscribe-Post` (RFC 8058) for a contact's
 * links (contactLinks: the token is signed once per recipient).
 * The mailto goes to UNSUBSCRIBE_MAILTO when it is set. Otherwise, when the sender domain's return path is ACTIVE
 * (`bounce`: its bounce host, whose MX is the inbound server), to the email's signed `u-<token>@<bounce host>`, which
 * unsubscribes even from a client that drops the subject; else to unsubscribe@<sender's domain>, a mailbox we do not
 * read. The subject carries the contact's token in every case.
 */
export function listUnsubscribeHeaders(
  links: ContactLinks,
  senderEmail: string,
  cfg: LinkConfig = config(),
  bounce?: { emailId: string; host: string },
): Record<string, string> {
  const entries = [`<${links.oneClickUrl}>`];
  if (cfg.unsubscribeMailto !== 'off') {
    const domain = emailDomain(senderEmail);
    if (!domain && !cfg.unsubscribeMailto) throw new Error(`Not an email address: ${senderEmail}`);
    const mailbox = cfg.unsubscribeMailto ?? (bounce ? unsubscribeAddress(bounce.emailId, bounce.host, cfg.appSecret) : `unsubscribe@${domain}`);
    entries.push(`<mailto:${mailbox}?subject=${encodeURIComponent(`unsubscribe ${links.token}`)}>`);
  }
  return { 'List-Unsubscribe': entries.join(', '), 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' };
}
