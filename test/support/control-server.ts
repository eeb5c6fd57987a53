import http from 'node:http';
import { freePort } from '../../scripts/services/process';

/**
 * The crash-test control of a test stack (TestStackEnv.workerControlUrl) on loopback: `POST <path>` runs the action
 * named for it and answers 204 once it is done, 500 with the error when it fails, 404 for anything else.
 */
export async function startControlServer(actions: Record<string, () => Promise<void>>): Promise<{ url: string; stop(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const action = req.method === 'POST' ? actions[req.url ?? ''] : undefined;
    if (!action) return void res.writeHead(404).end();
    action()
      .then(() => res.writeHead(204).end())
      .catch((err: unknown) => res.writeHead(500).end(String(err)));
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${port}`, stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
