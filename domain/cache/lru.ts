/**
 * The one cache of the service: a small LRU map bounded by entry count and by a total weight (e.g. the characters it
 * keeps alive), so a burst of distinct large entries cannot grow the process without bound. Entries of weight 1 make
 * it a plain count-bounded LRU. (ProjectScopedCache adds invalidation by project on top of the change feed.)
 */
export class LruCache<V> {
  private readonly entries = new Map<string, { value: V; weight: number }>();
  private weight = 0;

  constructor(private readonly limits: { maxEntries: number; maxWeight: number }) {}

  get size(): number {
    return this.entries.size;
  }

  get totalWeight(): number {
    return this.weight;
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    // Map keeps insertion order: re-inserting marks the entry most recently used.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  set(key: string, value: V, weight: number): void {
    this.remove(key);
    // An entry heavier than the whole budget is not kept at all.
    if (weight > this.limits.maxWeight) return;
    this.entries.set(key, { value, weight });
    this.weight += weight;
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.limits.maxEntries && this.weight <= this.limits.maxWeight) break;
      this.entries.delete(oldest);
      this.weight -= entry.weight;
    }
  }

  /** Updates the weight of `key` if it still holds `value` (e.g. once a pending compile has finished). */
  reweigh(key: string, value: V, weight: number): void {
    const entry = this.entries.get(key);
    if (entry?.value === value) this.set(key, value, weight);
  }

  /** Removes `key` if it still holds `value` (or any value when `value` is not given). */
  delete(key: string, value?: V): void {
    const entry = this.entries.get(key);
    if (entry && (value === undefined || entry.value === value)) this.remove(key);
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.weight -= entry.weight;
  }
}
