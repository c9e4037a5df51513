/**
 * One row per training process found on the machine (trainwatch_lab/core/processes/source.py):
 * a script in a terminal, under tmux or nohup. The server computes every number; this file
 * only words and lays them out: command, GPU(s) and memory, I/O rates, where its main thread
 * is blocked, the time it loses to storage per path, the directories it made the panel
 * watch, and a button to hide it.
 *
 * The panel calls ``renderProcesses(container, sample.processes ?? [], hideProcess)`` on each
 * sample; ``processFacts`` is DOM-free for unit tests in node.
 */

import { changed, el, keyedChildren } from './dom';
import { formatBytes, formatMBs, formatPct, shortPath } from './format';

/** Below this share a path is not worth a word (notebook.cell.report.WAIT_SHOWN in Python). */
export const WAIT_SHOWN = 0.005;
/** Paths named per row at most, the most costly first. */
export const WAITS_SHOWN = 3;

/**
 * Time lost to storage, per watched path, the main thread and its workers apart:
 * ``waiting on …/share/runs 31 % · workers 12 %``. The main thread's share is over the
 * charts' window when the server sent it (one checkpoint save is no verdict), the workers'
 * over the last interval. Nothing when the process's waits are not measured.
 */
export function waitFacts(io: ITrainingProcessJSON['io']): string[] {
  const main =
    io?.waits_window && Object.keys(io.waits_window).length ? io.waits_window : io?.waits;
  const workers = io?.worker_waits ?? {};
  const paths = new Set([...Object.keys(main ?? {}), ...Object.keys(workers)]);
  const rows = [...paths]
    .map(path => ({ path, main: main?.[path] ?? 0, workers: workers[path] ?? 0 }))
    .filter(r => r.main >= WAIT_SHOWN || r.workers >= WAIT_SHOWN)
    .sort((a, b) => b.main - a.main || b.workers - a.workers || a.path.localeCompare(b.path));
  return rows.slice(0, WAITS_SHOWN).map(r => {
    const parts = [`waiting on ${shortPath(r.path, 3)} ${formatPct(r.main)}`];
    if (r.workers >= WAIT_SHOWN) {
      parts.push(`workers ${formatPct(r.workers)}`);
    }
    return parts.join(' · ');
  });
}
import { requestAPI } from './request';

/** ``Sample.processes[i]`` (core/model.py: TrainingProcess.to_json). */
export interface ITrainingProcessJSON {
  pid: number;
  /** its command line, shortened on the server: "python train.py --lr 3e-4" */
  command: string;
  cwd: string | null;
  /** why it counts: "gpu", "event file", "checkpoint", "writes a watched path" */
  reasons: string[];
  /** watched directory -> where it came from ("pid 4242 `python train.py`, event file") */
  paths: Record<string, string[]>;
  /** CUDA indices of its GPUs; null when NVML says it holds memory but not where */
  gpus: number[] | null;
  gpu_mem_bytes: number | null;
  io: {
    read_chars_s: number;
    write_chars_s: number;
    read_bytes_s: number;
    write_bytes_s: number;
    /** time lost to storage (core/processes/waits.py): watched path -> fraction (0-1) of the last
     * interval its main thread slept on files under it; absent or empty: not measured */
    waits?: Record<string, number>;
    /** the same for its worker processes (DataLoader workers), averaged over them */
    worker_waits?: Record<string, number>;
    /** ``waits`` over the charts' window (10 min): steadier than one interval */
    waits_window?: Record<string, number>;
  } | null;
  main_thread: {
    state: string | null;
    wchan: string | null;
    syscall: string | null;
    fd_path: string | null;
    blocked: boolean;
  } | null;
}

/** The facts of one row, in reading order: GPU and memory, I/O, where it is blocked.
 * (Time lost to storage has its own line: ``waitFacts``.) */
