import net, { type AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { simpleParser } from 'mailparser';
import { SmtpPipelinePool } from '../../domain/mail/smtp-pipeline';
import { buildMime, wireMessage } from '../../domain/mail/mime';
import type { SmtpError } from '../../domain/emails/delivery';

/** A real SMTP server on loopback that keeps what it receives, with the envelope and the commands' parameters. */
interface Received {
  from: string;
  to: string[];
  body: string | false;
  raw: Buffer;
  secure: boolean;
  user: unknown;
}

async function startServer(opts: Partial<SMTPServerOptions> & { onRaw?: (raw: Buffer, session: SMTPServerSession) => Error | null } = {}) {
  const received: Received[] = [];
  const connections = { count: 0 };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: opts.onAuth ? [] : ['AUTH'],
    logger: false,
    onConnect: (_s, cb) => {
      connections.count++;
      cb();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        const failure = opts.onRaw?.(raw, session) ?? null;
        if (failure) return cb(failure);
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          body: (session.envelope.mailFrom ? (session.envelope.mailFrom.args as Record<string, string> | false) : false) ? ((session.envelope.mailFrom as { args: Record<string, string> }).args.BODY ?? false) : false,
          raw,
          secure: session.secure,
          user: session.user,
        });
        cb(null, `OK queued as Q${received.length}`);
      });
    },
    ...opts,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.server.address() as AddressInfo).port;
  return { server, port, received, connections, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const pool = (port: number, extra: Partial<ConstructorParameters<typeof SmtpPipelinePool>[0]> = {}) =>
  new SmtpPipelinePool({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, rejectUnauthorized: false, maxConnections: 3, ...extra });

const message = (to: string, html: string, eightBit = false) =>
  buildMime({ messageId: `<${to}@example.com>`, from: { address: 'news@example.com' }, to: { address: to }, subject: `For ${to}`, html, text: html.replace(/<[^>]+>/g, '') }, { eightBit });

const job = (to: string, html = '<p>Hello</p>', eightBit = false) => ({ from: 'bounce@example.com', to, eightBit, data: Buffer.from(wireMessage(message(to, html, eightBit))) });

describe('wireMessage', () => {
  test('dot-stuffs every line that starts with a dot, the first included, and ends with the terminating line', () => {
    expect(wireMessage('.a\r\nb\r\n.c\r\n..d\r\n')).toBe('..a\r\nb\r\n..c\r\n...d\r\n.\r\n');
    expect(wireMessage('no final line end')).toBe('no final line end\r\n.\r\n');
  });
});

describe('SmtpPipelinePool against a real SMTP server (smtp-server)', () => {
  test('many messages over pipelined connections: each arrives once, intact (dot-stuffed lines, 8-bit UTF-8), with BODY=8BITMIME only when 8-bit', async () => {
    const srv = await startServer();
    const p = pool(srv.port);
    try {
      expect([...(await p.capabilities())]).toEqual(expect.arrayContaining(['PIPELINING', '8BITMIME']));
      const html = '<p>Line one</p>\n.a line that starts with a dot\n..and two\n.';
      const jobs = Array.from({ length: 60 }, (_, i) => job(`r${i}@example.org`, i % 2 ? `${html}<p>Grüße — ${i}</p>` : html, i % 2 === 1));
      const results = await Promise.all(jobs.map((j) => p.send(j)));
      expect(results.every((r) => /^250 OK queued as Q\d+$/.test(r.response))).toBe(true);
      expect(srv.received.map((r) => r.to[0]).sort()).toEqual(jobs.map((j) => j.to).sort());
      expect(srv.connections.count).toBeLessThanOrEqual(3);
      for (const r of srv.received) {
        const i = Number(/^r(\d+)@/.exec(r.to[0]!)![1]);
        expect(r.from).toBe('bounce@example.com');
        expect(r.body).toBe(i % 2 ? '8BITMIME' : false);
        const parsed = await simpleParser(r.raw);
        expect((parsed.html as string).replace(/\r\n/g, '\n')).toBe(i % 2 ? `${html}<p>Grüße — ${i}</p>` : html);
        expect(parsed.messageId).toBe(`<r${i}@example.org@example.com>`);
        if (i % 2) expect(r.raw.toString('utf8')).toContain('Content-Transfer-Encoding: 8bit');
      }
    } finally {
      p.close();
      await srv.close();
    }
  });

  test('without PIPELINING and 8BITMIME: commands one at a time, every message delivered; an 8-bit message is refused as transient', async () => {
    const srv = await startServer({ hidePIPELINING: true, hide8BITMIME: true });
    const p = pool(srv.port, { maxConnections: 2 });
    try {
      const caps = await p.capabilities();
      expect(caps.has('PIPELINING')).toBe(false);
      const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => p.send(job(`s${i}@example.org`))));
      expect(sent).toHaveLength(20);
      expect(new Set(srv.received.map((r) => r.to[0])).size).toBe(20);
      const err = (await p.send(job('eight@example.org', '<p>é</p>', true)).catch((e: unknown) => e)) as SmtpError;
      expect(err.code).toBe('E8BIT');
      expect(err.responseCode).toBeUndefined();
      expect(srv.received.some((r) => r.to[0] === 'eight@example.org')).toBe(false);
    } finally {
      p.close();
      await srv.close();
    }
  });

  test('a refused recipient, a refused content and a transient MAIL FROM fail only their own message; the pipeline goes on', async () => {
    const srv = await startServer({
      onRcptTo: (addr, _s, cb) => (addr.address.startsWith('bad') ? cb(Object.assign(new Error('5.1.1 No such user'), { responseCode: 550 })) : cb()),
      onMailFrom: (addr, _s, cb) => (addr.address.startsWith('slow') ? cb(Object.assign(new Error('4.3.2 Try later'), { responseCode: 451 })) : cb()),
      onRaw: (raw) => (raw.includes('REJECT-ME') ? Object.assign(new Error('5.7.1 Content refused'), { responseCode: 554 }) : null),
    });
    const p = pool(srv.port, { maxConnections: 1 });
    try {
      const jobs = [job('a@example.org'), job('bad@example.org'), job('b@example.org'), job('c@example.org', '<p>REJECT-ME</p>'), job('d@example.org'), { ...job('e@example.org'), from: 'slow@example.com' }, job('f@example.org')];
      const outcomes = await Promise.all(jobs.map((j) => p.send(j).then((r) => r.response, (e: SmtpError) => e)));
      expect(typeof outcomes[0]).toBe('string');
      expect(outcomes[1]).toMatchObject({ responseCode: 550, command: 'RCPT TO' });
      expect(typeof outcomes[2]).toBe('string');
      expect(outcomes[3]).toMatchObject({ responseCode: 554, command: 'DATA' });
      expect(typeof outcomes[4]).toBe('string');
      expect(outcomes[5]).toMatchObject({ responseCode: 451, command: 'MAIL FROM' });
      expect(typeof outcomes[6]).toBe('string');
      expect(srv.received.map((r) => r.to[0])).toEqual(['a@example.org', 'b@example.org', 'd@example.org', 'f@example.org']);
    } finally {
      p.close();
      await srv.close();
    }
  });

  test('STARTTLS and AUTH PLAIN: the pool upgrades, logs in, and sends over TLS; wrong credentials are an EAUTH error', async () => {
    const srv = await startServer({
      onAuth: (auth, _s, cb) => (auth.username === 'mailer' && auth.password === 's3cret' ? cb(null, { user: 'mailer' }) : cb(new Error('Invalid credentials'))),
    });
    const good = pool(srv.port, { ignoreTLS: false, auth: { user: 'mailer', pass: 's3cret' } });
    const bad = pool(srv.port, { ignoreTLS: false, auth: { user: 'mailer', pass: 'wrong' } });
    try {
      await good.send(job('tls@example.org'));
      expect(srv.received[0]).toMatchObject({ secure: true, user: 'mailer' });
      const err = (await bad.send(job('no@example.org')).catch((e: unknown) => e)) as SmtpError;
      expect(err.code).toBe('EAUTH');
      expect(err.responseCode).toBe(535);
      expect(srv.received).toHaveLength(1);
    } finally {
      good.close();
      bad.close();
      await srv.close();
    }
  });

  test('TLS from the first byte (smtps): pipelined messages arrive once each, over TLS, each settled with its own reply', async () => {
    // smtp-server's own certificate: the pool is told not to check it, as for a loopback relay.
    const srv = await startServer({ secure: true });
    const tlsPool = pool(srv.port, { secure: true, maxConnections: 2 });
    try {
      const to = Array.from({ length: 12 }, (_, i) => `smtps-${i}@example.org`);
      const sent = await Promise.all(to.map((t) => tlsPool.send(job(t, `<p>For ${t}</p>`))));
      expect(srv.received.map((r) => r.to[0]).sort()).toEqual([...to].sort());
      expect(srv.received.every((r) => r.secure)).toBe(true);
      // Each send resolved with the reply to its own content (the server numbers them in the order it took them).
      expect(new Set(sent.map((s) => s.response)).size).toBe(to.length);
      expect(sent.every((s) => /^250 OK queued as Q\d+$/.test(s.response))).toBe(true);
      for (const r of srv.received) expect((await simpleParser(r.raw)).subject).toBe(`For ${r.to[0]}`);
    } finally {
      tlsPool.close();
      await srv.close();
    }
  });

  test('a connection dropped mid-message fails that message as transient; later messages go over a new connection', async () => {
    let dropped = false;
    const srv = await startServer({
      onRaw: (raw, session) => {
        if (!dropped && raw.includes('DROP-ME')) {
          dropped = true;
          // The server goes away before answering the content.
          (srv.server as unknown as { connections: Set<{ id: string; _socket: { destroy(): void } }> }).connections.forEach((c) => c.id === session.id && c._socket.destroy());
          return new Error('dropped');
        }
        return null;
      },
    });
    const p = pool(srv.port, { maxConnections: 1 });
    try {
      const first = await p.send(job('one@example.org', '<p>DROP-ME</p>')).catch((e: unknown) => e as SmtpError);
      expect(first).toMatchObject({ code: 'ECONNECTION' });
      expect((first as SmtpError).responseCode).toBeUndefined();
      await p.send(job('two@example.org'));
      expect(srv.received.map((r) => r.to[0])).toEqual(['two@example.org']);
      expect(srv.connections.count).toBe(2);
    } finally {
      p.close();
      await srv.close();
    }
  });

  test('a relay that stops answering times out while a reply is awaited, and an idle connection does not', async () => {
    let stall = false;
    const srv = await startServer({
      onData(stream, _session, cb) {
        stream.resume();
        // A stalled relay takes the content and never answers it.
        stream.on('end', () => (stall ? undefined : cb(null, 'OK')));
      },
    });
    const p = pool(srv.port, { maxConnections: 1, socketTimeoutMs: 300 });
    try {
      await p.send(job('one@example.org'));
      // Idle for longer than the timeout: the connection stays and takes the next message.
      await new Promise((r) => setTimeout(r, 700));
      await p.send(job('two@example.org'));
      expect(srv.connections.count).toBe(1);
      stall = true;
      await expect(p.send(job('three@example.org'))).rejects.toMatchObject({ code: 'ETIMEDOUT' });
    } finally {
      p.close();
      await srv.close();
    }
  });

  test('replies that arrive a few octets at a time, multi-line, with CRLF or a bare LF: each message settles with its own reply', async () => {
    // A scripted relay: every reply is written in pieces of one to three octets, one piece a turn of its event loop.
    const messages: Buffer[] = [];
    const server = net.createServer((socket) => {
      socket.setNoDelay(true);
      let queue = Promise.resolve();
      const reply = (text: string) => {
        queue = queue.then(async () => {
          for (let i = 0; i < text.length; ) {
            const n = 1 + (i % 3);
            socket.write(text.slice(i, i + n));
            i += n;
            await new Promise((r) => setImmediate(r));
          }
        });
      };
      let pending = Buffer.alloc(0);
      let inData = false;
      socket.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        for (;;) {
          if (inData) {
            const end = pending.indexOf('\r\n.\r\n');
            if (end < 0) return;
            messages.push(pending.subarray(0, end + 5));
            pending = pending.subarray(end + 5);
            inData = false;
            reply(`250-queued\r\n250 as Q${messages.length}\r\n`);
            continue;
          }
          const nl = pending.indexOf('\r\n');
          if (nl < 0) return;
          const line = pending.subarray(0, nl).toString('latin1');
          pending = pending.subarray(nl + 2);
          const verb = line.slice(0, 4).toUpperCase();
          if (verb === 'EHLO') reply('250-relay.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n');
          else if (verb === 'MAIL') reply('250-sender\n250 ok\n');
          else if (verb === 'RCPT') reply('250 recipient ok\r\n');
          else if (verb === 'DATA') {
            reply('354 go ahead\r\n');
            inData = true;
          } else if (verb === 'QUIT') reply('221 bye\r\n');
          else reply('500 what\r\n');
        }
      });
      socket.on('error', () => undefined);
      reply('220 relay.test ready\r\n');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const p = pool((server.address() as AddressInfo).port, { maxConnections: 2 });
    try {
      const jobs = Array.from({ length: 20 }, (_, i) => job(`r${i}@example.org`, `<p>Message ${i}</p>`));
      const results = await Promise.all(jobs.map((j) => p.send(j)));
      expect(results.every((r) => /^250 queued\nas Q\d+$/.test(r.response))).toBe(true);
      expect(new Set(results.map((r) => r.response)).size).toBe(20);
      expect(messages.map((m) => m.toString('latin1')).sort()).toEqual(jobs.map((j) => j.data.toString('latin1')).sort());
    } finally {
      p.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  test('an unreachable relay: sends and capabilities fail with a connection error, never hang', async () => {
    const srv = await startServer();
    const port = srv.port;
    await srv.close();
    const p = pool(port);
    await expect(p.send(job('x@example.org'))).rejects.toMatchObject({ code: 'ECONNECTION' });
    await expect(p.capabilities()).rejects.toMatchObject({ code: 'ECONNECTION' });
    p.close();
  });
});
