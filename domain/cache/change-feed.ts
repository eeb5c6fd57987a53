import { Client } from 'pg';
import { logger } from '../logger';
import { onConnection } from '../db/sql';

export type ChangeHandler = (payload: string) => void;

/**
 * A LISTEN connection on `mailwright_cache` (fed by database triggers). While it is not connected, `healthy` is
 * false and caches must not be trusted; on every (re)connect handlers get '*' so caches start empty.
 */
export class ChangeFeed {
  healthy = false;
  private client?: Client;
  private closed = false;
  private readonly handlers: ChangeHandler[] = [];

  constructor(private readonly databaseUrl: string) {}

  subscribe(handler: ChangeHandler): void {
    this.handlers.push(handler);
  }

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = new Client({ connectionString: this.databaseUrl });
    client.on('notification', (msg) => this.emit(msg.payload ?? '*'));
    client.on('error', (err) => {
      logger.warn({ err }, 'cache change feed lost its connection; caches disabled until it is back');
      this.healthy = false;
      this.emit('*');
      client.end().catch(() => undefined);
      this.scheduleReconnect();
    });
    try {
      await client.connect();
      await onConnection(client).run('LISTEN mailwright_cache');
      this.client = client;
      this.emit('*');
      this.healthy = true;
    } catch (err) {
      logger.warn({ err }, 'cache change feed could not connect; retrying');
      this.scheduleReconnect();
    }
  }

  private scheduleReconnect(): void {
    if (this.closed) return;
    setTimeout(() => void this.connect(), 1_000).unref();
  }

  private emit(payload: string): void {
    for (const h of this.handlers) h(payload);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.healthy = false;
    await this.client?.end().catch(() => undefined);
  }
}
