/**
 * The panel's data model, kept free of DOM and JupyterLab so it can be unit-tested in node:
 * the JSON shapes the server sends, a bounded columnar ring of points, the merge of history
 * and live samples, the status-bar text, the live/paused/stale/stopped state, the numbers on
 * the chart axes (rounded ticks, 24-hour times) and the reconnection backoff.
 */

import type { TrainingProcessJSON } from './processes';

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

/**
 * The one line every surface opens with (trainwatch_lab/advice/headline.py): the status bar,
 * the panel header and the notebook dashboard all show these words, never their own.
 */
export interface HeadlineJSON {
  level: 'ok' | 'warning' | 'critical';
  /** "Storage OK", "2 warnings (1 critical)" */
  verdict: string;
  /** "GPU 87 %", "vda 45.1 MB/s, 62 % busy", "1 GiB free on /scratch (10 %)" */
  facts: string[];
  /** verdict and facts, " · " between them */
  text: string;
  /** the status bar's short form: "GPU 87 % · disk 45.1 MB/s · ⚠ 1" */
  brief: string;
  /** info notes (gpu-unavailable...), shown quietly, never as a warning */
  notes: number;
}

export interface SampleJSON {
  t: number;
  disks: Record<string, DiskRatesJSON>;
  paths: Record<string, PathStateJSON>;
  gpus: GpuJSON[];
  notes?: Record<string, string>;
  warnings: AlertJSON[];
  kernels?: Record<string, KernelJSON>;
  /** training processes found on the machine: scripts in terminals, tmux, nohup */
  processes?: TrainingProcessJSON[];
  headline?: HeadlineJSON | null;
  /** the log mirrors live on the server's machine (server/hub.py, fix/mirror_files.py) */
  mirrors?: MirrorJSON[];
}

/** One ``local_mirror`` (fix/mirror_status.py MirrorStatus, its owner and Python's words). */
export interface MirrorJSON {
  local: string;
  share: string;
  /** starting | in-sync | copying | share-unresponsive | error */
  state: string;
  last_sync: number | null;
  lag_s: number;
  bytes_pending: number;
  bytes_copied: number;
  files: number;
  error: string | null;
  pid: number;
  every: number | null;
  /** the status line ``%trainwatch status`` prints, made in Python */
  text: string;
}

/** GET history: one shared time axis, columns keyed "kind:name:field", null where missing. */
export interface HistoryJSON {
  t: number[];
  series: Record<string, (number | null)[]>;
  /** the server sampler's interval (c.TrainWatch.interval), for the stale test */
  interval_s?: number;
}

export interface WatchedPathJSON {
  path: string;
  roles: string[];
  state: PathStateJSON | null;
}

// -- series keys -----------------------------------------------------------------------------

const MB = 1e6;
/** ``disks[d].rmb_s``/``wmb_s`` are MiB/s (iostat -m); rates are shown in decimal MB/s. */
export const MIB_TO_MB = 1.048576;

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
    put(seriesKey('path', path, 'total_bytes'), p.total_bytes);
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

/** A size in binary units as Python's ``advice.text.fmt_bytes`` words it: ``11.2 GiB``. */
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
  const text = i === 0 ? String(Math.round(v)) : significant(v);
  return `${n < 0 ? '-' : ''}${text} ${units[i]}`;
}

/**
 * A rate in decimal megabytes per second, always in MB/s (one unit on every surface), with
 * three significant digits at most like Python's ``advice.text``: ``45.2 MB/s``,
 * ``0.05 MB/s``, ``1250 MB/s``. Callers pass decimal MB/s: MiB/s from ``disks`` times
 * ``MIB_TO_MB``, bytes per second divided by 1e6.
 */
export function formatMBs(mbPerS: number): string {
  if (!Number.isFinite(mbPerS) || mbPerS < 0) {
    return '–';
  }
  return `${significant(mbPerS)} MB/s`;
}

