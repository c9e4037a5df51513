import { ServerConnection } from '@jupyterlab/services';
import { Panel } from '@lumino/widgets';
import { Message } from '@lumino/messaging';

import {
  awayCards,
  cardId,
  groupRuns,
  IEndingJSON,
  FIRST_LOOK_S,
  lastLookedKey,
  LastLooked
} from '../replay/away';

import { Block, FoldListener, Section } from '../blocks';
import { TimeChart } from '../charts/chart';
import { FleetSection } from '../fleet/view';
import { formatClock } from '../format';
import { LiveState, liveState } from '../live';
import { IHistoryJSON, ISampleJSON } from '../model';
import { IChartInput, IPanelChart, PANEL_CHARTS } from './chartList';
import { StateHeader, stateText, VerdictView } from './header';
import { KernelsView, MirrorsView, ProcessesView } from './machine';
import { PathsView } from './paths';
import { WarningsView } from './warnings';
import { IEventJSON } from '../charts/markers';
import { hideProcess } from '../processes';
import {
  LIVE,
  IRecordedJSON,
  recordedColumns,
  recordedSample,
  rangeWindow,
  replayingText,
  replayText,
  runWindow,
  TimeRange
} from '../replay/range';
import { AwayView, RangeView } from '../replay/view';
import { APIError, requestAPI } from '../request';
import { Aligned, ringCapacity, SeriesRing } from '../series';
import { StreamClient } from '../stream';

/** A chart of the panel (PANEL_CHARTS), the section it is in and the note under it. */
interface IChartSlot {
  spec: IPanelChart;
  chart: TimeChart;
  section: Section;
  note: Block | null;
}

/** A replayed window: what GET recorded and recorded/events answered for it. */
interface IReplay {
  window: { since: number; until: number };
  recorded: IRecordedJSON;
  events: IEventJSON[];
  sample: ISampleJSON;
  /** the columns each chart asked for, made once (live samples redraw every second) */
  columns: Map<string, Aligned>;
}

/** ``keys``' recorded columns over the replayed window, made once per set of keys. */
function replayColumns(replay: IReplay, keys: string[]): Aligned {
  const id = keys.join('\n');
  let columns = replay.columns.get(id);
  if (!columns) {
    columns = recordedColumns(replay.recorded, keys);
    replay.columns.set(id, columns);
  }
  return columns;
}

/** The most events marked on a replayed window (GET recorded/events' limit). */
const MAX_MARKED_EVENTS = 2000;

/** Which sections are open (true) or folded (false), by id: the setting ``sections``. */
export type Folds = Record<string, boolean>;

/**
 * The side panel. At its top the state of its data (live, paused, stale, stopped) and the
 * verdict line Python made for the sample (``headline.text``, the words the status bar and
 * the notebook dashboard use too), then info notes as one quiet line each, the warnings
 * folded to their first line, live charts of the GPUs, the disks under the watched paths and
 * the space used per filesystem, the watched paths (add/remove), the machine's log mirrors,
 * the training processes found (with the time each loses to storage) and the running kernels.
 * Every section folds; at first only the verdict, the warnings and the main charts are open,
 * so that they fit in one screen (900 px), and what the reader opens or folds is remembered
 * (``onFoldsChanged``: the setting ``sections``).
 * Data always flows into the ring; drawing stops while the panel is hidden, and the charts
 * hold still while paused. Each section draws itself (header, warnings, paths,
 * machine, fleet/view); this shell holds the data and decides when to draw.
 */
export class TrainWatchPanel extends Panel {
  private _ring: SeriesRing;
  private _windowS = 600;
  private _dirty = false;
  private _paused = false;
  private _latest: ISampleJSON | null = null;
  private _header: StateHeader;
  private _verdict = new VerdictView();
  private _warnings = new WarningsView();
  private _chartSlots: IChartSlot[] = [];
  private _paths = new PathsView(() => this._invalidate());
  private _mirrors = new MirrorsView();
  private _processes = new ProcessesView(pid => void this.hideProcess(pid));
  private _kernels = new KernelsView();
  /** Every host Prometheus scrapes (hidden without c.TrainWatch.prometheus_url). */
  readonly fleet = new FleetSection();
  /** Told when the reader opens or folds a section (index.ts saves it in the settings). */
  onFoldsChanged: ((folds: Folds) => void) | null = null;
  private _sections: Section[] = [];
  private _folds: Folds = {};
  private _range: TimeRange = LIVE;
  private _replay: IReplay | null = null;
  private _replayAsked = 0; // the latest range asked for: older answers are dropped
  private _rangeView = new RangeView(range => void this.setRange(range));
  private _away = new AwayView(
    ending => void this._showRun(ending),
    endings => this._dismiss(endings)
  );
  private _endings: IEndingJSON[] = [];
  private _dismissed = new Set<string>();
  private _lastLooked = new LastLooked(
    typeof localStorage === 'undefined' ? null : localStorage,
    lastLookedKey(ServerConnection.makeSettings().baseUrl)
  );

