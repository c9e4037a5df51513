import {
  TIME_INCRS,
  fitLabels,
  formatTick,
  niceIncrs,
  niceMax,
  tickDecimals,
  timeTickLabels
} from '../src/charts/axes';
import {
  MIB_TO_MB,
  byteUnit,
  formatBytes,
  formatClock,
  formatDuration,
  formatMBs,
  formatMs,
  formatPct,
  shortPath
} from '../src/format';
import { STALE_AFTER_INTERVALS, backoffDelay, liveState, medianGap } from '../src/live';
import { IAlertJSON, IHeadlineJSON, IPathStateJSON, ISampleJSON } from '../src/model';
import {
  activeWarnings,
  diskThroughput,
  gpuEmptyReason,
  infoNotes,
  scopeText,
  statusText,
  watchedBy,
  watchedDevices,
  watchedPaths
} from '../src/readings';
import { SeriesRing, flatten, ringCapacity, seriesKey } from '../src/series';
import { filesystems, fillNotes, usedPercent } from '../src/space';

function disk(device: string, rmb: number, wmb: number, util = 10) {
  return {
    device,
    r_s: 1,
    w_s: 1,
    rmb_s: rmb,
    wmb_s: wmb,
    r_await: 1,
    w_await: 2,
    aqu_sz: 0,
    util
  };
}

function pathState(path: string, device: string | null, avail = 1e9) {
  return {
    path,
    exists: true,
    mountpoint: '/',
    fstype: 'ext4',
    source: '/dev/x',
    device,
    kind: 'local',
    shared: false,
    read_only: false,
    total_bytes: 2e9,
    free_bytes: avail,
    avail_bytes: avail,
    responsive: true,
    probe: null,
    error: null
  };
}

function sample(t: number, extra: Partial<ISampleJSON> = {}): ISampleJSON {
  return {
    t,
    disks: { sda: disk('sda', 20, 25), nvme0n1: disk('nvme0n1', 1, 2) },
    paths: { '/data': pathState('/data', 'sda') },
    gpus: [
      { index: 0, name: 'A', util_pct: 80, mem_used_bytes: 1e9, mem_total_bytes: 8e9 },
      { index: 1, name: 'B', util_pct: 94, mem_used_bytes: 2e9, mem_total_bytes: 8e9 }
    ],
    warnings: [],
    ...extra
  };
}

const warn = (severity: 'info' | 'warning' | 'critical', code = 'shared-mount') => ({
  code,
  severity,
  subject: '/data',
  message: 'm',
  fix: 'f'
});

const headline = (brief: string, extra: Partial<IHeadlineJSON> = {}): IHeadlineJSON => ({
  level: 'warning',
  verdict: '1 warning',
  facts: ['GPU 87 %', 'sda 47.2 MB/s, 10 % busy'],
  text: '1 warning · GPU 87 % · sda 47.2 MB/s, 10 % busy',
  brief,
  notes: 1,
  ...extra
});

describe('statusText', () => {
  it("says Python's headline.brief, word for word", () => {
    const s = sample(1, { headline: headline('GPU 87 % · disk 47.2 MB/s · ⚠ 1') });
    expect(statusText(s)).toBe('GPU 87 % · disk 47.2 MB/s · ⚠ 1');
  });

  it('has words of its own only before the first sample and when offline', () => {
    expect(statusText(null)).toBe('TrainWatch');
    expect(statusText(null, false)).toBe('TrainWatch (offline)');
    const s = sample(1, { headline: headline('disk 47.2 MB/s') });
    expect(statusText(s, false)).toBe('disk 47.2 MB/s · offline');
    // a server without headlines (older version): no home-made numbers either
    expect(statusText(sample(1))).toBe('TrainWatch');
  });

  it('sums only the devices under watched paths, in decimal MB/s', () => {
    expect(watchedDevices(sample(1))).toEqual(['sda']);
    expect(diskThroughput(sample(1))).toBeCloseTo(45 * MIB_TO_MB);
    // no watched path resolved to a device: every disk counts
    expect(watchedDevices(sample(1, { paths: {} }))).toEqual(['nvme0n1', 'sda']);
    expect(diskThroughput(sample(1, { paths: {} }))).toBeCloseTo(48 * MIB_TO_MB);
  });

  it('counts warnings and criticals, not infos; infos are notes', () => {
    const s = sample(1, { warnings: [warn('critical'), warn('warning'), warn('info')] });
    expect(activeWarnings(s)).toHaveLength(2);
    expect(activeWarnings(null)).toEqual([]);
    expect(infoNotes(s).map(w => w.severity)).toEqual(['info']);
    expect(infoNotes(null)).toEqual([]);
  });
});

