/**
 * The top of the side panel: the state of its data (live, paused, stale, stopped, with Pause
 * and Retry), the verdict line Python made for the sample and the info notes under it.
 */

import { Widget } from '@lumino/widgets';

import { Block } from '../blocks';
import { changed, el, proseEl } from '../dom';
import { formatDuration, plainProse } from '../format';
import { severityIcon } from '../icons';
import { LiveState } from '../live';
import { ISampleJSON } from '../model';
import { infoNotes, scopeText, watchedPaths } from '../readings';

/** What each state reads like in the header (the clock is the last sample's, 24-hour). */
export function stateText(state: LiveState, clock: string, ageS: number | null): string {
  switch (state) {
    case 'live':
      return `live · ${clock}`;
    case 'paused':
      return `paused · charts at ${clock}`;
    case 'stale':
      return `stale · no sample for ${formatDuration(ageS)}${clock !== '–' ? ` (last ${clock})` : ''}`;
    case 'stopped':
      return 'stopped · server unreachable';
    default:
      return 'connecting…';
  }
}

/** The header line: the state in words, Retry while stopped, the Pause/Resume button. */
export class StateHeader extends Block {
  readonly pauseButton: HTMLButtonElement;
  private _stateNode = el('span', 'jp-TrainWatch-state');

  constructor(
    onPause: () => void,
    private _onRetry: () => void
  ) {
    super('jp-TrainWatch-header');
    this.pauseButton = el('button', 'jp-mod-styled jp-TrainWatch-pause', 'Pause');
    this.pauseButton.title = 'Hold the charts still (data keeps arriving)';
    this.pauseButton.onclick = onPause;
    this.node.append(this._stateNode, this.pauseButton);
    this._stateNode.setAttribute('role', 'status');
  }

  /** Show ``text`` for ``state``; false when that is what it already shows. */
  showState(state: LiveState | 'replay', text: string, paused: boolean): boolean {
    if (!changed(this._stateNode, [state, text, paused])) {
      return false;
    }
    const node = this._stateNode;
    node.className = `jp-TrainWatch-state jp-mod-${state}`;
    node.textContent = text;
    if (state === 'stopped') {
      const retry = el('button', 'jp-mod-styled jp-TrainWatch-retry', 'Retry now');
      retry.onclick = this._onRetry;
      node.appendChild(retry);
    }
    this.node.dataset.state = state;
    this.pauseButton.textContent = paused ? 'Resume' : 'Pause';
    this.pauseButton.setAttribute('aria-pressed', String(paused));
    return true;
  }
}

/**
 * The verdict line (the headline's text, coloured by its level), the scope of the panel
 * (the machine's watched paths, where the notebook's dashboard says its kernel's) and the
 * info notes.
 */
export class VerdictView {
  readonly verdict = new Block('jp-TrainWatch-verdict');
  readonly scope = new Block('jp-TrainWatch-scope');
  readonly notes = new Block('jp-TrainWatch-notes');

  constructor() {
    this.verdict.node.setAttribute('role', 'status');
  }

  /** The widgets to add to the panel, in order. */
  get widgets(): Widget[] {
    return [this.verdict, this.scope, this.notes];
  }

  render(sample: ISampleJSON | null): void {
    const headline = sample?.headline;
    const notes = infoNotes(sample);
    const node = this.verdict.node;
    if (headline) {
      node.dataset.t = String(sample!.t); // the sample whose words these are
    } else {
      delete node.dataset.t;
    }
    const paths = watchedPaths(sample).map(p => p.path);
    if (!changed(this.verdict.node, [headline ?? null, notes, !!sample, paths])) {
      return;
    }
    this._renderVerdict(sample);
    const scope = this.scope.node;
    scope.textContent = scopeText(sample);
    scope.dataset.paths = String(paths.length);
    scope.title = paths.length ? `Watched on this machine:\n${paths.join('\n')}` : '';
    // info notes (no GPU...): one quiet line each, shown once, never a warning box; a long
    // one wraps (cut, "no NVIDIA driver on t..." said nothing)
    const box = this.notes.node;
    box.textContent = '';
    for (const note of notes) {
      const line = proseEl('div', 'jp-TrainWatch-infoNote', note.message);
      line.dataset.code = note.code;
      line.title = plainProse(`${note.message}\n${note.fix}`);
      box.appendChild(line);
    }
  }

  private _renderVerdict(sample: ISampleJSON | null): void {
    const headline = sample?.headline;
    const node = this.verdict.node;
    node.textContent = '';
    const level = headline ? headline.level : 'waiting';
    for (const l of ['ok', 'warning', 'critical', 'waiting']) {
      this.verdict.toggleClass(`jp-mod-${l}`, l === level);
    }
    node.dataset.level = level;
    if (headline) {
      // exactly headline.text: the verdict in colour, the facts after it
      const rest = headline.text.startsWith(headline.verdict)
        ? headline.text.slice(headline.verdict.length)
        : headline.facts.map(f => ` · ${f}`).join('');
      const word = el('span', 'jp-TrainWatch-verdictWord');
      word.append(...severityIcon(level), headline.verdict);
      node.append(word);
      if (rest) {
        node.append(el('span', 'jp-TrainWatch-facts', rest));
      }
    } else {
      node.textContent = sample
        ? 'No verdict from the server yet.'
        : 'Waiting for the first sample…';
    }
  }
}
