/**
 * Recorded events as marks on the replayed charts (issue 27): which events are marked, how
 * serious each looks, and where the marks go (DOM-free; chart.ts draws them).
 */

import { formatClock } from '../format';

/** One recorded event (core/record/store.py Event.to_json), as GET recorded/events sends it. */
export interface IEventJSON {
  t: number;
  kind: string;
  subject: string;
  text: string;
  data: Record<string, any>;
}

/** A mark's colour: a warning's severity, ``ok`` for one that cleared. */
export type MarkLevel = 'info' | 'ok' | 'warning' | 'critical';

const RANK: Record<MarkLevel, number> = { info: 0, ok: 1, warning: 2, critical: 3 };

/** The kinds marked on the charts; the rest (a process seen, a kernel started) is noise there. */
export const MARKED_KINDS = new Set([
  'warning-raised',
  'warning-cleared',
  'process-ended',
  'run-ended',
  'kernel-ended',
  'kernel-restarted',
  'checkpoint',
  'mount-changed'
]);

/** How serious an event looks: a warning by its severity, an end by how it ended. */
export function eventLevel(event: IEventJSON): MarkLevel {
  const data = event.data ?? {};
  switch (event.kind) {
    case 'warning-raised':
      return data.severity === 'critical' || data.severity === 'warning' ? data.severity : 'info';
    case 'warning-cleared':
      return 'ok';
    case 'process-ended':
    case 'run-ended':
    case 'kernel-ended':
      if (data.oom_killed || data.oom_logged) {
        return 'critical';
      }
      if (data.requested) {
        return 'info'; // shut down or restarted on request (its SIGKILL is the manager's)
      }
      if (data.exit?.signal) {
        return 'critical';
      }
      return data.exit?.code === 0 ? 'info' : 'warning';
    case 'kernel-restarted':
      return 'warning';
    default:
      return 'info';
  }
}

/** One mark on a chart: where (px from the plot's left), its colour and its tooltip. */
export interface IMarker {
  t: number;
  x: number;
  level: MarkLevel;
  /** every event under the mark, one line each: "03:12:07 train.py ended (exit status 1)" */
  title: string;
}

/**
 * The marks of ``events`` on a plot ``width`` px wide, ``toX`` placing a time. Events closer
 * than ``mergePx`` share one mark (the worst colour, every text in its tooltip), so a burst
 * of warnings stays readable; events off the plot are left out.
 */
export function placeMarkers(
  events: IEventJSON[],
  toX: (t: number) => number,
  width: number,
  mergePx = 4
): IMarker[] {
  const out: IMarker[] = [];
  const sorted = events
    .filter(e => MARKED_KINDS.has(e.kind))
    .map(e => ({ e, x: toX(e.t) }))
    .filter(({ x }) => Number.isFinite(x) && x >= 0 && x <= width)
    .sort((a, b) => a.x - b.x);
  for (const { e, x } of sorted) {
    const level = eventLevel(e);
    const line = `${formatClock(e.t)} ${e.text}`;
    const last = out[out.length - 1];
    if (last && x - last.x < mergePx) {
      last.title += `\n${line}`;
      if (RANK[level] > RANK[last.level]) {
        last.level = level;
      }
      continue;
    }
    out.push({ t: e.t, x, level, title: line });
  }
  return out;
}
