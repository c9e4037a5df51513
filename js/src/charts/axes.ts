/**
 * The numbers on the chart axes: rounded ticks, labels with just the decimals they need,
 * 24-hour times that never read the same twice, and which labels fit (DOM-free).
 */

import { formatClock } from '../format';

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
