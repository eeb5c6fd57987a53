interface OpenBatch<T> {
  items: T[];
  keys: Set<string>;
  waiters: { resolve: () => void; reject: (e: unknown) => void }[];
  timer: NodeJS.Timeout;
}

/**
 * Groups work of one project that arrives close together so it can be written at once. A batch is written when it
 * holds `maxBatch` items, `maxWaitMs` after its first item, or when an item arrives whose `key` is already in it
 * (that item starts the next batch). `add` resolves once the batch holding its items was written, and rejects
 * with the batch's error.
 */
export class ProjectBatcher<T> {
  private readonly open = new Map<string, OpenBatch<T>>();

  constructor(
    private readonly write: (projectId: string, items: T[]) => Promise<void>,
    private readonly opts: { maxBatch: number; maxWaitMs: number; key?: (item: T) => string },
  ) {}

  async add(projectId: string, items: T[]): Promise<void> {
    if (items.length > this.opts.maxBatch) {
      const chunks: T[][] = [];
      for (let i = 0; i < items.length; i += this.opts.maxBatch) chunks.push(items.slice(i, i + this.opts.maxBatch));
      await Promise.all(chunks.map((chunk) => this.add(projectId, chunk)));
      return;
    }
    const keys = this.opts.key ? items.map(this.opts.key) : [];
    return new Promise<void>((resolve, reject) => {
      let batch = this.open.get(projectId);
      if (batch && (batch.items.length + items.length > this.opts.maxBatch || keys.some((k) => batch!.keys.has(k)))) {
        this.flush(projectId);
        batch = undefined;
      }
      if (!batch) {
        batch = { items: [], keys: new Set(), waiters: [], timer: setTimeout(() => this.flush(projectId), this.opts.maxWaitMs) };
        this.open.set(projectId, batch);
      }
      batch.items.push(...items);
      for (const k of keys) batch.keys.add(k);
      batch.waiters.push({ resolve, reject });
      if (batch.items.length >= this.opts.maxBatch) this.flush(projectId);
    });
  }

  private flush(projectId: string): void {
    const batch = this.open.get(projectId);
    if (!batch) return;
    this.open.delete(projectId);
    clearTimeout(batch.timer);
    this.write(projectId, batch.items).then(
      () => batch.waiters.forEach((w) => w.resolve()),
      (err: unknown) => batch.waiters.forEach((w) => w.reject(err)),
    );
  }

  /** Writes whatever is waiting (on shutdown). */
  flushAll(): void {
    for (const projectId of [...this.open.keys()]) this.flush(projectId);
  }
}
