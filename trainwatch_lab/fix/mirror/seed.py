"""What a mirror that starts (a restarted kernel, the CLI again) may take the share to hold
already: a file there of the same size and modification time as the local one (what every
finished copy sets) is trusted only once digests of its bytes, taken on the share by the
guard's helper, equal the local file's (all of it up to ``mp.FULL_CHECK_BYTES``, the head
and tail of a bigger one: a 4.5 GiB log is not read twice before the first append); a copy
recreated sparse, full of zeros, looks the same by size and time. The temporaries an
earlier, killed mirror of this share left go first: the caller holds the share's lock
(mirror.lock), so no other mirror's can be there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import plan as mp
from .released import Entry

Call = Callable[..., Any]  # Mirror._call: (op, nbytes, **args) -> the answer, None on failure


def seed(
    call: Call,
    timeout: Callable[[int], float | None],
    local: str,
    share: str,
    released: dict[str, Entry],
) -> tuple[dict[str, mp.Copied], dict[str, Entry]] | None:
    """What the share holds of the local files, proven, and the files released here whose
    share copy no longer holds the released records (``resumed``); None when the share did
    not answer (the next round tries again)."""
    tree = call("tree", mp.BATCH_BYTES, directory=share, skip_prefix=mp.TMP_PREFIX)
    if tree is None:
        return None
    temps = [os.path.join(share, t) for t in tree.get("temps", [])]
    if temps and call("remove", 0, paths=temps) is None:
        return None
    files, _ = mp.scan(local)
    found = resumed(call, files, tree["files"], share, released)
    if found is None:
        return None
    copied, lost = found
    others = {rel: f for rel, f in files.items() if rel not in copied and rel not in lost}
    queue = list(mp.seed_candidates(others, tree["files"]).values())
    while queue:
        batch, size = mp.take_batch(queue, _window_bytes)
        items = [
            {"path": os.path.join(share, f.rel), "offset": start, "length": end - start}
            for f in batch
            for start, end in mp.seed_windows(f.size)
        ]
        found = call("digests", size, items=items, budget_s=(timeout(size) or 0.0) / 2)
        if found is None:
            return None
        done = 0
        for f in batch:
            n = len(mp.seed_windows(f.size))
            if done + n > len(found):
                break  # the helper's budget ended within this file: the next call
            if (c := mp.seeded(local, f, found[done : done + n])) is not None:
                copied[f.rel] = c
            done += n
        queue = batch[_files_done(batch, len(found)) :] + queue
    return copied, lost


def resumed(
    call: Call,
    files: dict[str, mp.LocalFile],
    share_files: dict[str, list[int]],
    share: str,
    released: dict[str, Entry],
) -> tuple[dict[str, mp.Copied], dict[str, Entry]] | None:
    """The files whose copied prefix was released here (mirror.released): the local bytes
    there are padding, so the share's copy is trusted up to the released offset when it is
    that long and begins with the same first record (never compared with the padding);
    the others are lost (their records are nowhere else: never written over). None when
    the share did not answer."""
    mine = {
        rel: e
        for rel, e in released.items()
        if e.released and (f := files.get(rel)) is not None and f.ino == e.ino
    }
    items = [
        {"path": os.path.join(share, rel), "offset": 0, "length": e.head_end}
        for rel, e in mine.items()
    ]
    digests = call("digests", sum(e.head_end for e in mine.values()), items=items) if items else []
    if digests is None or len(digests) < len(items):
        return None
    copied: dict[str, mp.Copied] = {}
    lost: dict[str, Entry] = {}
    for (rel, e), digest in zip(mine.items(), digests, strict=False):
        size = share_files.get(rel, [0])[0]
        if size < e.released or digest != e.head_digest:
            lost[rel] = e
            continue
        ranges = ((0, e.released, ""),)
        copied[rel] = mp.Copied(e.released, e.ino, -1, ranges, -1, e.released, e.pad_from)
    return copied, lost


def _window_bytes(f: mp.LocalFile) -> int:
    return sum(end - start for start, end in mp.seed_windows(f.size))


def _files_done(batch: list[mp.LocalFile], answered: int) -> int:
    """How many files of ``batch`` the helper's ``answered`` digests cover whole."""
    n = 0
    for f in batch:
        answered -= len(mp.seed_windows(f.size))
        if answered < 0:
            break
        n += 1
    return n
