/** panel/chartList.ts: the panel's chart table (DOM-free): order, sections, what each chart gets. */
import { ISampleJSON } from '../../src/model';
import { IChartInput, PANEL_CHARTS } from '../../src/panel/chartList';
import { Aligned } from '../../src/series';

/** Columns as the ring gives them: one time, then one column per key (the key's length). */
function input(sample: ISampleJSON | null, asked: string[][] = []): IChartInput {
  return {
    sample,
    columns: (keys: string[]): Aligned => {
      asked.push(keys);
      return [[1], ...keys.map(k => [k.length])];
    }
  };
}

const bare: ISampleJSON = { t: 1, disks: {}, paths: {}, gpus: [], warnings: [] };

test('the charts, their sections and units, in panel order: the main ones open', () => {
  const section = (c: (typeof PANEL_CHARTS)[number]) =>
    c.section ? `${c.section.title}${c.section.open ? '' : ' (folded)'}` : null;
  expect(PANEL_CHARTS.map(c => [section(c), c.options.title, c.options.unit])).toEqual([
    ['GPU', 'GPU utilization', '%'],
    ['Disks under the paths', 'Disk throughput', 'MB/s'],
    ['Space', 'Space used', '% per filesystem'],
    ['More charts (folded)', 'GPU memory used', 'GiB'],
    [null, 'Disk await', 'ms'],
    [null, 'Disk busy', '%util']
  ]);
  expect(PANEL_CHARTS.filter(c => c.note).map(c => c.options.title)).toEqual(['Space used']);
});

test('before the first sample: waiting, the GPU memory chart hidden', () => {
  const got = PANEL_CHARTS.map(c => c.content(input(null)));
  expect(got.map(c => c.hidden)).toEqual([false, undefined, undefined, true, undefined, undefined]);
  expect(got[1].empty).toBe('Waiting for data…');
  expect(got.every(c => c.specs.length === 0)).toBe(true);
});

test('no GPU noted in the info notes: both GPU charts hidden', () => {
  const sample: ISampleJSON = {
    ...bare,
    warnings: [
      { code: 'gpu-unavailable', severity: 'info', subject: 'gpu', message: 'm', fix: 'f' }
    ] as ISampleJSON['warnings']
  };
  const [util, mem] = [0, 3].map(i => PANEL_CHARTS[i].content(input(sample)));
  expect([util.hidden, mem.hidden]).toEqual([true, true]);
});

test('GPU series are keyed per index, memory in a byte unit', () => {
  const sample: ISampleJSON = {
    ...bare,
    gpus: [{ index: 0, name: 'H100', mem_total_bytes: 80 * 1024 ** 3 }] as ISampleJSON['gpus']
  };
  const asked: string[][] = [];
  const [util, mem] = [0, 3].map(i => PANEL_CHARTS[i].content(input(sample, asked)));
  expect(asked).toEqual([['gpu:0:util_pct'], ['gpu:0:mem_used_bytes']]);
  expect(util.specs).toEqual([{ key: 'gpu:0:util_pct', label: 'H100' }]);
  expect([util.hidden, mem.hidden, mem.unit]).toEqual([false, false, 'GiB']);
});
