import { Panel } from '@lumino/widgets';
import { Message } from '@lumino/messaging';

import { niceIncrs } from '../charts/axes';
import { Block } from '../blocks';
import { TimeChart } from '../charts/chart';
import { changed, el, keyedChildren } from '../dom';
import {
  chartData,
  countsText,
  fleetCounts,
  FLEET_WINDOWS,
  IFleetHostJSON,
  IFleetJSON,
  IFleetRangeJSON,
  hostFacts,
  hostState,
  matchesFilter,
  statusText,
  warningsText,
  warningsTitle,
  windowLabel
} from './data';
import { formatClock } from '../format';
import { severityIcon } from '../icons';
import { requestAPI } from '../request';

const PERCENT_INCRS = niceIncrs([1, 2, 2.5, 5], 0, 2);
/** Rows drawn at a time: a cluster of thousands of hosts draws a page, the worst first,
 * and "Show more" draws the next (the DOM stays a few hundred nodes whatever the size). */
export const FLEET_PAGE = 50;

/**
 * The Fleet section of the panel: one row per host Prometheus scrapes (``GET fleet``, read
 * by the server from c.TrainWatch.prometheus_url), the worst first; a click on a row shows
 * that host's charts over the chosen window (``GET fleet/range``). Hidden when the server has
 * no Prometheus URL. Prometheus down or slow: the server's one line, in place of the rows'
 * freshness, never a spinner that waits forever. Polls only while the panel is visible.
 * At cluster size: the hosts per state at the top, a filter box (host name, warning code),
 * only a page of rows drawn, one host's charts on demand above the list.
 */
export class FleetSection extends Panel {
  private _head = new Block('jp-TrainWatch-fleetHead');
  private _status = el('div', 'jp-TrainWatch-fleetStatus');
  private _error = el('div', 'jp-TrainWatch-error jp-TrainWatch-fleetError');
  private _rows = new Block('jp-TrainWatch-fleetRows');
  private _counts = el('div', 'jp-TrainWatch-fleetCounts');
  private _filter: HTMLInputElement;
  private _list = new Block('jp-TrainWatch-fleetListBlock');
  private _hostList = el('ul', 'jp-TrainWatch-fleetList');
  private _more = el('button', 'jp-mod-styled jp-TrainWatch-fleetMore');
  private _data: IFleetJSON | null = null;
  private _shown = FLEET_PAGE;
  private _detailTitle = new Block('jp-TrainWatch-fleetDetailTitle');
  private _detail = new Panel();
  private _charts = new Map<string, TimeChart>();
  private _select: HTMLSelectElement;
  private _hosts: IFleetHostJSON[] = [];
  private _selected: string | null = null;
  private _windowS = 3600;
  private _refreshS = 15;
  private _timer: number | null = null;
  private _enabled: boolean | null = null; // null: not asked yet
  private _loading = false;
  private _answeredAt: number | null = null; // when Prometheus last answered (its clock)

  constructor() {
    super();
    this.addClass('jp-TrainWatch-fleet');
    this.id = 'trainwatch-lab-fleet';
    this._select = el('select', 'jp-mod-styled jp-TrainWatch-fleetWindow');
    this._select.setAttribute('aria-label', 'Fleet chart window');
    this._select.onchange = () => this.setWindow(Number(this._select.value));
    this._head.node.append(el('h3', 'jp-TrainWatch-sectionTitle', 'Fleet'), this._select);
    this._error.setAttribute('role', 'alert');
    this._counts.setAttribute('aria-live', 'polite');
    this._more.onclick = () => {
      this._shown += FLEET_PAGE;
      this._renderList();
    };
    this._filter = el('input', 'jp-mod-styled jp-TrainWatch-fleetFilter');
    this._filter.type = 'search';
    this._filter.placeholder = 'Filter: host or warning code';
    this._filter.setAttribute('aria-label', 'Filter hosts by name or warning code');
    this._filter.oninput = () => {
      this._shown = FLEET_PAGE;
      this._renderList();
    };
    this._rows.node.append(this._status, this._counts, this._filter, this._error);
    this._detail.addClass('jp-TrainWatch-fleetDetail');
    this._detail.addWidget(this._detailTitle);
    this._detail.hide();
    this.addWidget(this._head);
    this.addWidget(this._rows);
    this.addWidget(this._detail);
    this.addWidget(this._list);
    this._fillSelect();
    this.hide(); // until the server says it has a Prometheus
  }

  /** Show only the hosts matching ``text`` (the filter box's words). */
  setFilter(text: string): void {
    this._filter.value = text;
    this._shown = FLEET_PAGE;
    this._renderList();
  }

  /** The hosts of the last listing (the browser test reads them). */
  get hosts(): IFleetHostJSON[] {
    return this._hosts;
  }

  get selected(): string | null {
    return this._selected;
  }

