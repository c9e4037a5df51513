/** processes.ts: the words of one training process's row (DOM-free part). */
jest.mock('../src/request', () => ({ requestAPI: jest.fn() })); // no Jupyter server in node

import { processFacts, ITrainingProcessJSON, waitFacts } from '../src/processes';

const GIB = 1024 ** 3;

function proc(over: Partial<ITrainingProcessJSON> = {}): ITrainingProcessJSON {
  return {
    pid: 4242,
    command: 'python train.py --lr 3e-4',
    cwd: '/home/ada/run',
    reasons: ['gpu', 'event file'],
    paths: {},
    gpus: [0],
    gpu_mem_bytes: 21 * GIB,
    io: { read_chars_s: 2.5e6, write_chars_s: 45e6, read_bytes_s: 0, write_bytes_s: 0 },
    main_thread: null,
    ...over
  };
}

describe('processFacts', () => {
  it('says GPU and memory, then I/O in MB/s', () => {
    expect(processFacts(proc())).toEqual(['GPU 0 · 21 GiB', 'write 45 MB/s · read 2.5 MB/s']);
  });

  it('names several GPUs, or only the memory when NVML cannot say where', () => {
    expect(processFacts(proc({ gpus: [0, 1], io: null }))).toEqual(['GPU 0,1 · 21 GiB']);
    expect(processFacts(proc({ gpus: null, io: null }))).toEqual(['GPU memory 21 GiB']);
  });

  it('says where the main thread is blocked: the syscall and the file', () => {
    const blocked = proc({
      io: null,
      main_thread: {
        state: 'D',
        wchan: 'rpc_wait_bit_killable',
        syscall: 'fsync',
        fd_path: '/mnt/share/runs/exp1/events.out.tfevents.1700.node1',
        blocked: true
      }
    });
    expect(processFacts(blocked)).toEqual([
      'GPU 0 · 21 GiB',
      'blocked in fsync() of …/runs/exp1/events.out.tfevents.1700.node1'
    ]);
    const kernelWait = proc({
      gpus: [],
      gpu_mem_bytes: null,
      io: null,
      main_thread: { state: 'D', wchan: 'nfs_wait', syscall: null, fd_path: null, blocked: true }
    });
    expect(processFacts(kernelWait)).toEqual(['blocked in the kernel (nfs_wait)']);
  });

  it('falls back to why it is listed when there is no number', () => {
    const quiet = proc({ gpus: [], gpu_mem_bytes: null, io: null, reasons: ['checkpoint'] });
    expect(processFacts(quiet)).toEqual(['checkpoint']);
  });
});

describe('waitFacts', () => {
  const io = (over: object) => ({
    read_chars_s: 0,
    write_chars_s: 0,
    read_bytes_s: 0,
    write_bytes_s: 0,
    ...over
  });

  it('says the time lost per path, the costliest first, workers apart', () => {
    const facts = waitFacts(
      io({
        waits: { '/mnt/share/runs': 0.9, '/data': 0.0 },
        waits_window: { '/mnt/share/runs': 0.31, '/data': 0.052 },
        worker_waits: { '/data': 0.4, '/mnt/share/runs': 0.0 }
      })
    );
    expect(facts).toEqual([
      'waiting on /mnt/share/runs 31 %',
      'waiting on /data 5.2 % · workers 40 %'
    ]);
  });

  it('uses the last interval without a window, and says nothing below 0.5 %', () => {
    expect(waitFacts(io({ waits: { '/a/b/c/d': 0.2 } }))).toEqual(['waiting on …/b/c/d 20 %']);
    expect(waitFacts(io({ waits: { '/a': 0.004 }, worker_waits: { '/a': 0.001 } }))).toEqual([]);
    expect(waitFacts(io({}))).toEqual([]);
    expect(waitFacts(null)).toEqual([]);
  });

  it('names three paths at most', () => {
    const waits = { '/p1': 0.1, '/p2': 0.2, '/p3': 0.3, '/p4': 0.4 };
    expect(waitFacts(io({ waits })).map(f => f.split(' ')[2])).toEqual(['/p4', '/p3', '/p2']);
  });
});