describe('SeriesRing', () => {
  it('keeps at most capacity points, in order, and counts every point received', () => {
    const ring = new SeriesRing(4);
    for (let t = 1; t <= 10; t++) {
      ring.pushSample(sample(t));
    }
    expect(ring.length).toBe(4);
    expect(ring.received).toBe(10);
    expect(ring.firstTime).toBe(7);
    expect(ring.lastTime).toBe(10);
    const [ts, util] = ring.aligned([seriesKey('gpu', '0', 'util_pct')], 1e9);
    expect(ts).toEqual([7, 8, 9, 10]);
    expect(util).toEqual([80, 80, 80, 80]);
  });

  it('ignores replays and out-of-order points', () => {
    const ring = new SeriesRing(8);
    expect(ring.pushSample(sample(5))).toBe(true);
    expect(ring.pushSample(sample(5))).toBe(false);
    expect(ring.pushSample(sample(4))).toBe(false);
    expect(ring.length).toBe(1);
  });

  it('fills series that appear or vanish with null', () => {
    const ring = new SeriesRing(8);
    ring.pushSample(sample(1, { gpus: [] }));
    ring.pushSample(sample(2));
    ring.pushSample(sample(3, { gpus: [] }));
    const [ts, util] = ring.aligned([seriesKey('gpu', '1', 'util_pct'), 'gpu:9:none'], 100);
    expect(ts).toEqual([2, 3]); // from its first value on
    expect(util).toEqual([94, null]);
  });

  it('starts a series watched a moment ago at its first point, not ten minutes back', () => {
    const ring = new SeriesRing(1000);
    for (let t = 0; t < 600; t++) {
      const s = sample(t);
      ring.pushSample(t < 595 ? { ...s, paths: {} } : s); // /data watched at t = 595
    }
    const key = seriesKey('path', '/data', 'avail_bytes');
    const [ts, avail] = ring.aligned([key, seriesKey('path', '/data', 'total_bytes')], 600);
    expect(ts).toEqual([595, 596, 597, 598, 599]);
    expect(avail).toEqual([1e9, 1e9, 1e9, 1e9, 1e9]);
    // a key with no value at all: no points (the chart says "no data" instead)
    expect(ring.aligned(['path:/gone:avail_bytes'], 600)).toEqual([[], []]);
    // no key asked: every time of the window (the times alone)
    expect(ring.aligned([], 600)[0]).toHaveLength(600);
  });

  it('windows relative to the newest point', () => {
    const ring = new SeriesRing(100);
    for (let t = 0; t < 50; t++) {
      ring.pushSample(sample(t));
    }
    const [ts] = ring.aligned([], 10);
    expect(ts[0]).toBe(39);
    expect(ts[ts.length - 1]).toBe(49);
  });

  it('merges history under live points without duplicates', () => {
    const ring = new SeriesRing(6);
    ring.pushSample(sample(10));
    ring.pushSample(sample(11));
    const key = seriesKey('gpu', '0', 'util_pct');
    const added = ring.mergeHistory({
      t: [6, 7, 8, 9, 10],
      series: { [key]: [1, null, 3, 4, 5], 'disk:sda:util': [NaN, 1, 1, 1, 1] as any }
    });
    expect(added).toBe(4);
    expect(ring.received).toBe(6);
    const [ts, util, diskUtil] = ring.aligned([key, 'disk:sda:util'], 100);
    expect(ts).toEqual([6, 7, 8, 9, 10, 11]);
    expect(util).toEqual([1, null, 3, 4, 80, 80]); // t=10 keeps the live value
    expect(diskUtil).toEqual([null, 1, 1, 1, 10, 10]);
    // live points keep flowing after the merge
    expect(ring.pushSample(sample(12))).toBe(true);
    expect(ring.aligned([], 100)[0]).toEqual([7, 8, 9, 10, 11, 12]);
  });

  it('keeps only the newest capacity points of a long history', () => {
    const ring = new SeriesRing(3);
    ring.mergeHistory({ t: [1, 2, 3, 4, 5], series: {} });
    expect(ring.aligned([], 100)[0]).toEqual([3, 4, 5]);
  });

  it('rejects a useless capacity', () => {
    expect(() => new SeriesRing(1)).toThrow(/capacity/);
  });

  it('flattens to the server history keys', () => {
    const keys = [...flatten(sample(1)).keys()];
    expect(keys).toContain('disk:sda:wmb_s');
    expect(keys).toContain('path:/data:avail_bytes');
    expect(keys).toContain('path:/data:total_bytes'); // space used, as in the server's history
    expect(keys).toContain('gpu:1:mem_used_bytes');
  });
});

