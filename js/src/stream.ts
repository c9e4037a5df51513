import { ISignal, Signal } from '@lumino/signaling';

import { backoffDelay, HistoryJSON, SampleJSON } from './model';
import { requestAPI, streamURL } from './request';

export type ConnectionState = 'connecting' | 'open' | 'closed';

/**
 * The one WebSocket to the server's sample stream, shared by the status item and the panel.
 * Reconnects with exponential backoff after a drop (server restart) and backfills the gap
 * from GET history once it is back.
 */
export class StreamClient {
  private _ws: WebSocket | null = null;
  private _attempt = 0;
  private _timer: number | null = null;
  private _disposed = false;
  private _interval = 0;
  private _state: ConnectionState = 'closed';
  private _latest: SampleJSON | null = null;
  private _retryAt: number | null = null;
  private _sampleReceived = new Signal<this, SampleJSON>(this);
  private _historyReceived = new Signal<this, HistoryJSON>(this);
  private _stateChanged = new Signal<this, ConnectionState>(this);
  /** Messages and bytes received (the browser test reads these). */
  readonly stats = { messages: 0, bytes: 0, since: Date.now(), reconnects: 0 };

  get sampleReceived(): ISignal<this, SampleJSON> {
    return this._sampleReceived;
  }
  get historyReceived(): ISignal<this, HistoryJSON> {
    return this._historyReceived;
  }
  get stateChanged(): ISignal<this, ConnectionState> {
    return this._stateChanged;
  }
  get state(): ConnectionState {
    return this._state;
  }
  get latest(): SampleJSON | null {
    return this._latest;
  }
  /** When the next reconnect attempt happens (ms since epoch), while closed. */
  get retryAt(): number | null {
    return this._retryAt;
  }

  /** At most one sample every ``seconds`` (0 = every sample the server takes). */
  setInterval(seconds: number): void {
    this._interval = Math.max(0, seconds);
    this._sendInterval();
  }

  connect(): void {
    if (this._disposed || this._ws) {
      return;
    }
    this._setState('connecting');
    const ws = new WebSocket(streamURL());
    this._ws = ws;
    ws.onopen = () => {
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
        this._latest = data as SampleJSON;
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

  private _sendInterval(): void {
    if (this._ws && this._ws.readyState === WebSocket.OPEN) {
      this._ws.send(JSON.stringify({ interval: this._interval }));
    }
  }

  private async _backfill(): Promise<void> {
    try {
      const history = await requestAPI<HistoryJSON>('history');
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
