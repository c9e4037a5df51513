import { Panel, Widget } from '@lumino/widgets';
import { Message } from '@lumino/messaging';

import { TimeChart } from './chart';
import { FleetSection } from './fleetView';
import { AlertJSON, HistoryJSON, MirrorJSON, SampleJSON, WatchedPathJSON } from './model';
import { formatBytes, formatClock, formatDuration, formatMBs, formatMs } from './format';
import { LiveState, liveState } from './live';
import { activeWarnings, infoNotes } from './readings';
import { ringCapacity, SeriesRing } from './series';
import { IChartInput, IPanelChart, PANEL_CHARTS } from './panelCharts';
import { hideProcess, renderProcesses } from './processes';
import { requestAPI } from './request';
import { StreamClient } from './stream';

const pct = (v: number) => `${Math.round(v)} %`;

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

/** A section title ("Warnings", "GPU"...). */
function section(title: string): Block {
  const b = new Block('jp-TrainWatch-section');
  b.node.appendChild(el('h3', 'jp-TrainWatch-sectionTitle', title));
  return b;
}

/** A chart of the panel (PANEL_CHARTS), the section it is in and the note under it. */
interface IChartSlot {
  spec: IPanelChart;
  chart: TimeChart;
  section: Block;
  note: Block | null;
}

