/**
 * The panel's data model, kept free of DOM and JupyterLab so it can be unit-tested in node:
 * the JSON shapes the server sends, a bounded columnar ring of points, the merge of history
 * and live samples, the status-bar text, and the reconnection backoff.
 */

// -- JSON shapes (trainwatch_lab/core/model.py: Sample.to_json) ----------------------------

export type Severity = 'info' | 'warning' | 'critical';

export interface AlertJSON {
  code: string;
  severity: Severity;
  subject: string;
  message: string;
  fix: string;
}

export interface DiskRatesJSON {
  device: string;
  r_s: number;
  w_s: number;
  rmb_s: number;
  wmb_s: number;
  r_await: number | null;
  w_await: number | null;
  aqu_sz: number;
  util: number;
}

export interface ProbeJSON {
  p50_ms: number | null;
  p99_ms: number | null;
  samples: number;
}

export interface FillJSON {
  filesystem: string;
  trend: 'measuring' | 'filling' | 'steady' | 'freeing';
  rate_bps: number | null;
  seconds_to_full: number | null;
  trend_s: number;
  points: number;
}

export interface PathStateJSON {
  path: string;
  exists: boolean;
  mountpoint: string | null;
  fstype: string | null;
  source: string | null;
  device: string | null;
  kind: string;
  shared: boolean;
  read_only: boolean;
  total_bytes: number | null;
  free_bytes: number | null;
  avail_bytes: number | null;
  responsive: boolean;
  probe: ProbeJSON | null;
  error: string | null;
  /** how its filesystem fills: computed once per tick in Python (core/fill.py) */
  fill?: FillJSON | null;
  /** e.g. "not created yet; checked at /mnt/share/runs" (the line `check` prints) */
  note?: string | null;
}

export interface GpuJSON {
  index: number;
  name: string;
  util_pct: number | null;
  mem_used_bytes: number | null;
  mem_total_bytes: number | null;
  lost?: boolean;
}

export interface KernelJSON {
  id: string;
  name: string | null;
  execution_state: string | null;
  pid: number | null;
  cwd: string | null;
  io: {
    read_chars_s: number;
    write_chars_s: number;
    read_bytes_s: number;
    write_bytes_s: number;
  } | null;
  gpu_mem_bytes: number | null;
}

export interface SampleJSON {
  t: number;
  disks: Record<string, DiskRatesJSON>;
  paths: Record<string, PathStateJSON>;
  gpus: GpuJSON[];
  notes?: Record<string, string>;
  warnings: AlertJSON[];
  kernels?: Record<string, KernelJSON>;
}

/** GET history: one shared time axis, columns keyed "kind:name:field", null where missing. */
export interface HistoryJSON {
  t: number[];
  series: Record<string, (number | null)[]>;
}

export interface WatchedPathJSON {
  path: string;
  roles: string[];
  state: PathStateJSON | null;
}

// -- series keys -----------------------------------------------------------------------------

const MB = 1e6;

export function seriesKey(kind: string, name: string, field: string): string {
  return `${kind}:${name}:${field}`;
}

/** Devices under watched paths; all devices when no watched path resolved to one. */
export function watchedDevices(sample: SampleJSON): string[] {
  const devices = new Set<string>();
  for (const p of Object.values(sample.paths)) {
    if (p.device && sample.disks[p.device]) {
      devices.add(p.device);
    }
  }
  const list = devices.size ? [...devices] : Object.keys(sample.disks);
  return list.sort();
}

/** The numbers the panel charts, under the same keys as the server's History columns. */
export function flatten(sample: SampleJSON): Map<string, number> {
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
  }
  for (const g of sample.gpus) {
    put(seriesKey('gpu', String(g.index), 'util_pct'), g.util_pct);
    put(seriesKey('gpu', String(g.index), 'mem_used_bytes'), g.mem_used_bytes);
    put(seriesKey('gpu', String(g.index), 'mem_total_bytes'), g.mem_total_bytes);
  }
  return out;
}

// -- the ring --------------------------------------------------------------------------------

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

  pushSample(sample: SampleJSON): boolean {
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

  /** The last ``seconds`` (relative to the newest point) of ``keys``, ready for uPlot. */
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
      ts.push(t);
      sources.forEach((col, j) => {
        const v = col ? col[slot] : NaN;
        cols[j].push(Number.isNaN(v) ? null : v);
      });
    }
    return [ts, ...cols];
  }

  /**
   * Merge GET history (older points, e.g. after opening the panel or reconnecting) with what
   * the stream already delivered; equal times keep the live point. Keeps the newest
   * ``capacity`` points; returns how many points were added.
   */
  mergeHistory(history: HistoryJSON): number {
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

// -- formatting ------------------------------------------------------------------------------

export function formatBytes(n: number | null | undefined): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) {
    return '–';
  }
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Math.abs(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  const digits = i === 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2;
  return `${n < 0 ? '-' : ''}${v.toFixed(digits)} ${units[i]}`;
}

