/**
 * The panel's replay controls (issue 27): the range menu (in the header line, so the panel
 * grows by nothing while live), the chosen window's two inputs, the "Replaying … · back to
 * live" line, and the "while you were away" cards.
 */

import { Block } from '../blocks';
import { el, pathEl } from '../dom';
import { cardId, IEndingJSON, IRunCards } from './away';
import {
  chosenWindow,
  LIVE,
  RANGE_CHOICES,
  rangeFromValue,
  rangeValue,
  TimeRange,
  toLocalInput
} from './range';

/** The range menu, the chosen window's inputs and the replay line. */
export class RangeView {
  /** The menu: placed in the header line by the panel. */
  readonly select = el('select', 'jp-TrainWatch-rangeSelect');
  /** From/to and Show, while "Chosen window…" is picked. */
  readonly chooser = new Block('jp-TrainWatch-window');
  /** "Replaying 02:12 – 03:12 (last 1 h) · back to live", or what went wrong. */
  readonly banner = new Block('jp-TrainWatch-replay');
  private _from = el('input', 'jp-TrainWatch-windowFrom');
  private _to = el('input', 'jp-TrainWatch-windowTo');
  private _error = el('span', 'jp-TrainWatch-windowError');
  private _text = el('span', 'jp-TrainWatch-replayText');

  constructor(private _onRange: (range: TimeRange) => void) {
    this.select.title = 'Time range of the charts: live, or the recorded history';
    this.select.setAttribute('aria-label', 'Time range');
    // live first, then the replays under one heading (their short labels need it)
    const replays = el('optgroup');
    replays.label = 'Replay the recorded history';
    for (const choice of RANGE_CHOICES) {
      const option = el('option', '', choice.label);
      option.value = choice.value;
      option.title = choice.words;
      (choice.value === 'live' ? this.select : replays).appendChild(option);
    }
    this.select.appendChild(replays);
    this.select.onchange = () => this._picked();

    for (const [input, label] of [
      [this._from, 'from'],
      [this._to, 'to']
    ] as const) {
      input.type = 'datetime-local';
      input.setAttribute('aria-label', label);
      this.chooser.node.append(el('label', '', label), input);
    }
    const show = el('button', 'jp-mod-styled jp-TrainWatch-windowShow', 'Show');
    show.type = 'button';
    show.onclick = () => this._showWindow();
    this._error.setAttribute('role', 'alert');
    this.chooser.node.append(show, this._error);
    this.chooser.hide();

    const back = el('button', 'jp-mod-styled jp-TrainWatch-backToLive', 'back to live');
    back.type = 'button';
    back.onclick = () => this._onRange(LIVE);
    this._text.setAttribute('role', 'status');
    this.banner.node.append(this._text, ' · ', back);
    this.banner.hide();
  }

  /** Show ``range`` in the menu, and the replay line (``text``: what it replays, or why not). */
  show(range: TimeRange, text: string, failed = false): void {
    this.select.value = rangeValue(range);
    this.chooser.setHidden(range.kind !== 'window' || !failed);
    this.banner.setHidden(range.kind === 'live');
    this.banner.node.dataset.state = failed ? 'error' : 'replaying';
    this._text.textContent = text;
  }

  private _picked(): void {
    const range = rangeFromValue(this.select.value);
    if (range) {
      this.chooser.hide();
      this._onRange(range);
      return;
    }
    // a chosen window: the last hour to start from, as the reader will adjust it
    const now = Date.now() / 1000;
    this._from.value ||= toLocalInput(now - 3600);
    this._to.value ||= toLocalInput(now);
    this._error.textContent = '';
    this.chooser.show();
  }

  private _showWindow(): void {
    try {
      this._error.textContent = '';
      this._onRange(chosenWindow(this._from.value, this._to.value));
      this.chooser.hide();
    } catch (error) {
      this._error.textContent = (error as Error).message;
    }
  }
}

/**
 * One card per run that ended badly since the reader last looked: the sentence made in
 * Python and its evidence, word for word, "Show on charts" (the run's last hour) and Dismiss.
 * Hidden when there is none.
 */
export class AwayView extends Block {
  constructor(
    private _onShow: (ending: IEndingJSON) => void,
    private _onDismiss: (endings: IEndingJSON[]) => void
  ) {
    super('jp-TrainWatch-away');
    this.hide();
  }

  /**
   * One header ("While you were away", with Dismiss all) over one card per run: its newest
   * end's sentence, what ran and where, and its earlier ends folded under it.
   */
  render(runs: IRunCards[]): void {
    this.node.textContent = '';
    const ends = runs.reduce((n, run) => n + run.endings.length, 0);
    this.node.dataset.cards = String(runs.length);
    this.node.dataset.ends = String(ends);
    this.setHidden(!runs.length);
    if (!runs.length) {
      return;
    }
    const head = el('div', 'jp-TrainWatch-awayHead');
    const all = el('button', 'jp-mod-styled jp-TrainWatch-awayDismissAll', 'Dismiss all');
    all.type = 'button';
    all.onclick = () => this._onDismiss(runs.flatMap(run => run.endings));
    head.append(
      el(
        'span',
        'jp-TrainWatch-awayTitle',
        `While you were away: ${runs.length} run${runs.length === 1 ? '' : 's'} ended badly`
      ),
      all
    );
    this.node.appendChild(head);
    for (const run of runs) {
      this.node.appendChild(this._card(run));
    }
  }

  private _card(run: IRunCards): HTMLDivElement {
    const [newest, ...earlier] = run.endings;
    const card = el('div', 'jp-TrainWatch-awayCard');
    card.dataset.id = cardId(newest);
    card.dataset.cause = newest.cause ?? '';
    card.dataset.ends = String(run.endings.length);
    card.setAttribute('role', 'alert');
    const what = el('div', 'jp-TrainWatch-awayRun');
    what.append(el('code', 'jp-TrainWatch-awayCommand', run.what));
    if (run.where) {
      what.append(' in ', pathEl('span', 'jp-TrainWatch-awayCwd', run.where));
    }
    card.append(what, el('div', 'jp-TrainWatch-awaySentence', newest.sentence));
    if (earlier.length) {
      const more = el('details', 'jp-TrainWatch-awayEarlier');
      more.appendChild(
        el('summary', '', `${earlier.length} earlier end${earlier.length === 1 ? '' : 's'}`)
      );
      const list = el('ul', 'jp-TrainWatch-awayEvidence');
      earlier.forEach(e => list.appendChild(el('li', '', e.sentence)));
      more.appendChild(list);
      card.appendChild(more);
    }
    if (newest.evidence.length) {
      // the sentence says the evidence already: the list, one line each, opens on demand
      const details = el('details', 'jp-TrainWatch-awayDetails');
      details.appendChild(el('summary', '', `Evidence (${newest.evidence.length})`));
      const list = el('ul', 'jp-TrainWatch-awayEvidence');
      newest.evidence.forEach(line => list.appendChild(el('li', '', line)));
      details.appendChild(list);
      card.appendChild(details);
    }
    const show = el('button', 'jp-mod-styled jp-TrainWatch-awayShow', 'Show on charts');
    show.type = 'button';
    show.onclick = () => this._onShow(newest);
    const dismiss = el('button', 'jp-mod-styled jp-TrainWatch-awayDismiss', 'Dismiss');
    dismiss.type = 'button';
    dismiss.onclick = () => this._onDismiss(run.endings);
    const buttons = el('div', 'jp-TrainWatch-awayButtons');
    buttons.append(show, dismiss);
    card.appendChild(buttons);
    return card;
  }
}