/** What each state reads like in the header (the clock is the last sample's, 24-hour). */
function stateText(state: LiveState, clock: string, ageS: number | null): string {
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

/**
 * The side panel. At its top the state of its data (live, paused, stale, stopped) and the
 * verdict line Python made for the sample (``headline.text``, the words the status bar and
 * the notebook dashboard use too), then info notes as one quiet line each, the warnings
 * folded to their first line, live charts of the GPUs, the disks under the watched paths and
 * the space used per filesystem, the watched paths (add/remove), the machine's log mirrors,
 * the training processes found (with the time each loses to storage) and the running kernels.
 * Data always flows into the ring; drawing stops while the panel is hidden, and the charts
 * hold still while paused.
 */
export class TrainWatchPanel extends Panel {
  private _ring: SeriesRing;
  private _windowS = 600;
  private _dirty = false;
  private _paused = false;
  private _latest: SampleJSON | null = null;
  private _paths: WatchedPathJSON[] = [];
  private _header = new Block('jp-TrainWatch-header');
  private _stateNode = el('span', 'jp-TrainWatch-state');
  private _pauseButton: HTMLButtonElement;
  private _stateShown = '';
  private _verdict = new Block('jp-TrainWatch-verdict');
  private _verdictShown: string | null = null;
  private _notes = new Block('jp-TrainWatch-notes');
  private _warningsTitle = section('Warnings');
  private _warnings = new Block('jp-TrainWatch-warnings');
  private _warningsShown: string | null = null;
  private _opened = new Set<string>(); // warnings the reader unfolded (code + subject)
  private _chartSlots: IChartSlot[] = [];
  private _pathsBlock = new Block('jp-TrainWatch-paths');
  private _kernels = new Block('jp-TrainWatch-kernels');
  private _mirrorsTitle = section('Log mirrors');
  private _mirrors = new Block('jp-TrainWatch-mirrors');
  private _mirrorsShown: string | null = null;
  private _processesTitle = section('Training processes');
  private _processes = new Block('jp-TrainWatch-processes');
  /** Every host Prometheus scrapes (hidden without c.TrainWatch.prometheus_url). */
  readonly fleet = new FleetSection();
  private _pathInput: HTMLInputElement;
  private _addButton: HTMLButtonElement;
  private _pathError: HTMLDivElement;
  private _controlsEnabled = true;

  constructor(readonly stream: StreamClient) {
    super();
    this.id = 'trainwatch-lab-panel';
    this.addClass('jp-TrainWatch-panel');
    this.title.caption = 'TrainWatch: storage and GPU';
    this._ring = new SeriesRing(ringCapacity(this._windowS, 1));

    this._pauseButton = el('button', 'jp-mod-styled jp-TrainWatch-pause', 'Pause');
    this._pauseButton.title = 'Hold the charts still (data keeps arriving)';
    this._pauseButton.onclick = () => this.setPaused(!this._paused);
    this._header.node.append(this._stateNode, this._pauseButton);
    this._stateNode.setAttribute('role', 'status');
    this._verdict.node.setAttribute('role', 'status');
    this.addWidget(this._header);
    this.addWidget(this._verdict);
    this.addWidget(this._notes);
    this.addWidget(this._warningsTitle);
    this.addWidget(this._warnings);
    this._addCharts(PANEL_CHARTS);
    this.addWidget(section('Watched paths'));
    this.addWidget(this._pathsBlock);

    const form = new Block('jp-TrainWatch-addPath');
    this._pathInput = el('input', 'jp-mod-styled jp-TrainWatch-pathInput');
    this._pathInput.placeholder = '/path/to/logs or ~/checkpoints';
    this._pathInput.setAttribute('aria-label', 'Path to watch');
    const add = (this._addButton = el(
      'button',
      'jp-mod-styled jp-mod-accept jp-TrainWatch-addButton',
      'Watch'
    ));
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

    this.addWidget(this._mirrorsTitle);
    this.addWidget(this._mirrors);
    this.addWidget(this._processesTitle);
    this.addWidget(this._processes);
    this.addWidget(section('Kernels'));
    this.addWidget(this._kernels);
    this.addWidget(this.fleet);

    stream.sampleReceived.connect(this._onSample, this);
    stream.historyReceived.connect(this._onHistory, this);
    stream.stateChanged.connect(this._renderState, this);
    stream.ticked.connect(this._renderState, this);
    this._renderState();
    this._renderVerdict(null);
  }

  /** Samples received in total (live + backfilled): the browser test reads data-samples. */
  get received(): number {
    return this._ring.received;
  }

  get paused(): boolean {
    return this._paused;
  }

  /** What the header says: live, paused, stale, stopped or connecting. */
  get state(): LiveState {
    return liveState(this.stream.liveInput(this._paused)).state;
  }

  /** The charts, in panel order (the browser test reads their tick labels). */
  get charts(): TimeChart[] {
    return this._charts();
  }

  /** Hold the charts still (the data keeps arriving and shows on resume). */
  setPaused(paused: boolean): void {
    this._paused = paused;
    this._renderState();
    if (!paused) {
      this._invalidate();
    }
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
    this.fleet.restyle();
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
    this.stream.stateChanged.disconnect(this._renderState, this);
    this.stream.ticked.disconnect(this._renderState, this);
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
  /** Each chart of the table, after the title of the section it opens, a note under it. */
  private _addCharts(specs: IPanelChart[]): void {
    let current: Block | null = null;
    for (const spec of specs) {
      if (spec.section !== undefined || current === null) {
        current = section(spec.section ?? '');
        this.addWidget(current);
      }
      const chart = new TimeChart(spec.options);
      this.addWidget(chart);
      const note = spec.note ? new Block('jp-TrainWatch-note') : null;
      if (note) {
        this.addWidget(note);
      }
      this._chartSlots.push({ spec, chart, section: current, note });
    }
  }

  private _charts(): TimeChart[] {
    return this._chartSlots.map(s => s.chart);
  }

  private _render(): void {
    this._dirty = false;
    this.node.dataset.renders = String(Number(this.node.dataset.renders || 0) + 1);
    const sample = this._latest;
    this._renderState();
    this._renderVerdict(sample);
    this._renderWarnings(sample);
    if (!this._paused) {
      this._renderCharts(sample);
    }
    this._renderPaths(sample);
    this._renderMirrors(sample?.mirrors ?? []);
    this._renderProcesses(sample);
    this._renderKernels(sample);
  }

  /** The header: live, paused, stale (decided here, in the browser), stopped. */
  private _renderState(): void {
    const { state, ageS } = liveState(this.stream.liveInput(this._paused));
    const clock = this._latest ? formatClock(this._latest.t) : '–';
    let text = stateText(state, clock, ageS);
    if (state === 'stopped') {
      const at = this.stream.retryAt;
      const wait = at ? Math.max(0, Math.round((at - Date.now()) / 1000)) : 0;
      text += `, retrying in ${wait} s`;
    }
    const key = `${state}|${text}|${this._paused}`;
    if (key === this._stateShown) {
      return;
    }
    this._stateShown = key;
    const node = this._stateNode;
    node.className = `jp-TrainWatch-state jp-mod-${state}`;
    node.textContent = text;
    if (state === 'stopped') {
      const retry = el('button', 'jp-mod-styled jp-TrainWatch-retry', 'Retry now');
      retry.onclick = () => this.stream.reconnect();
      node.appendChild(retry);
    }
    this._header.node.dataset.state = state;
    this.node.dataset.state = state;
    this._pauseButton.textContent = this._paused ? 'Resume' : 'Pause';
    this._pauseButton.setAttribute('aria-pressed', String(this._paused));
    this._setControlsEnabled(state !== 'stopped');
  }

  /** Stopped: nothing a click could reach, so the buttons say so. */
  private _setControlsEnabled(enabled: boolean): void {
    this._pauseButton.disabled = !enabled;
    if (enabled === this._controlsEnabled) {
      return;
    }
    this._controlsEnabled = enabled;
    this._pathInput.disabled = !enabled;
    this._addButton.disabled = !enabled;
    this._pathsBlock.node
      .querySelectorAll<HTMLButtonElement>('.jp-TrainWatch-remove')
      .forEach(b => (b.disabled = !enabled));
  }

  /** The verdict line: the headline's text, coloured by its level, and the info notes. */
  private _renderVerdict(sample: SampleJSON | null): void {
    const headline = sample?.headline;
    const notes = infoNotes(sample);
    const node = this._verdict.node;
    if (headline) {
      node.dataset.t = String(sample!.t); // the sample whose words these are
    } else {
      delete node.dataset.t;
    }
    const signature = JSON.stringify([headline ?? null, notes, !!sample]);
    if (signature === this._verdictShown) {
      return;
    }
    this._verdictShown = signature;
    node.textContent = '';
    const level = headline ? headline.level : 'waiting';
    for (const l of ['ok', 'warning', 'critical', 'waiting']) {
      this._verdict.toggleClass(`jp-mod-${l}`, l === level);
    }
    node.dataset.level = level;
    if (headline) {
      // exactly headline.text: the verdict in colour, the facts after it
      const rest = headline.text.startsWith(headline.verdict)
        ? headline.text.slice(headline.verdict.length)
        : headline.facts.map(f => ` · ${f}`).join('');
      node.append(el('span', 'jp-TrainWatch-verdictWord', headline.verdict));
      if (rest) {
        node.append(el('span', 'jp-TrainWatch-facts', rest));
      }
    } else {
      node.textContent = sample
        ? 'No verdict from the server yet.'
        : 'Waiting for the first sample…';
    }
    // info notes (no GPU...): one quiet line each, shown once, never a warning box
    const box = this._notes.node;
    box.textContent = '';
    for (const note of notes) {
      const line = el('div', 'jp-TrainWatch-infoNote', note.message);
      line.dataset.code = note.code;
      line.title = `${note.message}\n${note.fix}`;
      line.onclick = () => line.classList.toggle('jp-mod-expanded'); // the whole note
      box.appendChild(line);
    }
  }

  /** Warnings folded to their first line; a click unfolds the whole message and the fix. */
  private _renderWarnings(sample: SampleJSON | null): void {
    const node = this._warnings.node;
    const warnings = activeWarnings(sample);
    this._warningsTitle.setHidden(!warnings.length);
    this._warnings.setHidden(!warnings.length);
    node.dataset.count = String(warnings.length);
    // rebuild only when the warnings changed: a list replaced every tick loses the reader's
    // text selection, scroll position and what they unfolded
    const signature = JSON.stringify(warnings);
    if (signature === this._warningsShown) {
      return;
    }
    this._warningsShown = signature;
    node.textContent = '';
    if (!warnings.length) {
      return;
    }
    const list = el('div', 'jp-TrainWatch-warningList');
    for (const w of warnings) {
      list.appendChild(this._warningItem(w));
    }
    node.appendChild(list);
  }

  private _warningItem(w: AlertJSON): HTMLDetailsElement {
    const id = `${w.code}|${w.subject}`;
    const item = el('details', `jp-TrainWatch-warning jp-mod-${w.severity}`);
    item.dataset.code = w.code;
    item.dataset.subject = w.subject;
    item.open = this._opened.has(id);
    item.addEventListener('toggle', () => {
      if (item.open) {
        this._opened.add(id);
      } else {
        this._opened.delete(id);
      }
    });
    const summary = el('summary', 'jp-TrainWatch-warningHead');
    summary.append(
      el('span', 'jp-TrainWatch-severity', w.severity),
      el('span', 'jp-TrainWatch-message', w.message)
    );
    summary.title = w.message;
    const body = el('div', 'jp-TrainWatch-warningBody');
    const about = el('div', 'jp-TrainWatch-about');
    about.append(
      el('code', 'jp-TrainWatch-code', w.code),
      el('span', 'jp-TrainWatch-subject', w.subject)
    );
    body.append(el('div', 'jp-TrainWatch-fix', `Fix: ${w.fix}`), about);
    item.append(summary, body);
    return item;
  }

  private _renderCharts(sample: SampleJSON | null): void {
    const input: IChartInput = {
      sample,
      columns: keys => this._ring.aligned(keys, this._windowS)
    };
    for (const { spec, chart, note } of this._chartSlots) {
      const { specs, data, empty, unit, hidden } = spec.content(input);
      if (hidden !== undefined) {
        chart.setHidden(hidden);
      }
      chart.setEmpty(specs.length ? empty : (empty ?? 'No data yet.'));
      chart.setSeries(specs, data, unit);
      if (note && spec.note) {
        note.node.textContent = spec.note(sample);
      }
    }
    // a section whose every chart is hidden (no GPU, said once in the notes) goes too
    for (const { section: block } of this._chartSlots) {
      const own = this._chartSlots.filter(s => s.section === block);
      block.setHidden(own.every(s => s.chart.isHidden));
    }
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
      remove.disabled = !this._controlsEnabled;
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
          st?.probe?.p50_ms != null ? `write+fsync ${formatMs(st.probe.p50_ms)}` : 'latency –'
        ),
        el(
          'span',
          '',
          st && st.avail_bytes != null && st.total_bytes
            ? `${formatBytes(st.avail_bytes)} free (${pct((100 * st.avail_bytes) / st.total_bytes)})`
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

  /** One line per live ``local_mirror`` of the machine: Python's status words, coloured by
   * its state (a share that does not answer, an error). Hidden when there is none. */
  private _renderMirrors(mirrors: MirrorJSON[]): void {
    this._mirrorsTitle.setHidden(!mirrors.length);
    this._mirrors.setHidden(!mirrors.length);
    const signature = JSON.stringify(mirrors.map(m => [m.local, m.state, m.text]));
    if (signature === this._mirrorsShown) {
      return;
    }
    this._mirrorsShown = signature;
    const lines = mirrors.map(m => {
      const line = el('div', `jp-TrainWatch-mirror jp-mod-${m.state}`, m.text);
      line.dataset.state = m.state;
      line.dataset.local = m.local;
      line.title = `${m.local}\n→ ${m.share}\nowned by pid ${m.pid}`;
      return line;
    });
    this._mirrors.node.replaceChildren(...lines);
  }

  /** Training processes found on the machine (scripts in terminals, tmux, nohup). */
  private _renderProcesses(sample: SampleJSON | null): void {
    const processes = sample?.processes ?? [];
    this._processesTitle.setHidden(!processes.length);
    this._processes.setHidden(!processes.length);
    renderProcesses(this._processes.node, processes, pid => void this.hideProcess(pid));
  }

  /** Hide a training process: its row and the directories it made the panel watch go. */
  async hideProcess(pid: number): Promise<void> {
    try {
      await hideProcess(pid);
    } catch (error) {
      this._pathError.textContent = (error as Error).message;
      return;
    }
    if (this._latest?.processes) {
      this._latest.processes = this._latest.processes.filter(p => p.pid !== pid);
    }
    await this.refreshPaths();
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
        el(
          'div',
          'jp-TrainWatch-kernelHead',
          `${k.name ?? 'kernel'} · ${k.execution_state ?? '?'} · pid ${k.pid ?? '?'}`
        ),
        el('div', 'jp-TrainWatch-kernelBody', `${k.cwd ?? ''}`),
        el('div', 'jp-TrainWatch-kernelBody', `${io}${gpu}`)
      );
      list.appendChild(item);
    }
    node.appendChild(list);
  }
}
