/**
 * Free space per filesystem: the watched paths grouped the way core/storage/fill.py groups them, the
 * percent used of each, and the fill notes in the numbers Python sent (DOM-free).
 */

import { formatBytes, formatDuration, formatMBs, shortPath } from './format';
import type { IAlertJSON, IPathStateJSON } from './model';

const MB = 1e6;

/**
 * Whether ``w`` is a disk-filling warning about the filesystem mounted at ``mount``, on which
 * ``paths`` are watched: its subject is the filesystem or one of those paths (one warning per
 * path, or one per filesystem), or its sentence opens with the filesystem.
 */
function fillingWarning(w: IAlertJSON, mount: string, paths: string[]): boolean {
  return (
    w.code === 'disk-filling' &&
    w.severity !== 'info' &&
    (w.subject === mount || paths.includes(w.subject) || w.message.startsWith(`${mount} `))
  );
}

/**
 * The fill notes under the free-space chart: one line per filesystem that is filling, in the
 * numbers Python sent (the same estimate the disk-filling warning uses; nothing refitted here).
 * Python sends the numbers only when the advisor believes them (null otherwise), and a fill
 * is stated only while a ``disk-filling`` warning about that filesystem is up: an estimate
 * beside "Storage OK" (or beside warnings about something else) would contradict the verdict.
 */
export function fillNotes(
  paths: Record<string, IPathStateJSON>,
  warnings: readonly IAlertJSON[] = []
): string[] {
  const onFs = new Map<string, string[]>();
  for (const p of Object.keys(paths).sort()) {
    const fs = paths[p].fill?.filesystem;
    if (fs) {
      onFs.set(fs, [...(onFs.get(fs) ?? []), p]);
    }
  }
  const notes: string[] = [];
  for (const [fs, on] of onFs) {
    const fill = paths[on[0]].fill!;
    const numbers = fill.rate_bps != null && fill.seconds_to_full != null;
    if (fill.trend !== 'filling' || !numbers) {
      continue;
    }
    if (warnings.some(w => fillingWarning(w, fs, on))) {
      // (named as in the chart's legend: the end of the mountpoint)
      notes.push(
        `${shortPath(fs)}: filling at ${formatMBs(fill.rate_bps! / MB)}, full in ${formatDuration(fill.seconds_to_full)}`
      );
    }
  }
  return notes;
}

/** One filesystem under the watched paths: every path on it sees the same free space. */
export interface IFilesystemGroup {
  /** the key Python groups by (core/storage/fill.py: mountpoint and size) */
  id: string;
  /** where it is mounted (``fill.filesystem``), for the legend */
  label: string;
  /** the watched paths on it, sorted */
  paths: string[];
}

/**
 * Group the watched paths by filesystem, as core/storage/fill.py does (mountpoint and total size: a
 * directory under a project quota reports the quota as its size), so the space chart draws
 * one line per filesystem, not one identical line per path.
 */
export function filesystems(paths: Record<string, IPathStateJSON>): IFilesystemGroup[] {
  const groups = new Map<string, IFilesystemGroup>();
  for (const path of Object.keys(paths).sort()) {
    const p = paths[path];
    if (!p.total_bytes || p.avail_bytes === null || p.avail_bytes === undefined) {
      continue; // nothing measured (missing, not answering)
    }
    const mount = p.fill?.filesystem || p.mountpoint || path;
    const id = `${mount}|${p.total_bytes}`;
    const group = groups.get(id);
    if (group) {
      group.paths.push(path);
    } else {
      groups.set(id, { id, label: mount, paths: [path] });
    }
  }
  const list = [...groups.values()];
  // the same mountpoint twice (quotas): say which is which by its size
  const count = new Map<string, number>();
  list.forEach(g => count.set(g.label, (count.get(g.label) ?? 0) + 1));
  for (const g of list) {
    if (count.get(g.label)! > 1) {
      g.label = `${g.label} (${formatBytes(Number(g.id.split('|').pop()))})`;
    }
  }
  return list.sort((a, b) => a.label.localeCompare(b.label));
}

/**
 * Percent used of one filesystem at each point, from the columns of its paths (``avail``,
 * ``total`` and ``free`` per path, in the same order): the first path with all three values
 * at a point counts. df's Use%, as every other view says it (core/model.py
 * df_used_fraction): used / (used + avail), used = total − free, so the blocks reserved for
 * root count neither way and a disk whose user space is full reads 100 %.
 */
export function usedPercent(
  avail: (number | null)[][],
  total: (number | null)[][],
  free: (number | null)[][]
): (number | null)[] {
  const n = Math.max(0, ...avail.map(c => c.length));
  const out: (number | null)[] = [];
  for (let i = 0; i < n; i++) {
    let value: number | null = null;
    for (let j = 0; j < avail.length && value === null; j++) {
      const a = avail[j][i];
      const t = total[j]?.[i];
      const f = free[j]?.[i];
      if (typeof a === 'number' && typeof t === 'number' && typeof f === 'number') {
        const used = t - f;
        if (used + a > 0) {
          value = Math.min(100, Math.max(0, (100 * used) / (used + a)));
        }
      }
    }
    out.push(value);
  }
  return out;
}
