import net from 'node:net';

/**
 * A plain SMTP client for talking to the inbound server the way another MTA does, with every reply visible (nodemailer
 * hides the codes of refusals and will not send a null reverse path): `MAIL FROM:<>` for bounces and reports.
 */
export interface SmtpReply {
  code: number;
  text: string;
}

export interface SmtpSession {
  command(line: string): Promise<SmtpReply>;
  /** DATA, the message (dot-stuffed here), and the final reply. */
  data(raw: Buffer | string): Promise<SmtpReply>;
  close(): Promise<void>;
}

export async function openSmtp(port: number, host = '127.0.0.1'): Promise<SmtpSession> {
  const socket = net.connect(port, host);
  let buffer = '';
  const waiting: Array<(r: SmtpReply) => void> = [];
  const ready: SmtpReply[] = [];
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffer += chunk;
    // A reply ends with a line whose code is followed by a space (multi-line replies use `250-`).
    for (let m = /^(\d{3}) .*$/m.exec(buffer); m; m = /^(\d{3}) .*$/m.exec(buffer)) {
      const end = m.index + m[0].length + 1;
      const reply = { code: Number(m[1]), text: buffer.slice(0, end).trim() };
      buffer = buffer.slice(end);
      const w = waiting.shift();
      if (w) w(reply);
      else ready.push(reply);
    }
  });
  const next = () => new Promise<SmtpReply>((resolve) => (ready.length ? resolve(ready.shift()!) : waiting.push(resolve)));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const greeting = await next();
  if (greeting.code !== 220) throw new Error(`unexpected greeting: ${greeting.text}`);
  const command = (line: string) => {
    socket.write(`${line}\r\n`);
    return next();
  };
  const ehlo = await command('EHLO client.test');
  if (ehlo.code !== 250) throw new Error(`EHLO refused: ${ehlo.text}`);
  return {
    command,
    async data(raw) {
      const go = await command('DATA');
      if (go.code !== 354) return go;
      const text = (Buffer.isBuffer(raw) ? raw.toString('latin1') : raw).replace(/\r?\n/g, '\r\n');
      const stuffed = text.replace(/^\./gm, '..');
      socket.write(Buffer.from(`${stuffed}${stuffed.endsWith('\r\n') ? '' : '\r\n'}.\r\n`, 'latin1'));
      return next();
    },
    async close() {
      socket.write('QUIT\r\n');
      socket.end();
      await new Promise((resolve) => socket.once('close', resolve));
    },
  };
}

/** One message from `from` (empty: the null sender) to `to`: every reply of the transaction. */
export async function deliver(port: number, from: string, to: string[], raw: Buffer | string): Promise<{ mail: SmtpReply; rcpt: SmtpReply[]; data?: SmtpReply }> {
  const s = await openSmtp(port);
  try {
    const mail = await s.command(`MAIL FROM:<${from}>`);
    const rcpt: SmtpReply[] = [];
    for (const r of to) rcpt.push(await s.command(`RCPT TO:<${r}>`));
    if (mail.code !== 250 || !rcpt.some((r) => r.code === 250)) return { mail, rcpt };
    return { mail, rcpt, data: await s.data(raw) };
  } finally {
    await s.close().catch(() => undefined);
  }
}
