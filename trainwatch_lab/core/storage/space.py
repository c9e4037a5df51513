"""Free space and the checkpoints that eat it (how fast it shrinks: core.storage.fill).

Pure functions over data the caller already has (a statvfs result, a series of readings) plus
one bounded directory scan; the scan touches the filesystem, so callers run it inside the
mount guard's worker (core.paths.names does), never on the kernel or event-loop thread.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import os
import re
import statistics
import time
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass

from ..defaults import CHECKPOINT_SUFFIXES
from ..model import CheckpointInfo
from .probe import PREFIX as PROBE_PREFIX

MAX_SCAN_ENTRIES = 10_000
# directories below the watched one: a parent two levels above a run still reaches Lightning's
# lightning_logs/version_0/checkpoints/
MAX_SCAN_DEPTH = 5
MAX_SAVE_DEPTH = 8  # inside one save directory (Orbax: step/item/ocdbt.process_0/d/...)
# a folder whose name says nothing of training output is listed this far: a dataset folder of
# a million images beside the checkpoints must not eat the scan's whole entry budget
OTHER_DIR_ENTRIES = 1_000
LATEST_TAG_BYTES = 256  # DeepSpeed's ``latest`` holds a tag such as "global_step500"

# One directory per save, by the name its library gives it: Hugging Face Trainer
# checkpoint-<step> (transformers.trainer_utils.PREFIX_CHECKPOINT_DIR), Accelerate
# checkpoint_<n> (ProjectConfiguration(automatic_checkpoint_naming=True)), DeepSpeed
# global_step<n> (DeepSpeedEngine.save_checkpoint's default tag)
SAVE_DIR_NAME = re.compile(r"(?:checkpoint[-_]\d+|global_step\d+)\Z")
# a directory named after a step or an epoch: Orbax's 100/, a training loop's step_1000/
STEP_DIR_NAME = re.compile(
    r"(?:\d+|(?:step|steps|ckpt|checkpoint|epoch|iter|iteration)[-_=]?\d+)\Z", re.IGNORECASE
)
# files only a save directory holds: DeepSpeed's mp_rank_00_model_states.pt and
# zero_pp_rank_0_mp_rank_00_optim_states.pt (deepspeed/runtime/engine.py, _get_ckpt_name and
# _get_rank_zero_ckpt_name; older releases wrote "..._mp_rank_00optim_states.pt")
DEEPSPEED_FILE = re.compile(
    r"(?:(?:bf16_)?zero_pp_rank_\d+_)?mp_rank_\d+_?(?:model|optim)_states\.pt\Z"
    r"|layer_\d+-model_\d+-model_states\.pt\Z"
)
# Orbax: _CHECKPOINT_METADATA in a CheckpointManager's step directory, _METADATA and
# manifest.ocdbt in a saved tree (an item), an empty orbax.checkpoint file (the v1 API)
ORBAX_FILES = frozenset({"_CHECKPOINT_METADATA", "_METADATA", "manifest.ocdbt", "orbax.checkpoint"})
# the parts of one save written side by side (lower-cased names): a model, possibly sharded
# (model-00001-of-00003.safetensors), its optimizer, scheduler, scaler and RNG states
SAVE_PART = re.compile(
    r"(?:(?:pytorch_|adapter_|tf_|flax_|diffusion_pytorch_)?model(?:-\d+-of-\d+)?"
    r"|optim(?:izer)?(?:_\d+)?|(?:lr_)?scheduler(?:_\d+)?|scaler(?:_\d+)?"
    r"|rng_state(?:_\d+)?|random_states_\d+|training_args|ema(?:_model)?)\."
)
# Lightning's last.ckpt (ModelCheckpoint.CHECKPOINT_NAME_LAST, last-v1.ckpt when taken): a
# copy or a link of the newest save, so not a save of its own beside the others
ALIAS_SAVE = re.compile(r"last(?:-v\d+)?\.", re.IGNORECASE)
# a save still being written: Orbax's <step>.orbax-checkpoint-tmp-<n>, Trainer's older
# tmp-checkpoint-<step>, and the usual partial-file names
TEMPORARY_SAVE = re.compile(
    r"\.orbax-checkpoint-tmp|\Atmp-checkpoint-|\.(?:tmp|temp|partial|part|incomplete)\Z|~\Z",
    re.IGNORECASE,
)
# folders that hold training output by their names are looked into first
RUN_DIR_HINT = re.compile(
    r"ckpt|checkpoint|lightning_logs|version_\d|global_step|step|epoch|save|weight|model"
    r"|output|result|orbax|keras|\A\d+\Z",
    re.IGNORECASE,
)
# folders below the watched one that hold no saves but may hold many big files with checkpoint
# suffixes (nanoGPT's data/openwebtext/train.bin, HDF5 datasets): not entered
NOT_RUN_DIRS = frozenset(
    {"data", "dataset", "datasets", "__pycache__", "node_modules", "site-packages"}
)
_DIGITS = re.compile(r"\d+")
CADENCE_MAX_CV = 0.5  # spacing stdev / mean above this: saves are not regular


def space_fields(st: os.statvfs_result) -> dict[str, int]:
    """PathState's space fields from statvfs. ``avail`` (f_bavail) is what a non-root
    training job may still write; ``free`` includes the root-reserved blocks."""
    return {
        "total_bytes": st.f_blocks * st.f_frsize,
        "free_bytes": st.f_bfree * st.f_frsize,
        "avail_bytes": st.f_bavail * st.f_frsize,
        "inodes_total": st.f_files,
        "inodes_free": st.f_ffree,
    }


def _cadence(save_times: Iterable[float]) -> float | None:
    """Median spacing of saves, only when there are >= 3 and they come regularly."""
    times = sorted(save_times)
    if len(times) < 3:
        return None
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = statistics.fmean(gaps)
    if mean <= 0 or statistics.pstdev(gaps) / mean > CADENCE_MAX_CV:
        return None
    return statistics.median(gaps)


# -- checkpoint scan ------------------------------------------------------------------------
# What one save is follows what each library writes (the tests build each layout with the
# library itself, or copy its documented layout where it needs CUDA):
#   Lightning, Keras 3, plain torch.save: one file per save (epoch=3-step=500.ckpt,
#     model_2.keras, x.weights.h5, model_7.pt), often many in one folder
#   Hugging Face Trainer checkpoint-<step>/, Accelerate checkpoint_<n>/, DeepSpeed
#     global_step<n>/ (plus a ``latest`` file naming the newest tag): one directory per save
#   torch.distributed.checkpoint: a directory of .metadata + __<rank>_<n>.distcp files
#   Orbax CheckpointManager: a numbered step directory (_CHECKPOINT_METADATA, item folders)
@dataclass(slots=True)
class _Save:
    """One save: a file, the part files of one save side by side, or a whole directory."""

    mtime: float  # of its newest file
    size: int

    def merge(self, other: _Save) -> None:
        self.mtime = max(self.mtime, other.mtime)
        self.size += other.size


class _Walk:
    """The bounds of one scan: entries looked at, the clock, the mount points not entered."""

    def __init__(self, max_entries: int, budget_s: float | None, skip: Container[str]) -> None:
        self.left = max_entries
        self.deadline = None if budget_s is None else time.monotonic() + budget_s
        self.skip = skip

    def stopped(self) -> bool:
        return self.left <= 0 or (self.deadline is not None and time.monotonic() >= self.deadline)

    def listing(self, path: str, cap: int | None = None) -> list[os.DirEntry[str]]:
        """Entries of ``path`` within the bounds; none when it cannot be listed."""
        out: list[os.DirEntry[str]] = []
        try:
            with os.scandir(path) as it:
                for entry in it:
                    if self.stopped() or (cap is not None and len(out) >= cap):
                        break
                    self.left -= 1
                    out.append(entry)
        except OSError:
            pass
        return out


def _regular(entry: os.DirEntry[str]) -> os.stat_result | None:
    """stat of a regular file, never through a symlink: a link (Lightning's ``last.ckpt``
    with ``save_last="link"``) is no second save, and a loop must not be walked."""
    try:
        if entry.is_file(follow_symlinks=False):
            return entry.stat(follow_symlinks=False)
    except OSError:
        pass
    return None


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _ignored(name: str) -> bool:
    """Hidden (our probe files, .ipynb_checkpoints, .git) or a save still being written."""
    return name.startswith(".") or TEMPORARY_SAVE.search(name) is not None


def _is_checkpoint(name: str, suffixes: tuple[str, ...]) -> bool:
    lower = name.lower()
    if not lower.endswith(suffixes) or _ignored(name):
        return False
    # ".bin" is any binary file (a download, a tokenised dataset): a save only by its name
    # (pytorch_model.bin, optimizer.bin) or inside a save directory (weighed whole)
    return not lower.endswith(".bin") or SAVE_PART.match(lower) is not None or "ckpt" in lower


def _is_save_dir(name: str, entries: list[os.DirEntry[str]], sfx: tuple[str, ...]) -> bool:
    """A directory that is one save, by the name its library gives such a directory or by the
    files only such a directory holds."""
    if SAVE_DIR_NAME.match(name):
        return True
    files = {e.name for e in entries if _is_file(e)}
    if ".metadata" in files and any(f.endswith(".distcp") for f in files):
        return True  # torch.distributed.checkpoint
    if files & ORBAX_FILES or any(DEEPSPEED_FILE.match(f) for f in files):
        return True
    # a loop's step_1000/ holding model.pt and optimizer.pt (but a job's 0/ holding
    # epoch_1.pt and epoch_2.pt is a folder of saves)
    ckpts = [f for f in files if _is_checkpoint(f, sfx)]
    return STEP_DIR_NAME.match(name) is not None and bool(ckpts) and not _numbered_series(ckpts)


def _template(name: str) -> str:
    return _DIGITS.sub("#", name)


def _numbered_series(names: Iterable[str]) -> bool:
    """Two or more checkpoint files named alike but for their numbers (epoch=1.ckpt,
    epoch=2.ckpt) are separate saves; a sharded model's parts are not such a series."""
    templates = collections.Counter(_template(n) for n in names if not SAVE_PART.match(n.lower()))
    return any(count > 1 for count in templates.values())


