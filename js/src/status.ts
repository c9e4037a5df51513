import { Widget } from '@lumino/widgets';

import { activeWarnings, SampleJSON, statusText } from './model';
import { StreamClient } from './stream';

/** The status-bar item, e.g. ``GPU 87% · disk 45 MB/s · ⚠ 1``; a click opens the panel. */
export class TrainWatchStatus extends Widget {
  constructor(
    private readonly _stream: StreamClient,
    onClick: () => void
  ) {
    super();
    this.addClass('jp-TrainWatch-status');
    this.node.title = 'TrainWatch: open the storage and GPU panel';
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    this.node.addEventListener('click', onClick);
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        onClick();
      }
    });
    _stream.sampleReceived.connect(this._update, this);
    _stream.stateChanged.connect(() => this._update(this._stream, this._stream.latest), this);
    this._update(_stream, null);
  }

  private _update(_: StreamClient, sample: SampleJSON | null): void {
    const connected = this._stream.state === 'open';
    this.node.textContent = statusText(sample ?? this._stream.latest, connected);
    const warnings = activeWarnings(sample);
    this.toggleClass('jp-mod-warning', warnings.length > 0);
    this.toggleClass(
      'jp-mod-critical',
      warnings.some(w => w.severity === 'critical')
    );
  }
}
