/** replay/range.ts, charts/markers.ts and replay/away.ts: the panel's time range, event marks and cards (DOM-free). */
import {
  awayCards,
  cardId,
  IEndingJSON,
  endedBadly,
  FIRST_LOOK_S,
  IKeyValue,
  LastLooked,
  MAX_LOOK_S
} from '../../src/replay/away';
import { eventLevel, IEventJSON, placeMarkers } from '../../src/charts/markers';
import { PANEL_CHARTS } from '../../src/panel/chartList';
import {
  chosenWindow,
  parseLocalTime,
  rangeFromValue,
  rangeValue,
  rangeWindow,
  RANGE_CHOICES,
  IRecordedJSON,
  recordedColumns,
  recordedSample,
  replayText,
  runWindow,
  toLocalInput
} from '../../src/replay/range';

const NOW = 1_800_000_000;

describe('the time range', () => {
  test('every menu choice round-trips; a chosen window comes from the inputs', () => {
    for (const { value } of RANGE_CHOICES) {
      const range = rangeFromValue(value);
      if (value === 'window') {
        expect(range).toBeNull();
      } else {
        expect(rangeValue(range!)).toBe(value);
      }
    }
    expect(rangeFromValue('last:bogus')).toBeNull();
  });

  test('each range replays its window; live replays none', () => {
    expect(rangeWindow({ kind: 'live' }, NOW, null)).toBeNull();
    expect(rangeWindow({ kind: 'last', hours: 6 }, NOW, null)).toEqual({
      since: NOW - 6 * 3600,
      until: NOW
    });
    expect(rangeWindow({ kind: 'restart' }, NOW, NOW - 42)).toEqual({
      since: NOW - 42,
      until: NOW
    });
    expect(rangeWindow({ kind: 'window', since: 5, until: 9 }, NOW, null)).toEqual({
      since: 5,
      until: 9
    });
    // a card's run: its last hour, or its whole life when shorter, and a minute after
    expect(runWindow(NOW)).toEqual({ kind: 'window', since: NOW - 3600, until: NOW + 60 });
    expect(runWindow(NOW, NOW - 7200)).toEqual(runWindow(NOW));
    expect(runWindow(NOW, NOW - 25)).toEqual({ kind: 'window', since: NOW - 85, until: NOW + 60 });
  });

  test('"since restart" before the server said when it started is a clear error', () => {
    expect(() => rangeWindow({ kind: 'restart' }, NOW, null)).toThrow(
      /has not said when it started/
    );
  });

  test('datetime-local values are local times, checked', () => {
    expect(parseLocalTime('2026-12-02T03:12')).toBe(new Date(2026, 11, 2, 3, 12).getTime() / 1000);
    expect(parseLocalTime('2026-12-02T03:12:07')).toBe(
      new Date(2026, 11, 2, 3, 12, 7).getTime() / 1000
    );
    for (const bad of ['', 'yesterday', '2026-02-31T01:00', '2026-12-02T25:00', '2026-12-02']) {
      expect(parseLocalTime(bad)).toBeNull();
    }
    const t = new Date(2026, 0, 5, 7, 8).getTime() / 1000;
    expect(toLocalInput(t)).toBe('2026-01-05T07:08');
    expect(parseLocalTime(toLocalInput(t))).toBe(t);
  });

  test('a chosen window says in one line what is wrong with it', () => {
    expect(chosenWindow('2026-12-02T01:00', '2026-12-02T03:00')).toEqual({
      kind: 'window',
      since: new Date(2026, 11, 2, 1).getTime() / 1000,
      until: new Date(2026, 11, 2, 3).getTime() / 1000
    });
    expect(() => chosenWindow('', '2026-12-02T03:00')).toThrow("'from' is not a date and time");
    expect(() => chosenWindow('2026-12-02T03:00', 'x')).toThrow("'to' is not a date and time");
    expect(() => chosenWindow('2026-12-02T03:00', '2026-12-02T01:00')).toThrow(
      "'from' must be before 'to'"
    );
  });

  test('the replay line says the window and the choice', () => {
    const until = Date.now() / 1000;
    const text = replayText({ kind: 'last', hours: 1 }, { since: until - 3600, until });
    const clock = '(\\d\\d-\\d\\d )?\\d\\d:\\d\\d';
    expect(text).toMatch(new RegExp(`^Replaying ${clock} – ${clock} \\(last 1 h\\)$`));
    // a window on other days names the day
    const old = new Date(2025, 4, 6, 10, 0).getTime() / 1000;
    const win = { since: old, until: old + 600 };
    expect(replayText({ kind: 'window', ...win }, win)).toBe('Replaying 05-06 10:00 – 05-06 10:10');
  });
});

