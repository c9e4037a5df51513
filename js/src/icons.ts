/**
 * Severity icons from JupyterLab's own set (a glyph such as U+26D4 has no font on many
 * Linux desktops, Debian's Chromium drew a box): the same icon for the panel's warnings, its
 * verdict line and the status bar, coloured by the level in CSS.
 */

import { errorIcon } from '@jupyterlab/ui-components';

/** The icon of a warning or critical level, as an inline element (none for info, ok). */
export function severityIcon(level: string): HTMLElement[] {
  if (level !== 'warning' && level !== 'critical') {
    return [];
  }
  const icon = errorIcon.element({
    tag: 'span',
    className: `jp-TrainWatch-levelIcon jp-mod-${level}`
  });
  icon.dataset.level = level;
  icon.setAttribute('aria-hidden', 'true');
  return [icon];
}
