/**
 * The fleet's data in the panel: the JSON of ``GET fleet`` and ``GET fleet/range``
 * (trainwatch_lab/prometheus/fleet.py computes every number) and the words of one row. Free
 * of DOM and JupyterLab so it can be unit-tested in node; view.ts lays it out.
 */

import { formatBytes, formatDuration, formatMBs, plainProse } from '../format';
import { Severity } from '../model';
import { Aligned } from '../series';

/** A warning of a host: an agent's carries code, severity and subject only (its message is
 * empty). The fix is the listing's, by code (``IFleetJSON.fixes``). */
export interface IFleetWarningJSON {
  code: string;
  severity: Severity;
  subject: string;
  message: string;
}

/** One host of ``GET fleet`` (trainwatch_lab/prometheus/fleet.py: fold). */
export interface IFleetHostJSON {
  /** the instance without its port: what ``fleet/range?host=`` takes */
  host: string;
  /** its ``hostname`` label (our agents' file_sd targets), else the host */
  name: string;
  instances: { instance: string; job: string; up: boolean }[];
  /** up: every exporter answers; partial; down; gone: no target names it any more */
  status: 'up' | 'partial' | 'down' | 'gone';
  /** runs a trainwatch agent (its own warnings), else node_exporter/DCGM only */
  agent: boolean;
  last_seen: number | null;
  worst: Severity | null;
  /** its line in the counts: worst warning, else down (down or gone), else ok */
  state?: FleetState;
  warnings: IFleetWarningJSON[];
  /** mean utilization over its GPUs (our agent's numbers, else DCGM's) */
  gpu: { count: number; util_pct: number } | null;
  disk: { device: string; util_pct: number; bytes_per_s: number | null } | null;
  /** its least free filesystem */
  space: { mountpoint: string; avail_bytes: number; free_pct: number } | null;
}

/** A host's line in the counts at the top of the section, the most urgent first. */
export type FleetState = 'critical' | 'warning' | 'down' | 'ok';
export const FLEET_STATES: FleetState[] = ['critical', 'warning', 'down', 'ok'];

/** ``GET fleet``: ``prometheus`` is null when c.TrainWatch.prometheus_url is not set. */
export interface IFleetJSON {
  prometheus: string | null;
  t?: number;
  /** hosts per state (the server counts them; an older server's listing has none) */
  counts?: Record<FleetState, number>;
  /** the fix of each warning code derived from node_exporter's and DCGM's numbers */
  fixes?: Record<string, string>;
  hosts: IFleetHostJSON[];
}

/** The host's state as the server says, else as its fields say (an older server). */
export function hostState(host: IFleetHostJSON): FleetState {
  if (host.state) {
    return host.state;
  }
  if (host.worst === 'critical' || host.worst === 'warning') {
    return host.worst;
  }
  return host.status === 'down' || host.status === 'gone' ? 'down' : 'ok';
}

/** Hosts per state: the server's counts, else counted here. */
export function fleetCounts(data: IFleetJSON): Record<FleetState, number> {
  if (data.counts) {
    return data.counts;
  }
  const out: Record<FleetState, number> = { critical: 0, warning: 0, down: 0, ok: 0 };
  for (const host of data.hosts) {
    out[hostState(host)] += 1;
  }
  return out;
}

/** "2 critical, 14 warning, 984 ok, 3 down": the states with hosts, most urgent first
 * (ok before down reads as the issue's example: the healthy bulk, then the lost). */
export function countsText(counts: Record<FleetState, number>): string {
  const order: FleetState[] = ['critical', 'warning', 'ok', 'down'];
  const parts = order.filter(s => counts[s] > 0).map(s => `${counts[s]} ${s}`);
  return parts.length ? parts.join(', ') : 'no hosts';
}

/** Whether a host matches the filter box: words (any order, case ignored) each found in
 * its name, host, instances or a warning's code or subject; ``state:warning`` (what a click
 * on a count writes) is the host's state, exactly. */
export function matchesFilter(host: IFleetHostJSON, filter: string): boolean {
  const words = filter.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) {
    return true;
  }
  const text = [
    host.name,
    host.host,
    ...host.instances.map(i => i.instance),
    ...host.warnings.flatMap(w => [w.code, w.subject])
  ]
    .join(' ')
    .toLowerCase();
  const state = `state:${hostState(host)}`;
  return words.every(w => (w.startsWith('state:') ? w === state : text.includes(w)));
}

