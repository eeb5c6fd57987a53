import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { simpleParser, type ParsedMail } from 'mailparser';
import nodemailer, { type Transporter } from 'nodemailer';
import { SMTPServer } from 'smtp-server';
import { startPostfix, type RunningPostfix } from '../helpers/postfix';
import { SmtpPipelinePool } from '../../domain/mail/smtp-pipeline';
import { buildMime, wireMessage } from '../../domain/mail/mime';
import type { SmtpError } from '../../domain/emails/delivery';

/**
 * The real-MTA harness itself (test/helpers/postfix.ts), with no Mailwright in the loop: a private Postfix takes a
 * message for an unknown user of its local domain, accepts it, and then sends its own RFC 3464 DSN to the envelope
 * sender's domain, relayed to a stand-in for Mailwright's inbound server. This pins down what the wiring to the real
 * inbound server can rely on: the DSN's shape, its null envelope sender, and the recipient it is addressed to.
 * A first run on a machine without postfix installs the package (scripts/postfix/install.sh) in beforeAll.
 */

interface Received {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
}

/** A stand-in for the inbound server: takes everything, keeps the envelope and the raw message. */
async function startInbound(): Promise<{ port: number; received: Received[]; stop(): Promise<void> }> {
  const received: Received[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const from = session.envelope.mailFrom;
        received.push({ mailFrom: from ? from.address : '(none)', rcptTo: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks) });
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as net.AddressInfo).port;
  return { port, received, stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** The fields of a message/delivery-status body: the per-message block, then one block per recipient (RFC 3464 § 2). */
function deliveryStatusBlocks(body: string): Record<string, string>[] {
  return body
    .replace(/\r\n/g, '\n')
    .replace(/\n[ \t]+/g, ' ') // folded lines
    .split(/\n{2,}/)
    .filter((b) => b.trim().length > 0)
    .map((block) =>
      Object.fromEntries(
        block
          .split('\n')
          .filter((l) => l.includes(':'))
          .map((l) => [l.slice(0, l.indexOf(':')).trim().toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      ),
    );
}

async function waitFor<T>(what: string, probe: () => T | undefined, mta: RunningPostfix, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms; postfix log:\n${mta.logs().join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The DSN as parsed, with its delivery-status part kept as an attachment (mailparser folds it into the text otherwise). */
async function parseDsn(raw: Buffer): Promise<{ mail: ParsedMail; status: Record<string, string>[] }> {
  const mail = await simpleParser(raw, { keepDeliveryStatus: true });
  const part = mail.attachments.find((a) => a.contentType === 'message/delivery-status');
  if (!part) throw new Error(`no message/delivery-status part in:\n${raw.toString()}`);
  return { mail, status: deliveryStatusBlocks(part.content.toString('utf8')) };
}

let inbound: Awaited<ReturnType<typeof startInbound>>;
let mta: RunningPostfix;
let transport: Transporter;
const started = Date.now();

beforeAll(async () => {
  inbound = await startInbound();
  mta = await startPostfix({ inboundPort: inbound.port, localDomain: 'mta.test', bounceDomains: ['bounce.example.test'], delayWarningTime: '2s' });
  process.stdout.write(`[postfix harness] instance on 127.0.0.1:${mta.smtpPort} after ${Date.now() - started} ms (install included)\n`);
  // As Mailwright's worker talks to its relay: plain SMTP on loopback, no authentication.
  transport = nodemailer.createTransport({ host: '127.0.0.1', port: mta.smtpPort, secure: false, ignoreTLS: true });
}, 15 * 60_000); // a first run installs postfix

afterAll(async () => {
  transport?.close();
  const pidFile = mta && path.join(mta.directory, 'queue/pid/master.pid');
  const pid = pidFile && fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').trim()) : undefined;
  await mta?.stop();
  await inbound?.stop();
  if (mta) {
    // What stop() promises: nothing left holding the port, the folder gone, no master process (a zombie that
    // this machine's init has not reaped yet counts as gone).
    expect(fs.existsSync(mta.directory)).toBe(false);
    if (pid) {
      const state = fs.existsSync(`/proc/${pid}/stat`) ? fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] : undefined;
      expect(state === undefined || state === 'Z').toBe(true);
    }
    const open = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port: mta.smtpPort });
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    expect(open).toBe(false);
  }
}, 30_000);

test('an unknown local user is accepted, then bounced with a Postfix DSN to the envelope sender', async () => {
  const messageId = `<harness-${Date.now()}@example.test>`;
  const t0 = Date.now();
  const info = await transport.sendMail({
    envelope: { from: 'b-abc@bounce.example.test', to: ['nobody@mta.test'] },
    from: 'Sender <sender@example.test>',
    to: 'nobody@mta.test',
    subject: 'Harness bounce',
    text: 'This goes nowhere.',
    messageId,
  });
  // Accepted at SMTP time: the failure comes later, as mail, the way a relay on the Internet reports it.
  expect(info.accepted).toEqual(['nobody@mta.test']);
  expect(info.response).toMatch(/^250 /);

  const dsn = await waitFor('DSN at the inbound server', () => inbound.received.find((m) => m.rcptTo.includes('b-abc@bounce.example.test')), mta);
  process.stdout.write(`[postfix harness] DSN round trip ${Date.now() - t0} ms\n`);
  expect(dsn.mailFrom).toBe(''); // MAIL FROM:<>, so a DSN never bounces back
  expect(dsn.rcptTo).toEqual(['b-abc@bounce.example.test']);

  const { mail, status } = await parseDsn(dsn.raw);
  const contentType = mail.headers.get('content-type') as { value: string; params: Record<string, string> };
  expect(contentType.value).toBe('multipart/report');
  expect(contentType.params['report-type']).toBe('delivery-status');
  expect(mail.to && !Array.isArray(mail.to) ? mail.to.value[0]?.address : undefined).toBe('b-abc@bounce.example.test');
  expect(mail.from?.value[0]?.address?.toLowerCase()).toBe('mailer-daemon@mta.test');

  const [perMessage, ...recipients] = status;
  expect(perMessage?.['reporting-mta']).toBe('dns; mta.test');
  expect(recipients).toHaveLength(1);
  const r = recipients[0]!;
  expect(r['final-recipient']).toBe('rfc822; nobody@mta.test');
  expect(r['original-recipient']).toBe('rfc822;nobody@mta.test');
  expect(r.action).toBe('failed');
  expect(r.status).toMatch(/^5\.\d{1,3}\.\d{1,3}$/);
  expect(r.status).toBe('5.1.1');
  expect(r['diagnostic-code']).toMatch(/User unknown/);

  // The original message comes back whole (it is under bounce_size_limit), so its Message-ID identifies it.
  const original = mail.attachments.find((a) => a.contentType === 'message/rfc822' || a.contentType === 'text/rfc822-headers');
  expect(original?.contentType).toBe('message/rfc822');
  expect(original?.content.toString('utf8')).toContain(`Message-ID: ${messageId}`);
  expect(original?.content.toString('utf8')).toContain('Return-Path: <b-abc@bounce.example.test>');

  expect(mta.logs().some((l) => /to=<nobody@mta\.test>.*status=bounced/.test(l))).toBe(true);
});

test('a deferred recipient gets a "delayed" DSN (4.x.x) once the message is older than delay_warning_time', async () => {
  const t0 = Date.now();
  const info = await transport.sendMail({
    envelope: { from: 'b-def@bounce.example.test', to: ['defer-1@mta.test'] },
    from: 'sender@example.test',
    to: 'defer-1@mta.test',
    subject: 'Harness delay',
    text: 'Still trying.',
  });
  expect(info.accepted).toEqual(['defer-1@mta.test']);

  const dsn = await waitFor('delay DSN at the inbound server', () => inbound.received.find((m) => m.rcptTo.includes('b-def@bounce.example.test')), mta);
  process.stdout.write(`[postfix harness] delay DSN after ${Date.now() - t0} ms\n`);
  expect(dsn.mailFrom).toBe('');
  const { mail, status } = await parseDsn(dsn.raw);
  expect((mail.headers.get('content-type') as { params: Record<string, string> }).params['report-type']).toBe('delivery-status');
  const r = status[1]!;
  expect(r['final-recipient']).toBe('rfc822; defer-1@mta.test');
  expect(r.action).toBe('delayed');
  expect(r.status).toBe('4.2.2');
  expect(r['will-retry-until']).toBeDefined();
});

test('other domains are refused at RCPT TO without a capture port (never an open relay)', async () => {
  await expect(
    transport.sendMail({ envelope: { from: 'b-x@bounce.example.test', to: ['someone@example.com'] }, from: 'sender@example.test', to: 'someone@example.com', subject: 'x', text: 'x' }),
  ).rejects.toMatchObject({ responseCode: 554, response: expect.stringMatching(/Relay access denied/) });
});

test('with a capture port, existing mailboxes and other domains are relayed there; unknown local users still bounce', async () => {
  const capture = await startInbound();
  const inbound2 = await startInbound();
  const mta2 = await startPostfix({ inboundPort: inbound2.port, bounceDomains: ['bounce.example.test'], mailboxes: ['alice'], capturePort: capture.port });
  const t = nodemailer.createTransport({ host: '127.0.0.1', port: mta2.smtpPort, secure: false, ignoreTLS: true });
  try {
    const info = await t.sendMail({
      envelope: { from: 'b-cap@bounce.example.test', to: ['alice@mta.test', 'someone@example.com', 'nobody@mta.test'] },
      from: 'sender@example.test',
      to: 'alice@mta.test',
      subject: 'Harness capture',
      text: 'x',
    });
    expect(info.accepted).toHaveLength(3);
    const relayed = await waitFor('mail at the capture port', () => (capture.received.flatMap((m) => m.rcptTo).length >= 2 ? capture.received : undefined), mta2);
    expect(relayed.flatMap((m) => m.rcptTo).sort()).toEqual(['alice@mta.test', 'someone@example.com']);
    expect(relayed.every((m) => m.mailFrom === 'b-cap@bounce.example.test')).toBe(true); // the envelope sender kept
    const dsn = await waitFor('DSN', () => inbound2.received[0], mta2);
    const { status } = await parseDsn(dsn.raw);
    expect(status.slice(1).map((r) => [r['final-recipient'], r.action, r.status])).toEqual([['rfc822; nobody@mta.test', 'failed', '5.1.1']]);
  } finally {
    t.close();
    await mta2.stop();
    await Promise.all([capture.stop(), inbound2.stop()]);
  }
});

test('the campaign pool pipelines through Postfix: each message relayed once, its 8-bit body intact; a refused recipient fails alone', async () => {
  const capture = await startInbound();
  const mta2 = await startPostfix({ inboundPort: inbound.port, bounceDomains: ['bounce.example.test'], capturePort: capture.port });
  const pool = (port: number) => new SmtpPipelinePool({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, rejectUnauthorized: false, maxConnections: 2 });
  const relay = pool(mta2.smtpPort);
  const direct = pool(mta.smtpPort);
  const job = (to: string, i: number) => ({
    from: 'b-pool@bounce.example.test',
    to,
    eightBit: true,
    data: Buffer.from(wireMessage(buildMime({ messageId: `<pool-${i}@example.test>`, from: { address: 'news@example.test' }, to: { address: to }, subject: `Pool ${i}`, html: `<p>Grüße ${i}</p>\n.dot line`, text: `Grüße ${i}` }, { eightBit: true }))),
  });
  try {
    const caps = await relay.capabilities();
    expect(caps.has('PIPELINING') && caps.has('8BITMIME')).toBe(true);
    const to = Array.from({ length: 30 }, (_, i) => `reader-${i}@example.com`);
    const replies = await Promise.all(to.map((addr, i) => relay.send(job(addr, i))));
    expect(replies.every((r) => /^250 .*queued as/i.test(r.response))).toBe(true);
    const relayed = await waitFor('30 messages at the capture port', () => (capture.received.length >= 30 ? capture.received : undefined), mta2);
    expect(relayed.flatMap((m) => m.rcptTo).sort()).toEqual([...to].sort());
    for (const m of relayed) {
      const i = Number(/reader-(\d+)@/.exec(m.rcptTo[0]!)![1]);
      const mail = await simpleParser(m.raw);
      expect(mail.messageId).toBe(`<pool-${i}@example.test>`);
      expect((mail.html as string).replace(/\r\n/g, '\n')).toBe(`<p>Grüße ${i}</p>\n.dot line`);
    }
    // Without a capture port other domains are refused at RCPT TO: that message fails with the reply, the next is sent.
    const [refused, accepted] = await Promise.all([direct.send(job('someone@example.com', 100)).catch((e: unknown) => e as SmtpError), direct.send(job('nobody@mta.test', 101))]);
    expect(refused).toMatchObject({ responseCode: 554, command: 'RCPT TO', response: expect.stringMatching(/Relay access denied/) });
    expect(accepted.response).toMatch(/^250 /);
  } finally {
    relay.close();
    direct.close();
    await mta2.stop();
    await capture.stop();
  }
});
