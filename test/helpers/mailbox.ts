import { simpleParser, type ParsedMail } from 'mailparser';
import { stackEnv } from '../stack-env';

interface CapturedSummary {
  id: string;
  to: string[];
  from: string;
}

async function list(): Promise<CapturedSummary[]> {
  const res = await fetch(`${stackEnv().mailboxUrl}/messages`);
  return (await res.json()) as CapturedSummary[];
}

/** The raw message as the SMTP server received it, parsed. */
async function fetchParsed(id: string): Promise<ParsedMail> {
  const res = await fetch(`${stackEnv().mailboxUrl}/messages/${id}/raw`);
  return simpleParser(Buffer.from(await res.arrayBuffer()));
}

/** Waits until the capture server has `count` messages for the envelope recipient `to`, then returns them parsed. */
export async function waitForMail(to: string, opts: { count?: number; timeoutMs?: number } = {}): Promise<ParsedMail[]> {
  const count = opts.count ?? 1;
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  for (;;) {
    const matches = await messagesTo(to);
    if (matches.length >= count) return Promise.all(matches.map((m) => fetchParsed(m.id)));
    if (Date.now() > deadline) throw new Error(`expected ${count} message(s) to ${to}, found ${matches.length}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Messages for the envelope recipient `to` received so far (no waiting). */
export async function messagesTo(to: string): Promise<CapturedSummary[]> {
  const address = to.toLowerCase();
  return (await list()).filter((m) => m.to.includes(address));
}

/** How many times the capture server refused each address (tempfail-N-* recipients). */
export async function refusals(): Promise<Record<string, number>> {
  return (await (await fetch(`${stackEnv().mailboxUrl}/attempts`)).json()) as Record<string, number>;
}