export interface IFleetChartJSON {
  id: string;
  title: string;
  unit: string;
  range: [number, number] | null;
  series: { label: string; values: (number | null)[] }[];
}

/** ``GET fleet/range``: charts on one time axis. */
export interface IFleetRangeJSON {
  host: string;
  window_s: number;
  step_s: number;
  t: number[];
  charts: IFleetChartJSON[];
}

/** The windows a reader picks from (seconds, label). */
export const FLEET_WINDOWS: [number, string][] = [
  [300, '5 min'],
  [900, '15 min'],
  [3600, '1 h'],
  [6 * 3600, '6 h'],
  [24 * 3600, '24 h'],
  [7 * 86400, '7 days']
];

/** The label of a window, also for one the settings named that is not in the list. */
export function windowLabel(seconds: number): string {
  const known = FLEET_WINDOWS.find(([s]) => s === seconds);
  return known ? known[1] : formatDuration(seconds);
}

const pct = (v: number) => `${Math.round(v)} %`;
/** A free share: under 10 % with a decimal (0.5 % free is not "1 %"). */
const freePct = (v: number) => (v < 9.95 ? `${v.toFixed(1)} %` : pct(v));

/** How the host answers: "up", "2 of 3 exporters answer", "down, last seen 5 min ago". */
export function statusText(host: IFleetHostJSON, nowS: number): string {
  const ago =
    host.last_seen !== null
      ? `last seen ${formatDuration(Math.max(0, nowS - host.last_seen))} ago`
      : 'never seen';
  switch (host.status) {
    case 'up':
      return 'up';
    case 'partial': {
      const up = host.instances.filter(i => i.up).length;
      return `${up} of ${host.instances.length} exporters answer`;
    }
    case 'down':
      return `down, ${ago}`;
    default:
      return `gone, ${ago}`;
  }
}

/** The numbers of one row, in reading order: GPU, the busiest disk, the least free space. */
export function hostFacts(host: IFleetHostJSON): string[] {
  const facts: string[] = [];
  if (host.gpu) {
    const n = host.gpu.count > 1 ? ` (${host.gpu.count} GPUs)` : '';
    facts.push(`GPU ${pct(host.gpu.util_pct)}${n}`);
  }
  if (host.disk) {
    const rate =
      host.disk.bytes_per_s !== null ? `, ${formatMBs(host.disk.bytes_per_s / 1e6)}` : '';
    facts.push(`${host.disk.device} ${pct(host.disk.util_pct)} busy${rate}`);
  }
  if (host.space) {
    facts.push(
      `${formatBytes(host.space.avail_bytes)} (${freePct(host.space.free_pct)}) free on ${host.space.mountpoint}`
    );
  }
  return facts.length ? facts : ['no numbers yet'];
}

/** One warning in a line: its message, else (an agent's) code and subject. */
export function warningLine(w: IFleetWarningJSON): string {
  return w.message ? plainProse(w.message) : `${w.code} · ${w.subject}`;
}

/** A row's warnings, one a line, each with its fix where the listing has one (the title
 * of the warnings line). */
export function warningsTitle(host: IFleetHostJSON, fixes: Record<string, string> = {}): string {
  return host.warnings
    .map(w => {
      const fix = fixes[w.code];
      return `${w.severity}: ${warningLine(w)}${fix ? `\n  Fix: ${plainProse(fix)}` : ''}`;
    })
    .join('\n');
}

/** The warnings line of a row: the worst first, "+ N more" for the rest. */
export function warningsText(host: IFleetHostJSON): string {
  if (!host.warnings.length) {
    return '';
  }
  const more = host.warnings.length - 1;
  return `${warningLine(host.warnings[0])}${more ? ` (+ ${more} more)` : ''}`;
}

/** A chart of ``fleet/range`` as uPlot wants it: the shared axis, then one column a line. */
export function chartData(range: IFleetRangeJSON, chart: IFleetChartJSON): Aligned {
  return [range.t, ...chart.series.map(s => s.values)];
}
