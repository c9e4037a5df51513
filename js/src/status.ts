import { Widget } from '@lumino/widgets';

import { changed } from './dom';
import { formatDuration } from './format';
import { liveState } from './live';
import { ISampleJSON } from './model';
import { activeWarnings, scopeText, statusText } from './readings';
import { StreamClient } from './stream';

/**
 * The status-bar item: the headline's ``brief`` Python made for the latest sample (e.g.
 * ``GPU 87 % · disk 45.1 MB/s · ⚠ 1``), the same words as the panel header; a click opens the
 * panel. After it, dimmed, its scope ("this machine: 3 paths": the panel's, where the
 * notebook dashboard says its kernel's); its hover says the scope and the verdict; stale data dims it and says so on hover. ``data-t`` and ``data-warnings`` say
 * which sample it shows and how many warnings that sample has (the browser test compares
 * them with the panel's at the same moment).
 */
export class TrainWatchStatus extends Widget {
  constructor(
    private readonly _stream: StreamClient,
    onClick: () => void
  ) {
    super();
    this.addClass('jp-TrainWatch-status');
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    this.node.addEventListener('click', onClick);
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        onClick();
      }
    });
    _stream.sampleReceived.connect(this._update, this);
    _stream.stateChanged.connect(this._update, this);
    _stream.ticked.connect(this._update, this);
    this._update();
  }

  private _update(): void {
    const sample: ISampleJSON | null = this._stream.latest;
    const connected = this._stream.state === 'open';
    const { state, ageS } = liveState(this._stream.liveInput());
    const text = statusText(sample, connected);
    const level = sample?.headline?.level ?? 'ok';
    const scope = scopeText(sample);
    const verdict = sample?.headline?.verdict;
    const stale = state === 'stale' ? Math.round(ageS ?? 0) : '';
    if (!changed(this.node, [text, level, state, stale, scope, verdict, sample?.t])) {
      return;
    }
    this.node.textContent = text;
    this.node.dataset.state = state;
    this.node.dataset.scope = scope;
    // shown after the brief by CSS (::after), so the text stays Python's words alone
    this.node.dataset.scopeShort = scopeText(sample, true);
    this.node.dataset.t = String(sample?.t ?? '');
    this.node.dataset.warnings = String(activeWarnings(sample).length);
    this.toggleClass('jp-mod-warning', level === 'warning');
    this.toggleClass('jp-mod-critical', level === 'critical');
    this.toggleClass('jp-mod-stale', state === 'stale');
    const about = `TrainWatch, ${scope}${verdict ? `: ${verdict}` : ''}`;
    this.node.title =
      state === 'stale'
        ? `${about}; stale, no sample for ${formatDuration(ageS)}; open the panel`
        : `${about}; open the storage and GPU panel`;
  }
}
