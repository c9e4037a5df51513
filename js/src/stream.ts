import { ISignal, Signal } from '@lumino/signaling';

import { backoffDelay, ILiveInput, medianGap } from './live';
import { IHistoryJSON, ISampleJSON } from './model';
import { requestAPI, streamURL } from './request';

export type ConnectionState = 'connecting' | 'open' | 'closed';

/**
 * The one WebSocket to the server's sample stream, shared by the status item and the panel.
 * Reconnects with exponential backoff after a drop (server restart) and backfills the gap
 * from GET history once it is back. Knows when the last sample arrived and how often one
 * should (the server's interval from GET history, else the gaps seen), and ticks so that
 * the views can say "stale" while no message arrives at all.
 */
export class StreamClient {
  private _ws: WebSocket | null = null;
  private _attempt = 0;
  private _timer: number | null = null;
  private _disposed = false;
  private _interval = 0;
  private _state: ConnectionState = 'closed';
  private _latest: ISampleJSON | null = null;
  private _retryAt: number | null = null;
  private _lastArrival: number | null = null;
  private _arrivals: number[] = [];
  private _serverInterval: number | null = null;
  private _serverStarted: number | null = null;
  private _ticker: number | null = null;
  private _ticked = new Signal<this, void>(this);
  private _sampleReceived = new Signal<this, ISampleJSON>(this);
  private _historyReceived = new Signal<this, IHistoryJSON>(this);
  private _stateChanged = new Signal<this, ConnectionState>(this);
  /** Messages and bytes received (the browser test reads these). */
  readonly stats = { messages: 0, bytes: 0, since: Date.now(), reconnects: 0 };

  get sampleReceived(): ISignal<this, ISampleJSON> {
    return this._sampleReceived;
  }
  get historyReceived(): ISignal<this, IHistoryJSON> {
    return this._historyReceived;
  }
  get stateChanged(): ISignal<this, ConnectionState> {
    return this._stateChanged;
  }
  /** Emitted about every second (faster at short intervals): time to re-check staleness. */
  get ticked(): ISignal<this, void> {
    return this._ticked;
  }
  get state(): ConnectionState {
    return this._state;
  }
  get latest(): ISampleJSON | null {
    return this._latest;
  }
  /** When the server began (epoch s, from GET history), or null before it said. */
  get serverStarted(): number | null {
    return this._serverStarted;
  }
  /** When the next reconnect attempt happens (ms since epoch), while closed. */
  get retryAt(): number | null {
    return this._retryAt;
  }

  /**
   * Seconds between two samples as this client receives them: the server sampler's interval
   * (sent with GET history; else the median gap seen), or the slower refresh setting.
   */
  get intervalS(): number {
    const server = this._serverInterval ?? medianGap(this._arrivals) ?? 1;
    return Math.max(server, this._interval);
  }

  /** What ``liveState`` needs from the connection, at ``nowMs``. */
  liveInput(paused = false, nowMs = Date.now()): ILiveInput {
    return {
      connection: this._state,
      paused,
      lastArrivalMs: this._lastArrival,
      nowMs,
      intervalS: this.intervalS
    };
  }

  /** At most one sample every ``seconds`` (0 = every sample the server takes). */
  setInterval(seconds: number): void {
    this._interval = Math.max(0, seconds);
    this._arrivals = []; // the gaps seen so far were at the old setting
    this._sendInterval();
    this._startTicker();
  }

  connect(): void {
    if (this._disposed || this._ws) {
      return;
    }
    this._setState('connecting');
    const ws = new WebSocket(streamURL());
    this._ws = ws;
    ws.onopen = () => {
      this._lastArrival = Date.now(); // stale counts from here until the first sample
      this._arrivals = [];
      this._startTicker();
      this._setState('open');
      this._sendInterval();
      void this._backfill();
    };
    ws.onmessage = event => {
      const text = String(event.data);
      this.stats.messages++;
      this.stats.bytes += text.length;
      let data: any;
      try {
        data = JSON.parse(text);
      } catch {
        return;
      }
      if (data && typeof data.t === 'number') {
        this._attempt = 0;
        this._lastArrival = Date.now();
        this._arrivals = [...this._arrivals.slice(-8), this._lastArrival];
        this._latest = data as ISampleJSON;
        this._sampleReceived.emit(this._latest);
      } else if (data && data.error) {
        console.warn('trainwatch stream:', data.error);
      }
    };
    ws.onclose = () => {
      this._ws = null;
      this._setState('closed');
      this._scheduleReconnect();
    };
    ws.onerror = () => {
      // onclose follows and schedules the retry
    };
  }

  /** Drop the connection now and retry at once (e.g. the user clicked "reconnect"). */
  reconnect(): void {
    this._attempt = 0;
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
      this._timer = null;
    }
    if (this._ws) {
      this._ws.close();
    } else {
      this.connect();
    }
  }

  dispose(): void {
    this._disposed = true;
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
    }
    if (this._ticker !== null) {
      window.clearInterval(this._ticker);
      this._ticker = null;
    }
    this._ws?.close();
    this._ws = null;
    Signal.clearData(this);
  }

  private _scheduleReconnect(): void {
    if (this._disposed || this._timer !== null) {
      return;
    }
    const delay = backoffDelay(this._attempt++);
    this._retryAt = Date.now() + delay;
    this.stats.reconnects++;
    this._timer = window.setTimeout(() => {
      this._timer = null;
      this._retryAt = null;
      this.connect();
    }, delay);
    this._stateChanged.emit(this._state);
  }

  private _startTicker(): void {
    if (this._disposed) {
      return;
    }
    const period = Math.round(Math.min(1000, Math.max(100, this.intervalS * 500)));
    if (this._ticker !== null) {
      window.clearInterval(this._ticker);
    }
    this._ticker = window.setInterval(() => this._ticked.emit(undefined), period);
  }

  private _sendInterval(): void {
    if (this._ws && this._ws.readyState === WebSocket.OPEN) {
      this._ws.send(JSON.stringify({ interval: this._interval }));
    }
  }

  private async _backfill(): Promise<void> {
    try {
      const history = await requestAPI<IHistoryJSON>('history');
      if (typeof history.interval_s === 'number' && history.interval_s > 0) {
        this._serverInterval = history.interval_s;
        this._startTicker();
      }
      if (typeof history.started_at === 'number') {
        this._serverStarted = history.started_at;
      }
      this._historyReceived.emit(history);
    } catch (error) {
      console.warn('trainwatch: history unavailable', error);
    }
  }

  private _setState(state: ConnectionState): void {
    this._state = state;
    this._stateChanged.emit(state);
  }
}