describe('recorded points through the chart table', () => {
  const recorded: IRecordedJSON = {
    since: 0,
    until: 100,
    series: {
      'disk:vda:wmb_s': { t: [10, 20, 30], v: [1, null, 3] },
      'disk:vda:rmb_s': { t: [20, 40], v: [5, 6] },
      'path:/mnt/a:b:avail_bytes': { t: [10, 20], v: [50, 0] },
      'path:/mnt/a:b:total_bytes': { t: [10, 20], v: [100, 100] },
      'path:/mnt/a:b:free_bytes': { t: [10, 20], v: [50, 0] }
    }
  };

  test('series on one time axis, null where one has no point', () => {
    const keys = ['disk:vda:wmb_s', 'disk:vda:rmb_s', 'disk:sdz:util'];
    expect(recordedColumns(recorded, keys)).toEqual([
      [10, 20, 30, 40],
      [1, null, 3, null],
      [null, 5, null, 6],
      [null, null, null, null]
    ]);
  });

  test('the recorded window names its own disks and paths (a path with a colon too)', () => {
    const sample = recordedSample(recorded, null);
    expect(Object.keys(sample.disks)).toEqual(['vda']);
    expect(Object.keys(sample.paths)).toEqual(['/mnt/a:b']);
    expect(sample.paths['/mnt/a:b'].avail_bytes).toBe(0);
    expect(sample.gpus).toEqual([]);
    // the same chart code draws it: the space chart reads used % from the recorded columns
    const space = PANEL_CHARTS.find(c => c.options.title === 'Space used')!;
    const content = space.content({ sample, columns: keys => recordedColumns(recorded, keys) });
    expect(content.specs.map(s => s.label)).toEqual(['/mnt/a:b']);
    expect(content.data).toEqual([
      [10, 20],
      [50, 100]
    ]);
    const disks = PANEL_CHARTS.find(c => c.options.title === 'Disk throughput')!;
    const columns = (keys: string[]) => recordedColumns(recorded, keys);
    expect(disks.content({ sample, columns }).empty).toBeNull();
  });
});

describe('event marks', () => {
  const ev = (
    t: number,
    kind: string,
    data: Record<string, any> = {},
    text = kind
  ): IEventJSON => ({
    t,
    kind,
    subject: 's',
    text,
    data
  });

  test('coloured by severity: a warning by its own, an end by how it ended', () => {
    expect(eventLevel(ev(0, 'warning-raised', { severity: 'critical' }))).toBe('critical');
    expect(eventLevel(ev(0, 'warning-raised', { severity: 'warning' }))).toBe('warning');
    expect(eventLevel(ev(0, 'warning-raised', { severity: 'info' }))).toBe('info');
    expect(eventLevel(ev(0, 'warning-cleared'))).toBe('ok');
    expect(eventLevel(ev(0, 'run-ended', { exit: { code: 0 } }))).toBe('info');
    expect(eventLevel(ev(0, 'run-ended', { exit: { code: 1 } }))).toBe('warning');
    expect(eventLevel(ev(0, 'process-ended', { exit: { signal: 'SIGKILL' } }))).toBe('critical');
    expect(eventLevel(ev(0, 'kernel-ended', { oom_killed: { after: 1 } }))).toBe('critical');
    expect(eventLevel(ev(0, 'kernel-ended'))).toBe('warning');
    expect(eventLevel(ev(0, 'checkpoint'))).toBe('info');
  });

  test('placed by time on the plot; off-plot and unmarked kinds left out', () => {
    const toX = (t: number) => t * 2; // 2 px a second
    const marks = placeMarkers(
      [
        ev(10, 'checkpoint', {}, 'saved epoch-3.ckpt'),
        ev(-5, 'checkpoint'),
        ev(60, 'warning-raised', { severity: 'critical' }),
        ev(30, 'process-seen'),
        ev(45, 'mount-changed')
      ],
      toX,
      100
    );
    expect(marks.map(m => [m.x, m.level])).toEqual([
      [20, 'info'],
      [90, 'info']
    ]);
    expect(marks[0].title).toMatch(/^\d\d:\d\d:\d\d saved epoch-3\.ckpt$/);
  });

  test('events closer than a few px share one mark: the worst colour, every text', () => {
    const marks = placeMarkers(
      [
        ev(10, 'warning-raised', { severity: 'warning' }, 'disk-filling'),
        ev(11, 'run-ended', { exit: { signal: 'SIGKILL' } }, 'train.py ended'),
        ev(12, 'warning-cleared', {}, 'disk-filling cleared'),
        ev(40, 'checkpoint', {}, 'saved')
      ],
      t => t,
      100
    );
    expect(marks.map(m => m.level)).toEqual(['critical', 'info']);
    expect(marks[0].title.split('\n').map(l => l.slice(9))).toEqual([
      'disk-filling',
      'train.py ended',
      'disk-filling cleared'
    ]);
  });
});

