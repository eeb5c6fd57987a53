import net from 'node:net';
import os from 'node:os';
import tls from 'node:tls';
import { observeSend, smtpRelay } from './transport';
import { logger } from '../logger';
import type { SmtpError } from '../emails/delivery';

/**
 * A pooled SMTP client for bulk sending (campaigns): ready message bytes go straight to the socket.
 *
 * nodemailer's `sendMail` builds a composer, a MimeNode and four streams for every message, dot-stuffs the body in
 * JavaScript a byte at a time and writes each command separately; for a campaign that was most of the worker's main
 * thread (BENCHMARKS.md › Campaign send). Here a message arrives rendered, signed and dot-stuffed with its terminating
 * `.` line (`wireMessage`, mime.ts), and each connection pipelines (RFC 2920): MAIL FROM, RCPT TO and DATA go in one write,
 * and a message's content goes in the same write as the next message's MAIL, RCPT and DATA. A message costs one
 * socket write when the relay offers PIPELINING, and the commands one at a time when it does not.
 *
 * The handshake is the usual one: greeting, EHLO (HELO if refused), STARTTLS when offered (unless `ignoreTLS`),
 * EHLO again, AUTH PLAIN or LOGIN with the URL's credentials. Every failure is an `SmtpError` as nodemailer's are
 * (`responseCode`, `response`, `command`, `code`), so callers classify them the same way: a 5xx reply is permanent,
 * anything else (4xx, a timeout, a dropped connection) is worth retrying.
 */

export interface SmtpPoolOptions {
  host: string;
  port: number;
  /** TLS from the first byte (smtps://, port 465). */
  secure: boolean;
  /** Never upgrade with STARTTLS even when offered. */
  ignoreTLS: boolean;
  /** Whether the server's certificate is checked (loopback capture servers have none worth checking). */
  rejectUnauthorized: boolean;
  auth?: { user: string; pass: string };
  maxConnections: number;
  connectionTimeoutMs?: number;
  /** No reply for this long while one is awaited: the connection is given up. */
  socketTimeoutMs?: number;
  /** An idle connection is closed (QUIT) after this long. */
  idleTimeoutMs?: number;
  /** The name given in EHLO (default: this host's name). */
  name?: string;
}

/** A message ready for the wire: content dot-stuffed, ending with the `.` line (`wireMessage`, mime.ts). */
export interface WireJob {
  from: string;
  to: string;
  /** The content is 8-bit (BODY=8BITMIME), which only a relay offering 8BITMIME takes. */
  eightBit: boolean;
  data: Buffer;
}

export interface SmtpSent {
  /** The relay's reply to the end of the content (`250 ... queued as ...`). */
  response: string;
}

interface Reply {
  code: number;
  text: string;
}

function smtpError(message: string, fields: { responseCode?: number; response?: string; command?: string; code?: string }): SmtpError {
  return Object.assign(new Error(message), fields) as SmtpError;
}

/** Addresses go into commands as they are: nothing that could end a command or an angle address. */
// eslint-disable-next-line no-control-regex -- control characters are what it refuses
const UNSAFE_ADDRESS = /[\x00-\x20<>\x7f-\uffff]/;

interface Job extends WireJob {
  /** Called once, with the relay's final reply or why the message was not sent (settle). */
  done: SendCallback;
  /** When it was handed to the pool (performance.now()), for the send-duration metric. */
  startedAt: number;
  /** The first refusal of its envelope (set while its replies come). */
  failure?: SmtpError | null;
  /** Its callback has been called (settle calls it once, as a promise settles once). */
  settled?: boolean;
}

/** A job's commands and content, in the order their replies come. */
const enum Step {
  Reset,
  Mail,
  Rcpt,
  Data,
  Content,
  /** The reply to the lone `.` sent after a 354 to a refused envelope. */
  Ignore,
}
const STEP_COMMANDS = ['RSET', 'MAIL FROM', 'RCPT TO', 'DATA'];