describe('formatting', () => {
  it('formats bytes, rates and durations as Python words them', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(5 * 1024 ** 3)).toBe('5 GiB');
    expect(formatBytes(11.2 * 1024 ** 3)).toBe('11.2 GiB');
    expect(formatBytes(null)).toBe('–');
    expect(formatMBs(45.2)).toBe('45.2 MB/s');
    expect(formatMBs(2.345)).toBe('2.35 MB/s');
    expect(formatMBs(0.05)).toBe('0.05 MB/s');
    expect(formatMBs(0.001)).toBe('0 MB/s');
    expect(formatMBs(2500)).toBe('2500 MB/s'); // one unit: MB/s, never kB/s or GB/s
    expect(formatMBs(-1)).toBe('–');
    expect(formatMs(0.812)).toBe('0.81 ms');
    expect(formatMs(38.2)).toBe('38.2 ms');
    expect(formatMs(0.004)).toBe('4 µs');
    expect(formatMs(1234)).toBe('1.23 s');
    expect(formatMs(null)).toBe('–');
    // advice.text.fmt_pct: whole percents from 10 %, one decimal below
    expect(formatPct(0.31)).toBe('31 %');
    expect(formatPct(0.052)).toBe('5.2 %');
    expect(formatPct(0)).toBe('0 %');
    expect(formatPct(null)).toBe('?');
    expect(formatDuration(42)).toBe('42 s');
    expect(formatDuration(600)).toBe('10 min');
    expect(formatDuration(3 * 3600 + 600)).toBe('3 h 10 min');
    expect(formatDuration(null)).toBe('–');
  });

  it('explains an empty GPU chart', () => {
    expect(gpuEmptyReason(sample(1))).toBeNull();
    expect(gpuEmptyReason(sample(1, { gpus: [], notes: { gpus: 'no NVIDIA driver' } }))).toBe(
      'no NVIDIA driver'
    );
    expect(gpuEmptyReason(sample(1, { gpus: [] }))).toMatch(/No NVIDIA GPU/);
  });
});

describe('what the panel watches', () => {
  it('lists the paths watched at this sample, with their roles and states', () => {
    const s = sample(1, { watched: { '/data': ['user'], '/new': ['kernel:k1'] } });
    expect(watchedPaths(s).map(w => [w.path, w.roles, w.state?.path ?? null])).toEqual([
      ['/data', ['user'], '/data'],
      ['/new', ['kernel:k1'], null] // watched since, not sampled yet
    ]);
    // a path the sample has but nobody watches any more is not listed
    expect(watchedPaths(sample(1, { watched: {} }))).toEqual([]);
    // an older server (no list): the sample's paths
    expect(watchedPaths(sample(1)).map(w => w.path)).toEqual(['/data']);
    expect(watchedPaths(null)).toEqual([]);
  });

  it('says its scope: the machine and how many paths', () => {
    expect(scopeText(sample(1, { watched: { '/a': ['user'], '/b': ['root'] } }))).toBe(
      'this machine: 2 watched paths'
    );
    expect(scopeText(sample(1))).toBe('this machine: 1 watched path');
    expect(scopeText(sample(1), true)).toBe('this machine: 1 path'); // the status bar's
    expect(scopeText(null)).toBe('this machine');
  });
});