export function processFacts(p: ITrainingProcessJSON): string[] {
  const facts: string[] = [];
  if (p.gpus && p.gpus.length) {
    facts.push(`GPU ${p.gpus.join(',')} · ${formatBytes(p.gpu_mem_bytes)}`);
  } else if (p.gpu_mem_bytes) {
    facts.push(`GPU memory ${formatBytes(p.gpu_mem_bytes)}`);
  }
  if (p.io) {
    const write = formatMBs(p.io.write_chars_s / 1e6);
    facts.push(`write ${write} · read ${formatMBs(p.io.read_chars_s / 1e6)}`);
  }
  const mt = p.main_thread;
  if (mt && mt.blocked) {
    if (mt.syscall && mt.fd_path) {
      facts.push(`blocked in ${mt.syscall}() of ${shortPath(mt.fd_path, 3)}`);
    } else if (mt.state === 'D') {
      facts.push(`blocked in the kernel${mt.wchan ? ` (${mt.wchan})` : ''}`);
    }
  }
  if (!facts.length) {
    facts.push(p.reasons.join(', '));
  }
  return facts;
}

/** One row's frame: "pid 4242 python train.py --lr 3e-4" and its hide button. */
function processRow(p: ITrainingProcessJSON, onHide?: (pid: number) => void): HTMLElement {
  const row = el('div', 'jp-TrainWatch-process');
  row.dataset.pid = String(p.pid);
  const head = el('div', 'jp-TrainWatch-processHead');
  head.appendChild(el('span', 'jp-TrainWatch-processCommand', `pid ${p.pid} ${p.command}`));
  if (onHide) {
    const hide = el('button', 'jp-TrainWatch-processHide', 'Hide');
    hide.title = 'Stop listing this process and watching its directories';
    hide.addEventListener('click', () => onHide(p.pid));
    head.appendChild(hide);
  }
  row.appendChild(head);
  return row;
}

/** What a row says now under its head: its facts, the time it loses to storage, its
 * directories (redrawn only when they changed). */
function fillProcessRow(row: HTMLElement, p: ITrainingProcessJSON): void {
  const facts = processFacts(p);
  const waits = waitFacts(p.io);
  const blocked = !!p.main_thread?.blocked;
  if (!changed(row, [p.command, p.cwd, facts, waits, blocked, p.paths])) {
    return;
  }
  const name = row.querySelector<HTMLElement>('.jp-TrainWatch-processCommand')!;
  name.title = p.cwd ? `${p.command}\nin ${p.cwd}` : p.command;
  const parts: HTMLElement[] = [];
  const line = el('div', 'jp-TrainWatch-processFacts', facts.join(' · '));
  line.classList.toggle('jp-mod-blocked', blocked);
  parts.push(line);
  if (waits.length) {
    const lost = el('div', 'jp-TrainWatch-processWaits');
    for (const text of waits) {
      lost.appendChild(el('div', 'jp-TrainWatch-processWait', text));
    }
    lost.title =
      "Time lost to storage: the share of the main thread's time (over the last 10 min) and " +
      "of its worker processes' (last interval) spent in system calls on files under each path";
    parts.push(lost);
  }
  const dirs = Object.keys(p.paths);
  if (dirs.length) {
    const list = el('ul', 'jp-TrainWatch-processPaths');
    for (const dir of dirs) {
      const item = el('li', '', shortPath(dir, 3));
      item.title = `${dir}\n${p.paths[dir].join('\n')}`;
      list.appendChild(item);
    }
    parts.push(list);
  }
  row.replaceChildren(row.firstElementChild!, ...parts);
}

/** One row per process in ``container`` (nothing when there is none); a process keeps its
 * row across samples, so a focused Hide button stays focused. */
export function renderProcesses(
  container: HTMLElement,
  processes: ITrainingProcessJSON[],
  onHide?: (pid: number) => void
): void {
  keyedChildren(
    container,
    processes,
    p => `${p.pid} ${p.command}`, // a pid reused by another command is another row
    p => processRow(p, onHide),
    fillProcessRow
  );
}

/** Hide a process in the panel: its row and its directories go (``DELETE processes?pid=``). */
export async function hideProcess(pid: number): Promise<void> {
  await requestAPI(`processes?pid=${encodeURIComponent(String(pid))}`, { method: 'DELETE' });
}
