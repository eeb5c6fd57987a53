import type { AutoReplyReason, MessageView } from './inbound-message';

/**
 * Auto-replies: out-of-office and vacation responders, autoresponders of ticket systems. They answer the From (or
 * the return path) of our mail, and must never count as bounces: a person on holiday has a working mailbox.
 *
 * RFC 3834's `Auto-Submitted` is the standard marker; the X- headers and `Precedence: auto_reply` are what responders
 * wrote before it; the subject is all that some send (Outlook rules, small providers' vacation settings), so subjects
 * are matched at their start, in the languages of the usual responders, where a person's "Re: vacation plans" is not.
 */

/** Subjects that responders write: matched at the start of the subject, case-insensitive. */
const AUTO_SUBJECT_RE = new RegExp(
  '^\\s*(?:' +
    [
      'auto(?:matic|matische)?[ -]?(?:reply|response|answer|antwort)',
      'autoreply',
      'auto:',
      'out of (?:the )?office',
      'ooo\\b',
      'away from (?:the )?office',
      '(?:on )?vacation\\b',
      '(?:on )?holiday\\b',
      'abwesenheit(?:snotiz|smeldung)?\\b',
      'nicht im büro',
      'r[ée]ponse automatique',
      'absent(?:e)? du bureau',
      'respuesta autom[aá]tica',
      'fuera de la oficina',
      'risposta automatica',
      'fuori ufficio',
      'automatisch antwoord',
      'afwezig(?:heid)?',
      'automatiskt svar',
      'autosvar',
      'resposta autom[aá]tica',
    ].join('|') +
    ')',
  'i',
);
/** Lotus Notes and others: "Jane Doe is out of the office." */
const OUT_OF_OFFICE_ANYWHERE_RE = /\bis out of (?:the )?office\b/i;

/** The first auto-reply signal of the message, or null. `Auto-Submitted: no` is a person's message (RFC 3834 § 5). */
export function autoReplySignal(view: MessageView): { reason: AutoReplyReason; detail: string } | null {
  const autoSubmitted = view.header('auto-submitted')?.trim();
  if (autoSubmitted && !/^no\b/i.test(autoSubmitted)) return { reason: 'auto-submitted', detail: autoSubmitted };
  const xHeader = view.headerNames.find((name) => name.startsWith('x-autoreply') || name.startsWith('x-autorespond'));
  if (xHeader) return { reason: 'x-autoreply', detail: `${xHeader}: ${view.header(xHeader) ?? ''}`.trim() };
  const precedence = view.header('precedence')?.trim();
  if (precedence && /^auto[_-]reply\b/i.test(precedence)) return { reason: 'precedence', detail: precedence };
  const subject = view.common.subject;
  if (AUTO_SUBJECT_RE.test(subject) || OUT_OF_OFFICE_ANYWHERE_RE.test(subject)) return { reason: 'subject', detail: subject };
  return null;
}
