import {
  SampleJSON,
  SeriesRing,
  activeWarnings,
  backoffDelay,
  diskThroughput,
  fillNotes,
  flatten,
  formatBytes,
  formatDuration,
  formatMBs,
  gpuEmptyReason,
  ringCapacity,
  seriesKey,
  shortPath,
  statusText,
  watchedDevices
} from '../src/model';

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

function sample(t: number, extra: Partial<SampleJSON> = {}): SampleJSON {
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

describe('statusText', () => {
  it('reads like the issue example', () => {
    const s = sample(1, { warnings: [warn('warning'), warn('info', 'gpu-unavailable')] });
    expect(statusText(s)).toBe('GPU 87% · disk 45 MB/s · ⚠ 1');
  });

  it('drops what is not there and says so when offline', () => {
    const s = sample(1, { gpus: [], paths: {}, disks: {} });
    expect(statusText(s)).toBe('TrainWatch');
    expect(statusText(null, false)).toBe('TrainWatch (offline)');
    expect(statusText(sample(1, { gpus: [] }), false)).toBe('disk 45 MB/s · offline');
  });

  it('sums only the devices under watched paths', () => {
    expect(watchedDevices(sample(1))).toEqual(['sda']);
    expect(diskThroughput(sample(1))).toBe(45);
    // no watched path resolved to a device: every disk counts
    expect(watchedDevices(sample(1, { paths: {} }))).toEqual(['nvme0n1', 'sda']);
    expect(diskThroughput(sample(1, { paths: {} }))).toBe(48);
  });

  it('counts warnings and criticals, not infos', () => {
    const s = sample(1, { warnings: [warn('critical'), warn('warning'), warn('info')] });
    expect(activeWarnings(s)).toHaveLength(2);
    expect(activeWarnings(null)).toEqual([]);
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
    expect(ts).toEqual([1, 2, 3]);
    expect(util).toEqual([null, 94, null]);
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
    expect(keys).toContain('gpu:1:mem_used_bytes');
  });
});

describe('formatting', () => {
  it('formats bytes, rates and durations', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1536)).toBe('1.50 KiB');
    expect(formatBytes(5 * 1024 ** 3)).toBe('5.00 GiB');
    expect(formatBytes(null)).toBe('–');
    expect(formatMBs(45.2)).toBe('45 MB/s');
    expect(formatMBs(2.345)).toBe('2.3 MB/s');
    expect(formatMBs(0.05)).toBe('50 kB/s');
    expect(formatMBs(2500)).toBe('2.5 GB/s');
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

describe('shortPath', () => {
  it('keeps the informative end of a path', () => {
    expect(shortPath('/tmp/pytest-of-root/sshfs0/mnt/work')).toBe('…/mnt/work');
    expect(shortPath('/data/logs')).toBe('/data/logs');
    expect(shortPath('/')).toBe('/');
  });
});

describe('fillNotes', () => {
  const path = (mount: string, fill: Record<string, unknown> | null) =>
    ({ mountpoint: mount, fill }) as unknown as SampleJSON['paths'][string];
  const filling = {
    filesystem: '/data',
    trend: 'filling',
    rate_bps: 3.42e6,
    seconds_to_full: 6 * 3600 + 44 * 60,
    trend_s: 90,
    points: 91
  };

  it('says what Python sent, once per filesystem', () => {
    const notes = fillNotes({
      '/data/ckpt': path('/data', filling),
      '/data/logs': path('/data', filling),
      '/tmp/x': path('/tmp', { ...filling, filesystem: '/tmp', trend: 'steady' })
    });
    expect(notes).toEqual(['/data: filling at 3.4 MB/s, full in 6 h 44 min']);
  });

  it('is silent while measuring, steady, freeing or unknown', () => {
    for (const trend of ['measuring', 'steady', 'freeing']) {
      expect(fillNotes({ '/d': path('/d', { ...filling, trend }) })).toEqual([]);
    }
    expect(fillNotes({ '/d': path('/d', null) })).toEqual([]);
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