  constructor(readonly stream: StreamClient) {
    super();
    this.id = 'trainwatch-lab-panel';
    this.addClass('jp-TrainWatch-panel');
    this.title.caption = 'TrainWatch: storage and GPU';
    this._ring = new SeriesRing(ringCapacity(this._windowS, 1));
    this._header = new StateHeader(
      () => this.setPaused(!this._paused),
      () => this.stream.reconnect()
    );
    this.addWidget(this._header);
    // the range menu sits in the header line beside Pause (the two wrap together under
    // the state on a narrow panel)
    const tools = document.createElement('span');
    tools.className = 'jp-TrainWatch-headerTools';
    tools.append(this._rangeView.select, this._header.pauseButton);
    this._header.node.appendChild(tools);
    this.addWidget(this._away);
    this._verdict.widgets.forEach(w => this.addWidget(w));
    this._warnings.widgets.forEach(w => this.addWidget(w));
    // the chosen window's inputs and the replay line sit right above the charts they drive
    this.addWidget(this._rangeView.chooser);
    this.addWidget(this._rangeView.banner);
    this._addCharts(PANEL_CHARTS);
    for (const view of [this._paths, this._mirrors, this._processes, this._kernels]) {
      view.widgets.forEach(w => this.addWidget(w));
    }
    this.addWidget(this.fleet);
    const told: FoldListener = (id, open) => {
      this._folds = { ...this._folds, [id]: open };
      this.onFoldsChanged?.(this._folds);
      this._invalidate(); // a section just opened draws what it missed while folded
    };
    this._sections = [
      this._warnings.title,
      ...new Set(this._chartSlots.map(s => s.section)),
      ...[this._paths, this._mirrors, this._processes, this._kernels].map(v => v.title)
    ];
    this._sections.forEach(s => (s.onToggle = told));

    stream.sampleReceived.connect(this._onSample, this);
    stream.historyReceived.connect(this._onHistory, this);
    stream.stateChanged.connect(this._renderState, this);
    stream.ticked.connect(this._renderState, this);
    this._renderState();
    this._verdict.render(null);
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
    return this._chartSlots.map(s => s.chart);
  }

  /** What the charts show: live data or a recorded window. */
  get range(): TimeRange {
    return this._range;
  }

  /**
   * Show ``range``: live data, or the recorded points of its window (GET recorded, thinned
   * to the charts' width) with its events marked. Resolves once the charts show it.
   */
  async setRange(range: TimeRange): Promise<void> {
    const asked = ++this._replayAsked;
    this._range = range;
    let window: { since: number; until: number } | null;
    try {
      window = rangeWindow(range, Date.now() / 1000, this.stream.serverStarted);
    } catch (error) {
      this._replay = null;
      this._rangeView.show(range, `Cannot replay: ${(error as Error).message}`, true);
      return this._invalidate();
    }
    if (window === null) {
      this._replay = null;
      this._rangeView.show(range, '');
      this.node.dataset.range = 'live';
      return this._invalidate();
    }
    this._rangeView.show(range, `${replayText(range, window)}: loading the recorded history…`);
    const { since, until } = window;
    const points = Math.max(2, Math.min(10000, Math.round(this.node.clientWidth || 400)));
    const query = (extra: Record<string, string>) =>
      new URLSearchParams({ since: String(since), until: String(until), ...extra }).toString();
    try {
      const [recorded, events] = await Promise.all([
        requestAPI<IRecordedJSON>(`recorded?${query({ points: String(points) })}`),
        requestAPI<{ events: IEventJSON[] }>(
          `recorded/events?${query({ limit: String(MAX_MARKED_EVENTS) })}`
        )
      ]);
      if (asked !== this._replayAsked) {
        return; // the reader picked another range meanwhile
      }
      const sample = recordedSample(recorded, this._latest);
      this._replay = { window, recorded, events: events.events, sample, columns: new Map() };
      const cut = recorded.truncated ? ' (cut short: too many points; pick a shorter window)' : '';
      this._rangeView.show(range, replayText(range, window) + cut);
    } catch (error) {
      if (asked !== this._replayAsked) {
        return;
      }
      this._replay = null;
      this._rangeView.show(range, `Cannot replay: ${(error as Error).message}`, true);
    }
    this.node.dataset.range = this._replay ? 'replay' : 'error';
    this._invalidate();
  }

  /**
   * Ask for the runs that ended badly since the reader last looked ("while you were away"),
   * show a card for each, and remember this look.
   */
  async checkAway(): Promise<void> {
    const now = Date.now() / 1000;
    const ask = (since: number) =>
      requestAPI<{ endings: IEndingJSON[] }>(
        `recorded/why?${new URLSearchParams({ since: String(since), until: String(now) })}`
      );
    try {
      const answer = await ask(this._lastLooked.get(now)).catch(error => {
        // a history kept shorter than a week refuses the window: the last day then
        if (error instanceof APIError && error.status === 400) {
          return ask(now - FIRST_LOOK_S);
        }
        throw error;
      });
      const known = new Set(this._endings.map(cardId));
      this._endings.push(...answer.endings.filter(e => !known.has(cardId(e))));
      this._lastLooked.set(now);
    } catch (error) {
      // no history (recording off, nothing recorded yet): no card, nothing to say
      console.debug('trainwatch-lab: no recorded endings', error);
    }
    this._renderAway();
  }

