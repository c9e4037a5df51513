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
