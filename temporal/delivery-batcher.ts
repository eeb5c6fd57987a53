/**
 * Groups emails accepted at about the same time (per project) into one delivery workflow start. A /v1/send call
 * still returns only after the workflow holding its emails has started, so acceptance stays durable; the batch
 * costs each call at most `maxWaitMs` of latency and saves Temporal one workflow per call under load.
 */
export class DeliveryBatcher {
  private readonly open = new Map<string, { emailIds: string[]; waiters: { resolve: () => void; reject: (e: unknown) => void }[]; timer: NodeJS.Timeout }>();

  constructor(
    private readonly start: (batch: { projectId: string; emailIds: string[] }) => Promise<unknown>,
    private readonly opts: { maxBatch: number; maxWaitMs: number },
  ) {}

  async enqueue(projectId: string, emailIds: string[]): Promise<void> {
    if (emailIds.length > this.opts.maxBatch) {
      const chunks: string[][] = [];
      for (let i = 0; i < emailIds.length; i += this.opts.maxBatch) chunks.push(emailIds.slice(i, i + this.opts.maxBatch));
      await Promise.all(chunks.map((chunk) => this.enqueue(projectId, chunk)));
      return;
    }
    return new Promise<void>((resolve, reject) => {
      let batch = this.open.get(projectId);
      if (batch && batch.emailIds.length + emailIds.length > this.opts.maxBatch) {
        this.flush(projectId);
        batch = undefined;
      }
      if (!batch) {
        batch = { emailIds: [], waiters: [], timer: setTimeout(() => this.flush(projectId), this.opts.maxWaitMs) };
        this.open.set(projectId, batch);
      }
      batch.emailIds.push(...emailIds);
      batch.waiters.push({ resolve, reject });
      if (batch.emailIds.length >= this.opts.maxBatch) this.flush(projectId);
    });
  }

  private flush(projectId: string): void {
    const batch = this.open.get(projectId);
    if (!batch) return;
    this.open.delete(projectId);
    clearTimeout(batch.timer);
    this.start({ projectId, emailIds: batch.emailIds }).then(
      () => batch.waiters.forEach((w) => w.resolve()),
      (err) => batch.waiters.forEach((w) => w.reject(err)),
    );
  }

  /** Starts whatever is waiting (used on shutdown). */
  flushAll(): void {
    for (const projectId of [...this.open.keys()]) this.flush(projectId);
  }
}