/**
 * One reply awaited, in order: a job's step (a plain record: a campaign sends four or five commands a message, and a
 * callback for each was a closure and more for the worker's main thread), or, while connecting, what to do with it and
 * what to do if the connection fails first.
 */
type Expectation = { job: Job; step: Step } | { job?: undefined; reply(reply: Reply): void; fail?(err: SmtpError): void };

export type SendCallback = (err: SmtpError | null, sent: SmtpSent | null) => void;

/** A job's end: measured as nodemailer's sends are (transport.ts observeSend), then its callback. */
function settle(job: Job, err: SmtpError | null, sent: SmtpSent | null): void {
  if (job.settled) return;
  job.settled = true;
  observeSend(job.startedAt, err);
  try {
    job.done(err, sent);
  } catch (thrown) {
    logger.error({ err: thrown }, 'an SMTP send callback threw');
  }
}

/** A connection's read buffer: replies are a few hundred octets (an EHLO's the longest); a longer read comes in parts. */
const READ_BUFFER_BYTES = 16 * 1024;

const mailCommand = (job: Job) => `MAIL FROM:<${job.from}>${job.eightBit ? ' BODY=8BITMIME' : ''}`;

class PipelinedConnection {
  private socket: net.Socket | tls.TLSSocket | null = null;
  private buffer = '';
  private lines: string[] = [];
  private readonly expected: Expectation[] = [];
  /** Jobs waiting for this connection. */
  readonly queue: Job[] = [];
  /** Jobs whose commands are on the wire and not yet answered to the end. */
  private readonly active = new Set<Job>();
  private extensions = new Set<string>();
  private authMechanisms: string[] = [];
  private ready: Promise<void> | null = null;
  /** The handshake (greeting, EHLO, STARTTLS, AUTH) is done. */
  private established = false;
  private closed = false;
  /**
   * A job's envelope is on the wire and its DATA not answered yet (or, without PIPELINING, its content not answered
   * yet): the next job may not start before.
   */
  private envelopeOpen = false;
  /** STARTTLS has wrapped the plain socket (whose `onread` then no longer carries replies). */
  private upgraded = false;
  /** The last transaction failed: RSET before the next MAIL. */
  private needsReset = false;
  private idleTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly opts: SmtpPoolOptions,
    private readonly onClose: (conn: PipelinedConnection, leftover: Job[]) => void,
  ) {}

  get load(): number {
    return this.queue.length + this.active.size;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The relay's EHLO keywords (connects first if needed). */
  async capabilities(): Promise<Set<string>> {
    await this.connect();
    return this.extensions;
  }

  enqueue(job: Job): void {
    this.queue.push(job);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    // Connected: straight on (a promise reaction a message was a cost of its own); else once the handshake is done.
    if (this.established) {
      this.pump();
      return;
    }
    this.connect().then(
      () => this.pump(),
      () => undefined, // failConnection has rejected the queue
    );
  }

  private connect(): Promise<void> {
    this.ready ??= this.handshake().catch((err: unknown) => {
      this.failConnection(err as SmtpError);
      throw err;
    });
    return this.ready;
  }

  private async handshake(): Promise<void> {
    const { opts } = this;
    this.socket = await new Promise<net.Socket>((resolve, reject) => {
      const onError = (err: Error) => reject(smtpError(`Connection to ${opts.host}:${opts.port} failed: ${err.message}`, { code: 'ECONNECTION' }));
      // Replies are read into one buffer of the connection's (`onread`), not through the socket's stream: see receiveInto.
      const onread = {
        buffer: Buffer.allocUnsafe(READ_BUFFER_BYTES),
        callback: (n: number, buf: Buffer) => {
          this.receiveInto(buf, n);
          return true;
        },
      };
      // tls.connect takes `onread` as net.connect does (Node's types leave it out of its options).
      const tlsOptions = { host: opts.host, port: opts.port, servername: net.isIP(opts.host) ? undefined : opts.host, rejectUnauthorized: opts.rejectUnauthorized, onread };
      const socket = opts.secure
        ? tls.connect(tlsOptions as tls.ConnectionOptions, () => done())
        : net.connect({ host: opts.host, port: opts.port, onread }, () => done());
      const timer = setTimeout(() => {
        socket.destroy();
        reject(smtpError(`Connection to ${opts.host}:${opts.port} timed out`, { code: 'ETIMEDOUT' }));
      }, opts.connectionTimeoutMs ?? 10_000);
      socket.once('error', onError);
      const done = () => {
        clearTimeout(timer);
        socket.off('error', onError);
        resolve(socket);
      };
    });
    this.attach(this.socket);
    const greeting = await this.command(null);
    if (greeting.code !== 220) throw this.replyError(greeting, 'CONN');
    await this.hello();
    if (!opts.secure && !opts.ignoreTLS && this.extensions.has('STARTTLS')) {
      const r = await this.command('STARTTLS');
      if (r.code !== 220) throw this.replyError(r, 'STARTTLS');
      const plain = this.socket;
      // The TLS layer reads the plain socket from here on; a socket made on one (`{ socket }`) takes no `onread`, so
      // its replies come as 'data' events.
      this.upgraded = true;
      plain.removeAllListeners('error');
      plain.removeAllListeners('close');
      plain.removeAllListeners('timeout');
      this.socket = await new Promise<tls.TLSSocket>((resolve, reject) => {
        const s = tls.connect({ socket: plain, servername: net.isIP(opts.host) ? undefined : opts.host, rejectUnauthorized: opts.rejectUnauthorized }, () => resolve(s));
        s.once('error', (err) => reject(smtpError(`TLS negotiation failed: ${err.message}`, { code: 'ETLS' })));
      });
      this.attach(this.socket);
      this.socket.setEncoding('latin1');
      this.socket.on('data', (chunk: string) => this.receive(chunk));
      await this.hello();
    }
    if (opts.auth) await this.authenticate(opts.auth);
    this.established = true;
  }

  private async hello(): Promise<void> {
    const name = this.opts.name ?? os.hostname();
    let r = await this.command(`EHLO ${name}`);
    let lines = r.text.split('\n');
    if (r.code !== 250) {
      r = await this.command(`HELO ${name}`);
      if (r.code !== 250) throw this.replyError(r, 'HELO');
      lines = [];
    }
    this.extensions = new Set();
    this.authMechanisms = [];
    for (const line of lines.slice(1)) {
      const [keyword, ...params] = line.trim().toUpperCase().split(/[\s=]+/);
      if (!keyword) continue;
      this.extensions.add(keyword);
      if (keyword === 'AUTH') this.authMechanisms.push(...params);
    }
  }

  private async authenticate(auth: { user: string; pass: string }): Promise<void> {
    const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
    if (this.authMechanisms.includes('PLAIN') || !this.authMechanisms.includes('LOGIN')) {
      const r = await this.command(`AUTH PLAIN ${b64(`\u0000${auth.user}\u0000${auth.pass}`)}`);
      if (r.code !== 235) throw this.replyError(r, 'AUTH PLAIN', 'EAUTH');
      return;
    }
    let r = await this.command('AUTH LOGIN');
    if (r.code === 334) r = await this.command(b64(auth.user));
    if (r.code === 334) r = await this.command(b64(auth.pass));
    if (r.code !== 235) throw this.replyError(r, 'AUTH LOGIN', 'EAUTH');
  }

  /** Writes one command (or none: the greeting) and waits for its reply. Used while connecting only. */
  private command(line: string | null): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      this.expected.push({ reply: resolve, fail: reject });
      if (line !== null) this.socket!.write(`${line}\r\n`);
      this.armTimeout();
    });
  }

  private replyError(r: Reply, command: string, code = 'EPROTOCOL'): SmtpError {
    return smtpError(`${command} refused: ${r.code} ${r.text}`, { responseCode: r.code, response: `${r.code} ${r.text}`, command, code });
  }

  private attach(socket: net.Socket): void {
    socket.setNoDelay(true);
    socket.on('error', (err) => this.failConnection(smtpError(`Connection error: ${err.message}`, { code: 'ECONNECTION' })));
    socket.on('close', () => this.failConnection(smtpError('The connection closed unexpectedly', { code: 'ECONNECTION' })));
    socket.on('timeout', () => this.failConnection(smtpError('No reply from the SMTP server in time', { code: 'ETIMEDOUT' })));
  }

  /** The socket and the timeout last set on it. */
  private armed: { socket: net.Socket; ms: number } | null = null;

  /**
   * The socket times out only while a reply is awaited. Set only when that changes: each read and write restarts a
   * socket's timeout by itself, and setting it again (a timer taken out of its list and put back) after every write
   * and reply was a few percent of a campaign's main thread.
   */
  private armTimeout(): void {
    const socket = this.socket;
    if (!socket) return;
    const ms = this.expected.length ? (this.opts.socketTimeoutMs ?? 30_000) : 0;
    if (this.armed?.socket === socket && this.armed.ms === ms) return;
    this.armed = { socket, ms };
    socket.setTimeout(ms);
  }

  /**
   * Replies read into the connection's buffer (the socket's `onread`): `n` octets. Through the socket's readable stream
   * each read was a chunk pushed, a string decoder, an event and a read-more scheduled with process.nextTick (an async
   * resource of its own while async hooks are on, as Temporal's AsyncLocalStorage turns them on): about an eighth of a
   * campaign's main thread, for one to four replies a message (BENCHMARKS.md › Issue 28, sixteenth stop).
   */
  private receiveInto(buf: Buffer, n: number): void {
    // After STARTTLS the TLS layer reads the socket; nothing should come here, and nothing that does is a reply.
    if (this.upgraded) return;
    this.receive(buf.toString('latin1', 0, n));
  }

  /** Splits replies (multi-line ones end with a line whose code is followed by a space) and hands each to its expectation. */
  private receive(chunk: string): void {
    const buffer = this.buffer ? this.buffer + chunk : chunk;
    let start = 0;
    for (let end = buffer.indexOf('\n'); end >= 0 && !this.closed; end = buffer.indexOf('\n', start)) {
      const line = buffer.slice(start, end > start && buffer.charCodeAt(end - 1) === 0x0d ? end - 1 : end);
      start = end + 1;
      if (line.length >= 4 && line[3] === '-') {
        this.lines.push(line);
        continue;
      }
      const code = Number(line.slice(0, 3));
      let text: string;
      if (this.lines.length) {
        this.lines.push(line);
        text = this.lines.map((l) => l.slice(4)).join('\n');
        this.lines = [];
      } else text = line.slice(4);
      const handler = this.expected.shift();
      if (!handler || !Number.isInteger(code)) {
        this.failConnection(smtpError(`Unexpected reply from the SMTP server: ${line.slice(0, 200)}`, { code: 'EPROTOCOL' }));
        return;
      }
      if (handler.job) this.stepReply(handler.job, handler.step, { code, text });
      else handler.reply({ code, text });
    }
    this.buffer = start === 0 ? buffer : buffer.slice(start);
    if (this.buffer.length > 64 * 1024) this.failConnection(smtpError('The SMTP server sent an overlong line', { code: 'EPROTOCOL' }));
    this.armTimeout();
  }

  /** Starts the next job's envelope when none is open: with the previous content in the same write when pipelining. */
  private pump(prefix: Buffer | null = null): void {
    if (this.closed || !this.socket) return;
    const job = this.envelopeOpen ? undefined : this.queue.shift();
    if (!job) {
      if (prefix) this.socket.write(prefix);
      this.armTimeout();
      this.maybeIdle();
      return;
    }
    const unsupported = this.refusal(job);
    if (unsupported) {
      settle(job, unsupported, null);
      this.pump(prefix);
      return;
    }
    this.envelopeOpen = true;
    this.active.add(job);
    job.failure = null;
    const reset = this.needsReset;
    this.needsReset = false;
    if (reset) this.expected.push({ job, step: Step.Reset });
    this.expected.push({ job, step: Step.Mail }, { job, step: Step.Rcpt }, { job, step: Step.Data });
    if (this.extensions.has('PIPELINING')) this.write(prefix, `${reset ? 'RSET\r\n' : ''}${mailCommand(job)}\r\nRCPT TO:<${job.to}>\r\nDATA\r\n`);
    else this.write(prefix, reset ? 'RSET\r\n' : `${mailCommand(job)}\r\n`);
  }

  /** A reply to one of a job's steps. */
  private stepReply(job: Job, step: Step, r: Reply): void {
    const pipelining = this.extensions.has('PIPELINING');
    if (step === Step.Ignore) return;
    if (step === Step.Content) {
      this.active.delete(job);
      if (r.code >= 200 && r.code < 300) settle(job, null, { response: `${r.code} ${r.text}` });
      else settle(job, this.replyError(r, 'DATA'), null);
      if (!pipelining) {
        // Without PIPELINING the next MAIL waits for this reply.
        this.envelopeOpen = false;
        this.pump();
      } else this.maybeIdle();
      return;
    }
    const ok = step === Step.Data ? r.code === 354 : step === Step.Reset ? r.code < 400 : r.code >= 200 && r.code < 300;
    if (!ok && !job.failure && step !== Step.Reset) job.failure = this.replyError(r, STEP_COMMANDS[step]!);
    if (step === Step.Data) this.endEnvelope(job, job.failure ?? null, r);
    // Pipelined, every command is on the wire already: DATA's reply settles the job.
    else if (pipelining) return;
    // One at a time: a refusal ends the job (nothing more of it is on the wire), else the next command goes.
    else if (job.failure) this.endEnvelope(job, job.failure, null);
    else this.write(null, step === Step.Reset ? `${mailCommand(job)}\r\n` : step === Step.Mail ? `RCPT TO:<${job.to}>\r\n` : 'DATA\r\n');
  }

  /** What the relay cannot take of this job (before anything is written), or null. */
  private refusal(job: Job): SmtpError | null {
    if (UNSAFE_ADDRESS.test(job.from) || UNSAFE_ADDRESS.test(job.to)) return smtpError('The address cannot be written in an SMTP command', { code: 'EENVELOPE', command: 'MAIL FROM' });
    // Transient: the next pass renders for this relay's extensions again (a relay behind a balancer may differ).
    if (job.eightBit && !this.extensions.has('8BITMIME')) return smtpError('The relay does not offer 8BITMIME', { code: 'E8BIT' });
    return null;
  }

  private write(prefix: Buffer | null, commands: string | null): void {
    const socket = this.socket!;
    if (prefix && commands) {
      // One write of both (writev).
      socket.cork();
      socket.write(prefix);
      socket.write(commands, 'latin1');
      socket.uncork();
    } else if (prefix) socket.write(prefix);
    else if (commands) socket.write(commands, 'latin1');
    this.armTimeout();
  }

  /** DATA answered (or the envelope refused): send the content, or end the job and go on. */
  private endEnvelope(job: Job, failure: SmtpError | null, dataReply: Reply | null): void {
    const pipelining = this.extensions.has('PIPELINING');
    if (failure) {
      this.envelopeOpen = false;
      this.active.delete(job);
      this.needsReset = true;
      // A relay that answers DATA with 354 despite a refused recipient gets an empty message it cannot deliver.
      if (dataReply?.code === 354) {
        this.expected.push({ job, step: Step.Ignore });
        this.pump(Buffer.from('.\r\n'));
      } else this.pump();
      settle(job, failure, null);
      return;
    }
    this.expected.push({ job, step: Step.Content });
    // With PIPELINING the next job's MAIL, RCPT and DATA go in the same write as this content.
    if (pipelining) this.envelopeOpen = false;
    this.pump(job.data);
  }

  private maybeIdle(): void {
    if (this.closed || this.load > 0 || this.idleTimer) return;
    this.idleTimer = setTimeout(() => this.quit(), this.opts.idleTimeoutMs ?? 10_000);
    this.idleTimer.unref();
  }

  /** Ends the connection politely (no job is lost: only an idle connection quits). */
  quit(): void {
    if (this.closed) return;
    if (this.load > 0) {
      this.failConnection(smtpError('The pool was closed', { code: 'ECONNECTION' }));
      return;
    }
    this.closed = true;
    this.socket?.removeAllListeners('close');
    this.socket?.removeAllListeners('timeout');
    this.socket?.on('error', () => undefined);
    if (this.socket && !this.socket.destroyed) this.socket.end('QUIT\r\n');
    this.onClose(this, []);
  }

  /** The connection is gone: jobs on the wire fail (retried later), jobs not yet started go back to the pool. */
  private failConnection(err: SmtpError): void {
    if (this.closed) return;
    this.closed = true;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.socket?.destroy();
    const waiting = this.queue.splice(0);
    for (const e of this.expected.splice(0)) if (!e.job) e.fail?.(err);
    for (const job of this.active) settle(job, err, null);
    this.active.clear();
    // A connection that never came up takes its waiting jobs down with it (the relay is away or refuses us: a new
    // connection would fare no better); otherwise they go on over another.
    if (!this.established) {
      for (const job of waiting) settle(job, err, null);
      this.onClose(this, []);
    } else this.onClose(this, waiting);
  }
}

