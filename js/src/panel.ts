import { Panel, Widget } from '@lumino/widgets';
import { Message } from '@lumino/messaging';

import { ISeriesSpec, TimeChart } from './chart';
import {
  activeWarnings,
  fillNotes,
  formatBytes,
  formatMBs,
  gpuEmptyReason,
  HistoryJSON,
  ringCapacity,
  SampleJSON,
  seriesKey,
  SeriesRing,
  shortPath,
  WatchedPathJSON,
  watchedDevices
} from './model';
import { requestAPI } from './request';
import { StreamClient } from './stream';

const pct = (v: number) => `${Math.round(v)}%`;
const ms = (v: number) => (v >= 10 ? `${Math.round(v)} ms` : `${v.toFixed(1)} ms`);

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text) {
    node.textContent = text;
  }
  return node;
}

/** A plain DOM block inside the panel (header, lists, forms). */
class Block extends Widget {
  constructor(className: string) {
    super();
    this.addClass(className);
  }
}

/**
 * The side panel: live charts of the GPUs, the disks under the watched paths and their free
 * space, the current warnings with their fixes, the watched paths (add/remove) and the running
 * kernels. Data always flows into the ring; drawing is paused while the panel is hidden.
 */
export class TrainWatchPanel extends Panel {
  private _ring: SeriesRing;
  private _windowS = 600;
  private _dirty = false;
  private _latest: SampleJSON | null = null;
  private _paths: WatchedPathJSON[] = [];
  private _header = new Block('jp-TrainWatch-header');
  private _warnings = new Block('jp-TrainWatch-warnings');
  private _warningsShown: string | null = null;
  private _gpuUtil = new TimeChart({ title: 'GPU utilization', format: pct, range: [0, 100] });
  private _gpuMem = new TimeChart({ title: 'GPU memory used', format: formatBytes });
  private _diskRate = new TimeChart({ title: 'Disk throughput', format: formatMBs });
  private _diskAwait = new TimeChart({ title: 'Disk await', format: ms });
  private _diskUtil = new TimeChart({ title: 'Disk %util', format: pct, range: [0, 100] });
  private _space = new TimeChart({ title: 'Free space', format: formatBytes });
  private _spaceNote = new Block('jp-TrainWatch-note');
  private _pathsBlock = new Block('jp-TrainWatch-paths');
  private _kernels = new Block('jp-TrainWatch-kernels');
  private _pathInput: HTMLInputElement;
  private _pathError: HTMLDivElement;

  constructor(readonly stream: StreamClient) {
    super();
    this.id = 'trainwatch-lab-panel';
    this.addClass('jp-TrainWatch-panel');
    this.title.caption = 'TrainWatch: storage and GPU';
    this._ring = new SeriesRing(ringCapacity(this._windowS, 1));

    const section = (title: string) => {
      const b = new Block('jp-TrainWatch-section');
      b.node.appendChild(el('h3', 'jp-TrainWatch-sectionTitle', title));
      return b;
    };
    this.addWidget(this._header);
    this.addWidget(section('Warnings'));
    this.addWidget(this._warnings);
    this.addWidget(section('GPU'));
    this.addWidget(this._gpuUtil);
    this.addWidget(this._gpuMem);
    this.addWidget(section('Disks under the watched paths'));
    this.addWidget(this._diskRate);
    this.addWidget(this._diskAwait);
    this.addWidget(this._diskUtil);
    this.addWidget(section('Free space'));
    this.addWidget(this._space);
    this.addWidget(this._spaceNote);
    this.addWidget(section('Watched paths'));
    this.addWidget(this._pathsBlock);

    const form = new Block('jp-TrainWatch-addPath');
    this._pathInput = el('input', 'jp-mod-styled jp-TrainWatch-pathInput');
    this._pathInput.placeholder = '/path/to/logs or ~/checkpoints';
    this._pathInput.setAttribute('aria-label', 'Path to watch');
    const add = el('button', 'jp-mod-styled jp-mod-accept jp-TrainWatch-addButton', 'Watch');
    add.type = 'submit';
    const formNode = el('form');
    formNode.append(this._pathInput, add);
    formNode.addEventListener('submit', event => {
      event.preventDefault();
      void this.addPath(this._pathInput.value);
    });
    this._pathError = el('div', 'jp-TrainWatch-error');
    form.node.append(formNode, this._pathError);
    this.addWidget(form);

    this.addWidget(section('Kernels'));
    this.addWidget(this._kernels);

    stream.sampleReceived.connect(this._onSample, this);
    stream.historyReceived.connect(this._onHistory, this);
    stream.stateChanged.connect(() => this._renderHeader(), this);
    this._renderHeader();
  }