def _weigh(walk: _Walk, entries: list[os.DirEntry[str]], depth: int = 0) -> _Save | None:
    """Every regular file under a save directory (hidden ones too: DCP's ``.metadata``), dated
    by the newest; bounded like the rest of the scan."""
    save: _Save | None = None
    for entry in entries:
        if walk.stopped():
            break
        part: _Save | None = None
        if entry.name.startswith(PROBE_PREFIX):
            continue
        if _is_dir(entry):
            if depth < MAX_SAVE_DEPTH and entry.path not in walk.skip:
                part = _weigh(walk, walk.listing(entry.path), depth + 1)
        elif (st := _regular(entry)) is not None:
            part = _Save(st.st_mtime, st.st_size)
        if part is None:
            continue
        if save is None:
            save = part
        else:
            save.merge(part)
    return save


def _file_saves(
    directory: str, entries: list[os.DirEntry[str]], sfx: tuple[str, ...]
) -> dict[str, _Save]:
    """Checkpoint files in a folder of saves: each file is a save, except the parts written
    side by side for one save (``model.safetensors`` + ``optimizer.pt`` + ``scheduler.pt``),
    which make one, and Lightning's ``last.ckpt`` copy, which is the newest save again
    (counted only when alone)."""
    files = [
        (e, st) for e in entries if _is_checkpoint(e.name, sfx) and (st := _regular(e)) is not None
    ]
    own = [(e, st) for e, st in files if not ALIAS_SAVE.match(e.name)] or files
    parts = [st for e, st in own if SAVE_PART.match(e.name.lower())]
    saves = {
        e.path: _Save(st.st_mtime, st.st_size)
        for e, st in own
        if not (len(parts) > 1 and SAVE_PART.match(e.name.lower()))
    }
    if len(parts) > 1:
        saves[directory] = _Save(max(st.st_mtime for st in parts), sum(st.st_size for st in parts))
    return saves


