/**
 * The JSON shapes the server sends (trainwatch_lab/core/model.py: Sample.to_json and the REST
 * answers), kept free of DOM and JupyterLab. What the panel does with them lives beside it:
 * series.ts (the ring of points), readings.ts (what one sample says), space.ts (free space per
 * filesystem), format.ts (words for numbers), charts/axes.ts (chart axes), live.ts (live/stale state).
 */

import type { ITrainingProcessJSON } from './processes';

export type Severity = 'info' | 'warning' | 'critical';

export interface IAlertJSON {
  code: string;
  severity: Severity;
  subject: string;
  message: string;
  fix: string;
}

export interface IDiskRatesJSON {
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

export interface IProbeJSON {
  p50_ms: number | null;
  p99_ms: number | null;
  samples: number;
}

export interface IFillJSON {
  filesystem: string;
  trend: 'measuring' | 'filling' | 'steady' | 'freeing';
  rate_bps: number | null;
  seconds_to_full: number | null;
  trend_s: number;
  points: number;
}

export interface IPathStateJSON {
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
  probe: IProbeJSON | null;
  error: string | null;
  /** how its filesystem fills: computed once per tick in Python (core/storage/fill.py) */
  fill?: IFillJSON | null;
  /** e.g. "not created yet; checked at /mnt/share/runs" (the line `check` prints) */
  note?: string | null;
}

export interface IGpuJSON {
  index: number;
  name: string;
  util_pct: number | null;
  mem_used_bytes: number | null;
  mem_total_bytes: number | null;
  lost?: boolean;
}

export interface IKernelJSON {
  id: string;
  name: string | null;
  /** the notebook (or console) path its session serves, relative to the server's root */
  notebook: string | null;
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
export interface IHeadlineJSON {
  level: 'ok' | 'warning' | 'critical';
  /** "Storage OK", "2 warnings (1 critical)" */
  verdict: string;
  /** "GPU 87 %", "vda 45.1 MB/s, 62 % busy", "1 GiB (10 %) free on /scratch" */
  facts: string[];
  /** verdict and facts, " · " between them */
  text: string;
  /** the status bar's short form: "GPU 87 % · disk 45.1 MB/s · ⚠ 1" */
  brief: string;
  /** info notes (gpu-unavailable...), shown quietly, never as a warning */
  notes: number;
}

export interface ISampleJSON {
  t: number;
  disks: Record<string, IDiskRatesJSON>;
  paths: Record<string, IPathStateJSON>;
  gpus: IGpuJSON[];
  notes?: Record<string, string>;
  warnings: IAlertJSON[];
  kernels?: Record<string, IKernelJSON>;
  /** training processes found on the machine: scripts in terminals, tmux, nohup */
  processes?: ITrainingProcessJSON[];
  headline?: IHeadlineJSON | null;
  /** the log mirrors live on the server's machine (server/hub.py, fix/mirror_files.py) */
  mirrors?: IMirrorJSON[];
  /** the paths the server watches at this sample and why (roles: user, root, kernel:ID...) */
  watched?: Record<string, string[]>;
  /** each path's free space in Python's words (advice/text.py space_text), as the notebook
   * and `watch` say it: one figure and one rounding in every view */
  space?: Record<string, string>;
}

/** One ``local_mirror`` (fix/mirror_status.py MirrorStatus, its owner and Python's words). */
export interface IMirrorJSON {
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
  /** the local disk filled (fix/mirror_room.py): copied bytes released locally, bytes
   * never copied that were dropped (the oldest first), the last dropped runs */
  bytes_released?: number;
  bytes_dropped?: number;
  dropped?: { file: string; start: number; end: number; at: number }[];
  pid: number;
  every: number | null;
  /** the status line ``%trainwatch status`` prints, made in Python */
  text: string;
}

/** GET history: one shared time axis, columns keyed "kind:name:field", null where missing. */
export interface IHistoryJSON {
  t: number[];
  series: Record<string, (number | null)[]>;
  /** the server sampler's interval (c.TrainWatch.interval), for the stale test */
  interval_s?: number;
  /** when the server began (epoch s): the panel's "since the last server restart" */
  started_at?: number;
}

export interface IWatchedPathJSON {
  path: string;
  roles: string[];
  state: IPathStateJSON | null;
}
