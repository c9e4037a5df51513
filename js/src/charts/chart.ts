import { Widget } from '@lumino/widgets';
import uPlot from 'uplot';

import { fitLabels, formatTick, niceIncrs, niceMax, TIME_INCRS, timeTickLabels } from './axes';
import { placeMarkers, IEventJSON } from './markers';
import { Aligned } from '../series';

/** One line of a chart: the key it is drawn from, its legend label and the full name. */
export interface ISeriesSpec {
  key: string;
  label: string;
  /** the full name (tooltip of a shortened legend label) */
  title?: string;
}

export interface IChartOptions {
  title: string;
  /** The unit every value of the chart is in ("MB/s", "%", "ms"): said once, in the title. */
  unit: string;
  /** Fixed y range (e.g. 0..100 for percentages); else 0 to the data's rounded-up maximum. */
  range?: [number, number];
  /** The least top of an auto range (1 MB/s: an idle disk is a flat line at the bottom). */
  floor?: number;
  /** Tick steps of the y axis; 1, 2, 5 × 10ⁿ when absent. */
  incrs?: number[];
  height?: number;
}

/** A label the chart drew on its canvas, in page coordinates (the browser test reads these). */
export interface ITickBox {
  axis: 'x' | 'y';
  text: string;
  left: number;
  right: number;
  top: number;
  bottom: number;
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

/**
 * The shortest span of the time axis (s). The axis spans the data the chart has, so a chart
 * whose window has not filled yet (a path watched a moment ago, a panel just opened) draws
 * its points across the plot, never as a tick at its right edge.
 */
const MIN_SPAN_S = 2;
const TICK_SIZE = 4;
const AXIS_GAP = 4;
const X_AXIS_SIZE = 22;
const DEFAULT_HEIGHT = 80; // three charts, the verdict and the warnings fit in 900 px

function cssVar(node: HTMLElement, name: string): string {
  return getComputedStyle(node).getPropertyValue(name).trim();
}

let measureCtx: CanvasRenderingContext2D | null = null;

/** Width in CSS px of ``text`` in ``font`` (the font uPlot draws the axes with). */
function textWidth(text: string, font: string): number {
  measureCtx ??= document.createElement('canvas').getContext('2d');
  if (!measureCtx) {
    return text.length * 7;
  }
  measureCtx.font = font;
  return measureCtx.measureText(text).width;
}

/**
 * The one chart component of the panel: a titled uPlot time series whose lines and colours
 * follow the theme. Every chart (GPU, disks, space) is an instance with other series.
 * The unit is in the title, the ticks are round numbers (1, 2, 5 × 10ⁿ) and 24-hour times,
 * the legend sits under the plot, and a tick label that would be cut at the edge of the
 * figure or overlap its neighbour is left out.
 * ``data-points`` on its node says how many points it shows (the browser test reads it).
 */
export class TimeChart extends Widget {
  private _plot: uPlot | null = null;
  private _specs: ISeriesSpec[] = [];
  private _data: Aligned = [[]];
  private _unit: string;
  private _plotNode: HTMLDivElement;
  private _titleNode: HTMLDivElement;
  private _emptyNode: HTMLDivElement;
  private _font = '11px sans-serif';
  private _fontPx = 11;
  private _resize: ResizeObserver | null = null;
  private _pending = false; // a build waits for the chart to have a width
  /** A replay's window (the time axis spans it whatever the data) and its events. */
  private _xRange: [number, number] | null = null;
  private _events: IEventJSON[] = [];

