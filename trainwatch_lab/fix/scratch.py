"""Where the mirror's local side lives: a local disk with room, never a network mount.

The whole point of the mirror is that training writes to storage that cannot stall, so its
local directory must be on a local block device (or in memory, when nothing else is there):
a mount is judged from the mount table (core.storage.mounts), never by touching it. The directory's
name comes from the share's path, so a restarted kernel finds its earlier copy and resumes;
a lock file keeps two processes of one host out of the same directory.

Every directory on the way that we create or reuse (the root, ``trainwatch-mirror-<uid>``
in it, the share's directory in that) must be ours alone (core.private): under a
shared /tmp those names are guessable, and a directory another user planted there would let
them read the logs and add files that the mirror copies to the share. A root that fails the
rule is passed over (or refused when it was asked for); a share's directory that fails it is
skipped for the next name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import tempfile

from ..core.guard.guard import MountGuard, default_guard
from ..core.paths.names import normalise, printable
from ..core.private import private_dir, untrusted
from ..core.storage.mount_facts import MountFacts
from ..core.storage.mounts import mount_for_path, read_mounts
from ..core.storage.space import space_fields
from .mirror.plan import LOCK_PREFIX

MIRROR_DIR = "trainwatch-mirror"  # + "-<uid>": one per user, never shared
ROOT_ENV = "TRAINWATCH_MIRROR_ROOT"  # the scratch root to use, when the default is wrong
MAX_CLAIMS = 16  # directories tried for one share before giving up (16 processes at once)
LOCAL_KINDS = ("local", "memory", "overlay")


def local_refusal(path: str) -> str | None:
    """Why ``path`` cannot hold the local side (a network or unknown filesystem), or None."""
    mounts = read_mounts()
    try:
        facts = MountFacts.of(mount_for_path(path, mounts), mounts)
    except LookupError:
        return f"{printable(path)} is on no mounted filesystem"
    if facts.shared or facts.kind not in LOCAL_KINDS:
        return (
            f"{printable(path)} is on {facts.fstype} ({facts.kind}, mounted at "
            f"{printable(facts.mountpoint)}): the local side must be a local disk"
        )
    return None


def base_name(kind: str = MIRROR_DIR) -> str:
    """This user's directory under a scratch root (``trainwatch-mirror-<uid>``): a shared
    one would be another user's, or writable by them."""
    return f"{kind}-{os.geteuid()}"


def root_refusal(root: str, kind: str = MIRROR_DIR) -> str | None:
    """Why ``root`` cannot hold this user's ``kind`` directory: a network mount (from the
    mount table), or it (or that directory in it, when it exists) is not ours alone."""
    return local_refusal(root) or _not_ours(root, kind)


def _not_ours(root: str, kind: str) -> str | None:
    """``root`` or its ``kind`` directory not ours alone (they are looked at: a local root)."""
    return untrusted(root, only_ours_made_in=True) or untrusted(os.path.join(root, base_name(kind)))


def _available(path: str, guard: MountGuard) -> int:
    """Free bytes where ``path`` is or will be created (0 when it cannot be told quickly)."""
    mounts = read_mounts()
    mountpoint = mount_for_path(path, mounts).mountpoint
    try:
        raw = guard.call(mountpoint, "inspect", timeout=1.0, what="statvfs", path=path)
    except Exception:
        return 0
    if not raw["is_dir"]:
        return 0
    return space_fields(os.statvfs_result(tuple(raw["statvfs"])))["avail_bytes"]


def candidates() -> list[str]:
    env = os.environ.get(ROOT_ENV)
    if env:
        return [normalise(env)]
    found = [tempfile.gettempdir(), "/var/tmp", os.path.expanduser("~/.cache")]
    return list(dict.fromkeys(normalise(p) for p in found))


def pick_root(
    local_root: str | os.PathLike[str] | None,
    guard: MountGuard | None = None,
    kind: str = MIRROR_DIR,
) -> str:
    """The scratch root: ``local_root`` when given (refused on a network mount or when
    another user controls it), else the safe local candidate with the most free space.
    Raises ValueError with the reason."""
    g = guard if guard is not None else default_guard()
    if local_root is not None:
        root = normalise(os.fspath(local_root))
        why = root_refusal(root, kind)
        if why is not None:
            raise ValueError(f"local_root: {why}")
        return root
    scored, refused = [], []
    for root in candidates():
        why = local_refusal(root)
        if why is not None:
            refused.append(why)
            continue
        scored.append((_available(root, g), root))
    # the most free space first (ties in the candidates' order); only the one taken, and
    # those passed over before it, are looked at: their statvfs answered just now
    for _, root in sorted(scored, key=lambda s: -s[0]):
        why = _not_ours(root, kind)
        if why is None:
            return root
        refused.append(f"{why}: passed over")
    raise ValueError(
        "no local disk for the mirror's local side (" + "; ".join(refused) + "); pass "
        f"local_root= or set {ROOT_ENV}"
    )


def private_base(root: str, kind: str = MIRROR_DIR) -> str:
    """``<root>/<kind>-<uid>``, made (the root too, when missing) and judged ours alone;
    ValueError (one line) otherwise."""
    os.makedirs(root, exist_ok=True)
    base = os.path.join(root, base_name(kind))
    why = untrusted(root, only_ours_made_in=True) or private_dir(base)
    if why is not None:
        raise ValueError(f"refusing to keep files there: {why}")
    return base


def _name_for(share: str) -> str:
    digest = hashlib.sha1(share.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    tail = "-".join(p for p in share.split(os.sep)[-2:] if p)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", tail)[:60].strip("._") or "share"
    return f"{slug}-{digest}"


def lock(local: str) -> int | None:
    """Lock ``local`` for this process (a lock file inside it, never copied): the locked
    descriptor, or None while another live process holds it."""
    fd = os.open(os.path.join(local, f"{LOCK_PREFIX}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            raise
        return None
    return fd


def claim(share: str, root: str) -> tuple[str, int]:
    """A local directory for ``share`` under ``root`` and the locked descriptor that keeps
    it ours: the same one as last time unless another live process holds it (or it is not
    ours alone: another name then). ValueError when the root is not ours alone."""
    base = private_base(root)
    name = _name_for(share)
    for n in range(MAX_CLAIMS):
        local = os.path.join(base, name if n == 0 else f"{name}-{n + 1}")
        if private_dir(local) is not None:
            continue
        fd = lock(local)
        if fd is not None:
            return local, fd
    raise RuntimeError(f"{MAX_CLAIMS} processes already mirror {printable(share)} from {base}")


def release(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)  # closing drops the flock
