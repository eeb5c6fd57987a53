interface OpenBatch<T, R> {
  items: T[];
  keys: Set<string>;
  waiters: { items: T[]; resolve: (results: R[]) => void; reject: (e: unknown) => void }[];
  timer: NodeJS.Timeout;
}

/** What writing a batch tells about each of its items (`R`), or nothing. */
type BatchResult<T, R> = ((item: T) => R) | void;

/**
 * Groups work of one project that arrives close together so it can be written at once. A batch is written when it
 * holds `maxBatch` items, `maxWaitMs` after its first item, or when an item arrives whose `key` is already in it
 * (that item starts the next batch). `add` resolves once the batch holding its items was written, with what the write
 * says about each of them (in order; undefined when the write returns nothing), and rejects with the batch's error.
 */
export class ProjectBatcher<T, R = void> {
  private readonly open = new Map<string, OpenBatch<T, R>>();

  constructor(
    private readonly write: (projectId: string, items: T[]) => Promise<BatchResult<T, R>>,
    private readonly opts: { maxBatch: number; maxWaitMs: number; key?: (item: T) => string },
  ) {}

  async add(projectId: string, items: T[]): Promise<R[]> {
    if (items.length > this.opts.maxBatch) {
      const chunks: T[][] = [];
      for (let i = 0; i < items.length; i += this.opts.maxBatch) chunks.push(items.slice(i, i + this.opts.maxBatch));
      return (await Promise.all(chunks.map((chunk) => this.add(projectId, chunk)))).flat();
    }
    const keys = this.opts.key ? items.map(this.opts.key) : [];
    return new Promise<R[]>((resolve, reject) => {
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
      batch.waiters.push({ items, resolve, reject });
      if (batch.items.length >= this.opts.maxBatch) this.flush(projectId);
    });
  }

  private flush(projectId: string): void {
    const batch = this.open.get(projectId);
    if (!batch) return;
    this.open.delete(projectId);
    clearTimeout(batch.timer);
    this.write(projectId, batch.items).then(
      (result) => batch.waiters.forEach((w) => w.resolve(w.items.map((item) => (result ? result(item) : (undefined as R))))),
      (err: unknown) => batch.waiters.forEach((w) => w.reject(err)),
    );
  }

  /** Writes whatever is waiting (on shutdown). */
  flushAll(): void {
    for (const projectId of [...this.open.keys()]) this.flush(projectId);
  }
}
