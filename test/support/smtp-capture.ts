import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';

export interface Captured {
  id: string;
  to: string[];
  from: string;
  raw: Buffer;
  receivedAt: string;
}

/** An SMTP error with a reply code, as smtp-server expects from callbacks. */
function smtpError(code: number, message: string): Error & { responseCode: number } {
  return Object.assign(new Error(message), { responseCode: code });
}

/**
 * The SMTP server of the test stack: it keeps every accepted message (raw MIME, served over HTTP for the tests to
 * parse) and injects failures by recipient, so delivery's error handling is tested against real SMTP replies:
 *   bounce-*@...      550 on RCPT TO (permanent)
 *   tempfail-N-*@...  451 on RCPT TO for the first N attempts, then accepted
 * and, for the fault tests (test/faults), misbehaves the way relays do:
 *   bouncedata-*@...  554 after the whole DATA (permanent)
 *   tempdata-N-*@...  451 after the whole DATA for the first N attempts
 *   stall-N-*@...     no answer to RCPT TO for the first N attempts (the client's socket timeout ends the session)
 *   drop-N-*@...      the connection closed in the middle of DATA for the first N attempts
 *   `stallConnections(n)`: the next n connections are accepted and never greeted.
 * `attempts` counts RCPT TOs per scripted address (what each address went through).
 */
export async function startSmtpCapture(): Promise<{
  smtpUrl: string;
  httpUrl: string;
  messages: Captured[];
  attempts: Map<string, number>;
  stallConnections(n: number): void;
  stop(): Promise<void>;
}> {
  const messages: Captured[] = [];
  const attempts = new Map<string, number>();
  const sockets = new Map<number, Socket>(); // by the client's port, to drop a session's connection
  let stallNext = 0;
  let seq = 0;
  const queuePrefix = `Q${randomBytes(4).toString('hex').toUpperCase()}`;
  /** Whether this attempt of `address` is one its script fails (`<fault>-N-`: the first N attempts). */
  const scripted = (fault: string, local: string, address: string): boolean => {
    const m = new RegExp(`^${fault}-(\\d+)-`).exec(local);
    return m !== null && (attempts.get(address) ?? 0) <= Number(m[1]);
  };
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    size: 60 * 1024 * 1024,
    onConnect(_session, callback) {
      if (stallNext > 0) return void stallNext--; // never greeted: the client's greeting timeout ends it
      callback();
    },
    onRcptTo(address: SMTPServerAddress, _session, callback) {
      const local = address.address.split('@')[0]!.toLowerCase();
      if (/^(tempfail|tempdata|stall|drop)-\d+-|^bounce/.test(local)) attempts.set(address.address, (attempts.get(address.address) ?? 0) + 1);
      if (local.startsWith('bouncedata')) return callback();
      if (local.startsWith('bounce')) return callback(smtpError(550, '5.1.1 Mailbox does not exist'));
      if (scripted('tempfail', local, address.address)) return callback(smtpError(451, '4.3.0 Try again later'));
      if (scripted('stall', local, address.address)) return; // no reply at all
      callback();
    },
    onData(stream, session, callback) {
      const rcpt = session.envelope.rcptTo.map((r) => r.address);
      const fault = (name: string) => rcpt.some((a) => scripted(name, a.split('@')[0]!.toLowerCase(), a));
      if (fault('drop')) {
        // Take the first part of the message, then cut the connection: the relay never answers the DATA.
        stream.once('data', () => sockets.get(session.remotePort)?.destroy());
        stream.on('data', () => undefined);
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (rcpt.some((a) => a.toLowerCase().startsWith('bouncedata'))) return callback(smtpError(554, '5.7.1 Message rejected'));
        if (fault('tempdata')) return callback(smtpError(451, '4.7.1 Try again later'));
        const id = String(++seq);
        messages.push({
          id,
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          raw: Buffer.concat(chunks),
          receivedAt: new Date().toISOString(),
        });
        // Named as Postfix and SendGrid name an accepted message (emails.provider_message_id, provider-webhooks.test.ts).
        callback(null, `Ok: queued as ${queuePrefix}${id}`);
      });
    },
  });
  // A client that dies mid-transaction (the crash tests kill the worker) resets its connections: smtp-server reports
  // that as an 'error' event, which without a listener is an uncaught exception in the test process.
  smtp.on('error', () => undefined);
  smtp.server.on('connection', (socket: Socket) => {
    const port = socket.remotePort!;
    sockets.set(port, socket);
    socket.once('close', () => sockets.delete(port));
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const smtpPort = (smtp.server.address() as { port: number }).port;

  const web = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const raw = /^\/messages\/(\d+)\/raw$/.exec(url.pathname);
    if (url.pathname === '/messages') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(messages.map(({ raw: _raw, ...m }) => m)));
    } else if (raw) {
      const m = messages.find((x) => x.id === raw[1]);
      res.statusCode = m ? 200 : 404;
      res.end(m?.raw ?? '');
    } else if (url.pathname === '/attempts') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(Object.fromEntries(attempts)));
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  const webPort = (web.address() as { port: number }).port;
  return {
    smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
    httpUrl: `http://127.0.0.1:${webPort}`,
    messages,
    attempts,
    stallConnections: (n) => void (stallNext += n),
    stop: async () => {
      for (const socket of sockets.values()) socket.destroy(); // stalled sessions would hold close() open
      await new Promise<void>((r) => smtp.close(() => r()));
      web.closeAllConnections();
      await new Promise<void>((r) => web.close(() => r()));
    },
  };
}