describe('shortPath', () => {
  it('keeps the informative end of a path', () => {
    expect(shortPath('/tmp/pytest-of-root/sshfs0/mnt/work')).toBe('…/mnt/work');
    expect(shortPath('/data/logs')).toBe('/data/logs');
    expect(shortPath('/')).toBe('/');
  });
});

describe('fillNotes', () => {
  const path = (mount: string, fill: Record<string, unknown> | null) =>
    ({ mountpoint: mount, fill }) as unknown as ISampleJSON['paths'][string];
  const filling = {
    filesystem: '/data',
    trend: 'filling',
    rate_bps: 3.42e6,
    seconds_to_full: 6 * 3600 + 44 * 60,
    trend_s: 90,
    points: 91
  };

  const alert = (code: string, severity = 'critical') =>
    ({ code, severity, subject: '/data/ckpt', message: 'm', fix: 'f' }) as IAlertJSON;
  // (the paths below are on /data, watched as /data/ckpt and /data/logs)
  const up = [alert('disk-filling')];

  it('says what Python sent, once per filesystem, while a disk-filling warning is up', () => {
    const notes = fillNotes(
      {
        '/data/ckpt': path('/data', filling),
        '/data/logs': path('/data', filling),
        '/tmp/x': path('/tmp', { ...filling, filesystem: '/tmp', trend: 'steady' })
      },
      up
    );
    expect(notes).toEqual(['/data: filling at 3.42 MB/s, full in 6 h 44 min']);
  });

  it('is silent while measuring, steady, freeing or unknown', () => {
    for (const trend of ['measuring', 'steady', 'freeing']) {
      expect(fillNotes({ '/d': path('/d', { ...filling, trend }) }, up)).toEqual([]);
    }
    expect(fillNotes({ '/d': path('/d', null) }, up)).toEqual([]);
  });

  it('never states numbers the advisor does not believe (sent as null)', () => {
    const unsure = { ...filling, rate_bps: null, seconds_to_full: null };
    expect(fillNotes({ '/data/ckpt': path('/data', unsure) }, up)).toEqual([]);
    const noEnd = { ...filling, seconds_to_full: null };
    expect(fillNotes({ '/data/ckpt': path('/data', noEnd) }, up)).toEqual([]);
  });

  it('never contradicts the verdict: no estimate beside "Storage OK"', () => {
    // "Storage OK" beside "/: filling at 193 MB/s, full in 7 min" (issue 23, item 4)
    const fast = { ...filling, filesystem: '/', rate_bps: 193e6, seconds_to_full: 420 };
    const paths = { '/home/me': path('/', fast) };
    expect(fillNotes(paths, [])).toEqual([]);
    expect(fillNotes(paths, [alert('gpu-unavailable', 'info')])).toEqual([]);
    expect(fillNotes(paths, [alert('slow-mount', 'warning')])).toEqual([]);
    const about = (subject: string, message = 'm') => ({
      ...alert('disk-filling', 'warning'),
      subject,
      message
    });
    expect(fillNotes(paths, [about('/home/me')])).toEqual([
      '/: filling at 193 MB/s, full in 7 min'
    ]);
    expect(fillNotes(paths, [about('/')])).toEqual(['/: filling at 193 MB/s, full in 7 min']);
    // ...a disk-filling warning about another filesystem says nothing of this one
    expect(fillNotes(paths, [about('/scratch/ckpt', '/scratch (where ...) is filling')])).toEqual(
      []
    );
    expect(fillNotes(paths, [about('x', '/ (where /home/me lives) is filling at')])).toEqual([
      '/: filling at 193 MB/s, full in 7 min'
    ]);
  });
});

describe('backoff', () => {
  it('doubles up to the cap, with bounded jitter', () => {
    const mid = () => 0.5;
    expect([0, 1, 2, 3].map(a => backoffDelay(a, 500, 30000, mid))).toEqual([
      500, 1000, 2000, 4000
    ]);
    expect(backoffDelay(20, 500, 30000, mid)).toBe(30000);
    expect(backoffDelay(0, 1000, 30000, () => 0)).toBe(750);
    expect(backoffDelay(0, 1000, 30000, () => 1)).toBe(1250);
  });

  it('sizes the ring for the window', () => {
    expect(ringCapacity(600, 1)).toBe(616);
    expect(ringCapacity(600, 0)).toBe(616);
    expect(ringCapacity(1e9, 0.1)).toBe(7200);
  });
});

