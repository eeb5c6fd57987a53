import { SMTPServer } from 'smtp-server';

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