  constructor(readonly options: IChartOptions) {
    super();
    this.addClass('jp-TrainWatch-chart');
    this._unit = options.unit;
    const title = (this._titleNode = document.createElement('div'));
    title.className = 'jp-TrainWatch-chartTitle';
    this._plotNode = document.createElement('div');
    this._plotNode.className = 'jp-TrainWatch-plot';
    this._emptyNode = document.createElement('div');
    this._emptyNode.className = 'jp-TrainWatch-empty';
    this._emptyNode.hidden = true;
    this.node.append(title, this._emptyNode, this._plotNode);
    this.node.dataset.points = '0';
    this._renderTitle();
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

  /**
   * New data for ``specs`` (rebuilds the plot only when the set of lines or the unit
   * changed). ``unit`` replaces the unit of the options (GPU memory in MiB or GiB).
   */
  setSeries(specs: ISeriesSpec[], data: Aligned, unit = this.options.unit): void {
    const changed =
      unit !== this._unit ||
      specs.length !== this._specs.length ||
      specs.some((s, i) => s.key !== this._specs[i].key || s.label !== this._specs[i].label);
    this._specs = specs;
    this._data = data;
    this._unit = unit;
    this.node.dataset.points = String(data[0].length);
    this.node.dataset.series = String(specs.length);
    if (changed) {
      this._renderTitle();
    }
    if (changed || !this._plot) {
      this._build();
    } else {
      this._plot.setData(data as uPlot.AlignedData);
      this._fit();
    }
  }

  /**
   * Replay a window: the time axis spans ``window`` and ``events`` are marked on the plot;
   * null goes back to live (the axis spans the data, no marks). Takes effect with the next
   * ``setSeries``.
   */
  setReplay(window: { since: number; until: number } | null, events: IEventJSON[] = []): void {
    this._xRange = window ? [window.since, window.until] : null;
    this._events = window ? events : [];
  }

  /** Re-read the theme's colours (after a theme change). */
  restyle(): void {
    if (this._plot) {
      this._build();
    }
  }

  /**
   * Where the tick labels are, in page coordinates, as uPlot drew them (its axes' splits and
   * values, placed as its drawAxesGrid places them): the browser test checks that they lie
   * inside the figure and do not overlap.
   */
  tickLabels(): ITickBox[] {
    const u = this._plot;
    const canvas = u?.root.querySelector('canvas');
    if (!u || !canvas) {
      return [];
    }
    const origin = canvas.getBoundingClientRect();
    const over = u.over.getBoundingClientRect();
    const out: ITickBox[] = [];
    u.axes.forEach((axis: any, i: number) => {
      const values: (string | number | null)[] = axis._values ?? [];
      const splits: number[] = axis._splits ?? [];
      values.forEach((value, j) => {
        if (value === null || value === undefined) {
          return;
        }
        const text = String(value);
        const w = textWidth(text, this._font);
        if (i === 0) {
          const cx = over.left + u.valToPos(splits[j], 'x');
          const top = origin.top + axis._pos + TICK_SIZE + AXIS_GAP;
          out.push({
            axis: 'x',
            text,
            left: cx - w / 2,
            right: cx + w / 2,
            top,
            bottom: top + this._fontPx
          });
        } else {
          const right = origin.left + axis._pos - TICK_SIZE - AXIS_GAP;
          const cy = over.top + u.valToPos(splits[j], 'y');
          out.push({
            axis: 'y',
            text,
            left: right - w,
            right,
            top: cy - this._fontPx / 2,
            bottom: cy + this._fontPx / 2
          });
        }
      });
    });
    return out;
  }

  dispose(): void {
    this._resize?.disconnect();
    this._plot?.destroy();
    this._plot = null;
    super.dispose();
  }

  private _renderTitle(): void {
    this._titleNode.textContent = '';
    const unit = document.createElement('span');
    unit.className = 'jp-TrainWatch-chartUnit';
    unit.textContent = this._unit;
    this._titleNode.append(this.options.title, ' ', unit);
  }

  private _fit(): void {
    const width = this.node.clientWidth;
    if (!width) {
      return; // hidden (or the theme is being swapped): size it once it has a width
    }
    if (!this._plot) {
      if (this._pending) {
        this._build();
      }
    } else if (Math.abs(width - this._plot.width) > 1) {
      this._plot.setSize({ width, height: this.options.height ?? DEFAULT_HEIGHT });
    }
  }

  private _build(): void {
    const node = this.node;
    const width = node.clientWidth;
    this._plot?.destroy();
    this._plot = null;
    this._plotNode.textContent = '';
    if (!width) {
      // no width to draw in (hidden, or the theme is being swapped): the ResizeObserver
      // builds it when it gets one, at the right size and in the theme of that moment
      this._pending = true;
      return;
    }
    this._pending = false;
    const text = cssVar(node, '--jp-ui-font-color1') || 'currentColor';
    const grid = cssVar(node, '--jp-border-color2') || 'currentColor';
    // uPlot scales fonts given in px only: take the computed size of our (themed) title
    this._fontPx = Math.round(parseFloat(getComputedStyle(this._titleNode).fontSize) || 11);
    this._font = `${this._fontPx}px ${cssVar(node, '--jp-ui-font-family') || 'sans-serif'}`;
    const font = this._font;
    const palette = PALETTE_VARS.map(v => cssVar(node, v)).filter(Boolean);
    const color = (i: number) => palette[i % Math.max(1, palette.length)] || text;
    const { range, floor = 1 } = this.options;
    const opts: uPlot.Options = {
      width,
      height: this.options.height ?? DEFAULT_HEIGHT,
      padding: [10, 10, 0, 0],
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: {
          time: true,
          range: (_u: uPlot, min: number, max: number) =>
            this._xRange ?? (max - min >= MIN_SPAN_S ? [min, max] : [max - MIN_SPAN_S, max])
        },
        y: {
          range: range
            ? [range[0], range[1]]
            : (_u: uPlot, _min: number, max: number) => [0, niceMax(max, floor)]
        }
      },
      series: [
        {},
        ...this._specs.map((s, i) => ({
          label: s.label,
          stroke: color(i),
          width: 1.5,
          points: { size: 4 }, // shown while few (uPlot's rule): one point is no line
          spanGaps: false
        }))
      ],
      axes: this._axes(text, grid, font),
      hooks: { draw: [(u: uPlot) => this._drawMarkers(u)] }
    };
    this._plot = new uPlot(opts, this._data as uPlot.AlignedData, this._plotNode);
    this._titleLegend();
  }