describe('space used per filesystem', () => {
  const state = (mount: string, total: number | null, avail: number | null, fs?: string) =>
    ({
      ...pathState('/x', 'sda', avail ?? 0),
      mountpoint: mount,
      total_bytes: total,
      avail_bytes: avail,
      fill: fs
        ? {
            filesystem: fs,
            trend: 'steady',
            rate_bps: 0,
            seconds_to_full: null,
            trend_s: 0,
            points: 3
          }
        : null
    }) as IPathStateJSON;

  it('draws one line per filesystem, grouped as core/storage/fill.py groups', () => {
    const groups = filesystems({
      '/data/logs': state('/data', 100, 40, '/data'),
      '/data/ckpt': state('/data', 100, 40, '/data'),
      '/tmp/run': state('/tmp', 64, 32),
      '/gone': state('/gone', null, null)
    });
    expect(groups.map(g => [g.label, g.paths])).toEqual([
      ['/data', ['/data/ckpt', '/data/logs']],
      ['/tmp', ['/tmp/run']]
    ]);
  });

  it('tells a quota apart from its filesystem by size', () => {
    const groups = filesystems({
      '/home/a': state('/home', 10 * 1024 ** 3, 1),
      '/home/b': state('/home', 2 * 1024 ** 4, 1)
    });
    expect(groups.map(g => g.label).sort()).toEqual(['/home (10 GiB)', '/home (2 TiB)']);
  });

  it("computes df's percent used from the first path that has all three numbers", () => {
    // no reserved blocks: used / total
    expect(usedPercent([[40, null, 0]], [[100, 100, 100]], [[40, 50, 0]])).toEqual([60, null, 100]);
    expect(
      usedPercent(
        [
          [null, 50],
          [75, 75]
        ],
        [
          [null, 100],
          [100, 100]
        ],
        [
          [null, 50],
          [75, 75]
        ]
      )
    ).toEqual([25, 50]);
  });

  it('counts blocks reserved for root neither as used nor as free, as df does', () => {
    // 250 GiB, 220 free counting root's reserve, 70 available to users: df says 30 %
    // (the panel drew 72 % with 1 - avail / total beside the notebook's 30 %: issue 33)
    expect(usedPercent([[70]], [[250]], [[220]])).toEqual([30]);
    // a disk whose user space is full reads 100 %, however much root still has
    expect(usedPercent([[0]], [[100]], [[5]])).toEqual([100]);
  });
});

