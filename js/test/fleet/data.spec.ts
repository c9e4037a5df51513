/** fleet/data.ts: the words of a fleet row and a host's chart data (DOM-free). */
import {
  chartData,
  countsText,
  fleetCounts,
  IFleetHostJSON,
  hostFacts,
  hostState,
  matchesFilter,
  statusText,
  warningsText,
  warningsTitle,
  windowLabel
} from '../../src/fleet/data';

const GIB = 1024 ** 3;
const NOW = 1_700_000_000;

function host(over: Partial<IFleetHostJSON> = {}): IFleetHostJSON {
  return {
    host: '10.0.0.7',
    name: 'gpu07',
    instances: [
      { instance: '10.0.0.7:10917', job: 'trainwatch', up: true },
      { instance: '10.0.0.7:9100', job: 'node', up: true }
    ],
    status: 'up',
    agent: true,
    last_seen: NOW - 2,
    worst: null,
    warnings: [],
    gpu: { count: 8, util_pct: 87.4 },
    disk: { device: 'nvme0n1', util_pct: 62.2, bytes_per_s: 45.1e6 },
    space: { mountpoint: '/scratch', avail_bytes: 120 * GIB, free_pct: 10 },
    ...over
  };
}

describe('fleet rows', () => {
  it('say GPU, the busiest disk and the least free space, numbers from Python', () => {
    expect(hostFacts(host())).toEqual([
      'GPU 87 % (8 GPUs)',
      'nvme0n1 62 % busy, 45.1 MB/s',
      '120 GiB (10 %) free on /scratch'
    ]);
    const bare = host({ gpu: { count: 1, util_pct: 0 }, disk: null, space: null });
    expect(hostFacts(bare)).toEqual(['GPU 0 %']);
    expect(hostFacts(host({ gpu: null, disk: null, space: null }))).toEqual(['no numbers yet']);
  });

  it('say whether the host answers, and when it was last seen', () => {
    expect(statusText(host(), NOW)).toBe('up');
    const partial = host({ status: 'partial' });
    partial.instances[1].up = false;
    expect(statusText(partial, NOW)).toBe('1 of 2 exporters answer');
    expect(statusText(host({ status: 'down', last_seen: NOW - 300 }), NOW)).toBe(
      'down, last seen 5 min ago'
    );
    expect(statusText(host({ status: 'gone', last_seen: null }), NOW)).toBe('gone, never seen');
  });

  it('put the worst warning first, an agent one by code and subject', () => {
    expect(warningsText(host())).toBe('');
    const warned = host({
      worst: 'critical',
      warnings: [
        { code: 'disk-filling', severity: 'critical', subject: '/scratch', message: '' },
        { code: 'shared-mount', severity: 'warning', subject: '/mnt/a', message: '' }
      ]
    });
    expect(warningsText(warned)).toBe('disk-filling · /scratch (+ 1 more)');
    const worded = host({
      warnings: [
        { code: 'gpu-stalled', severity: 'warning', subject: 'GPU 3', message: 'GPU 3 idles.' }
      ]
    });
    expect(warningsText(worded)).toBe('GPU 3 idles.');
    // the title: every warning, with the listing's fix of its code where it has one
    const fixes = { 'gpu-stalled': 'Look at where the loop waits.' };
    expect(warningsTitle(worded, fixes)).toBe(
      'warning: GPU 3 idles.\n  Fix: Look at where the loop waits.'
    );
    expect(warningsTitle(warned, fixes)).toBe(
      'critical: disk-filling · /scratch\nwarning: shared-mount · /mnt/a'
    );
    // a title and a row are plain text: code spans lose their backticks there (issue 36)
    const coded = host({
      warnings: [
        {
          code: 'shared-mount',
          severity: 'warning',
          subject: '/mnt/a',
          message: '/mnt/a is `nfs4`.'
        }
      ]
    });
    const fix = { 'shared-mount': 'Use `local_mirror(share)`.' };
    expect(warningsTitle(coded, fix)).toBe(
      'warning: /mnt/a is nfs4.\n  Fix: Use local_mirror(share).'
    );
    expect(warningsText(coded)).toBe('/mnt/a is nfs4.');
  });

  it('name the windows', () => {
    expect(windowLabel(3600)).toBe('1 h');
    expect(windowLabel(600)).toBe('10 min');
  });

  it('hand uPlot the shared axis and one column per line', () => {
    const range = {
      host: 'h',
      window_s: 60,
      step_s: 30,
      t: [0, 30, 60],
      charts: [
        {
          id: 'gpu',
          title: 'GPU utilization',
          unit: '%',
          range: [0, 100] as [number, number],
          series: [
            { label: 'GPU 0', values: [1, null, 3] },
            { label: 'GPU 1', values: [4, 5, 6] }
          ]
        }
      ]
    };
    expect(chartData(range, range.charts[0])).toEqual([
      [0, 30, 60],
      [1, null, 3],
      [4, 5, 6]
    ]);
  });

  it('count hosts per state, the server counts first', () => {
    const hosts = [
      host({ worst: 'critical' }),
      host({ worst: 'warning' }),
      host({ worst: 'info' }),
      host({ status: 'gone' }),
      host({ status: 'partial' })
    ];
    expect(hosts.map(hostState)).toEqual(['critical', 'warning', 'ok', 'down', 'ok']);
    expect(countsText(fleetCounts({ prometheus: 'p', hosts }))).toBe(
      '1 critical, 1 warning, 2 ok, 1 down'
    );
    const counts = { critical: 2, warning: 14, down: 3, ok: 984 };
    expect(countsText(fleetCounts({ prometheus: 'p', hosts, counts }))).toBe(
      '2 critical, 14 warning, 984 ok, 3 down'
    );
    expect(countsText({ critical: 0, warning: 0, down: 0, ok: 0 })).toBe('no hosts');
  });

  it('filter by host name and warning code, every word', () => {
    const warned = host({
      worst: 'warning',
      warnings: [{ code: 'disk-almost-full', severity: 'warning', subject: '/data', message: '' }]
    });
    expect(matchesFilter(warned, '')).toBe(true);
    expect(matchesFilter(warned, 'GPU07')).toBe(true);
    expect(matchesFilter(warned, 'almost-full')).toBe(true);
    expect(matchesFilter(warned, 'gpu07 /data')).toBe(true);
    expect(matchesFilter(warned, 'gpu07 gpu-stalled')).toBe(false);
    expect(matchesFilter(host(), 'disk-almost-full')).toBe(false);
    expect(matchesFilter(warned, 'state:warning')).toBe(true);
    expect(matchesFilter(warned, 'state:ok')).toBe(false);
    expect(matchesFilter(host({ name: 'book07' }), 'state:ok')).toBe(true);
    expect(matchesFilter(host({ name: 'book07' }), 'state:o')).toBe(false);
  });
});
