import http from 'node:http';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';

interface Captured {
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
 */
export async function startSmtpCapture(): Promise<{ smtpUrl: string; httpUrl: string; stop(): Promise<void> }> {
  const messages: Captured[] = [];
  const attempts = new Map<string, number>();
  let seq = 0;
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    size: 60 * 1024 * 1024,
    onRcptTo(address: SMTPServerAddress, _session, callback) {
      const local = address.address.split('@')[0]!.toLowerCase();
      if (local.startsWith('bounce')) return callback(smtpError(550, '5.1.1 Mailbox does not exist'));
      const temp = /^tempfail-(\d+)-/.exec(local);
      if (temp) {
        const n = (attempts.get(address.address) ?? 0) + 1;
        attempts.set(address.address, n);
        if (n <= Number(temp[1])) return callback(smtpError(451, '4.3.0 Try again later'));
      }
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        messages.push({
          id: String(++seq),
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          raw: Buffer.concat(chunks),
          receivedAt: new Date().toISOString(),
        });
        callback();
      });
    },
  });
  // A client that dies mid-transaction (the crash tests kill the worker) resets its connections: smtp-server reports
  // that as an 'error' event, which without a listener is an uncaught exception in the test process.
  smtp.on('error', () => undefined);
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
    stop: async () => {
      await new Promise<void>((r) => smtp.close(() => r()));
      web.closeAllConnections();
      await new Promise<void>((r) => web.close(() => r()));
    },
  };
}
