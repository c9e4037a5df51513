/**
 * The building blocks of the side panel: a plain DOM block, a section title, and a titled
 * section that shows and hides with its title.
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

/** A section title ("Warnings", "GPU"...). */
export function section(title: string): Block {
  const b = new Block('jp-TrainWatch-section');
  b.node.appendChild(el('h3', 'jp-TrainWatch-sectionTitle', title));
  return b;
}

/** A section title and the block under it, added to the panel in that order. */
export class TitledBlock {
  readonly title: Block;
  readonly block: Block;

  constructor(title: string, className: string) {
    this.title = section(title);
    this.block = new Block(className);
  }

  /** The widgets to add to the panel, in order. */
  get widgets(): Widget[] {
    return [this.title, this.block];
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
