/**
 * "While you were away" (issue 27): the runs that ended badly since the reader last looked,
 * from GET recorded/why, and when that was, kept in the browser's storage (DOM-free).
 */

/** One run's end and why, as core/record/why.py's Ending.to_json says it. */
export interface IEndingJSON {
  name: string;
  pid: number;
  t: number;
  sentence: string;
  cause: string | null;
  evidence: string[];
  exit: { code?: number | null; signal?: string | null } | null;
  started: number | null;
  /** "shutdown" or "restart" when the kernel's end was asked of the server, else null. */
  requested?: string | null;
  /** Whether it ended badly, as core/record/why.py's Ending.badly decides it for all. */
  badly?: boolean;
  /** The command line (redacted by the server), its working directory, a kernel's notebook. */
  command?: string | null;
  cwd?: string | null;
  notebook?: string | null;
}

/** The ends of one run: the same command in the same directory (or the same notebook). */
export interface IRunCards {
  key: string;
  /** What the run was: "python train.py --lr 3" or the notebook, else its name. */
  what: string;
  /** Where it ran: its working directory, '' when unknown. */
  where: string;
  /** Its ends, newest first. */
  endings: IEndingJSON[];
}

/** Which run an end belongs to: its notebook, else its command and directory. */
export function runKey(ending: IEndingJSON): string {
  return ending.notebook
    ? `notebook\n${ending.notebook}`
    : `${ending.command ?? ending.name}\n${ending.cwd ?? ''}`;
}

/**
 * The cards grouped per run (issue 36: six stacked, three "python ended ... no cause seen"
 * that said nothing of which): newest run first, each run's ends newest first.
 */
export function groupRuns(cards: IEndingJSON[]): IRunCards[] {
  const runs = new Map<string, IRunCards>();
  for (const ending of [...cards].sort((a, b) => b.t - a.t)) {
    const key = runKey(ending);
    let run = runs.get(key);
    if (!run) {
      run = {
        key,
        what: ending.notebook ?? ending.command ?? ending.name,
        where: ending.notebook ? '' : (ending.cwd ?? ''),
        endings: []
      };
      runs.set(key, run);
    }
    run.endings.push(ending);
  }
  return [...runs.values()];
}

/** How far back the first look goes, with nothing stored yet (a new browser). */
export const FIRST_LOOK_S = 24 * 3600;

/**
 * The furthest back a look goes (the history keeps 7 days by default, and the server refuses
 * a longer window): a reader back after a month sees the last week's ends.
 */
export const MAX_LOOK_S = 7 * 24 * 3600;

/** The storage key of "last looked", per server (two Jupyter servers, two histories). */
export function lastLookedKey(baseUrl: string): string {
  return `trainwatch-lab:last-looked:${baseUrl}`;
}

/**
 * Whether a run ended badly: the server says (``badly``, the rule the notebook's replay
 * follows too: a cause seen, or an end neither clean nor asked for, so a kernel shut down or
 * restarted from JupyterLab gets no card). A server without it: anything but an exit status
 * of 0. An end whose status nobody could see (a kernel killed, a process found by
 * discovery) counts: its card says "no cause seen" when nothing was, never more.
 */
export function endedBadly(ending: IEndingJSON): boolean {
  if (typeof ending.badly === 'boolean') {
    return ending.badly;
  }
  return !(ending.exit && ending.exit.code === 0 && !ending.exit.signal);
}

/** A card's identity (dismissing one hides that end only). */
export function cardId(ending: IEndingJSON): string {
  return `${ending.pid}@${ending.t}`;
}

/** The cards to show: the bad ends not dismissed, newest first. */
export function awayCards(endings: IEndingJSON[], dismissed: ReadonlySet<string>): IEndingJSON[] {
  return endings.filter(e => endedBadly(e) && !dismissed.has(cardId(e))).sort((a, b) => b.t - a.t);
}

/** The little of the Web Storage API the state needs (localStorage, or a map in tests). */
export interface IKeyValue {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** When the reader last looked at the panel: what "while you were away" starts from. */
export class LastLooked {
  constructor(
    private _store: IKeyValue | null,
    private _key: string
  ) {}

  /**
   * The time stored (at most a week back), or a day before ``nowS`` the first time (and when
   * storage fails).
   */
  get(nowS: number): number {
    let stored: number = NaN;
    try {
      stored = Number(this._store?.getItem(this._key) ?? NaN);
    } catch {
      // storage refused (private mode, quota): look a day back
    }
    if (!(Number.isFinite(stored) && stored > 0 && stored < nowS)) {
      return nowS - FIRST_LOOK_S;
    }
    return Math.max(stored, nowS - MAX_LOOK_S);
  }

  /** The reader looked at ``nowS``: the next open starts there. */
  set(nowS: number): void {
    try {
      this._store?.setItem(this._key, String(nowS));
    } catch {
      // storage refused: the next open looks a day back again, which is harmless
    }
  }
}