describe('while you were away', () => {
  const end = (t: number, exit: IEndingJSON['exit'], cause: string | null = null): IEndingJSON => ({
    name: 'train.py',
    pid: 7,
    t,
    sentence: `train.py ended at ${t}`,
    cause,
    evidence: [],
    exit,
    started: null
  });

  test('a card for every run that did not exit 0, newest first; dismissed ones go', () => {
    const full = end(300, { code: 1 }, '/data was full');
    const unknown = end(200, null); // a kernel killed: "ended; no cause seen", still a card
    const clean = end(100, { code: 0 });
    const killed = end(50, { code: null, signal: 'SIGKILL' });
    expect([full, unknown, clean, killed].map(endedBadly)).toEqual([true, true, false, true]);
    expect(awayCards([killed, clean, full, unknown], new Set())).toEqual([full, unknown, killed]);
    expect(awayCards([killed, full], new Set([cardId(full)]))).toEqual([killed]);
    expect(awayCards([clean], new Set())).toEqual([]);
  });

  test("the server's verdict decides: a kernel shut down on request gets no card", () => {
    const asked = {
      ...end(400, { code: null, signal: 'SIGKILL' }),
      requested: 'shutdown',
      badly: false
    };
    const died = { ...end(500, { code: null, signal: 'SIGKILL' }), badly: true };
    const oom = {
      ...end(600, { code: null, signal: 'SIGKILL' }, 'the OOM killer'),
      requested: 'restart',
      badly: true
    };
    expect(awayCards([asked, died, oom], new Set())).toEqual([oom, died]);
    const ev = (data: Record<string, any>): IEventJSON => ({
      t: 1,
      kind: 'kernel-ended',
      subject: 'k',
      text: '',
      data
    });
    expect(eventLevel(ev({ requested: 'shutdown', exit: { signal: 'SIGKILL' } }))).toBe('info');
    expect(eventLevel(ev({ exit: { signal: 'SIGKILL' } }))).toBe('critical');
    expect(eventLevel(ev({ requested: 'restart', oom_logged: 'Killed process 7' }))).toBe(
      'critical'
    );
  });

  test('"last looked" is kept per server; a new browser looks a day back', () => {
    const kept = new Map<string, string>();
    const store: IKeyValue = {
      getItem: k => kept.get(k) ?? null,
      setItem: (k, v) => void kept.set(k, v)
    };
    const looked = new LastLooked(store, 'a');
    expect(looked.get(NOW)).toBe(NOW - FIRST_LOOK_S);
    looked.set(NOW - 10);
    expect(looked.get(NOW)).toBe(NOW - 10);
    expect(new LastLooked(store, 'b').get(NOW)).toBe(NOW - FIRST_LOOK_S);
    // back after a month: the last week (the server refuses a window past its history)
    looked.set(NOW - 30 * 86400);
    expect(looked.get(NOW)).toBe(NOW - MAX_LOOK_S);
    // a stored time in the future (a clock moved back) or garbage: a day back again
    kept.set('a', String(NOW + 5));
    expect(looked.get(NOW)).toBe(NOW - FIRST_LOOK_S);
    kept.set('a', 'zzz');
    expect(looked.get(NOW)).toBe(NOW - FIRST_LOOK_S);
    // storage that refuses (private mode) is no error
    const refusing: IKeyValue = {
      getItem: () => {
        throw new Error('denied');
      },
      setItem: () => {
        throw new Error('denied');
      }
    };
    const none = new LastLooked(refusing, 'a');
    expect(() => none.set(NOW)).not.toThrow();
    expect(none.get(NOW)).toBe(NOW - FIRST_LOOK_S);
  });
});