  /** Samples received in total (live + backfilled): the browser test reads data-samples. */
  get received(): number {
    return this._ring.received;
  }

  /** Seconds of history shown in the charts (setting ``historyWindow``). */
  setWindow(seconds: number, intervalS: number): void {
    this._windowS = seconds;
    const capacity = ringCapacity(seconds, intervalS || 1);
    if (capacity !== this._ring.capacity) {
      const ring = new SeriesRing(capacity);
      for (const [t, values] of this._ring.points()) {
        ring.push(t, values);
      }
      this._ring = ring;
    }
    this._invalidate();
  }

  /** Re-read theme colours. */
  restyle(): void {
    for (const chart of this._charts()) {
      chart.restyle();
    }
  }

  async refreshPaths(): Promise<void> {
    try {
      const data = await requestAPI<{ paths: WatchedPathJSON[] }>('paths');
      this._paths = data.paths;
    } catch (error) {
      console.warn('trainwatch: paths unavailable', error);
    }
    this._invalidate();
  }

  async addPath(path: string): Promise<boolean> {
    path = path.trim();
    this._pathError.textContent = '';
    if (!path) {
      this._pathError.textContent = 'Type a path first.';
      return false;
    }
    try {
      const data = await requestAPI<{ paths: WatchedPathJSON[] }>('paths', {
        method: 'POST',
        body: JSON.stringify({ path })
      });
      this._paths = data.paths;
      this._pathInput.value = '';
    } catch (error) {
      this._pathError.textContent = (error as Error).message;
      return false;
    }
    this._invalidate();
    return true;
  }

