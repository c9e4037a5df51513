/**
 * What one sample says, in the numbers and words Python sent: the warnings and info notes,
 * the devices under the watched paths, GPU and disk load, the status-bar text (DOM-free).
 */

import { MIB_TO_MB } from './format';
import type { IAlertJSON, ISampleJSON, IWatchedPathJSON } from './model';

/** Devices under watched paths; all devices when no watched path resolved to one. */
export function watchedDevices(sample: ISampleJSON): string[] {
  const devices = new Set<string>();
  for (const p of Object.values(sample.paths)) {
    if (p.device && sample.disks[p.device]) {
      devices.add(p.device);
    }
  }
  const list = devices.size ? [...devices] : Object.keys(sample.disks);
  return list.sort();
}

/** Warnings that need attention (severity warning or critical). */
export function activeWarnings(sample: ISampleJSON | null): IAlertJSON[] {
  return (sample?.warnings ?? []).filter(w => w.severity !== 'info');
}

/** Mean utilization of the GPUs that report one, or null. */
export function gpuUtil(sample: ISampleJSON): number | null {
  const utils = sample.gpus
    .map(g => g.util_pct)
    .filter((u): u is number => typeof u === 'number' && Number.isFinite(u));
  return utils.length ? utils.reduce((a, b) => a + b, 0) / utils.length : null;
}

/** Read + write in decimal MB/s, summed over the devices under the watched paths. */
export function diskThroughput(sample: ISampleJSON): number | null {
  const devices = watchedDevices(sample);
  if (!devices.length) {
    return null;
  }
  return devices.reduce((sum, d) => {
    const r = sample.disks[d];
    return sum + ((r.rmb_s || 0) + (r.wmb_s || 0)) * MIB_TO_MB;
  }, 0);
}

/**
 * The status-bar text: the headline's ``brief`` that Python made for this sample (the panel
 * header and the notebook dashboard use the same headline), e.g. ``GPU 87 % · disk 45.1
 * MB/s · ⚠ 1``. Words of its own only before the first sample and when offline.
 */
export function statusText(sample: ISampleJSON | null, connected = true): string {
  const brief = sample?.headline?.brief || (sample ? 'TrainWatch' : '');
  if (!brief) {
    return connected ? 'TrainWatch' : 'TrainWatch (offline)';
  }
  return connected ? brief : `${brief} · offline`;
}

/** The info notes (severity info): one quiet line each, never a warning box. */
export function infoNotes(sample: ISampleJSON | null): IAlertJSON[] {
  return (sample?.warnings ?? []).filter(w => w.severity === 'info');
}

/** Why the GPU charts are empty, or null when there are GPUs. */
export function gpuEmptyReason(sample: ISampleJSON | null): string | null {
  if (!sample) {
    return 'Waiting for the first sample…';
  }
  if (sample.gpus.length) {
    return null;
  }
  return sample.notes?.gpus || 'No NVIDIA GPU found on the server.';
}

/**
 * The paths watched at this sample and why (``watched``, the server's list sent with every
 * sample), each with its state when the sample has one; without that list, the sample's
 * paths.
 */
export function watchedPaths(sample: ISampleJSON | null): IWatchedPathJSON[] {
  if (!sample) {
    return [];
  }
  const roles = sample.watched ?? Object.fromEntries(Object.keys(sample.paths).map(p => [p, []]));
  return Object.keys(roles)
    .sort()
    .map(path => ({ path, roles: roles[path], state: sample.paths[path] ?? null }));
}

/**
 * The notebooks whose ``%trainwatch`` watches a path (its ``notebook:<kernel id>`` roles),
 * by file name: "watched by train.ipynb, eval.ipynb"; empty when no notebook asked for it.
 */
export function watchedBy(roles: string[], sample: ISampleJSON | null): string {
  const names = roles
    .filter(role => role.startsWith('notebook:'))
    .map(role => sample?.kernels?.[role.slice('notebook:'.length)]?.notebook ?? 'a notebook')
    .map(path => path.split('/').pop() || path);
  return names.length ? `watched by ${[...new Set(names)].join(', ')}` : '';
}

/**
 * What a view watches, said beside its verdict: the panel and the status bar watch the
 * machine (the server's sampler), the notebook's dashboard its kernel's paths.
 */
export function scopeText(sample: ISampleJSON | null, short = false): string {
  if (!sample) {
    return 'this machine';
  }
  const n = watchedPaths(sample).length;
  return `this machine: ${n}${short ? '' : ' watched'} path${n === 1 ? '' : 's'}`;
}