def _latest_tag(entries: list[os.DirEntry[str]]) -> str | None:
    """DeepSpeed writes the tag of its last complete save to ``latest`` beside the tags."""
    for entry in entries:
        if entry.name != "latest" or not _is_file(entry):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                raw = os.read(fd, LATEST_TAG_BYTES)
            finally:
                os.close(fd)
        except OSError:
            return None
        tag = raw.decode("utf-8", "replace").strip()
        return tag if tag and "/" not in tag and not tag.startswith(".") else None
    return None


def _subdirs(walk: _Walk, entries: list[os.DirEntry[str]]) -> list[os.DirEntry[str]]:
    """Subdirectories worth entering: never a symlink, a hidden or half-written one, a mount
    point below (``skip_dirs``), a data set or a package tree."""
    return [
        e
        for e in entries
        if _is_dir(e)
        and not _ignored(e.name)
        and e.name not in NOT_RUN_DIRS
        and e.path not in walk.skip
    ]


def _add(saves: dict[str, _Save], key: str, save: _Save | None) -> None:
    if save is None:
        return
    if key in saves:
        saves[key].merge(save)
    else:
        saves[key] = save


def _info(saves: dict[str, _Save], tagged: set[str]) -> CheckpointInfo | None:
    """The newest save is the one a DeepSpeed ``latest`` file names, else the newest file."""
    if not saves:
        return None
    pick = [p for p in tagged if p in saves] or list(saves)
    path = max(pick, key=lambda p: (saves[p].mtime, p))
    return CheckpointInfo(
        count=len(saves),
        newest_path=path,
        newest_bytes=saves[path].size,
        newest_mtime=saves[path].mtime,
        cadence_s=_cadence(s.mtime for s in saves.values()),
    )


