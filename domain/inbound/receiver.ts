import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerAddress, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { Config } from '../config';
import type { Sql } from '../db/sql';
import { logger } from '../logger';
import { LruCache } from '../cache/lru';
import { inboundMessages } from '../metrics';
import { parseReturnPath, parseUnsubscribeAddress } from './return-path';
import { storeInbound, verifiedDomainExists } from './inbound.repository';

/**
 * The inbound SMTP server (README › Inbound mail): the MX of every sender domain's bounce host (`<label>.<domain>`).
 * It takes mail only for addresses of the bounce host of a VERIFIED domain that mean something here, and refuses every
 * other recipient with 550 (never an open relay):
 * - `b-<token>`: a return path (the envelope sender of one email), signed; a forged or expired one is refused;
 * - `u-<token>`: a List-Unsubscribe mailto: address of one email, signed;
 * - `unsubscribe` (the mailto: whose subject carries the contact's token), `postmaster` and `abuse` (RFC 2142; feedback
 *   loops send ARF reports to an address the sender registers, for which `abuse` or `fbl` serves), `fbl` and `replies`
 *   (for replies routed here).
 * A message is stored (`inbound_messages`) before the 250, so a worker that is down loses nothing; `onStored` is then
 * told, without waiting for it (api/inbound.ts batches the messages of a few milliseconds into one `inbound-mail`
 * workflow; a start that fails is left to the sweeper: the message is safe).
 */

export interface ReceiverDeps {
  config: Pick<Config, 'inbound' | 'appSecret'>;
  db: Sql;
  /** Starts the stored message's processing; not awaited, and a failure is logged (the sweeper starts it later). */
  onStored: (inboundId: string) => Promise<unknown>;
}

/** Local parts of a bounce host that take mail without a token. */
const NAMED_MAILBOXES = new Set(['unsubscribe', 'postmaster', 'abuse', 'fbl', 'replies']);
/** Recipients per message: a DSN or report has one; a few allow for mailbox software that adds copies. */
const MAX_RECIPIENTS = 20;

interface SmtpError extends Error {
  responseCode: number;
}

function smtpError(code: number, message: string): SmtpError {
  return Object.assign(new Error(message), { responseCode: code });
}

/** Why a recipient is refused, or null when it is taken. */
async function recipientRefusal(address: string, deps: Pick<ReceiverDeps, 'config'> & { verified: (domain: string) => Promise<boolean> }): Promise<SmtpError | null> {
  const at = address.lastIndexOf('@');
  if (at <= 0) return smtpError(550, '5.1.3 Bad recipient address syntax');
  const local = address.slice(0, at).toLowerCase();
  const host = address.slice(at + 1).toLowerCase().replace(/\.$/, '');
  const label = `${deps.config.inbound.returnPathLabel}.`;
  if (!host.startsWith(label) || !(await deps.verified(host.slice(label.length)))) {
    return smtpError(550, '5.7.1 Relaying denied: this server takes mail only for the bounce hosts of verified sender domains');
  }
  const base = local.split('+')[0]!;
  if (NAMED_MAILBOXES.has(base)) return null;
  if (local.startsWith('b-')) {
    const parsed = parseReturnPath(local, deps.config.appSecret);
    if ('emailId' in parsed) return null;
    return smtpError(550, parsed.error === 'expired' ? '5.1.1 This return path has expired' : '5.1.1 No such recipient');
  }
  if (local.startsWith('u-') && 'emailId' in parseUnsubscribeAddress(local, deps.config.appSecret)) return null;
  return smtpError(550, '5.1.1 No such recipient');
}

/** How long a domain found VERIFIED is taken without asking the database again (a flood asks once, not per message). */
const VERIFIED_TTL_MS = 30_000;

/**
 * Whether a domain is a verified sender domain, remembered for VERIFIED_TTL_MS when it is (a domain that loses its
 * verification keeps receiving its bounces that long). A domain that is not is asked again every time, so one that
 * has just been verified receives at once.
 */
function verifiedDomains(db: Sql): (domain: string) => Promise<boolean> {
  const known = new LruCache<number>({ maxEntries: 10_000, maxWeight: 10_000 });
  return async (domain) => {
    const until = known.get(domain);
    if (until !== undefined && until > Date.now()) return true;
    const ok = await verifiedDomainExists(db, domain);
    if (ok) known.set(domain, Date.now() + VERIFIED_TTL_MS, 1);
    else known.delete(domain);
    return ok;
  };
}