  async removePath(path: string): Promise<void> {
    try {
      const data = await requestAPI<{ paths: WatchedPathJSON[] }>(
        `paths?path=${encodeURIComponent(path)}`,
        { method: 'DELETE' }
      );
      this._paths = data.paths;
    } catch (error) {
      this._pathError.textContent = (error as Error).message;
    }
    this._invalidate();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.refreshPaths();
    if (this._dirty) {
      this._render();
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      void this.refreshPaths();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.stream.sampleReceived.disconnect(this._onSample, this);
    this.stream.historyReceived.disconnect(this._onHistory, this);
    super.dispose();
  }

  // -- data in -------------------------------------------------------------------------------
  private _onSample(_: StreamClient, sample: SampleJSON): void {
    this._latest = sample;
    this._ring.pushSample(sample);
    this.node.dataset.samples = String(this._ring.received);
    this._invalidate();
  }

  private _onHistory(_: StreamClient, history: HistoryJSON): void {
    this._ring.mergeHistory(history);
    this.node.dataset.samples = String(this._ring.received);
    this._invalidate();
  }

  private _invalidate(): void {
    if (this.isVisible) {
      this._render();
    } else {
      this._dirty = true; // hidden: keep collecting, draw when shown again
    }
  }

  // -- drawing -------------------------------------------------------------------------------
  private _charts(): TimeChart[] {
    return [
      this._gpuUtil,
      this._gpuMem,
      this._diskRate,
      this._diskAwait,
      this._diskUtil,
      this._space
    ];
  }

  private _render(): void {
    this._dirty = false;
    this.node.dataset.renders = String(Number(this.node.dataset.renders || 0) + 1);
    const sample = this._latest;
    this._renderHeader();
    this._renderWarnings(sample);
    this._renderCharts(sample);
    this._renderPaths(sample);
    this._renderKernels(sample);
  }

  private _renderHeader(): void {
    const node = this._header.node;
    node.textContent = '';
    const state = this.stream.state;
    const conn = el('span', `jp-TrainWatch-conn jp-mod-${state}`);
    if (state === 'open') {
      conn.textContent = 'live';
    } else if (state === 'connecting') {
      conn.textContent = 'connecting…';
    } else {
      const at = this.stream.retryAt;
      const wait = at ? Math.max(0, Math.round((at - Date.now()) / 1000)) : 0;
      conn.textContent = `server unreachable, retrying in ${wait} s`;
      const retry = el('button', 'jp-mod-styled jp-TrainWatch-retry', 'Retry now');
      retry.onclick = () => this.stream.reconnect();
      conn.appendChild(retry);
    }
    node.dataset.state = state;
    node.append(el('span', 'jp-TrainWatch-brand', 'TrainWatch'), conn);
  }

  private _renderWarnings(sample: SampleJSON | null): void {
    const node = this._warnings.node;
    const warnings = sample?.warnings ?? [];
    // rebuild only when the warnings changed: a list replaced every tick loses the reader's
    // text selection and scroll position
    const signature = sample ? JSON.stringify(warnings) : null;
    if (signature === this._warningsShown && node.childElementCount) {
      return;
    }
    this._warningsShown = signature;
    node.textContent = '';
    node.dataset.count = String(activeWarnings(sample).length);
    if (!warnings.length) {
      node.appendChild(
        el('div', 'jp-TrainWatch-empty', sample ? 'No warnings.' : 'Waiting for data…')
      );
      return;
    }
    const list = el('ul', 'jp-TrainWatch-warningList');
    for (const w of warnings) {
      const item = el('li', `jp-TrainWatch-warning jp-mod-${w.severity}`);
      item.dataset.code = w.code;
      item.dataset.subject = w.subject;
      const head = el('div', 'jp-TrainWatch-warningHead');
      head.append(
        el('span', 'jp-TrainWatch-severity', w.severity),
        el('code', 'jp-TrainWatch-code', w.code),
        el('span', 'jp-TrainWatch-subject', w.subject)
      );
      item.append(
        head,
        el('div', 'jp-TrainWatch-message', w.message),
        el('div', 'jp-TrainWatch-fix', `Fix: ${w.fix}`)
      );
      list.appendChild(item);
    }
    node.appendChild(list);
  }

  private _renderCharts(sample: SampleJSON | null): void {
    const ring = this._ring;
    const win = this._windowS;
    const show = (chart: TimeChart, specs: ISeriesSpec[], empty: string | null) => {
      chart.setEmpty(specs.length ? empty : empty ?? 'No data yet.');
      chart.setSeries(
        specs,
        ring.aligned(
          specs.map(s => s.key),
          win
        )
      );
    };
    // GPU
    const gpuReason = gpuEmptyReason(sample);
    const gpus = sample?.gpus ?? [];
    const gpuLabel = (i: number, name: string) => (gpus.length > 1 ? `${i}: ${name}` : name);
    show(
      this._gpuUtil,
      gpus.map(g => ({
        key: seriesKey('gpu', String(g.index), 'util_pct'),
        label: gpuLabel(g.index, g.name)
      })),
      gpuReason
    );
    this._gpuMem.setHidden(!gpus.length); // one "no GPU" note is enough
    show(
      this._gpuMem,
      gpus.map(g => ({
        key: seriesKey('gpu', String(g.index), 'mem_used_bytes'),
        label: gpuLabel(g.index, g.name)
      })),
      gpuReason
    );
    // disks under the watched paths
    const devices = sample ? watchedDevices(sample) : [];
    const diskEmpty = sample
      ? devices.length
        ? null
        : sample.notes?.disks || 'No block device found.'
      : 'Waiting for data…';
    const per = (fields: [string, string][]) =>
      devices.flatMap(d =>
        fields.map(([f, label]) => ({ key: seriesKey('disk', d, f), label: `${d} ${label}` }))
      );
    show(
      this._diskRate,
      per([
        ['rmb_s', 'read'],
        ['wmb_s', 'write']
      ]),
      diskEmpty
    );
    show(
      this._diskAwait,
      per([
        ['r_await', 'read'],
        ['w_await', 'write']
      ]),
      diskEmpty
    );
    show(this._diskUtil, per([['util', '']]), diskEmpty);
    // free space per watched path
    const paths = sample ? Object.keys(sample.paths).sort() : [];
    show(
      this._space,
      paths.map(p => ({ key: seriesKey('path', p, 'avail_bytes'), label: shortPath(p) })),
      sample && !paths.length ? 'No watched path. Add one below.' : null
    );
    this._spaceNote.node.textContent = sample ? fillNotes(sample.paths).join('\n') : '';
  }

  private _renderPaths(sample: SampleJSON | null): void {
    const node = this._pathsBlock.node;
    node.textContent = '';
    const states = sample?.paths ?? {};
    const known = new Map(this._paths.map(p => [p.path, p] as const));
    for (const p of Object.keys(states)) {
      if (!known.has(p)) {
        known.set(p, { path: p, roles: [], state: null });
      }
    }
    if (!known.size) {
      node.appendChild(
        el('div', 'jp-TrainWatch-empty', 'No watched path. Add a log or checkpoint directory.')
      );
      return;
    }
    const list = el('ul', 'jp-TrainWatch-pathList');
    for (const entry of [...known.values()].sort((a, b) => a.path.localeCompare(b.path))) {
      const st = states[entry.path] ?? entry.state;
      const row = el('li', 'jp-TrainWatch-pathRow');
      row.dataset.path = entry.path;
      row.dataset.kind = st?.kind ?? 'unknown';
      const head = el('div', 'jp-TrainWatch-pathHead');
      const name = el('span', 'jp-TrainWatch-pathName', entry.path);
      name.title = entry.roles.length ? `watched as: ${entry.roles.join(', ')}` : '';
      const remove = el('button', 'jp-mod-styled jp-TrainWatch-remove', '✕');
      remove.title = `Stop watching ${entry.path}`;
      remove.setAttribute('aria-label', `Stop watching ${entry.path}`);
      remove.onclick = () => void this.removePath(entry.path);
      head.append(name, remove);
      const kind = st
        ? `${st.kind}${st.fstype ? ` (${st.fstype})` : ''}${st.responsive ? '' : ', not answering'}`
        : 'checking…';
      const details = el('div', 'jp-TrainWatch-pathDetails');
      details.append(
        el('span', `jp-TrainWatch-kind jp-mod-${st?.kind ?? 'unknown'}`, kind),
        el(
          'span',
          '',
          st?.probe?.p50_ms != null ? `write+fsync ${ms(st.probe.p50_ms)}` : 'latency –'
        ),
        el(
          'span',
          '',
          st && st.avail_bytes != null && st.total_bytes
            ? `${formatBytes(st.avail_bytes)} free (${Math.round((100 * st.avail_bytes) / st.total_bytes)}%)`
            : 'free –'
        )
      );
      row.append(head, details);
      if (st?.note) {
        row.appendChild(el('div', 'jp-TrainWatch-pathNote', st.note));
      }
      list.appendChild(row);
    }
    node.appendChild(list);
  }

  private _renderKernels(sample: SampleJSON | null): void {
    const node = this._kernels.node;
    node.textContent = '';
    const kernels = Object.values(sample?.kernels ?? {});
    if (!kernels.length) {
      node.appendChild(el('div', 'jp-TrainWatch-empty', 'No running kernel.'));
      return;
    }
    const list = el('ul', 'jp-TrainWatch-kernelList');
    for (const k of kernels) {
      const item = el('li', 'jp-TrainWatch-kernel');
      item.dataset.kernel = k.id;
      const io = k.io
        ? `read ${formatMBs(k.io.read_chars_s / 1e6)}, write ${formatMBs(k.io.write_chars_s / 1e6)}`
        : 'I/O –';
      const gpu = k.gpu_mem_bytes != null ? ` · GPU ${formatBytes(k.gpu_mem_bytes)}` : '';
      item.append(
        el('div', 'jp-TrainWatch-kernelHead', `${k.name ?? 'kernel'} · ${k.execution_state ?? '?'} · pid ${k.pid ?? '?'}`),
        el('div', 'jp-TrainWatch-kernelBody', `${k.cwd ?? ''}`),
        el('div', 'jp-TrainWatch-kernelBody', `${io}${gpu}`)
      );
      list.appendChild(item);
    }
    node.appendChild(list);
  }
}
