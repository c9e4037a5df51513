/**
 * The panel's sections about what runs on the machine: the log mirrors (``local_mirror``),
 * the training processes found (scripts in terminals, tmux, nohup) and the running kernels.
 */

import { TitledBlock } from '../blocks';
import { el, pathEl } from '../dom';
import { formatBytes, formatMBs } from '../format';
import { IMirrorJSON, ISampleJSON } from '../model';
import { renderProcesses } from '../processes';

/** One line per live ``local_mirror`` of the machine: Python's status words, coloured by its
 * state (a share that does not answer, an error). Hidden when there is none. */
export class MirrorsView extends TitledBlock {
  private _shown: string | null = null;

  constructor() {
    super('mirrors', 'Log mirrors', 'jp-TrainWatch-mirrors', false);
  }

  render(mirrors: IMirrorJSON[]): void {
    this.setHidden(!mirrors.length);
    this.title.setSummary(String(mirrors.length));
    const signature = JSON.stringify(mirrors.map(m => [m.local, m.state, m.text]));
    if (signature === this._shown) {
      return;
    }
    this._shown = signature;
    const lines = mirrors.map(m => {
      const line = el('div', `jp-TrainWatch-mirror jp-mod-${m.state}`, m.text);
      line.dataset.state = m.state;
      line.dataset.local = m.local;
      line.title = `${m.local}\n→ ${m.share}\nowned by pid ${m.pid}`;
      return line;
    });
    this.node.replaceChildren(...lines);
  }
}

/** Training processes found on the machine, each with a Hide button; hidden when none. */
export class ProcessesView extends TitledBlock {
  constructor(private _onHide: (pid: number) => void) {
    super('processes', 'Training processes', 'jp-TrainWatch-processes', false);
  }

  render(sample: ISampleJSON | null): void {
    const processes = sample?.processes ?? [];
    this.setHidden(!processes.length);
    this.title.setSummary(String(processes.length));
    renderProcesses(this.node, processes, this._onHide);
  }
}

/**
 * The running kernels: the notebook each serves (its name when it has no session), state,
 * pid, working directory, I/O rates and GPU memory.
 */
export class KernelsView extends TitledBlock {
  constructor() {
    super('kernels', 'Kernels', 'jp-TrainWatch-kernels', false);
  }

  render(sample: ISampleJSON | null): void {
    const node = this.node;
    node.textContent = '';
    const kernels = Object.values(sample?.kernels ?? {});
    this.title.setSummary(String(kernels.length));
    if (!kernels.length) {
      node.appendChild(el('div', 'jp-TrainWatch-empty', 'No running kernel.'));
      return;
    }
    const list = el('ul', 'jp-TrainWatch-kernelList');
    for (const k of kernels) {
      const item = el('li', 'jp-TrainWatch-kernel');
      item.dataset.kernel = k.id;
      const notebook = k.notebook ? k.notebook.split('/').pop() : null;
      if (k.notebook) {
        item.title = `${k.notebook}\nkernel ${k.name ?? '?'} ${k.id}`;
      }
      const io = k.io
        ? `read ${formatMBs(k.io.read_chars_s / 1e6)}, write ${formatMBs(k.io.write_chars_s / 1e6)}`
        : 'I/O –';
      const gpu = k.gpu_mem_bytes != null ? ` · GPU ${formatBytes(k.gpu_mem_bytes)}` : '';
      item.append(
        el(
          'div',
          'jp-TrainWatch-kernelHead',
          `${notebook ?? k.name ?? 'kernel'} · ${k.execution_state ?? '?'} · pid ${k.pid ?? '?'}`
        ),
        pathEl('div', 'jp-TrainWatch-kernelBody', `${k.cwd ?? ''}`),
        el('div', 'jp-TrainWatch-kernelBody', `${io}${gpu}`)
      );
      list.appendChild(item);
    }
    node.appendChild(list);
  }
}
