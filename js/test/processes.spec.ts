/** processes.ts: the words of one training process's row (DOM-free part). */
jest.mock('../src/request', () => ({ requestAPI: jest.fn() })); // no Jupyter server in node

import { processFacts, TrainingProcessJSON } from '../src/processes';

const GIB = 1024 ** 3;

function proc(over: Partial<TrainingProcessJSON> = {}): TrainingProcessJSON {
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
