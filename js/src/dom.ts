/**
 * The one element helper of the panel, its sections and the process rows (no imports, so the
 * DOM-free modules that use it still load in node for jest).
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