/** Messages per client address in the current minute: a flood from one address is slowed down (451), not taken. */
class PerClientRate {
  private window = 0;
  private counts = new Map<string, number>();
  constructor(private readonly perMinute: number) {}

  take(client: string, now = Date.now()): boolean {
    const window = Math.floor(now / 60_000);
    if (window !== this.window) {
      this.window = window;
      this.counts.clear();
    }
    const n = (this.counts.get(client) ?? 0) + 1;
    this.counts.set(client, n);
    return n <= this.perMinute;
  }
}

/** Reads the DATA stream whole (the server holds it to the size limit: beyond it, the rest is drained unread). */
async function readMessage(stream: SMTPServerDataStream, limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= limit) chunks.push(chunk);
  }
  return stream.sizeExceeded || size > limit ? null : Buffer.concat(chunks);
}

export interface InboundReceiver {
  server: SMTPServer;
  port: number;
  close(): Promise<void>;
}

export async function startInboundReceiver(deps: ReceiverDeps): Promise<InboundReceiver> {
  const cfg = deps.config.inbound;
  const rate = new PerClientRate(cfg.ratePerMinute);
  const verified = verifiedDomains(deps.db);
  const tls = cfg.tls ? { key: fs.readFileSync(cfg.tls.keyFile), cert: fs.readFileSync(cfg.tls.certFile) } : undefined;
  const server = new SMTPServer({
    name: cfg.mxHost,
    banner: 'Mailwright inbound (bounces, reports, unsubscribes)',
    size: cfg.maxMessageBytes,
    maxClients: cfg.maxConnections,
    authOptional: true,
    disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(tls ?? {}),
    // A client that stalls must not hold one of the connections for long.
    socketTimeout: 60_000,
    closeTimeout: 5_000,
    logger: false,
    onMailFrom(_address: SMTPServerAddress, session: SMTPServerSession, callback: (err?: Error | null) => void) {
      if (!rate.take(session.remoteAddress)) {
        inboundMessages.inc({ outcome: 'rate_limited' });
        return callback(smtpError(451, '4.7.1 Too many messages from this address; try again later'));
      }
      callback();
    },
    onRcptTo(address: SMTPServerAddress, session: SMTPServerSession, callback: (err?: Error | null) => void) {
      if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) return callback(smtpError(452, '4.5.3 Too many recipients'));
      recipientRefusal(address.address, { config: deps.config, verified }).then(
        (refusal) => {
          if (refusal) inboundMessages.inc({ outcome: 'recipient_refused' });
          callback(refusal);
        },
        (err: unknown) => {
          logger.error({ err }, 'inbound: recipient check failed');
          callback(smtpError(451, '4.3.0 Temporary failure; try again later'));
        },
      );
    },
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback: (err?: Error | null, message?: string) => void) {
      void (async () => {
        const raw = await readMessage(stream, cfg.maxMessageBytes);
        if (!raw) {
          inboundMessages.inc({ outcome: 'too_large' });
          return callback(smtpError(552, `5.3.4 Message too big for this server (at most ${cfg.maxMessageBytes} bytes)`));
        }
        const envelope = session.envelope;
        const mailFrom = envelope.mailFrom ? envelope.mailFrom.address : '';
        let stored;
        try {
          stored = await storeInbound(deps.db, {
            mailFrom,
            rcptTo: envelope.rcptTo.map((r) => r.address),
            remoteAddress: session.remoteAddress ?? null,
            helo: session.hostNameAppearsAs ?? null,
            raw,
          });
        } catch (err) {
          logger.error({ err }, 'inbound: could not store a message');
          inboundMessages.inc({ outcome: 'store_failed' });
          return callback(smtpError(451, '4.3.0 Could not store the message; try again later'));
        }
        inboundMessages.inc({ outcome: stored.duplicate ? 'duplicate' : 'stored' });
        if (stored.status === 'RECEIVED') {
          void deps.onStored(stored.id).catch((err: unknown) => logger.warn({ err, inboundId: stored.id }, 'inbound: processing not started; the sweeper will'));
        }
        callback(null, `2.0.0 Stored as ${stored.id}`);
      })().catch((err: unknown) => {
        logger.error({ err }, 'inbound: message handling failed');
        callback(smtpError(451, '4.3.0 Temporary failure; try again later'));
      });
    },
  });
  server.on('error', (err) => logger.warn({ err }, 'inbound: connection error'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(cfg.port, cfg.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = ((server as unknown as { server: { address(): AddressInfo } }).server.address()).port;
  return {
    server,
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
