/**
 * The panel's time range (issue 27): live, the last hours, since the server's restart, or a
 * chosen window, and the recorded points (``GET recorded``) turned into what the chart table
 * draws, so that a replay goes through the same chart code as live data (DOM-free).
 */

import { formatClock } from '../format';
import type { ISampleJSON } from '../model';
import { Aligned } from '../series';

/** What the charts show: live data, or a window of the recorded history. */
export type TimeRange =
  | { kind: 'live' }
  | { kind: 'last'; hours: number }
  | { kind: 'restart' }
  | { kind: 'window'; since: number; until: number };

export const LIVE: TimeRange = { kind: 'live' };

/**
 * The choices of the range menu, in menu order: ``<option>`` values, short labels (the menu
 * shares the header line with the state and Pause) and the words of the replay line.
 */
export const RANGE_CHOICES: { value: string; label: string; words: string }[] = [
  { value: 'live', label: 'Live', words: 'live' },
  { value: 'last:1', label: '1 h', words: 'last 1 h' },
  { value: 'last:6', label: '6 h', words: 'last 6 h' },
  { value: 'last:24', label: '24 h', words: 'last 24 h' },
  { value: 'restart', label: 'Restart', words: 'since the server restart' },
  { value: 'window', label: 'Window…', words: '' }
];

/** GET recorded: each series' own times and values (null: no value), thinned to ``points``. */
export interface IRecordedJSON {
  since: number;
  until: number;
  series: Record<string, { t: number[]; v: (number | null)[] }>;
  decoded?: number;
  truncated?: boolean;
}

/** The menu value of a range (a chosen window is ``window``). */
export function rangeValue(range: TimeRange): string {
  return range.kind === 'last' ? `last:${range.hours}` : range.kind;
}

/** The range of a menu value; null for ``window`` (its times come from the two inputs). */
export function rangeFromValue(value: string): TimeRange | null {
  if (value === 'live' || value === 'restart') {
    return { kind: value };
  }
  const m = /^last:(\d+)$/.exec(value);
  return m ? { kind: 'last', hours: Number(m[1]) } : null;
}

/**
 * The window a range replays, in epoch seconds; null while live. ``startedS`` is when the
 * server's sampler began (sent with GET history); without it "since restart" cannot be
 * said, which is an error the panel shows.
 */
export function rangeWindow(
  range: TimeRange,
  nowS: number,
  startedS: number | null
): { since: number; until: number } | null {
  switch (range.kind) {
    case 'live':
      return null;
    case 'last':
      return { since: nowS - range.hours * 3600, until: nowS };
    case 'restart':
      if (startedS === null || !(startedS < nowS)) {
        throw new Error('the server has not said when it started yet; try again in a moment');
      }
      return { since: startedS, until: nowS };
    case 'window':
      return { since: range.since, until: range.until };
  }
}

/** A ``datetime-local`` value (``2026-12-02T03:12`` or with seconds), local time, in epoch s. */
export function parseLocalTime(text: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?$/.exec(text.trim());
  if (!m) {
    return null;
  }
  const [y, mo, d, h, mi, s] = m.slice(1).map(v => Number(v ?? 0));
  const date = new Date(y, mo - 1, d, h, mi, s);
  // 2026-02-31 rolls over to March: not a date the reader meant
  if (date.getMonth() !== mo - 1 || date.getDate() !== d || h > 23 || mi > 59 || s > 59) {
    return null;
  }
  return date.getTime() / 1000;
}

/** An epoch time as a ``datetime-local`` value (local time, to the minute). */
export function toLocalInput(epochS: number): string {
  const d = new Date(epochS * 1000);
  const two = (n: number) => String(n).padStart(2, '0');
  return (
    `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}` +
    `T${two(d.getHours())}:${two(d.getMinutes())}`
  );
}

/** The chosen window of the two inputs, or a one-line error saying what is wrong. */
export function chosenWindow(sinceText: string, untilText: string): TimeRange {
  const since = parseLocalTime(sinceText);
  const until = parseLocalTime(untilText);
  if (since === null || until === null) {
    throw new Error(`'${since === null ? 'from' : 'to'}' is not a date and time`);
  }
  if (since >= until) {
    throw new Error("'from' must be before 'to'");
  }
  return { kind: 'window', since, until };
}

/**
 * A run's last hour and a minute after its end (a card's "Show on charts"); a run shorter
 * than that from a minute before its start, so that its whole life fills the charts.
 */
