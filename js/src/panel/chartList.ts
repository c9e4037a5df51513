/**
 * The side panel's charts, in panel order: one table the panel builds its charts from and
 * renders each sample with. A new chart is one entry here (DOM-free, so jest covers it).
 */
import { niceIncrs } from '../charts/axes';
import type { IChartOptions, ISeriesSpec } from '../charts/chart';
import { byteUnit, MIB_TO_MB, shortPath } from '../format';
import { ISampleJSON } from '../model';
import { gpuEmptyReason, infoNotes, watchedDevices } from '../readings';
import { Aligned, seriesKey } from '../series';
import { fillNotes, filesystems, usedPercent } from '../space';

/** Steps of a 0–100 % axis: 0, 25, 50, 75, 100 in a short chart. */
const PERCENT_INCRS = niceIncrs([1, 2, 2.5, 5], 0, 2);

/** What a chart is drawn from: the latest sample and the ring's columns over the window. */
export interface IChartInput {
  sample: ISampleJSON | null;
  /** Aligned columns of these series keys over the panel's window. */
  columns(keys: string[]): Aligned;
}

/** One chart's content for one render. */
export interface IChartContent {
  specs: ISeriesSpec[];
  data: Aligned;
  /** The line shown instead of a plot (null: none; with no series, "No data yet."). */
  empty: string | null;
  /** Overrides the chart's unit (GPU memory: GiB, MiB...). */
  unit?: string;
  /** Hide the chart (absent: leave it shown). */
  hidden?: boolean;
}

/** A section of charts: its title and whether it starts open (the reader's choice is kept). */
export interface IChartSection {
  id: string;
  title: string;
  open: boolean;
}

/** One chart of the panel. */
export interface IPanelChart {
  /** The section this chart opens (the charts after it belong to the section). */
  section?: IChartSection;
  options: IChartOptions;
  content(input: IChartInput): IChartContent;
  /** A line of text under the chart (class jp-TrainWatch-note). */
  note?(sample: ISampleJSON | null): string;
}

function scaled(data: Aligned, factor: number): Aligned {
  return [
    data[0],
    ...data
      .slice(1)
      .map(col => (col as (number | null)[]).map(v => (v === null ? null : v * factor)))
  ];
}

// -- GPU: without one, the info note above says so once; nothing here repeats it ------------

function gpuSpecs(sample: ISampleJSON | null, field: string): ISeriesSpec[] {
  const gpus = sample?.gpus ?? [];
  const label = (i: number, name: string) => (gpus.length > 1 ? `${i}: ${name}` : name);
  return gpus.map(g => ({
    key: seriesKey('gpu', String(g.index), field),
    label: label(g.index, g.name)
  }));
}

function gpuUtil({ sample, columns }: IChartInput): IChartContent {
  const noted = infoNotes(sample).some(n => n.code === 'gpu-unavailable');
  const noGpu = !!sample && !(sample.gpus ?? []).length;
  const specs = gpuSpecs(sample, 'util_pct');
  const data = columns(specs.map(s => s.key));
  return { specs, data, empty: gpuEmptyReason(sample), hidden: noGpu && noted };
}

function gpuMem({ sample, columns }: IChartInput): IChartContent {
  const gpus = sample?.gpus ?? [];
  const specs = gpuSpecs(sample, 'mem_used_bytes');
  const mem = columns(specs.map(s => s.key));
  const top = Math.max(
    0,
    ...gpus.map(g => g.mem_total_bytes ?? 0),
    ...mem.slice(1).flatMap(c => (c as (number | null)[]).map(v => v ?? 0))
  );
  const { unit, divisor } = byteUnit(top);
  const data = scaled(mem, 1 / divisor);
  // one "no GPU" line is enough
  return { specs, data, empty: gpuEmptyReason(sample), unit, hidden: !gpus.length };
}

// -- disks under the watched paths, in decimal MB/s (the server's rmb_s/wmb_s are MiB/s) -----

function diskChart(fields: [string, string][], factor = 1) {
  return ({ sample, columns }: IChartInput): IChartContent => {
    const devices = sample ? watchedDevices(sample) : [];
    const empty = sample
      ? devices.length
        ? null
        : sample.notes?.disks || 'No block device found.'
      : 'Waiting for data…';
    const specs = devices.flatMap(d =>
      fields.map(([f, label]) => ({
        key: seriesKey('disk', d, f),
        label: label ? `${d} ${label}` : d
      }))
    );
    const data = columns(specs.map(s => s.key));
    return { specs, data: factor === 1 ? data : scaled(data, factor), empty };
  };
}

// -- space used, one line per filesystem (paths on one filesystem see the same space) --------

function spaceUsed({ sample, columns }: IChartInput): IChartContent {
  const groups = sample ? filesystems(sample.paths) : [];
  const fields = ['avail_bytes', 'total_bytes', 'free_bytes'];
  const keys = groups.flatMap(g => g.paths.flatMap(p => fields.map(f => seriesKey('path', p, f))));
  const raw = columns(keys);
  let col = 1;
  const used = groups.map(g => {
    const avail: (number | null)[][] = [];
    const total: (number | null)[][] = [];
    const free: (number | null)[][] = [];
    for (let i = 0; i < g.paths.length; i++) {
      avail.push(raw[col++] as (number | null)[]);
      total.push(raw[col++] as (number | null)[]);
      free.push(raw[col++] as (number | null)[]);
    }
    return usedPercent(avail, total, free);
  });
  return {
    specs: groups.map(g => ({
      key: `fs:${g.id}`,
      label: shortPath(g.label),
      title: `${g.label}: ${g.paths.join(', ')}`
    })),
    data: [raw[0], ...used],
    empty:
      sample && !groups.length
        ? Object.keys(sample.paths).length
          ? 'No free space measured yet.'
          : 'No watched path. Add one below.'
        : null
  };
}

const percent = { range: [0, 100] as [number, number], incrs: PERCENT_INCRS };

/**
 * The panel's charts, in panel order (the browser test reads them by position). The main
 * ones are open, so that at 900 px the verdict, the warnings and these fit in one screen:
 * GPU utilization, disk throughput, space used; the rest waits folded under "More charts".
 */
export const PANEL_CHARTS: IPanelChart[] = [
  {
    section: { id: 'gpu', title: 'GPU', open: true },
    options: { title: 'GPU utilization', unit: '%', ...percent },
    content: gpuUtil
  },
  {
    section: { id: 'disks', title: 'Disks under the paths', open: true },
    options: { title: 'Disk throughput', unit: 'MB/s', floor: 1 },
    content: diskChart(
      [
        ['rmb_s', 'read'],
        ['wmb_s', 'write']
      ],
      MIB_TO_MB
    )
  },
  {
    section: { id: 'space', title: 'Space', open: true },
    options: { title: 'Space used', unit: '% per filesystem', ...percent },
    content: spaceUsed,
    note: sample => (sample ? fillNotes(sample.paths, sample.warnings).join('\n') : '')
  },
  {
    section: { id: 'more-charts', title: 'More charts', open: false },
    options: { title: 'GPU memory used', unit: 'GiB' },
    content: gpuMem
  },
  {
    options: { title: 'Disk await', unit: 'ms', floor: 1 },
    content: diskChart([
      ['r_await', 'read'],
      ['w_await', 'write']
    ])
  },
  {
    options: { title: 'Disk busy', unit: '%util', ...percent },
    content: diskChart([['util', '']])
  }
];
