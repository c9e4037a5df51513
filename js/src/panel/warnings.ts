/** Warning rows shown at first, the worst first: the verdict, these and the main charts fit
 * in one screen (900 px); a "more" line shows the others. */
export const WARNINGS_SHOWN = 3;

const RANK: Record<string, number> = { critical: 0, warning: 1, info: 2 };

/**
 * The panel's Warnings section: each warning folded to its first line, a click unfolds the
 * whole message and the fix; what the reader unfolded stays unfolded across samples. The
 * worst come first; past ``WARNINGS_SHOWN`` the others wait behind one "N more" line.
 */

import { TitledBlock } from '../blocks';
import { changed, el, pathEl, proseEl } from '../dom';
import { plainProse } from '../format';
import { severityIcon } from '../icons';
import { IAlertJSON, ISampleJSON } from '../model';
import { activeWarnings } from '../readings';

export class WarningsView extends TitledBlock {
  private _opened = new Set<string>(); // warnings the reader unfolded (code + subject)
  private _all = false; // the reader asked to see every warning

  constructor() {
    super('warnings', 'Warnings', 'jp-TrainWatch-warnings');
  }

  render(sample: ISampleJSON | null): void {
    const node = this.node;
    const warnings = activeWarnings(sample);
    this.setHidden(!warnings.length);
    node.dataset.count = String(warnings.length);
    this.title.setSummary(String(warnings.length)); // folded, the count still shows
    // rebuild only when the warnings changed: a list replaced every tick loses the reader's
    // text selection, scroll position and what they unfolded
    if (!changed(node, warnings)) {
      return;
    }
    node.textContent = '';
    if (!warnings.length) {
      return;
    }
    const list = el('div', 'jp-TrainWatch-warningList');
    const sorted = [...warnings].sort((a, b) => RANK[a.severity] - RANK[b.severity]);
    const items = sorted.map(w => this._item(w));
    list.append(...items);
    node.appendChild(list);
    const extra = items.slice(WARNINGS_SHOWN);
    if (extra.length) {
      const more = el('button', 'jp-TrainWatch-moreWarnings');
      more.type = 'button';
      const show = (all: boolean) => {
        this._all = all;
        extra.forEach(item => item.classList.toggle('jp-mod-extra', !all));
        more.textContent = all ? 'Show fewer' : `${extra.length} more…`;
        more.setAttribute('aria-expanded', String(all));
      };
      more.onclick = () => show(!this._all);
      show(this._all);
      node.appendChild(more);
    }
  }

  private _item(w: IAlertJSON): HTMLDetailsElement {
    const id = `${w.code}|${w.subject}`;
    const item = el('details', `jp-TrainWatch-warning jp-mod-${w.severity}`);
    item.dataset.code = w.code;
    item.dataset.subject = w.subject;
    item.open = this._opened.has(id);
    item.addEventListener('toggle', () => {
      if (item.open) {
        this._opened.add(id);
      } else {
        this._opened.delete(id);
      }
    });
    const summary = el('summary', 'jp-TrainWatch-warningHead');
    const severity = el('span', 'jp-TrainWatch-severity');
    severity.append(...severityIcon(w.severity), w.severity);
    summary.append(severity, proseEl('span', 'jp-TrainWatch-message', w.message));
    summary.title = plainProse(w.message);
    const body = el('div', 'jp-TrainWatch-warningBody');
    const about = el('div', 'jp-TrainWatch-about');
    about.append(
      el('code', 'jp-TrainWatch-code', w.code),
      pathEl('span', 'jp-TrainWatch-subject', w.subject)
    );
    body.append(proseEl('div', 'jp-TrainWatch-fix', `Fix: ${w.fix}`), about);
    item.append(summary, body);
    return item;
  }
}
