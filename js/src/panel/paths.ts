/**
 * The panel's Watched paths section: one row per watched path (its kind, write latency and
 * free space, from the latest sample), a button to stop watching it, and the form that adds
 * one (``GET/POST/DELETE paths``). What is watched comes with every sample (``watched``):
 * a list fetched once would keep showing a path nobody watches any more.
 */

import { Block, TitledBlock } from '../blocks';
import { changed, el, keyedChildren, pathEl } from '../dom';
import { formatMs } from '../format';
import { IPathStateJSON, ISampleJSON, IWatchedPathJSON } from '../model';
import { watchedBy, watchedPaths } from '../readings';
import { requestAPI } from '../request';

export class PathsView extends TitledBlock {
  private _paths: IWatchedPathJSON[] = [];
  /** The time of the latest sample when the server last answered a request of ours: a
   * sample after that one lists the paths watched then, newer than our answer. */
  private _answeredAt = -Infinity;
  private _latestT = -Infinity;
  private _form = new Block('jp-TrainWatch-addPath');
  private _input: HTMLInputElement;
  private _addButton: HTMLButtonElement;
  private _error: HTMLDivElement;
  private _enabled = true;
  private _list = el('ul', 'jp-TrainWatch-pathList');
  private _empty = el(
    'div',
    'jp-TrainWatch-empty',
    'No watched path. Add a log or checkpoint directory.'
  );

  /** ``changed`` is called after each answer of the server (the panel redraws). */
  constructor(private _changed: () => void) {
    super('paths', 'Watched paths', 'jp-TrainWatch-paths', false);
    this._input = el('input', 'jp-mod-styled jp-TrainWatch-pathInput');
    this._input.placeholder = '/path/to/logs or ~/checkpoints';
    this._input.setAttribute('aria-label', 'Path to watch');
    const add = (this._addButton = el(
      'button',
      'jp-mod-styled jp-mod-accept jp-TrainWatch-addButton',
      'Watch'
    ));
    add.type = 'submit';
    const formNode = el('form');
    formNode.append(this._input, add);
    formNode.addEventListener('submit', event => {
      event.preventDefault();
      void this.add(this._input.value);
    });
    this._error = el('div', 'jp-TrainWatch-error');
    this._form.node.append(formNode, this._error);
    this.title.add(this._form);
  }

  /** Say what went wrong under the form (a path refused, a process not hidden). */
  showError(message: string): void {
    this._error.textContent = message;
  }

  async refresh(): Promise<void> {
    try {
      const data = await requestAPI<{ paths: IWatchedPathJSON[] }>('paths');
      this._answered(data.paths);
    } catch (error) {
      console.warn('trainwatch: paths unavailable', error);
    }
    this._changed();
  }

  async add(path: string): Promise<boolean> {
    path = path.trim();
    this._error.textContent = '';
    if (!path) {
      this._error.textContent = 'Type a path first.';
      return false;
    }
    try {
      const data = await requestAPI<{ paths: IWatchedPathJSON[] }>('paths', {
        method: 'POST',
        body: JSON.stringify({ path })
      });
      this._answered(data.paths);
      this._input.value = '';
    } catch (error) {
      this._error.textContent = (error as Error).message;
      return false;
    }
    this._changed();
    return true;
  }

  async remove(path: string): Promise<void> {
    try {
      const data = await requestAPI<{ paths: IWatchedPathJSON[] }>(
        `paths?path=${encodeURIComponent(path)}`,
        { method: 'DELETE' }
      );
      this._answered(data.paths);
    } catch (error) {
      this._error.textContent = (error as Error).message;
    }
    this._changed();
  }

  private _answered(paths: IWatchedPathJSON[]): void {
    this._paths = paths;
    this._answeredAt = this._latestT;
  }

