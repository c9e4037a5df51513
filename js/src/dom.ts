import { pathPieces, proseParts } from './format';

/**
 * The one element helper of the panel, its sections and the process rows (it imports only the
 * import-free format.ts, so the DOM-free modules that use it still load in node for jest).
 */

/** A new ``tag`` element with a class and a text; an empty class or text is left unset. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text) {
    node.textContent = text;
  }
  return node;
}

/** ``el`` for a warning's sentence: what it quotes in backticks set as ``<code>``. */
export function proseEl<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text: string
): HTMLElementTagNameMap[K] {
  const node = el(tag, className);
  for (const part of proseParts(text)) {
    node.append(part.code ? el('code', '', part.text) : part.text);
  }
  return node;
}

/** ``el`` for a path: a line may break after each "/", not inside a name. */
export function pathEl<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  path: string
): HTMLElementTagNameMap[K] {
  const node = el(tag, className);
  pathPieces(path).forEach((piece, i) => {
    if (i > 0) {
      node.append(document.createElement('wbr'));
    }
    node.append(piece);
  });
  return node;
}

/** What each node was last drawn from (``changed``): kept with the node, gone with it. */
const drawnFrom = new WeakMap<object, string>();

/**
 * Whether ``node`` must be redrawn to show ``data``; false when it already shows exactly that.
 * A section rebuilt on every sample loses what the reader holds in it: the focus on a button,
 * a text selection, a hover, an element a screenshot is being taken of.
 */
export function changed(node: object, data: unknown): boolean {
  const signature = JSON.stringify(data);
  if (drawnFrom.get(node) === signature) {
    return false;
  }
  drawnFrom.set(node, signature);
  return true;
}

/**
 * Make ``parent``'s children one element per item, in the items' order: the element of a key
 * already shown is kept (moved only when the order changed) and ``fill`` brings it up to date;
 * a new key gets ``make``'s element; the rest go. ``fill`` should use ``changed`` to leave an
 * unchanged row alone.
 */
export function keyedChildren<T>(
  parent: HTMLElement,
  items: readonly T[],
  key: (item: T) => string,
  make: (item: T) => HTMLElement,
  fill: (node: HTMLElement, item: T) => void
): void {
  const shown = new Map<string, HTMLElement>();
  for (const child of Array.from(parent.children)) {
    const k = (child as HTMLElement).dataset.key;
    if (k !== undefined && !shown.has(k)) {
      shown.set(k, child as HTMLElement);
    }
  }
  let next: Element | null = parent.firstElementChild;
  for (const item of items) {
    const k = key(item);
    let node = shown.get(k);
    shown.delete(k); // a key listed twice gets a second element
    if (!node) {
      node = make(item);
      node.dataset.key = k;
    }
    fill(node, item);
    if (node === next) {
      next = node.nextElementSibling;
    } else {
      parent.insertBefore(node, next);
    }
  }
  while (next) {
    const after: Element | null = next.nextElementSibling;
    next.remove();
    next = after;
  }
}