export function runWindow(endS: number, startedS: number | null = null): TimeRange {
  const born = startedS !== null && startedS < endS ? startedS - 60 : -Infinity;
  const since = Math.max(endS - 3600, born);
  return { kind: 'window', since, until: endS + 60 };
}

/**
 * The header's state while the charts replay a recorded window (issue 36: it still said
 * "live · 23:27:14" with a green dot): "replaying 23:10 – 00:10", live data still arriving.
 */
export function replayingText(win: { since: number; until: number }): string {
  return `replaying ${formatClock(win.since, false)} – ${formatClock(win.until, false)}`;
}

/** The line over replayed charts: "Replaying 02:12 – 03:12 (last 1 h)". */
export function replayText(range: TimeRange, win: { since: number; until: number }): string {
  const day = (t: number) => new Date(t * 1000).toDateString();
  const other = day(win.since) !== day(win.until) || day(win.until) !== day(Date.now() / 1000);
  const at = (t: number) =>
    other ? `${toLocalInput(t).slice(5, 10)} ${formatClock(t, false)}` : formatClock(t, false);
  const what = RANGE_CHOICES.find(c => c.value === rangeValue(range));
  const label = what?.words ? ` (${what.words})` : '';
  return `Replaying ${at(win.since)} – ${at(win.until)}${label}`;
}

/**
 * The recorded series ``keys`` on one time axis, as the ring's ``aligned`` gives live data:
 * every time any of them has a point, null where one has none.
 */
export function recordedColumns(recorded: IRecordedJSON, keys: string[]): Aligned {
  const cols = keys.map(k => recorded.series[k]);
  const times = [...new Set(cols.flatMap(c => c?.t ?? []))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const out = cols.map(c => {
    const col: (number | null)[] = new Array(times.length).fill(null);
    c?.t.forEach((t, i) => (col[index.get(t)!] = c.v[i] ?? null));
    return col;
  });
  return [times, ...out];
}

/** ``kind:name:field`` split at its first and last colon (a path may hold colons). */
function splitKey(key: string): [string, string, string] | null {
  const a = key.indexOf(':');
  const b = key.lastIndexOf(':');
  return a > 0 && b > a ? [key.slice(0, a), key.slice(a + 1, b), key.slice(b + 1)] : null;
}

function lastValue(recorded: IRecordedJSON, key: string): number | null {
  const v = recorded.series[key]?.v ?? [];
  for (let i = v.length - 1; i >= 0; i--) {
    if (typeof v[i] === 'number') {
      return v[i];
    }
  }
  return null;
}

/**
 * A sample that names what the recorded window holds (its disks, paths and GPUs), for the
 * chart table to pick its lines from: the table decides its series from a sample, and a
 * replay's series are those recorded then, not those watched now. The live sample's notes
 * and info notes (no GPU...) come along, so that a chart hidden live stays hidden.
 */
export function recordedSample(recorded: IRecordedJSON, live: ISampleJSON | null): ISampleJSON {
  const sample: ISampleJSON = {
    t: recorded.until,
    disks: {},
    paths: {},
    gpus: [],
    notes: live?.notes,
    warnings: (live?.warnings ?? []).filter(w => w.severity === 'info')
  };
  for (const key of Object.keys(recorded.series).sort()) {
    const parts = splitKey(key);
    if (!parts) {
      continue;
    }
    const [kind, name] = parts;
    if (kind === 'disk' && !sample.disks[name]) {
      sample.disks[name] = { device: name } as ISampleJSON['disks'][string];
    } else if (kind === 'path' && !sample.paths[name]) {
      sample.paths[name] = {
        path: name,
        mountpoint: live?.paths[name]?.mountpoint ?? null,
        device: null,
        total_bytes: lastValue(recorded, `path:${name}:total_bytes`),
        avail_bytes: lastValue(recorded, `path:${name}:avail_bytes`)
      } as ISampleJSON['paths'][string];
    } else if (kind === 'gpu' && !sample.gpus.some(g => String(g.index) === name)) {
      const live_ = live?.gpus.find(g => String(g.index) === name);
      sample.gpus.push({
        index: Number(name),
        name: live_?.name ?? `GPU ${name}`,
        util_pct: null,
        mem_used_bytes: null,
        mem_total_bytes: lastValue(recorded, `gpu:${name}:mem_total_bytes`)
      });
    }
  }
  return sample;
}