/** Megabytes per second as iostat prints them (decimal MB). */
export function formatMBs(mbPerS: number): string {
  if (!Number.isFinite(mbPerS) || mbPerS < 0) {
    return '–';
  }
  if (mbPerS >= 1000) {
    return `${(mbPerS / 1000).toFixed(1)} GB/s`;
  }
  if (mbPerS >= 10) {
    return `${Math.round(mbPerS)} MB/s`;
  }
  if (mbPerS >= 0.1) {
    return `${mbPerS.toFixed(1)} MB/s`;
  }
  return `${Math.round((mbPerS * MB) / 1000)} kB/s`;
}

export function formatDuration(seconds: number | null | undefined): string {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) {
    return '–';
  }
  if (seconds < 90) {
    return `${Math.round(seconds)} s`;
  }
  if (seconds < 90 * 60) {
    return `${Math.round(seconds / 60)} min`;
  }
  if (seconds < 48 * 3600) {
    const h = Math.floor(seconds / 3600);
    const m = Math.round((seconds - h * 3600) / 60);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  return `${Math.round(seconds / 86400)} d`;
}

/** Warnings that need attention (severity warning or critical). */
export function activeWarnings(sample: SampleJSON | null): AlertJSON[] {
  return (sample?.warnings ?? []).filter(w => w.severity !== 'info');
}

/** Mean utilization of the GPUs that report one, or null. */
export function gpuUtil(sample: SampleJSON): number | null {
  const utils = sample.gpus
    .map(g => g.util_pct)
    .filter((u): u is number => typeof u === 'number' && Number.isFinite(u));
  return utils.length ? utils.reduce((a, b) => a + b, 0) / utils.length : null;
}

/** Read + write MB/s summed over the devices under the watched paths. */
export function diskThroughput(sample: SampleJSON): number | null {
  const devices = watchedDevices(sample);
  if (!devices.length) {
    return null;
  }
  return devices.reduce((sum, d) => {
    const r = sample.disks[d];
    return sum + (r.rmb_s || 0) + (r.wmb_s || 0);
  }, 0);
}

/** The status-bar text, e.g. ``GPU 87% · disk 45 MB/s · ⚠ 1``. */
export function statusText(sample: SampleJSON | null, connected = true): string {
  if (!sample) {
    return connected ? 'TrainWatch' : 'TrainWatch (offline)';
  }
  const parts: string[] = [];
  const util = gpuUtil(sample);
  if (util !== null) {
    parts.push(`GPU ${Math.round(util)}%`);
  }
  const disk = diskThroughput(sample);
  if (disk !== null) {
    parts.push(`disk ${formatMBs(disk)}`);
  }
  const warnings = activeWarnings(sample).length;
  if (warnings) {
    parts.push(`⚠ ${warnings}`);
  }
  if (!parts.length) {
    parts.push('TrainWatch');
  }
  if (!connected) {
    parts.push('offline');
  }
  return parts.join(' · ');
}

/** Why the GPU charts are empty, or null when there are GPUs. */
export function gpuEmptyReason(sample: SampleJSON | null): string | null {
  if (!sample) {
    return 'Waiting for the first sample…';
  }
  if (sample.gpus.length) {
    return null;
  }
  return sample.notes?.gpus || 'No NVIDIA GPU found on the server.';
}

/**
 * The fill notes under the free-space chart: one line per filesystem that is filling, in the
 * numbers Python sent (the same estimate the disk-filling warning uses; nothing refitted here).
 */
export function fillNotes(paths: Record<string, PathStateJSON>): string[] {
  const seen = new Set<string>();
  const notes: string[] = [];
  for (const p of Object.keys(paths).sort()) {
    const fill = paths[p].fill;
    if (!fill || seen.has(fill.filesystem)) {
      continue;
    }
    seen.add(fill.filesystem);
    if (fill.trend === 'filling' && fill.rate_bps !== null && fill.seconds_to_full !== null) {
      notes.push(
        `${fill.filesystem}: filling at ${formatMBs(fill.rate_bps / MB)}, full in ${formatDuration(fill.seconds_to_full)}`
      );
    }
  }
  return notes;
}

/** A path short enough for a legend: its last two components ("…/mnt/work"). */
export function shortPath(path: string, parts = 2): string {
  const segments = path.split('/').filter(Boolean);
  if (segments.length <= parts) {
    return path;
  }
  return `…/${segments.slice(-parts).join('/')}`;
}

// -- reconnection ----------------------------------------------------------------------------

/** Delay before reconnect attempt ``attempt`` (0-based): doubling, capped, with jitter. */
export function backoffDelay(
  attempt: number,
  baseMs = 500,
  maxMs = 30000,
  random: () => number = Math.random
): number {
  const raw = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt));
  return Math.round(raw * (0.75 + 0.5 * random()));
}

/** How many points a window needs at a given interval (plus slack), bounded. */
export function ringCapacity(windowS: number, intervalS: number, max = 7200): number {
  const interval = intervalS > 0 ? intervalS : 1;
  return Math.max(16, Math.min(max, Math.ceil(windowS / interval) + 16));
}
