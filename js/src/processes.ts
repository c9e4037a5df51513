/**
 * One row per training process found on the machine (trainwatch_lab/core/training_source.py):
 * a script in a terminal, under tmux or nohup. The server computes every number; this file
 * only words and lays them out: command, GPU(s) and memory, I/O rates, where its main thread
 * is blocked, the directories it made the panel watch, and a button to hide it.
 *
 * The panel calls ``renderProcesses(container, sample.processes ?? [], hideProcess)`` on each
 * sample; ``processFacts`` is DOM-free for unit tests in node.
 */

import { formatBytes, formatMBs, shortPath } from './model';
import { requestAPI } from './request';

/** ``Sample.processes[i]`` (core/model.py: TrainingProcess.to_json). */
export interface TrainingProcessJSON {
  pid: number;
  /** its command line, shortened on the server: "python train.py --lr 3e-4" */
  command: string;
  cwd: string | null;
  /** why it counts: "gpu", "event file", "checkpoint" */
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
  } | null;
  main_thread: {
    state: string | null;
    wchan: string | null;
    syscall: string | null;
    fd_path: string | null;
    blocked: boolean;
  } | null;
}

/** The facts of one row, in reading order: GPU and memory, I/O, where it is blocked. */
export function processFacts(p: TrainingProcessJSON): string[] {
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

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  node.textContent = text;
  return node;
}

/** One row: "pid 4242 python train.py --lr 3e-4", its facts, its directories, a hide button. */
export function renderProcessRow(
  p: TrainingProcessJSON,
  onHide?: (pid: number) => void
): HTMLElement {
  const row = el('div', 'jp-TrainWatch-process');
  row.dataset.pid = String(p.pid);
  const head = el('div', 'jp-TrainWatch-processHead');
  const name = el('span', 'jp-TrainWatch-processCommand', `pid ${p.pid} ${p.command}`);
  name.title = p.cwd ? `${p.command}\nin ${p.cwd}` : p.command;
  head.appendChild(name);
  if (onHide) {
    const hide = el('button', 'jp-TrainWatch-processHide', 'Hide');
    hide.title = 'Stop listing this process and watching its directories';
    hide.addEventListener('click', () => onHide(p.pid));
    head.appendChild(hide);
  }
  row.appendChild(head);
  const facts = el('div', 'jp-TrainWatch-processFacts', processFacts(p).join(' · '));
  if (p.main_thread?.blocked) {
    facts.classList.add('jp-mod-blocked');
  }
  row.appendChild(facts);
  const dirs = Object.keys(p.paths);
  if (dirs.length) {
    const list = el('ul', 'jp-TrainWatch-processPaths');
    for (const dir of dirs) {
      const item = el('li', '', shortPath(dir, 3));
      item.title = `${dir}\n${p.paths[dir].join('\n')}`;
      list.appendChild(item);
    }
    row.appendChild(list);
  }
  return row;
}

/** Replace ``container``'s children with one row per process (nothing when there is none). */
export function renderProcesses(
  container: HTMLElement,
  processes: TrainingProcessJSON[],
  onHide?: (pid: number) => void
): void {
  container.replaceChildren(...processes.map(p => renderProcessRow(p, onHide)));
}

/** Hide a process in the panel: its row and its directories go (``DELETE processes?pid=``). */
export async function hideProcess(pid: number): Promise<void> {
  await requestAPI(`processes?pid=${encodeURIComponent(String(pid))}`, { method: 'DELETE' });
}