describe('axes', () => {
  it('steps by 1, 2 and 5 times a power of ten', () => {
    const incrs = niceIncrs([1, 2, 5], -1, 1);
    expect(incrs).toEqual([0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]);
  });

  it('labels ticks with the decimals their step needs, no more', () => {
    expect(tickDecimals(50)).toBe(0);
    expect(tickDecimals(2.5)).toBe(1);
    expect(tickDecimals(0.2)).toBe(1);
    expect(tickDecimals(0.05)).toBe(2);
    expect([0, 0.2, 0.4, 0.6].map(v => formatTick(v, 0.2))).toEqual(['0.0', '0.2', '0.4', '0.6']);
    expect([0, 20, 40].map(v => formatTick(v, 20))).toEqual(['0', '20', '40']);
    expect(formatTick(-0.0001, 0.1)).toBe('0.0');
    // never the 0.457 / 0.305 / 0.152 of the issue
    expect([0.1, 0.2, 0.5, 1, 2, 5, 10]).toEqual(
      expect.arrayContaining(niceIncrs().filter(i => i >= 0.1 && i <= 10))
    );
  });

  it('rounds the top of an axis up to a nice number, at least the floor', () => {
    expect(niceMax(0.457)).toBe(1);
    expect(niceMax(0, 1)).toBe(1);
    expect(niceMax(null, 1)).toBe(1);
    expect(niceMax(3.2, 1)).toBe(5);
    expect(niceMax(47.2, 1)).toBe(50);
    expect(niceMax(180, 1)).toBe(200);
    expect(niceMax(2.2, 1)).toBe(2.5);
  });

  it('reads bytes in the unit of the largest value', () => {
    expect(byteUnit(12e9)).toEqual({ unit: 'GiB', divisor: 1024 ** 3 });
    expect(byteUnit(300 * 1024 ** 2)).toEqual({ unit: 'MiB', divisor: 1024 ** 2 });
    expect(byteUnit(0)).toEqual({ unit: 'B', divisor: 1 });
  });

  it('writes times in 24-hour form, with seconds only when ticks are under a minute apart', () => {
    const at = (h: number, m: number, s: number) => new Date(2024, 0, 2, h, m, s).getTime() / 1000;
    expect(formatClock(at(22, 20, 5))).toBe('22:20:05');
    expect(formatClock(at(9, 5, 0), false)).toBe('09:05');
    expect(timeTickLabels([at(10, 19, 0), at(10, 19, 30), at(10, 20, 0)], 30)).toEqual([
      '10:19:00',
      '10:19:30',
      '10:20:00'
    ]);
    expect(timeTickLabels([at(22, 19, 0), at(22, 20, 0)], 60)).toEqual(['22:19', '22:20']);
    expect(TIME_INCRS[0]).toBe(1); // no sub-second steps: no label repeated three times
  });

  it('leaves out a label that would be cut at the edge or overlap its neighbour', () => {
    const labels = ['a', 'b', 'c', 'd'];
    // 40 px wide labels at 10, 60, 80, 190 in a 0..200 figure
    expect(fitLabels(labels, [10, 60, 80, 190], [40, 40, 40, 40], 0, 200)).toEqual([
      null, // would start at -10
      'b',
      null, // would overlap b
      null // would end at 210
    ]);
    expect(fitLabels(['x', null], [50, 60], [20, 20], 0, 100)).toEqual(['x', null]);
  });
});

describe('liveState', () => {
  const base = { connection: 'open' as const, paused: false, nowMs: 100_000, intervalS: 1 };

  it('is live while samples arrive, paused when the user holds the charts', () => {
    expect(liveState({ ...base, lastArrivalMs: 99_500 }).state).toBe('live');
    expect(liveState({ ...base, lastArrivalMs: 99_500, paused: true }).state).toBe('paused');
  });

  it(`is stale after ${STALE_AFTER_INTERVALS} intervals without a sample, even paused`, () => {
    expect(liveState({ ...base, lastArrivalMs: 97_100 }).state).toBe('live');
    const stale = liveState({ ...base, lastArrivalMs: 96_900, paused: true });
    expect(stale).toEqual({ state: 'stale', ageS: 3.1 });
    // a slower interval waits longer
    expect(liveState({ ...base, lastArrivalMs: 90_000, intervalS: 5 }).state).toBe('live');
  });

  it('is stopped without a connection, connecting before it opens', () => {
    expect(liveState({ ...base, connection: 'closed', lastArrivalMs: 99_900 }).state).toBe(
      'stopped'
    );
    expect(liveState({ ...base, connection: 'connecting', lastArrivalMs: 1 }).state).toBe(
      'connecting'
    );
    expect(liveState({ ...base, lastArrivalMs: null }).state).toBe('connecting');
  });

  it('learns the interval from the gaps when the server did not say it', () => {
    expect(medianGap([0, 1000])).toBeNull();
    expect(medianGap([0, 1000, 2000, 3000, 30_000])).toBe(1);
    expect(medianGap([0, 500, 1500, 2000])).toBe(0.5);
  });
});

describe('watchedBy', () => {
  const sample = {
    kernels: {
      k1: { id: 'k1', notebook: 'runs/train.ipynb' },
      k2: { id: 'k2', notebook: 'eval.ipynb' }
    }
  } as unknown as ISampleJSON;

  it('names the notebooks that asked for a path, by file name, once each', () => {
    expect(watchedBy(['root', 'notebook:k1', 'notebook:k2', 'notebook:k1'], sample)).toBe(
      'watched by train.ipynb, eval.ipynb'
    );
  });

  it('says nothing for paths no notebook asked for, and names an unknown kernel plainly', () => {
    expect(watchedBy(['root', 'kernel:k1', 'user'], sample)).toBe('');
    expect(watchedBy(['notebook:gone'], sample)).toBe('watched by a notebook');
  });
});