  /** A card's "Show on charts": the run's last hour, the charts brought into view. */
  private async _showRun(ending: IEndingJSON): Promise<void> {
    await this.setRange(runWindow(ending.t, ending.started));
    this._rangeView.banner.node.scrollIntoView({ block: 'start' });
  }

  private _dismiss(endings: IEndingJSON[]): void {
    endings.forEach(ending => this._dismissed.add(cardId(ending)));
    this._renderAway();
  }

  private _renderAway(): void {
    const cards = awayCards(this._endings, this._dismissed);
    this._away.render(groupRuns(cards));
    this.node.dataset.away = String(cards.length);
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

  /** Open or fold the sections as saved (ids not given keep their default). */
  setFolds(folds: Folds): void {
    this._folds = { ...folds };
    for (const section of this._sections) {
      section.setOpen(folds[section.sectionId] ?? section.openByDefault);
    }
    this._invalidate();
  }

  /** The sections, in panel order (the browser test opens them by id). */
  get sections(): Section[] {
    return this._sections;
  }

  /** Re-read theme colours. */
  restyle(): void {
    for (const chart of this.charts) {
      chart.restyle();
    }
    this.fleet.restyle();
  }

  refreshPaths(): Promise<void> {
    return this._paths.refresh();
  }

  addPath(path: string): Promise<boolean> {
    return this._paths.add(path);
  }

  removePath(path: string): Promise<void> {
    return this._paths.remove(path);
  }

  /** Hide a training process: its row and the directories it made the panel watch go. */
  async hideProcess(pid: number): Promise<void> {
    try {
      await hideProcess(pid);
    } catch (error) {
      this._paths.showError((error as Error).message);
      return;
    }
    if (this._latest?.processes) {
      this._latest.processes = this._latest.processes.filter(p => p.pid !== pid);
    }
    await this.refreshPaths();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.refreshPaths();
    void this.checkAway();
    if (this._dirty) {
      this._render();
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      void this.refreshPaths();
      void this.checkAway();
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
  private _onSample(_: StreamClient, sample: ISampleJSON): void {
    this._latest = sample;
    this._ring.pushSample(sample);
    this.node.dataset.samples = String(this._ring.received);
    this._invalidate();
  }

  private _onHistory(_: StreamClient, history: IHistoryJSON): void {
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
    let current: Section | null = null;
    for (const spec of specs) {
      if (spec.section !== undefined || current === null) {
        const { id, title, open } = spec.section ?? { id: 'charts', title: '', open: true };
        const section = new Section(id, title, open);
        this.addWidget(section);
        current = section;
      }
      const chart = new TimeChart(spec.options);
      this.addWidget(chart);
      current.add(chart);
      const note = spec.note ? new Block('jp-TrainWatch-note') : null;
      if (note) {
        this.addWidget(note);
        current.add(note);
      }
      this._chartSlots.push({ spec, chart, section: current, note });
    }
  }

  private _render(): void {
    this._dirty = false;
    this.node.dataset.renders = String(Number(this.node.dataset.renders || 0) + 1);
    const sample = this._latest;
    this._renderState();
    this._verdict.render(sample);
    this._warnings.render(sample);
    if (this._replay || !this._paused) {
      this._renderCharts(sample);
    }
    this._paths.render(sample);
    this._mirrors.render(sample?.mirrors ?? []);
    this._processes.render(sample);
    this._kernels.render(sample);
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
    // replaying a recorded window: the header says so, not "live" with its green dot (an
    // unreachable server still says stopped: that is what a click cannot fix)
    const replay = this._replay && state !== 'stopped' ? this._replay.window : null;
    const shown = replay ? 'replay' : state;
    if (replay) {
      text = replayingText(replay);
    }
    if (!this._header.showState(shown, text, this._paused)) {
      return;
    }
    this.node.dataset.state = state;
    // stopped: nothing a click could reach, so the buttons say so
    const enabled = state !== 'stopped';
    this._header.pauseButton.disabled = !enabled;
    this._paths.setEnabled(enabled);
  }

  private _renderCharts(live: ISampleJSON | null): void {
    // a replay goes through the same chart table, fed by the recorded points
    const replay = this._replay;
    const sample = replay ? replay.sample : live;
    const input: IChartInput = replay
      ? { sample, columns: keys => replayColumns(replay, keys) }
      : { sample, columns: keys => this._ring.aligned(keys, this._windowS) };
    for (const { spec, chart, note, section } of this._chartSlots) {
      if (!section.open) {
        continue; // folded: nothing to draw (opening it redraws)
      }
      const { specs, data, empty, unit, hidden } = spec.content(input);
      if (hidden !== undefined) {
        chart.setHidden(hidden);
      }
      chart.setEmpty(
        replay && !data[0].length
          ? 'Nothing recorded in this window.'
          : specs.length
            ? empty
            : (empty ?? 'No data yet.')
      );
      chart.setReplay(replay?.window ?? null, replay?.events);
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
}