/** Three significant digits at most, no trailing zeros: 1250, 45.2, 2.35, 0.05, 0. */
function significant(v: number): string {
  if (v >= 100) {
    return String(Math.round(v));
  }
  if (v < 0.005) {
    return '0';
  }
  const text = v >= 10 ? v.toFixed(1) : v.toFixed(2);
  return text.replace(/\.?0+$/, '');
}

/** A fraction (0.052) as Python's ``advice.text.fmt_pct`` words it: ``5.2 %``, ``31 %``. */
export function formatPct(fraction: number | null | undefined): string {
  if (typeof fraction !== 'number' || !Number.isFinite(fraction)) {
    return '?';
  }
  const pct = fraction * 100;
  return pct >= 10 || pct === 0 ? `${pct.toFixed(0)} %` : `${pct.toFixed(1)} %`;
}

/** A latency as Python's ``advice.text.fmt_ms`` words it: ``0.81 ms``, ``38 ms``, ``1.2 s``. */
export function formatMs(ms: number | null | undefined): string {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    return '–';
  }
  if (ms >= 1000) {
    return `${significant(ms / 1000)} s`;
  }
  if (ms < 0.01) {
    return `${Math.round(ms * 1000)} µs`;
  }
  return `${significant(ms)} ms`;
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

/** Read + write in decimal MB/s, summed over the devices under the watched paths. */
export function diskThroughput(sample: SampleJSON): number | null {
  const devices = watchedDevices(sample);
  if (!devices.length) {
    return null;
  }
  return devices.reduce((sum, d) => {
    const r = sample.disks[d];
    return sum + ((r.rmb_s || 0) + (r.wmb_s || 0)) * MIB_TO_MB;
  }, 0);
}

/**
 * The status-bar text: the headline's ``brief`` that Python made for this sample (the panel
 * header and the notebook dashboard use the same headline), e.g. ``GPU 87 % · disk 45.1
 * MB/s · ⚠ 1``. Words of its own only before the first sample and when offline.
 */
export function statusText(sample: SampleJSON | null, connected = true): string {
  const brief = sample?.headline?.brief || (sample ? 'TrainWatch' : '');
  if (!brief) {
    return connected ? 'TrainWatch' : 'TrainWatch (offline)';
  }
  return connected ? brief : `${brief} · offline`;
}

