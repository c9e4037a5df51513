/**
 * Live, paused, stale or stopped: what the panel header and the status bar say about their
 * data, decided in the browser, and the reconnection backoff (DOM-free).
 */

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
