import { groupRuns, IEndingJSON } from '../../src/replay/away';
import { replayingText } from '../../src/replay/range';

const end = (pid: number, t: number, extra: Partial<IEndingJSON> = {}): IEndingJSON => ({
  name: 'python',
  pid,
  t,
  sentence: `python ended at ${t} after 2 s; no cause seen (killed by SIGKILL)`,
  cause: null,
  evidence: [],
  exit: { signal: 'SIGKILL' },
  started: t - 2,
  ...extra
});

describe('while-you-were-away cards (issue 36)', () => {
  it('groups the ends of one run, naming its command and directory', () => {
    const a = { command: 'python train.py --lr 3', cwd: '/root/exp1' };
    const b = { command: 'python train.py --lr 3', cwd: '/root/exp2' };
    const runs = groupRuns([
      end(1, 100, a),
      end(2, 103, a),
      end(3, 101, b),
      end(4, 104, a),
      end(5, 90, { notebook: 'runs/train.ipynb', cwd: '/root' })
    ]);
    expect(runs.map(r => [r.what, r.where, r.endings.map(e => e.pid)])).toEqual([
      ['python train.py --lr 3', '/root/exp1', [4, 2, 1]],
      ['python train.py --lr 3', '/root/exp2', [3]],
      ['runs/train.ipynb', '', [5]]
    ]);
  });

  it('falls back to the name for a server that sends no command', () => {
    const runs = groupRuns([end(1, 1), end(2, 2)]);
    expect(runs).toHaveLength(1);
    expect(runs[0].what).toBe('python');
  });

  it('says "replaying" in the header while the charts replay', () => {
    const since = new Date(2026, 0, 1, 23, 10).getTime() / 1000;
    expect(replayingText({ since, until: since + 3600 })).toBe('replaying 23:10 – 00:10');
  });
});
