import { Widget } from '@lumino/widgets';
import uPlot from 'uplot';

import { Aligned } from './model';

/** One line of a chart: the ring key it plots and the label in the legend. */
export interface ISeriesSpec {
  key: string;
  label: string;
}

export interface IChartOptions {
  title: string;
  /** How a value reads on the axis and in the legend. */
  format: (value: number) => string;
  /** Fixed y range (e.g. 0..100 for percentages); auto when absent. */
  range?: [number, number];
  height?: number;
}

/** Line colours come from the theme, never hard-coded: these JupyterLab variables in turn. */
const PALETTE_VARS = [
  '--jp-brand-color1',
  '--jp-warn-color1',
  '--jp-success-color1',
  '--jp-error-color1',
  '--jp-accent-color1',
  '--jp-brand-color3',
  '--jp-warn-color3',
  '--jp-success-color3'
];

function cssVar(node: HTMLElement, name: string): string {
  return getComputedStyle(node).getPropertyValue(name).trim();
}

/**
 * The one chart component of the panel: a titled uPlot time series whose lines and colours
 * follow the theme. Every chart (GPU, disks, space) is an instance with other series.
 * ``data-points`` on its node says how many points it shows (the browser test reads it).
 */
export class TimeChart extends Widget {
  private _plot: uPlot | null = null;
  private _specs: ISeriesSpec[] = [];
  private _data: Aligned = [[]];
  private _plotNode: HTMLDivElement;
  private _titleNode: HTMLDivElement;
  private _emptyNode: HTMLDivElement;
  private _resize: ResizeObserver | null = null;

  constructor(readonly options: IChartOptions) {
    super();
    this.addClass('jp-TrainWatch-chart');
    const title = (this._titleNode = document.createElement('div'));
    title.className = 'jp-TrainWatch-chartTitle';
    title.textContent = options.title;
    this._plotNode = document.createElement('div');
    this._plotNode.className = 'jp-TrainWatch-plot';
    this._emptyNode = document.createElement('div');
    this._emptyNode.className = 'jp-TrainWatch-empty';
    this._emptyNode.hidden = true;
    this.node.append(title, this._emptyNode, this._plotNode);
    this.node.dataset.points = '0';
    if (typeof ResizeObserver !== 'undefined') {
      this._resize = new ResizeObserver(() => this._fit());
      this._resize.observe(this.node);
    }
  }

  get keys(): string[] {
    return this._specs.map(s => s.key);
  }

  /** Show ``reason`` instead of the plot (no GPU, no watched path...), or the plot again. */
  setEmpty(reason: string | null): void {
    this._emptyNode.hidden = reason === null;
    this._emptyNode.textContent = reason ?? '';
    this._plotNode.hidden = reason !== null;
  }

  /** New data for ``specs`` (rebuilds the plot only when the set of lines changed). */
  setSeries(specs: ISeriesSpec[], data: Aligned): void {
    const changed =
      specs.length !== this._specs.length ||
      specs.some((s, i) => s.key !== this._specs[i].key || s.label !== this._specs[i].label);
    this._specs = specs;
    this._data = data;
    this.node.dataset.points = String(data[0].length);
    this.node.dataset.series = String(specs.length);
    if (changed || !this._plot) {
      this._build();
    } else {
      this._plot.setData(data as uPlot.AlignedData);
    }
  }

  /** Re-read the theme's colours (after a theme change). */
  restyle(): void {
    if (this._plot) {
      this._build();
    }
  }

  dispose(): void {
    this._resize?.disconnect();
    this._plot?.destroy();
    this._plot = null;
    super.dispose();
  }

  private _width(): number {
    // the widget's own width follows the panel; the canvas inside must not push it wider
    return Math.max(160, this.node.clientWidth || 300);
  }

  private _fit(): void {
    if (this._plot && this.isVisible) {
      const width = this._width();
      if (Math.abs(width - this._plot.width) > 1) {
        this._plot.setSize({ width, height: this.options.height ?? 120 });
      }
    }
  }

  private _build(): void {
    this._plot?.destroy();
    this._plot = null;
    this._plotNode.textContent = '';
    const node = this.node;
    const text = cssVar(node, '--jp-ui-font-color2') || 'currentColor';
    const grid = cssVar(node, '--jp-border-color2') || 'currentColor';
    // uPlot scales fonts given in px only: take the computed size of our (themed) title
    const fontPx = parseFloat(getComputedStyle(this._titleNode).fontSize) || 10;
    const font = `${Math.round(fontPx)}px ${cssVar(node, '--jp-ui-font-family') || 'sans-serif'}`;
    const palette = PALETTE_VARS.map(v => cssVar(node, v)).filter(Boolean);
    const color = (i: number) => palette[i % Math.max(1, palette.length)] || text;
    const fmt = this.options.format;
    const axis = {
      stroke: text,
      font,
      grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1 }
    };
    const opts: uPlot.Options = {
      width: this._width(),
      height: this.options.height ?? 120,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        y: this.options.range ? { range: this.options.range } : { auto: true }
      },
      series: [
        {},
        ...this._specs.map((s, i) => ({
          label: s.label,
          stroke: color(i),
          width: 1.5,
          points: { show: false },
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : fmt(v))
        }))
      ],
      axes: [
        { ...axis, size: 28 },
        {
          ...axis,
          size: 66,
          values: (_u: uPlot, ticks: number[]) => ticks.map(v => fmt(v))
        }
      ]
    };
    this._plot = new uPlot(opts, this._data as uPlot.AlignedData, this._plotNode);
  }
}