/** The info notes (severity info): one quiet line each, never a warning box. */
export function infoNotes(sample: SampleJSON | null): AlertJSON[] {
  return (sample?.warnings ?? []).filter(w => w.severity === 'info');
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

// -- free space per filesystem -------------------------------------------------------------

/** One filesystem under the watched paths: every path on it sees the same free space. */
export interface FilesystemGroup {
  /** the key Python groups by (core/fill.py: mountpoint and size) */
  id: string;
  /** where it is mounted (``fill.filesystem``), for the legend */
  label: string;
  /** the watched paths on it, sorted */
  paths: string[];
}

/**
 * Group the watched paths by filesystem, as core/fill.py does (mountpoint and total size: a
 * directory under a project quota reports the quota as its size), so the space chart draws
 * one line per filesystem, not one identical line per path.
 */
export function filesystems(paths: Record<string, PathStateJSON>): FilesystemGroup[] {
  const groups = new Map<string, FilesystemGroup>();
  for (const path of Object.keys(paths).sort()) {
    const p = paths[path];
    if (!p.total_bytes || p.avail_bytes === null || p.avail_bytes === undefined) {
      continue; // nothing measured (missing, not answering)
    }
    const mount = p.fill?.filesystem || p.mountpoint || path;
    const id = `${mount}|${p.total_bytes}`;
    const group = groups.get(id);
    if (group) {
      group.paths.push(path);
    } else {
      groups.set(id, { id, label: mount, paths: [path] });
    }
  }
  const list = [...groups.values()];
  // the same mountpoint twice (quotas): say which is which by its size
  const count = new Map<string, number>();
  list.forEach(g => count.set(g.label, (count.get(g.label) ?? 0) + 1));
  for (const g of list) {
    if (count.get(g.label)! > 1) {
      g.label = `${g.label} (${formatBytes(Number(g.id.split('|').pop()))})`;
    }
  }
  return list.sort((a, b) => a.label.localeCompare(b.label));
}

/**
 * Percent used of one filesystem at each point, from the columns of its paths (``avail`` and
 * ``total`` per path, in the same order): the first path with both values at a point counts.
 * Used means not available to you: 100 × (1 − avail / total), the complement of the share the
 * headline calls free.
 */
export function usedPercent(
  avail: (number | null)[][],
  total: (number | null)[][]
): (number | null)[] {
  const n = Math.max(0, ...avail.map(c => c.length));
  const out: (number | null)[] = [];
  for (let i = 0; i < n; i++) {
    let value: number | null = null;
    for (let j = 0; j < avail.length && value === null; j++) {
      const a = avail[j][i];
      const t = total[j]?.[i];
      if (typeof a === 'number' && typeof t === 'number' && t > 0) {
        value = Math.min(100, Math.max(0, 100 * (1 - a / t)));
      }
    }
    out.push(value);
  }
  return out;
}

// -- axes: rounded ticks, 24-hour times ------------------------------------------------------

/** Tick steps a reader takes in at once: 1, 2 and 5 times a power of ten. */
export function niceIncrs(mantissas: number[] = [1, 2, 5], from = -4, to = 12): number[] {
  const incrs: number[] = [];
  for (let e = from; e <= to; e++) {
    for (const m of mantissas) {
      incrs.push(Number((m * 10 ** e).toPrecision(6)));
    }
  }
  return incrs;
}

/** Steps of a time axis in seconds: whole seconds, minutes and hours only. */
export const TIME_INCRS = [
  1,
  2,
  5,
  10,
  15,
  30,
  60,
  120,
  300,
  600,
  900,
  1800,
  3600,
  7200,
  3 * 3600,
  6 * 3600,
  12 * 3600,
  86400
];

/** Decimals a tick label needs so that every tick of step ``incr`` reads differently. */
export function tickDecimals(incr: number): number {
  if (!(incr > 0)) {
    return 0;
  }
  for (let d = 0; d < 6; d++) {
    const scaled = incr * 10 ** d;
    if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, scaled)) {
      return d;
    }
  }
  return 6;
}

/** A tick value with just the decimals its step needs: 0, 2.5 → "2.5"; 0, 20, 40 → "40". */
export function formatTick(value: number, incr: number): string {
  const text = value.toFixed(tickDecimals(incr));
  return /^-0(\.0+)?$/.test(text) ? text.slice(1) : text;
}

/**
 * The top of a value axis: the data's maximum rounded up to a nice number (1, 2, 2.5, 5 × 10ⁿ),
 * at least ``floor`` so an idle disk draws a flat line at the bottom of a 0–1 MB/s axis instead
 * of an axis of 0.000001 steps.
 */
export function niceMax(max: number | null | undefined, floor = 1): number {
  const top = typeof max === 'number' && Number.isFinite(max) ? Math.max(max, floor) : floor;
  if (!(top > 0)) {
    return 1;
  }
  const p = 10 ** Math.floor(Math.log10(top));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (top <= m * p * (1 + 1e-9)) {
      return Number((m * p).toPrecision(6));
    }
  }
  return 10 * p;
}

/** The binary unit a byte axis reads in, from its largest value: GiB for 12e9, MiB for 3e8. */
export function byteUnit(maxBytes: number | null | undefined): { unit: string; divisor: number } {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = typeof maxBytes === 'number' && Number.isFinite(maxBytes) ? Math.abs(maxBytes) : 0;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return { unit: units[i], divisor: 1024 ** i };
}

const pad2 = (n: number) => String(n).padStart(2, '0');

