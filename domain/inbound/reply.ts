/**
 * The new text of a reply, for the activity feed and the event on the contact: what the person wrote, not the copy
 * of our message that their client quoted under it. Clients quote in a few ways: `>` lines, an attribution line
 * ("On … wrote:", in the client's language, sometimes wrapped over two lines) before the quote, Outlook's header block
 * ("From: … Sent: …") or separator lines; signatures start with "-- ". Everything from the first of those on is cut,
 * except that `>` lines are skipped rather than ending the text, so answers written between quotes are kept.
 */

export const REPLY_EXCERPT_CHARS = 280;
/** The start of a body read for the excerpt: a reply's new text is at its top. */
const SCAN_CHARS = 32 * 1024;

/**
 * "On Mon, 1 Jan 2026, Bob <bob@example.org> wrote:" and its translations, alone on a line (or two joined); the name
 * comes after the verb in some ("Am 1.1.2026 schrieb Bob <bob@example.org>:"). The colon at the end is required, so a
 * sentence that starts with "On" and mentions writing is not taken for one.
 */
const ATTRIBUTION_RE =
  /^(?:on|am|le|el|op|il|em|den|på|w dniu|dne)\s[^\n]{0,300}?\s(?:wrote|schrieb|a écrit|escribió|schreef|ha scritto|escreveu|skrev|napisał|napsal)(?:\s[^\n]{0,200}?)?\s*:\s*$/i;
/** Outlook and others start the quoted message with a line like these. */
const SEPARATOR_RE =
  /^\s*(?:-{2,}\s*(?:original message|forwarded message|ursprüngliche nachricht|message d'origine|mensaje original|messaggio originale|oorspronkelijk bericht)\s*-{2,}|_{10,}|-{10,})\s*$/i;
/** The header block Outlook puts over the quoted message: a From line followed within three lines by a Sent/Date line. */
const QUOTED_FROM_RE = /^\s*\*?(?:from|von|de|da|van|från|fra|od)\s?\*?:\s*\S/i;
const QUOTED_SENT_RE = /^\s*\*?(?:sent|date|gesendet|datum|envoyé|enviado|inviato|verzonden|skickat|sendt|wysłano)\s?\*?:\s*\S/i;
/** Signatures, and the taglines of mobile clients. */
const SIGNATURE_RE = /^(?:--|__|sent from my [^\n]{1,40}|get outlook for [^\n]{1,40}|von meinem [^\n]{1,40} gesendet)\s*$/i;

/** Whether the quoted part of the reply starts at `lines[i]`. */
function quoteStarts(lines: readonly string[], i: number): boolean {
  const line = lines[i]!;
  if (SEPARATOR_RE.test(line) || SIGNATURE_RE.test(line.trim()) || ATTRIBUTION_RE.test(line.trim())) return true;
  const next = lines[i + 1];
  if (next !== undefined && line.trim() && ATTRIBUTION_RE.test(`${line.trim()} ${next.trim()}`)) return true;
  return QUOTED_FROM_RE.test(line) && lines.slice(i + 1, i + 4).some((l) => QUOTED_SENT_RE.test(l));
}

/** At most `max` characters of the new text of `body`, whitespace collapsed; empty when it has none. */
export function replyExcerpt(body: string, max: number = REPLY_EXCERPT_CHARS): string {
  const lines = body.slice(0, SCAN_CHARS).split(/\r?\n/);
  const kept: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (quoteStarts(lines, i)) break;
    if (/^\s*>/.test(lines[i]!)) continue;
    kept.push(lines[i]!);
  }
  const text = kept.join(' ').replace(/\s+/g, ' ').trim();
  if (text.length <= max) return text;
  let end = max - 1;
  // Never cut between the two halves of a surrogate pair.
  if (/[\uDC00-\uDFFF]/.test(text[end] ?? '')) end--;
  return `${text.slice(0, end).trimEnd()}…`;
}