def scan_checkpoints(
    directory: str,
    suffixes: Sequence[str] = CHECKPOINT_SUFFIXES,
    max_entries: int = MAX_SCAN_ENTRIES,
    budget_s: float | None = None,
    skip_dirs: Container[str] = (),
) -> CheckpointInfo | None:
    """Count the checkpoint saves under ``directory`` and size the newest: the next save will
    need about that much space again, so one save must be one save (a Lightning
    ``checkpoints/`` folder of six 9 MiB files is six saves of 9 MiB, not one of 54 MiB).

    The watched directory may be the run directory, the checkpoints folder or a parent a level
    or two up, so the scan goes down to ``MAX_SCAN_DEPTH`` levels, folders whose names look
    like training output first. A save directory is weighed whole and not entered further.
    Symlinks are never followed; at most ``max_entries`` entries are looked at, and after
    ``budget_s`` seconds the scan stops and reports what it saw (a big directory on a slow
    share must not hold its helper for long). Directories in ``skip_dirs`` (mount points) are
    not entered.
    """
    sfx = tuple(s.lower() for s in suffixes)
    walk = _Walk(max_entries, budget_s, skip_dirs)
    saves: dict[str, _Save] = {}
    tagged: set[str] = set()
    order = itertools.count()
    queue: list[tuple[int, int, int, str]] = [(0, 0, next(order), directory)]
    while queue and not walk.stopped():
        rank, depth, _, path = heapq.heappop(queue)
        entries = walk.listing(path, None if depth == 0 or rank == 0 else OTHER_DIR_ENTRIES)
        if _is_save_dir(os.path.basename(os.path.normpath(path)), entries, sfx):
            _add(saves, path, _weigh(walk, entries))
            continue
        for key, save in _file_saves(path, entries, sfx).items():
            _add(saves, key, save)
        if (tag := _latest_tag(entries)) is not None:
            tagged.add(os.path.join(path, tag))
        if depth < MAX_SCAN_DEPTH:
            for sub in _subdirs(walk, entries):
                hinted = 0 if RUN_DIR_HINT.search(sub.name) else 1
                heapq.heappush(queue, (hinted, depth + 1, next(order), sub.path))
    return _info(saves, tagged)