  /**
   * The events as thin vertical marks over the plot, coloured by severity (theme variables,
   * in the CSS), each saying its events' text on hover (its title).
   */
  private _drawMarkers(u: uPlot): void {
    u.over.querySelector('.jp-TrainWatch-markers')?.remove();
    const marks = placeMarkers(this._events, t => u.valToPos(t, 'x'), u.over.clientWidth);
    this.node.dataset.markers = String(marks.length);
    if (!marks.length) {
      return;
    }
    const layer = document.createElement('div');
    layer.className = 'jp-TrainWatch-markers';
    for (const mark of marks) {
      const node = document.createElement('div');
      node.className = `jp-TrainWatch-marker jp-mod-${mark.level}`;
      node.style.left = `${mark.x}px`;
      node.title = mark.title;
      node.dataset.level = mark.level;
      layer.appendChild(node);
    }
    u.over.appendChild(layer);
  }

  /** A shortened legend label says its full name on hover. */
  private _titleLegend(): void {
    const labels = this._plotNode.querySelectorAll('.u-legend .u-series .u-label');
    labels.forEach((label, i) => {
      const spec = this._specs[i];
      if (spec) {
        (label as HTMLElement).title = spec.title ?? spec.label;
      }
    });
  }

  /** The time axis and the value axis, in the theme's text and grid colours and font. */
  private _axes(text: string, grid: string, font: string): uPlot.Axis[] {
    const axis = {
      stroke: text,
      font,
      gap: AXIS_GAP,
      grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1, size: TICK_SIZE }
    };
    // the time axis: HH:MM:SS or HH:MM by step, labels that would be cut or overlap dropped
    const timeValues = (u: uPlot, splits: number[], _i: number, _s: number, incr: number) => {
      const labels = timeTickLabels(splits, incr);
      const left = u.bbox.left / uPlot.pxRatio;
      const centres = splits.map(t => left + u.valToPos(t, 'x'));
      const widths = labels.map(l => textWidth(l, font));
      return fitLabels(labels, centres, widths, 0, u.width) as string[];
    };
    const yValues = (_u: uPlot, splits: number[], _i: number, _s: number, incr: number) =>
      splits.map(v => formatTick(v, incr));
    // the value axis is as wide as its widest label, never cut, and at least four digits
    // wide, so that the plots of the panel line up under each other
    const ySize = (_u: uPlot, values: string[] | null) => {
      const widest = Math.max(
        textWidth('0000', font),
        ...(values ?? []).map(v => (v ? textWidth(v, font) : 0))
      );
      return Math.ceil(widest) + TICK_SIZE + AXIS_GAP + 4;
    };
    return [
      { ...axis, size: X_AXIS_SIZE, space: 70, incrs: TIME_INCRS, values: timeValues },
      {
        ...axis,
        space: 22,
        incrs: this.options.incrs ?? niceIncrs(),
        values: yValues,
        size: ySize
      }
    ];
  }
}