/** Local wall-clock time in 24-hour form: ``14:05:09``, or ``14:05`` without seconds. */
export function formatClock(epochS: number, seconds = true): string {
  if (!Number.isFinite(epochS)) {
    return '–';
  }
  const d = new Date(epochS * 1000);
  const hm = `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
  return seconds ? `${hm}:${pad2(d.getSeconds())}` : hm;
}

/**
 * The labels of a time axis whose ticks are ``incr`` seconds apart: HH:MM:SS under a minute,
 * HH:MM from a minute up, so no two ticks ever read the same.
 */
export function timeTickLabels(splits: number[], incr: number): string[] {
  const seconds = !(incr >= 60) || splits.some(t => Math.round(t) % 60 !== 0);
  return splits.map(t => formatClock(t, seconds));
}

/**
 * Which tick labels fit: a label centred on ``centres[i]`` and ``widths[i]`` wide must lie in
 * [``lo``, ``hi``] and keep ``gap`` from the previous label kept; others become null (not
 * drawn) instead of being cut at the edge of the figure or drawn over each other.
 */
export function fitLabels(
  labels: (string | null)[],
  centres: number[],
  widths: number[],
  lo: number,
  hi: number,
  gap = 4
): (string | null)[] {
  let lastRight = -Infinity;
  return labels.map((label, i) => {
    if (label === null) {
      return null;
    }
    const left = centres[i] - widths[i] / 2;
    const right = centres[i] + widths[i] / 2;
    if (left < lo || right > hi || left < lastRight + gap) {
      return null;
    }
    lastRight = right;
    return label;
  });
}

// -- live / paused / stale / stopped ---------------------------------------------------------

export type LiveState = 'connecting' | 'live' | 'paused' | 'stale' | 'stopped';

/** How many sampling intervals without a sample make the data stale (issue 11). */
export const STALE_AFTER_INTERVALS = 3;

export interface ILiveInput {
  /** the WebSocket: connecting, open or closed */
  connection: 'connecting' | 'open' | 'closed';
  /** the user paused the charts */
  paused: boolean;
  /** when the last sample arrived (or the stream opened), ms since epoch; null: never */
  lastArrivalMs: number | null;
  nowMs: number;
  /** seconds between two samples: the server's interval, or the slower refresh setting */
  intervalS: number;
}

/**
 * What the panel header says about its data, decided in the browser so it shows even while
 * the server or a kernel cannot speak: ``stopped`` (no connection), ``stale`` (connected but
 * no new sample for three intervals), ``paused`` (the user froze the charts), ``live``.
 * ``ageS`` is how long ago the last sample arrived.
 */
export function liveState(input: ILiveInput): { state: LiveState; ageS: number | null } {
  const ageS =
    input.lastArrivalMs === null ? null : Math.max(0, (input.nowMs - input.lastArrivalMs) / 1000);
  if (input.connection === 'closed') {
    return { state: 'stopped', ageS };
  }
  if (input.connection === 'connecting' || ageS === null) {
    return { state: 'connecting', ageS };
  }
  const interval = input.intervalS > 0 ? input.intervalS : 1;
  if (ageS > STALE_AFTER_INTERVALS * interval) {
    return { state: 'stale', ageS };
  }
  return { state: input.paused ? 'paused' : 'live', ageS };
}

/** The typical gap between arrivals (median, seconds), or null with fewer than two gaps. */
export function medianGap(arrivalsMs: number[]): number | null {
  const gaps: number[] = [];
  for (let i = 1; i < arrivalsMs.length; i++) {
    gaps.push((arrivalsMs[i] - arrivalsMs[i - 1]) / 1000);
  }
  if (gaps.length < 2) {
    return null;
  }
  gaps.sort((a, b) => a - b);
  const mid = gaps.length >> 1;
  return gaps.length % 2 ? gaps[mid] : (gaps[mid - 1] + gaps[mid]) / 2;
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