  /** The window of the charts and how often to ask again (settings). */
  configure(windowS: number, refreshS: number): void {
    this._refreshS = Math.max(5, refreshS || 15);
    this._restartTimer();
    this.setWindow(windowS || 3600);
  }

  setWindow(seconds: number): void {
    this._windowS = seconds;
    this._fillSelect();
    if (this._selected) {
      void this._loadRange(this._selected);
    }
  }

  /** Ask the server now (the first call decides whether the section shows at all). */
  async refresh(): Promise<void> {
    if (this._enabled === false || this._loading) {
      return;
    }
    this._loading = true;
    try {
      const data = await requestAPI<IFleetJSON>('fleet');
      this._enabled = data.prometheus !== null;
      this.setHidden(!this._enabled);
      this._hosts = data.hosts;
      this._showError(null);
      this._renderRows(data);
    } catch (error) {
      const status = (error as { status?: number }).status;
      if (this._enabled === null && status === 404) {
        this._enabled = false; // a server without the fleet endpoint
        this.hide();
        return;
      }
      this._enabled = true;
      this.show();
      this._showError((error as Error).message);
    } finally {
      this._loading = false;
    }
    if (this._selected) {
      await this._loadRange(this._selected);
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this._restartTimer();
    void this.refresh();
  }

  protected onBeforeDetach(msg: Message): void {
    this._stopTimer();
    super.onBeforeDetach(msg);
  }

  dispose(): void {
    this._stopTimer();
    super.dispose();
  }

  private _restartTimer(): void {
    this._stopTimer();
    if (!this.isAttached) {
      return;
    }
    this._timer = window.setInterval(() => {
      // hidden panel: no requests (this section itself may be hidden only while disabled)
      if (this.parent?.isVisible) {
        void this.refresh();
      }
    }, this._refreshS * 1000);
  }

  private _stopTimer(): void {
    if (this._timer !== null) {
      window.clearInterval(this._timer);
      this._timer = null;
    }
  }

  private _fillSelect(): void {
    const options = FLEET_WINDOWS.some(([s]) => s === this._windowS)
      ? FLEET_WINDOWS
      : [...FLEET_WINDOWS, [this._windowS, windowLabel(this._windowS)] as [number, string]];
    this._select.textContent = '';
    for (const [seconds, label] of options) {
      const option = el('option', '', label);
      option.value = String(seconds);
      option.selected = seconds === this._windowS;
      this._select.appendChild(option);
    }
  }

  /** Prometheus's one line; the rows and charts stay, faded, as its last answer. */
  private _showError(message: string | null): void {
    this._error.textContent = message ?? '';
    this.node.dataset.error = message ? 'true' : 'false';
    this.toggleClass('jp-mod-stale', !!message);
    if (message && this._answeredAt !== null) {
      this._status.textContent = `${this._hosts.length} hosts · last answer at ${formatClock(this._answeredAt)}`;
    }
  }

  private _renderRows(data: IFleetJSON): void {
    const at = data.t ?? Date.now() / 1000;
    this._answeredAt = at;
    this._data = data;
    this._status.textContent = `${data.hosts.length} host${data.hosts.length === 1 ? '' : 's'} · Prometheus at ${formatClock(at)}`;
    this._status.title = data.prometheus ?? '';
    const counts = fleetCounts(data);
    this._counts.textContent = '';
    for (const state of ['critical', 'warning', 'ok', 'down'] as const) {
      if (counts[state] > 0) {
        const part = el(
          'span',
          `jp-TrainWatch-fleetCount jp-mod-${state}`,
          `${counts[state]} ${state}`
        );
        part.title = `Show only the hosts that are ${state}`;
        part.onclick = () => this.setFilter(`state:${state}`);
        this._counts.append(part);
      }
    }
    this._counts.title = countsText(counts);
    this._counts.dataset.text = countsText(counts);
    this._filter.hidden = data.hosts.length < 2;
    this._renderList();
    if (this._selected && !data.hosts.some(h => h.host === this._selected)) {
      this._selectHost(null);
    }
  }

  /** The page of rows that match the filter, the worst first (the server's order). A host
   * keeps its row across refreshes (``keyedChildren``): a row reached with the keyboard
   * keeps the focus, which a list rebuilt every 15 s took away. */
  private _renderList(): void {
    const node = this._list.node;
    const data = this._data;
    const empty = (text: string) => node.replaceChildren(el('div', 'jp-TrainWatch-empty', text));
    if (!data) {
      node.replaceChildren();
      return;
    }
    if (!data.hosts.length) {
      empty('Prometheus scrapes no host yet.');
      return;
    }
    const filter = this._filter.value.trim();
    const matching = filter ? data.hosts.filter(h => matchesFilter(h, filter)) : data.hosts;
    node.dataset.matching = String(matching.length);
    if (!matching.length) {
      empty(`No host matches “${filter}”.`);
      return;
    }
    const at = this._answeredAt ?? Date.now() / 1000;
    keyedChildren(
      this._hostList,
      matching.slice(0, this._shown),
      host => host.host,
      host => this._row(host.host),
      (row, host) => this._fillRow(row, host, at)
    );
    const left = matching.length - this._shown;
    this._more.textContent = `Show ${Math.min(left, FLEET_PAGE)} more (${left} not shown)`;
    const parts: Node[] = left > 0 ? [this._hostList, this._more] : [this._hostList];
    const same =
      node.childNodes.length === parts.length && parts.every((n, i) => node.childNodes[i] === n);
    if (!same) {
      node.replaceChildren(...parts);
    }
  }

  /** A host's row and what a click or Enter on it does. */
  private _row(hostKey: string): HTMLLIElement {
    const row = el('li');
    row.tabIndex = 0;
    row.setAttribute('role', 'button');
    const open = () => this._selectHost(this._selected === hostKey ? null : hostKey);
    row.onclick = open;
    row.onkeydown = event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        open();
      }
    };
    return row;
  }

  /** What a host's row says now: its name, state, facts and warnings. */
  private _fillRow(row: HTMLElement, host: IFleetHostJSON, nowS: number): void {
    const selected = host.host === this._selected;
    row.className = `jp-TrainWatch-fleetRow jp-mod-${host.worst ?? 'ok'}`;
    row.classList.toggle('jp-mod-selected', selected);
    row.setAttribute('aria-expanded', String(selected));
    row.dataset.host = host.host;
    row.dataset.state = hostState(host);
    row.dataset.status = host.status;
    const state = statusText(host, nowS);
    const warnTitle = warningsTitle(host, this._data?.fixes);
    if (!changed(row, [host, state, warnTitle])) {
      return;
    }
    const head = el('div', 'jp-TrainWatch-fleetRowHead');
    const name = el('span', 'jp-TrainWatch-fleetName', host.name);
    name.title = host.instances
      .map(i => `${i.instance} (${i.job}${i.up ? '' : ', down'})`)
      .join('\n');
    head.append(name, el('span', `jp-TrainWatch-fleetState jp-mod-${host.status}`, state));
    const facts = el('div', 'jp-TrainWatch-fleetFacts');
    hostFacts(host).forEach((fact, i) => {
      facts.append(i ? ' · ' : '', el('span', 'jp-TrainWatch-fleetFact', fact));
    });
    const parts: HTMLElement[] = [head, facts];
    if (host.warnings.length) {
      const warn = el('div', `jp-TrainWatch-fleetWarning jp-mod-${host.worst}`);
      warn.append(...severityIcon(host.worst ?? ''), warningsText(host));
      warn.title = warnTitle;
      parts.push(warn);
    }
    row.replaceChildren(...parts);
  }

  private _selectHost(host: string | null): void {
    this._selected = host;
    this._list.node.querySelectorAll<HTMLElement>('.jp-TrainWatch-fleetRow').forEach(row => {
      const on = row.dataset.host === host;
      row.classList.toggle('jp-mod-selected', on);
      row.setAttribute('aria-expanded', String(on));
    });
    this._detail.setHidden(host === null);
    if (host) {
      this._detail.node.scrollIntoView({ block: 'nearest' });
      void this._loadRange(host);
    }
  }

  private async _loadRange(host: string): Promise<void> {
    const name = this._hosts.find(h => h.host === host)?.name ?? host;
    this._detailTitle.node.textContent = `${name} · last ${windowLabel(this._windowS)}`;
    const query = `fleet/range?host=${encodeURIComponent(host)}&window=${this._windowS}`;
    let range: IFleetRangeJSON;
    try {
      range = await requestAPI<IFleetRangeJSON>(query);
    } catch (error) {
      this._showError((error as Error).message);
      return;
    }
    if (host !== this._selected) {
      return; // another row was clicked meanwhile
    }
    this._detail.node.dataset.host = host;
    for (const chart of range.charts) {
      let widget = this._charts.get(chart.id);
      if (!widget) {
        const created = new TimeChart({
          title: chart.title,
          unit: chart.unit,
          range: chart.range ?? undefined,
          incrs: chart.range ? PERCENT_INCRS : undefined,
          floor: 1
        });
        this._charts.set(chart.id, created);
        this._detail.addWidget(created);
        widget = created;
      }
      const none =
        chart.id === 'gpu'
          ? `No GPU metrics from ${name} (neither a trainwatch agent nor DCGM exporter).`
          : `No data from ${name} in this window.`;
      widget.setEmpty(chart.series.length ? null : none);
      widget.setSeries(
        chart.series.map((s, i) => ({ key: `${chart.id}:${i}:${s.label}`, label: s.label })),
        chartData(range, chart)
      );
    }
  }

  /** Re-read theme colours. */
  restyle(): void {
    for (const chart of this._charts.values()) {
      chart.restyle();
    }
  }
}