/** A pool of pipelined connections to one relay; a message goes to the least loaded connection. */
export class SmtpPipelinePool {
  private readonly connections: PipelinedConnection[] = [];
  private closing = false;

  constructor(private readonly opts: SmtpPoolOptions) {}

  /** The relay's EHLO keywords, as one of the pool's connections sees them. */
  async capabilities(): Promise<Set<string>> {
    const conn = this.connections.find((c) => !c.isClosed) ?? this.open();
    return conn.capabilities();
  }

  /** Sends one message; resolves with the relay's final reply, rejects with an SmtpError. Measured as nodemailer's sends are. */
  send(job: WireJob): Promise<SmtpSent> {
    return new Promise<SmtpSent>((resolve, reject) => this.sendWith(job, (err, sent) => (err ? reject(err) : resolve(sent!))));
  }

  /**
   * send with a callback instead of a promise (a campaign's sends: each promise and reaction a message costs the
   * worker's main thread, more so with the promise hooks Temporal's context turns on). `done` is called once, perhaps
   * before sendWith returns (a closed pool, a message the relay cannot take); it must not throw (what it throws is
   * logged and dropped).
   */
  sendWith(job: WireJob, done: SendCallback): void {
    const queued: Job = { from: job.from, to: job.to, eightBit: job.eightBit, data: job.data, done, startedAt: performance.now() };
    if (this.closing) settle(queued, smtpError('The pool was closed', { code: 'ECONNECTION' }), null);
    else this.dispatch(queued);
  }

