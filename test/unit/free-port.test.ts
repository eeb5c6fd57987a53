import fs from 'node:fs';
import net from 'node:net';
import { freePort } from '../../scripts/services/process';

// freePort hands out ports below the kernel's own range, so a server of this process listening on port 0 (or an
// outgoing connection) cannot take one before the service it was chosen for listens on it.
test('freePort gives distinct, free ports below the kernel range, which a listen on port 0 never gets', async () => {
  const floor = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  const ports = await Promise.all(Array.from({ length: 30 }, () => freePort()));
  expect(new Set(ports).size).toBe(ports.length);
  for (const port of ports) {
    expect(port).toBeGreaterThanOrEqual(10_000);
    expect(port).toBeLessThan(floor);
  }
  // Each can be listened on, and the kernel's own picks meanwhile are elsewhere.
  const servers = await Promise.all(
    [...ports, 0, 0, 0].map((port) => new Promise<net.Server>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => resolve(srv));
    })),
  );
  const kernelPicks = servers.slice(ports.length).map((s) => (s.address() as net.AddressInfo).port);
  for (const port of kernelPicks) expect(ports).not.toContain(port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});
