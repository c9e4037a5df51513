/**
 * The numbers the panel charts: series keys shared with Python's History columns, and a
 * bounded columnar ring of points that merges history and live samples (DOM-free).
 */

import type { IHistoryJSON, ISampleJSON } from './model';

/** ``kind:name:field``, the key of a History column (core/history.py). */
export function seriesKey(kind: string, name: string, field: string): string {
  return `${kind}:${name}:${field}`;
}

/** The numbers the panel charts, under the same keys as the server's History columns. */
export function flatten(sample: ISampleJSON): Map<string, number> {
  const out = new Map<string, number>();
  const put = (key: string, v: number | null | undefined): void => {
    if (typeof v === 'number' && Number.isFinite(v)) {
      out.set(key, v);
    }
  };
  for (const [name, d] of Object.entries(sample.disks)) {
    for (const f of ['rmb_s', 'wmb_s', 'r_await', 'w_await', 'util'] as const) {
      put(seriesKey('disk', name, f), d[f]);
    }
  }
  for (const [path, p] of Object.entries(sample.paths)) {
    put(seriesKey('path', path, 'avail_bytes'), p.avail_bytes);
    put(seriesKey('path', path, 'free_bytes'), p.free_bytes);
    put(seriesKey('path', path, 'total_bytes'), p.total_bytes);
  }
  for (const g of sample.gpus) {
    put(seriesKey('gpu', String(g.index), 'util_pct'), g.util_pct);
    put(seriesKey('gpu', String(g.index), 'mem_used_bytes'), g.mem_used_bytes);
    put(seriesKey('gpu', String(g.index), 'mem_total_bytes'), g.mem_total_bytes);
  }
  return out;
}

/** uPlot's AlignedData: [times, ...one array per series], null where a series has no value. */
export type Aligned = [number[], ...(number | null)[][]];

/**
 * A fixed-capacity ring of points on one shared time axis, stored in columns (Float64Array,
 * NaN = no value), so memory stays flat however long the panel stays open.
 */
export class SeriesRing {
  readonly capacity: number;
  private _t: Float64Array;
  private _cols = new Map<string, Float64Array>();
  private _n = 0; // points written (slot arithmetic)
  private _received = 0; // points ever received, live or from history

  constructor(capacity: number) {
    if (!(capacity >= 2)) {
      throw new Error(`capacity must be at least 2, got ${capacity}`);
    }
    this.capacity = Math.floor(capacity);
    this._t = new Float64Array(this.capacity).fill(NaN);
  }

  get length(): number {
    return Math.min(this._n, this.capacity);
  }

  /** Total points ever received (keeps counting after the ring wrapped). */
  get received(): number {
    return this._received;
  }

  get lastTime(): number | null {
    return this._n ? this._t[(this._n - 1) % this.capacity] : null;
  }

  get firstTime(): number | null {
    return this._n ? this._t[(this._n - this.length) % this.capacity] : null;
  }

  keys(prefix = ''): string[] {
    return [...this._cols.keys()].filter(k => k.startsWith(prefix)).sort();
  }

  /** Append one point; a time at or before the newest is ignored (replays after reconnect). */
  push(t: number, values: Map<string, number>): boolean {
    const last = this.lastTime;
    if (!Number.isFinite(t) || (last !== null && t <= last)) {
      return false;
    }
    this._write(t, values);
    this._received++;
    return true;
  }

  pushSample(sample: ISampleJSON): boolean {
    return this.push(sample.t, flatten(sample));
  }

  /** Points in time order as [t, values] (NaN dropped from the map). */
  *points(since = -Infinity): IterableIterator<[number, Map<string, number>]> {
    const count = this.length;
    const first = this._n - count;
    for (let i = 0; i < count; i++) {
      const slot = (first + i) % this.capacity;
      const t = this._t[slot];
      if (!(t > since)) {
        continue;
      }
      const values = new Map<string, number>();
      for (const [key, col] of this._cols) {
        if (!Number.isNaN(col[slot])) {
          values.set(key, col[slot]);
        }
      }
      yield [t, values];
    }
  }

  /**
   * The last ``seconds`` (relative to the newest point) of ``keys``, ready for uPlot. The
   * columns start at the first point where one of them has a value: a chart of a path watched
   * a moment ago scales to the data it has until its window fills, instead of drawing a tick
   * at the right edge of ten empty minutes (the ring holds the other series' times).
   */
  aligned(keys: string[], seconds: number): Aligned {
    const last = this.lastTime;
    const ts: number[] = [];
    const cols: (number | null)[][] = keys.map(() => []);
    if (last === null) {
      return [ts, ...cols];
    }
    const since = last - seconds;
    const count = this.length;
    const first = this._n - count;
    const sources = keys.map(k => this._cols.get(k));
    for (let i = 0; i < count; i++) {
      const slot = (first + i) % this.capacity;
      const t = this._t[slot];
      if (!(t >= since)) {
        continue;
      }
      const values = sources.map(col => (col ? col[slot] : NaN));
      if (!ts.length && keys.length && values.every(Number.isNaN)) {
        continue; // before the first value of any of them
      }
      ts.push(t);
      values.forEach((v, j) => cols[j].push(Number.isNaN(v) ? null : v));
    }
    return [ts, ...cols];
  }

  /**
   * Merge GET history (older points, e.g. after opening the panel or reconnecting) with what
   * the stream already delivered; equal times keep the live point. Keeps the newest
   * ``capacity`` points; returns how many points were added.
   */
  mergeHistory(history: IHistoryJSON): number {
    const byTime = new Map<number, Map<string, number>>();
    history.t.forEach((t, i) => {
      const values = new Map<string, number>();
      for (const [key, col] of Object.entries(history.series)) {
        const v = col[i];
        if (typeof v === 'number' && Number.isFinite(v)) {
          values.set(key, v);
        }
      }
      byTime.set(t, values);
    });
    const before = this.length;
    for (const [t, values] of this.points()) {
      byTime.set(t, values);
    }
    const kept = [...byTime.keys()]
      .filter(Number.isFinite)
      .sort((a, b) => a - b)
      .slice(-this.capacity);
    this._t.fill(NaN);
    this._cols.clear();
    this._n = 0;
    for (const t of kept) {
      this._write(t, byTime.get(t)!);
    }
    const added = Math.max(0, kept.length - before);
    this._received += added;
    return added;
  }

  private _write(t: number, values: Map<string, number>): void {
    const slot = this._n % this.capacity;
    this._t[slot] = t;
    for (const col of this._cols.values()) {
      col[slot] = NaN;
    }
    for (const [key, v] of values) {
      let col = this._cols.get(key);
      if (!col) {
        col = new Float64Array(this.capacity).fill(NaN);
        this._cols.set(key, col);
      }
      col[slot] = v;
    }
    this._n++;
  }

  clear(): void {
    this._t.fill(NaN);
    this._cols.clear();
    this._n = 0;
    this._received = 0;
  }
}

/** How many points a window needs at a given interval (plus slack), bounded. */
export function ringCapacity(windowS: number, intervalS: number, max = 7200): number {
  const interval = intervalS > 0 ? intervalS : 1;
  return Math.max(16, Math.min(max, Math.ceil(windowS / interval) + 16));
}
