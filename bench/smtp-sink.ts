import { SMTPServer, type SMTPServerSession } from 'smtp-server';

/**
 * A message to the benchmark's own dashboard user (`bench-*@`, bench/stack.ts): its signup verification email. The
 * sinks leave it out of their counts: a benchmark counts the messages it sends.
 */
const toBenchUser = (session: SMTPServerSession) => session.envelope.rcptTo.every((r) => r.address.startsWith('bench-'));

/** An SMTP server that accepts and counts messages without keeping them: the receiving end of a benchmark. */
export async function startSmtpSink(port: number) {
  const state = { received: 0, firstAt: 0, lastAt: 0 };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    size: 50 * 1024 * 1024,
    onData(stream, _session, callback) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        if (toBenchUser(_session)) return void callback();
        state.received++;
        state.lastAt = Date.now();
        if (!state.firstAt) state.firstAt = state.lastAt;
        callback();
      });
    },
  });
  server.on('error', () => undefined); // a client killed mid-transaction resets its connections; nothing to do
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { state, url: `smtp://127.0.0.1:${port}`, stop: () => new Promise<void>((r) => server.close(() => r())) };
}

/**
 * A sink that accepts every message and notes, per envelope recipient, each arrival time. With `queueIds` it names
 * each message it accepts as Postfix, SendGrid and most relays do (`250 OK: queued as <id>`), so the sender records a
 * provider message id per message; without, it answers `250 OK: message queued` (no id) as `smtp-server` does.
 */
export async function startTimingSink(port: number, opts: { queueIds?: boolean } = {}) {
  const arrivals = new Map<string, number[]>();
  let messages = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        if (toBenchUser(session)) return void callback();
        messages++;
        const at = Date.now();
        for (const r of session.envelope.rcptTo) arrivals.set(r.address, [...(arrivals.get(r.address) ?? []), at]);
        if (opts.queueIds) callback(null, `OK: queued as 4B${messages.toString(16).toUpperCase().padStart(8, '0')}`);
        else callback();
      });
    },
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { arrivals, messages: () => messages, url: `smtp://127.0.0.1:${port}`, stop: () => new Promise<void>((r) => server.close(() => r())) };
}
