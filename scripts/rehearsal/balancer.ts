import net from 'node:net';

export interface Balancer {
  port: number;
  /** Connections handed to each backend so far, in the order of `backends`. */
  counts(): number[];
  stop(): Promise<void>;
}

/**
 * A TCP round-robin balancer on loopback, standing in for the load balancer in front of several API processes:
 * each new connection goes to the next backend that accepts it (a backend that refuses is skipped, as a health-checked
 * balancer would). Connections, not requests: a kept-alive client stays with one API until it reconnects.
 */
export async function startBalancer(backends: { host: string; port: number }[], port = 0): Promise<Balancer> {
  const counts = backends.map(() => 0);
  let next = 0;
  const sockets = new Set<net.Socket>();
  const connect = (client: net.Socket, tries: number) => {
    const i = next++ % backends.length;
    const upstream = net.connect(backends[i]!);
    sockets.add(upstream);
    upstream.once('close', () => sockets.delete(upstream));
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      counts[i]!++;
      client.pipe(upstream).pipe(client);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
      client.resume();
    });
    upstream.once('error', () => {
      if (!connected) {
        if (tries + 1 < backends.length) connect(client, tries + 1);
        else client.destroy();
      }
    });
  };
  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    connect(client, 0);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  return {
    port: typeof addr === 'object' && addr ? addr.port : port,
    counts: () => [...counts],
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
