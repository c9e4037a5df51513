/**
 * Numbers in words, as Python's ``advice.text`` words them, so every surface reads the same:
 * sizes, rates, shares, latencies, durations, wall-clock times and short paths (DOM-free).
 */

/** ``disks[d].rmb_s``/``wmb_s`` are MiB/s (iostat -m); rates are shown in decimal MB/s. */
export const MIB_TO_MB = 1.048576;

/** Binary units, as Python's ``advice.text.fmt_bytes`` uses them. */
const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** A size in binary units as Python's ``advice.text.fmt_bytes`` words it: ``11.2 GiB``. */
export function formatBytes(n: number | null | undefined): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) {
    return '–';
  }
  const { unit, divisor } = byteUnit(n);
  const v = Math.abs(n) / divisor; // exact: the divisor is a power of two
  const text = divisor === 1 ? String(Math.round(v)) : significant(v);
  return `${n < 0 ? '-' : ''}${text} ${unit}`;
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

/** A duration in the unit that reads at a glance: ``45 s``, ``12 min``, ``3 h 20 min``, ``2 d``. */
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

/** A path short enough for a legend: its last two components ("…/mnt/work"). */
export function shortPath(path: string, parts = 2): string {
  const segments = path.split('/').filter(Boolean);
  if (segments.length <= parts) {
    return path;
  }
  return `…/${segments.slice(-parts).join('/')}`;
}

/**
 * A path cut into the pieces a line may break between: after each "/" ("/root/", "runs/",
 * "exp1"), so a narrow panel wraps "/root/notebooks" at the slash, never as "notebook|s".
 */
export function pathPieces(path: string): string[] {
  return path.match(/[^/]*\/|[^/]+$/g) ?? [path];
}

/**
 * A warning's sentence as runs of prose and code: what it quotes between backticks (a
 * command, a line of Python) is code, shown in code type and without the backticks.
 */
export function proseParts(text: string): { text: string; code: boolean }[] {
  return text
    .split(/`([^`\n]+)`/)
    .map((part, i) => ({ text: part, code: i % 2 === 1 }))
    .filter(part => part.text !== '');
}

/** The sentence for a tooltip, which holds no markup: the backticks dropped. */
export function plainProse(text: string): string {
  return proseParts(text)
    .map(part => part.text)
    .join('');
}

/** The binary unit a byte axis reads in, from its largest value: GiB for 12e9, MiB for 3e8. */
export function byteUnit(maxBytes: number | null | undefined): { unit: string; divisor: number } {
  let v = typeof maxBytes === 'number' && Number.isFinite(maxBytes) ? Math.abs(maxBytes) : 0;
  let i = 0;
  while (v >= 1024 && i < BYTE_UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return { unit: BYTE_UNITS[i], divisor: 1024 ** i };
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