  /** Stopped: nothing a click could reach, so the form and the buttons say so. */
  setEnabled(enabled: boolean): void {
    if (enabled === this._enabled) {
      return;
    }
    this._enabled = enabled;
    this._input.disabled = !enabled;
    this._addButton.disabled = !enabled;
    this.node
      .querySelectorAll<HTMLButtonElement>('.jp-TrainWatch-remove')
      .forEach(b => (b.disabled = !enabled));
  }

  render(sample: ISampleJSON | null): void {
    const states = sample?.paths ?? {};
    this._latestT = sample?.t ?? this._latestT;
    // the sample's list, unless our own request was answered after it came
    const fresh = !!sample?.watched && sample.t > this._answeredAt;
    const known = new Map((fresh ? [] : this._paths).map(p => [p.path, p] as const));
    for (const w of watchedPaths(sample)) {
      if (fresh || !known.has(w.path)) {
        known.set(w.path, w);
      }
    }
    this.title.setSummary(String(known.size));
    const shown = known.size ? this._list : this._empty;
    if (this.node.firstChild !== shown || this.node.childNodes.length !== 1) {
      this.node.replaceChildren(shown);
    }
    const entries = [...known.values()].sort((a, b) => a.path.localeCompare(b.path));
    // each path keeps its row: the reader's focus on its button or a selected name survives
    // the samples (rebuilt each second, neither did)
    keyedChildren(
      this._list,
      entries,
      entry => entry.path,
      entry => this._row(entry),
      (row, entry) => this._fill(row, entry, states[entry.path] ?? entry.state, sample)
    );
  }

  /** A path's row: its name and its button, which do not change while it is watched. */
  private _row(entry: IWatchedPathJSON): HTMLLIElement {
    const row = el('li', 'jp-TrainWatch-pathRow');
    row.dataset.path = entry.path;
    const head = el('div', 'jp-TrainWatch-pathHead');
    const name = pathEl('span', 'jp-TrainWatch-pathName', entry.path);
    const remove = el('button', 'jp-mod-styled jp-TrainWatch-remove', '✕');
    remove.title = `Stop watching ${entry.path}`;
    remove.setAttribute('aria-label', `Stop watching ${entry.path}`);
    remove.onclick = () => void this.remove(entry.path);
    head.append(name, remove);
    row.append(head, el('div', 'jp-TrainWatch-pathDetails'));
    return row;
  }

  /** What a row says of its path now: kind, latency, free space, who watches it, a note. */
  private _fill(
    row: HTMLElement,
    entry: IWatchedPathJSON,
    st: IPathStateJSON | null,
    sample: ISampleJSON | null
  ): void {
    row.querySelector<HTMLButtonElement>('.jp-TrainWatch-remove')!.disabled = !this._enabled;
    const by = watchedBy(entry.roles, sample);
    const kind = st
      ? `${st.kind}${st.fstype ? ` (${st.fstype})` : ''}${st.responsive ? '' : ', not answering'}`
      : 'checking…';
    const latency =
      st?.probe?.p50_ms != null ? `write+fsync ${formatMs(st.probe.p50_ms)}` : 'latency –';
    const space = sample?.space?.[entry.path] ?? 'free space: ?';
    const note = st?.note ?? '';
    if (!changed(row, [entry.roles, by, st?.kind, kind, latency, space, note])) {
      return;
    }
    row.dataset.kind = st?.kind ?? 'unknown';
    row
      .querySelector('.jp-TrainWatch-pathName')!
      .setAttribute('title', entry.roles.length ? `watched as: ${entry.roles.join(', ')}` : '');
    const details = row.querySelector('.jp-TrainWatch-pathDetails')!;
    details.replaceChildren(
      ...(by ? [el('span', 'jp-TrainWatch-watchedBy', by)] : []),
      el('span', `jp-TrainWatch-kind jp-mod-${st?.kind ?? 'unknown'}`, kind),
      el('span', '', latency),
      el('span', 'jp-TrainWatch-pathSpace', space)
    );
    row.querySelector('.jp-TrainWatch-pathNote')?.remove();
    if (note) {
      row.appendChild(el('div', 'jp-TrainWatch-pathNote', note));
    }
  }
}
