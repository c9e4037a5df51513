/**
 * The panel's Watched paths section: one row per watched path (its kind, write latency and
 * free space, from the latest sample), a button to stop watching it, and the form that adds
 * one (``GET/POST/DELETE paths``). What is watched comes with every sample (``watched``):
 * a list fetched once would keep showing a path nobody watches any more.
 */

import { Block, TitledBlock } from '../blocks';
import { el, pathEl } from '../dom';
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
    const node = this.node;
    node.textContent = '';
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
    if (!known.size) {
      node.appendChild(
        el('div', 'jp-TrainWatch-empty', 'No watched path. Add a log or checkpoint directory.')
      );
      return;
    }
    const list = el('ul', 'jp-TrainWatch-pathList');
    for (const entry of [...known.values()].sort((a, b) => a.path.localeCompare(b.path))) {
      list.appendChild(this._row(entry, states[entry.path] ?? entry.state, sample));
    }
    node.appendChild(list);
  }

  private _row(
    entry: IWatchedPathJSON,
    st: IPathStateJSON | null,
    sample: ISampleJSON | null
  ): HTMLLIElement {
    const row = el('li', 'jp-TrainWatch-pathRow');
    row.dataset.path = entry.path;
    row.dataset.kind = st?.kind ?? 'unknown';
    const head = el('div', 'jp-TrainWatch-pathHead');
    const name = pathEl('span', 'jp-TrainWatch-pathName', entry.path);
    name.title = entry.roles.length ? `watched as: ${entry.roles.join(', ')}` : '';
    const remove = el('button', 'jp-mod-styled jp-TrainWatch-remove', '✕');
    remove.title = `Stop watching ${entry.path}`;
    remove.setAttribute('aria-label', `Stop watching ${entry.path}`);
    remove.onclick = () => void this.remove(entry.path);
    remove.disabled = !this._enabled;
    head.append(name, remove);
    const kind = st
      ? `${st.kind}${st.fstype ? ` (${st.fstype})` : ''}${st.responsive ? '' : ', not answering'}`
      : 'checking…';
    const details = el('div', 'jp-TrainWatch-pathDetails');
    const by = watchedBy(entry.roles, sample);
    if (by) {
      details.append(el('span', 'jp-TrainWatch-watchedBy', by));
    }
    details.append(
      el('span', `jp-TrainWatch-kind jp-mod-${st?.kind ?? 'unknown'}`, kind),
      el(
        'span',
        '',
        st?.probe?.p50_ms != null ? `write+fsync ${formatMs(st.probe.p50_ms)}` : 'latency –'
      ),
      el('span', 'jp-TrainWatch-pathSpace', sample?.space?.[entry.path] ?? 'free space: ?')
    );
    row.append(head, details);
    if (st?.note) {
      row.appendChild(el('div', 'jp-TrainWatch-pathNote', st.note));
    }
    return row;
  }
}
