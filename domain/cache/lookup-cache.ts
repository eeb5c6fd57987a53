import type { ChangeFeed } from './change-feed';

/**
 * A small read-through cache whose entries are grouped by project and dropped when the change feed says that
 * project changed. Entries also expire after `ttlMs` as a safety net. Without a healthy feed it does not cache.
 */
export class ProjectScopedCache<V> {
  private readonly entries = new Map<string, { value: V; projectId: string; at: number }>();
  private readonly byProject = new Map<string, Set<string>>();
  /** Bumped on every invalidation: a load that started before one must not be cached (it may be stale). */
  private generation = 0;

  constructor(
    private readonly feed: ChangeFeed | undefined,
    prefix: string,
    private readonly ttlMs: number,
    private readonly maxEntries = 50_000,
  ) {
    feed?.subscribe((payload) => {
      this.generation++;
      if (payload === '*') this.clear();
      else if (payload.startsWith(`${prefix}:`)) this.dropProject(payload.slice(prefix.length + 1));
    });
  }

  async get(key: string, load: () => Promise<{ value: V; projectId: string } | undefined>): Promise<V | undefined> {
    if (this.feed?.healthy) {
      const hit = this.entries.get(key);
      if (hit && Date.now() - hit.at < this.ttlMs) return hit.value;
    }
    const generation = this.generation;
    const loaded = await load();
    if (loaded && this.feed?.healthy && generation === this.generation) this.set(key, loaded.value, loaded.projectId);
    return loaded?.value;
  }

  /**
   * Drops the project's entries now, in this process: a write this process made itself (a key rotation) takes effect
   * for its next request without waiting for the feed's notification. Other processes still learn it from the feed.
   */
  forgetProject(projectId: string): void {
    this.generation++;
    this.dropProject(projectId);
  }

  private set(key: string, value: V, projectId: string): void {
    if (this.entries.size >= this.maxEntries) this.clear();
    this.entries.set(key, { value, projectId, at: Date.now() });
    let keys = this.byProject.get(projectId);
    if (!keys) this.byProject.set(projectId, (keys = new Set()));
    keys.add(key);
  }

  private dropProject(projectId: string): void {
    for (const key of this.byProject.get(projectId) ?? []) this.entries.delete(key);
    this.byProject.delete(projectId);
  }

  private clear(): void {
    this.entries.clear();
    this.byProject.clear();
  }
}
