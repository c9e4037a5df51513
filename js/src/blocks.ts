/**
 * The building blocks of the side panel: a plain DOM block, a section that folds (its title
 * is the button; what it holds hides with it, and the panel remembers what the reader folded),
 * and a titled section that shows and hides with its title.
 */

import { Widget } from '@lumino/widgets';

import { el } from './dom';

/** A plain DOM block inside the panel (header, lists, forms). */
export class Block extends Widget {
  constructor(className: string) {
    super();
    this.addClass(className);
  }
}

/** Called when the reader opens or folds a section (the panel saves it in its settings). */
export type FoldListener = (id: string, open: boolean) => void;

/**
 * A section title ("Warnings", "GPU"...) that folds what the section holds: a click on the
 * title (a button, so the keyboard reaches it) hides or shows its members. A folded section
 * keeps one line: its title and a summary ("3 paths"). Members keep their own hidden state
 * (a section with nothing to say hides itself); folding only adds ``jp-mod-folded``.
 */
export class Section extends Block {
  readonly members: Widget[] = [];
  onToggle: FoldListener | null = null;
  private _open: boolean;
  private _button: HTMLButtonElement;
  private _summary: HTMLSpanElement;

  constructor(
    readonly sectionId: string,
    title: string,
    readonly openByDefault = true
  ) {
    super('jp-TrainWatch-section');
    this._open = openByDefault;
    const head = el('h3', 'jp-TrainWatch-sectionTitle');
    const button = (this._button = el('button', 'jp-TrainWatch-sectionToggle'));
    button.type = 'button';
    this._summary = el('span', 'jp-TrainWatch-sectionSummary');
    button.append(el('span', 'jp-TrainWatch-sectionName', title), this._summary);
    button.onclick = () => {
      this.setOpen(!this._open);
      this.onToggle?.(this.sectionId, this._open);
    };
    head.appendChild(button);
    this.node.appendChild(head);
    this.node.dataset.section = sectionId;
    this._apply();
  }

  get open(): boolean {
    return this._open;
  }

  /** Widgets this section holds (they fold with it). */
  add(...widgets: Widget[]): void {
    this.members.push(...widgets);
    this._apply();
  }

  setOpen(open: boolean): void {
    if (open !== this._open) {
      this._open = open;
      this._apply();
    }
  }

  /** A few words after the title, e.g. "3 paths": what the section holds, said folded too. */
  setSummary(text: string): void {
    if (this._summary.textContent !== text) {
      this._summary.textContent = text;
    }
  }

  private _apply(): void {
    const open = this._open;
    this.toggleClass('jp-mod-open', open);
    this.node.dataset.open = String(open);
    this._button.setAttribute('aria-expanded', String(open));
    this._button.title = open ? 'Fold this section' : 'Open this section';
    for (const w of this.members) {
      w.toggleClass('jp-mod-folded', !open);
    }
  }
}

/** A section title and the block under it, added to the panel in that order. */
export class TitledBlock {
  readonly title: Section;
  readonly block: Block;

  constructor(id: string, title: string, className: string, openByDefault = true) {
    this.title = new Section(id, title, openByDefault);
    this.block = new Block(className);
    this.title.add(this.block);
  }

  /** The widgets to add to the panel, in order. */
  get widgets(): Widget[] {
    return [this.title, ...this.title.members];
  }

  get node(): HTMLElement {
    return this.block.node;
  }

  /** Hide (or show) the section with its title: an empty section says nothing. */
  setHidden(hidden: boolean): void {
    this.title.setHidden(hidden);
    this.block.setHidden(hidden);
  }
}
