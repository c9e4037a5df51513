/**
 * The panel's sections about what runs on the machine: the log mirrors (``local_mirror``),
 * the training processes found (scripts in terminals, tmux, nohup) and the running kernels.
 */

import { TitledBlock } from '../blocks';
import { changed, el, keyedChildren, pathEl } from '../dom';
import { formatBytes, formatMBs } from '../format';
import { IKernelJSON, IMirrorJSON, ISampleJSON } from '../model';
import { renderProcesses } from '../processes';

/** One line per live ``local_mirror`` of the machine: Python's status words, coloured by its
 * state (a share that does not answer, an error). Hidden when there is none. */
export class MirrorsView extends TitledBlock {
  constructor() {
    super('mirrors', 'Log mirrors', 'jp-TrainWatch-mirrors', false);
  }

  render(mirrors: IMirrorJSON[]): void {
    this.setHidden(!mirrors.length);
    this.title.setSummary(String(mirrors.length));
    if (
      !changed(
        this.node,
        mirrors.map(m => [m.local, m.state, m.text])
      )
    ) {
      return;
    }
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

  private _list = el('ul', 'jp-TrainWatch-kernelList');
  private _empty = el('div', 'jp-TrainWatch-empty', 'No running kernel.');

  render(sample: ISampleJSON | null): void {
    const kernels = Object.values(sample?.kernels ?? {});
    this.title.setSummary(String(kernels.length));
    const shown = kernels.length ? this._list : this._empty;
    if (this.node.firstChild !== shown || this.node.childNodes.length !== 1) {
      this.node.replaceChildren(shown);
    }
    keyedChildren(
      this._list,
      kernels,
      k => k.id,
      () => el('li', 'jp-TrainWatch-kernel'),
      (item, k) => this._fill(item, k)
    );
  }

  private _fill(item: HTMLElement, k: IKernelJSON): void {
    const notebook = k.notebook ? k.notebook.split('/').pop() : null;
    const io = k.io
      ? `read ${formatMBs(k.io.read_chars_s / 1e6)}, write ${formatMBs(k.io.write_chars_s / 1e6)}`
      : 'I/O –';
    const gpu = k.gpu_mem_bytes != null ? ` · GPU ${formatBytes(k.gpu_mem_bytes)}` : '';
    const head = `${notebook ?? k.name ?? 'kernel'} · ${k.execution_state ?? '?'} · pid ${k.pid ?? '?'}`;
    if (!changed(item, [k.notebook, k.name, head, k.cwd, io, gpu])) {
      return;
    }
    item.dataset.kernel = k.id;
    item.title = k.notebook ? `${k.notebook}\nkernel ${k.name ?? '?'} ${k.id}` : '';
    item.replaceChildren(
      el('div', 'jp-TrainWatch-kernelHead', head),
      pathEl('div', 'jp-TrainWatch-kernelBody', `${k.cwd ?? ''}`),
      el('div', 'jp-TrainWatch-kernelBody', `${io}${gpu}`)
    );
  }
}