  private dispatch(job: Job): void {
    let best: PipelinedConnection | undefined;
    for (const c of this.connections) if (!best || c.load < best.load) best = c;
    // A new connection while there is room and every open one is busy.
    if (!best || (best.load > 0 && this.connections.length < this.opts.maxConnections)) best = this.open();
    best.enqueue(job);
  }

  private open(): PipelinedConnection {
    const conn = new PipelinedConnection(this.opts, (closed, leftover) => {
      const i = this.connections.indexOf(closed);
      if (i >= 0) this.connections.splice(i, 1);
      for (const job of leftover) {
        if (this.closing) settle(job, smtpError('The pool was closed', { code: 'ECONNECTION' }), null);
        else this.dispatch(job);
      }
    });
    this.connections.push(conn);
    return conn;
  }

  close(): void {
    this.closing = true;
    for (const c of [...this.connections]) c.quit();
  }
}

/** The pool for `SMTP_URL`: the relay nodemailer's transport connects to (domain/mail/transport.ts), the same way. */
export function createSmtpPipelinePool(smtpUrl: string, poolSize: number): SmtpPipelinePool {
  const { loopback, ...relay } = smtpRelay(smtpUrl);
  return new SmtpPipelinePool({ ...relay, rejectUnauthorized: !loopback, maxConnections: poolSize });
}
