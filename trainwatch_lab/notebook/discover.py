"""Find the log and checkpoint directories a notebook has set up, by duck typing.

After each cell we look through the user namespace for the objects training code creates:
torch/tensorboardX ``SummaryWriter`` (``log_dir``/``logdir``), Lightning loggers
(``log_dir``, ``save_dir``) and ``ModelCheckpoint`` (``dirpath``), a Lightning ``Trainer``
(its ``loggers``/``callbacks``), Hugging Face ``TrainingArguments`` (``output_dir``,
``logging_dir``) and an HF ``Trainer`` (its ``args``), Keras 3 ``ModelCheckpoint`` (the
directory of its ``filepath`` pattern) and ``BackupAndRestore`` (``backup_dir``). None of
those libraries is imported: importing torch just to look would cost seconds and memory in
every kernel. What class held a path is kept (``Found.kind``), so a warning can carry its fix
as code for that very object (``fix_code``).

Attributes are looked up with ``inspect.getattr_static`` first, so objects that answer every
attribute (mocks, DataFrames, proxies) are never asked, and nothing touches the filesystem:
a path is only normalised (``abspath(expanduser())``), never stat'ed. One property is not
read: a Lightning logger's ``log_dir`` before its version is known, since picking the
version lists ``save_dir`` (on a dead share, a kernel that hangs after every cell).
"""

from __future__ import annotations

import inspect
import os
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.paths.names import normalise
from ..fix.checkpoint.save import directory_of_pattern

# attribute -> what it is, in the order we report them
PATH_ATTRS: tuple[tuple[str, str], ...] = (
    ("log_dir", "log directory"),
    ("logdir", "log directory"),
    ("save_dir", "log directory"),
    ("dirpath", "checkpoint directory"),
    ("output_dir", "output directory"),
    ("logging_dir", "log directory"),
    ("backup_dir", "backup directory"),  # Keras BackupAndRestore
)
# Keras ModelCheckpoint: ``filepath`` is a pattern (``ckpt/model_{epoch:02d}.keras``); an
# object is taken for one only when it also has these (``filepath`` alone is too common)
KERAS_CHECKPOINT_ATTRS = ("save_best_only", "save_freq")
LIGHTNING_MODULES = ("lightning.", "pytorch_lightning.", "lightning_fabric.")
# attributes that hold more such objects (Lightning/HF trainers)
CONTAINER_ATTRS: tuple[str, ...] = (
    "loggers",
    "logger",
    "callbacks",
    "checkpoint_callback",
    "args",
)
_SKIP_TYPES = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    dict,
    set,
    frozenset,
)
MAX_ITEMS = 64  # elements looked at in one list/tuple, so a huge list never costs a cell


@dataclass(frozen=True)
class Found:
    """A directory found on an object: ``writer.log_dir`` -> ``/root/runs/exp1``."""

    path: str  # normalised key (abspath(expanduser)), as every other layer uses
    where: str  # how the user named it: "writer.log_dir", "trainer.callbacks[1].dirpath"
    what: str  # "log directory", "checkpoint directory", "output directory"
    kind: str = ""  # the holder's class, "module.Class": "tensorboardX.writer.SummaryWriter"
    root_kind: str = ""  # the class of the variable's value (a Trainer holding the logger)

    @property
    def holder(self) -> str:
        """The expression for the object that holds the path: ``trainer.loggers[0]``."""
        return self.where.rsplit(".", 1)[0]

    @property
    def attr(self) -> str:
        return self.where.rsplit(".", 1)[1]

    @property
    def root(self) -> str:
        """The variable: ``trainer`` in ``trainer.loggers[0].save_dir``."""
        return self.where.split(".", 1)[0].split("[", 1)[0]


def _static_has(obj: Any, name: str) -> bool:
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def _read(obj: Any, name: str) -> Any:
    """The attribute's value when the object really defines it; None otherwise or on error."""
    if not _static_has(obj, name):
        return None
    try:
        return getattr(obj, name)
    except Exception:  # a property that raises is not our problem
        return None


def _kind(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _lists_to_read(obj: Any, name: str) -> bool:
    """A Lightning ``log_dir`` whose version is not picked yet: reading it lists the save
    directory (the logger's ``version`` property), and a Trainer's reads its logger's."""
    if name != "log_dir" or not type(obj).__module__.startswith(LIGHTNING_MODULES):
        return False
    try:
        return inspect.getattr_static(obj, "_version") is None
    except AttributeError:
        return True  # no version of its own (a Trainer): it asks its first logger


def _as_path(value: Any) -> str | None:
    if isinstance(value, (str, os.PathLike)):
        try:
            text = os.fspath(value)
        except TypeError:
            return None
        if isinstance(text, str) and text and "\x00" not in text and "://" not in text:
            return normalise(text)
    return None


def _candidates(obj: Any, where: str, depth: int) -> Iterator[tuple[Any, str]]:
    """The object itself, the elements of a list/tuple, and (one level down) its containers."""
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj[:MAX_ITEMS]):
            yield from _candidates(item, f"{where}[{i}]", depth)
        return
    if isinstance(obj, _SKIP_TYPES) or obj is None:
        return
    yield obj, where
    if depth <= 0:
        return
    for name in CONTAINER_ATTRS:
        inner = _read(obj, name)
        if inner is not None and inner is not obj:
            yield from _candidates(inner, f"{where}.{name}", depth - 1)


def _paths_of(obj: Any) -> Iterator[tuple[str, str, str]]:
    """(attribute, path, what) for each directory one object names."""
    for attr, what in PATH_ATTRS:
        if _lists_to_read(obj, attr):
            continue
        path = _as_path(_read(obj, attr))
        if path is not None:
            yield attr, path, what
    if all(_static_has(obj, a) for a in KERAS_CHECKPOINT_ATTRS):
        pattern = _as_path(_read(obj, "filepath"))
        if pattern is not None:
            yield "filepath", directory_of_pattern(pattern), "checkpoint directory"


def find_on(obj: Any, where: str, depth: int = 1) -> list[Found]:
    """Every log/checkpoint directory on ``obj`` (and its loggers/callbacks/args)."""
    found: list[Found] = []
    root_kind = _kind(obj)
    for candidate, name in _candidates(obj, where, depth):
        kind = _kind(candidate)
        for attr, path, what in _paths_of(candidate):
            found.append(Found(path, f"{name}.{attr}", what, kind, root_kind))
    return found


def discover(namespace: Mapping[str, Any], names: Iterable[str] | None = None) -> list[Found]:
    """Directories reachable from the user's public variables, one entry per path.

    ``names`` restricts the search (e.g. to the variables a cell just assigned).
    """
    seen: dict[str, Found] = {}
    keys = list(namespace) if names is None else [n for n in names if n in namespace]
    for name in keys:
        if name.startswith("_"):
            continue
        try:
            value = namespace[name]
        except Exception:
            continue
        for item in find_on(value, name):
            seen.setdefault(item.path, item)
    return list(seen.values())


# -- the fix as code, for the object that was found ----------------------------------------
MIRROR_CODES = frozenset({"shared-mount", "slow-mount", "mount-unresponsive"})
SPACE_CODES = frozenset({"disk-almost-full", "disk-filling", "checkpoint-wont-fit"})
FRAMEWORKS = (
    (LIGHTNING_MODULES, "lightning"),
    (("transformers.",), "huggingface"),
    (("keras.", "tf_keras."), "keras"),
    (("torch.utils.tensorboard.", "tensorboardX."), "tensorboard"),
)
IMPORT_MIRROR = "from trainwatch_lab.fix import local_mirror"
IMPORT_CALLBACK = "from trainwatch_lab.integrations.{} import TrainWatchCallback"


def _framework(kind: str) -> tuple[str | None, str]:
    """("lightning", "Trainer") for "lightning.pytorch.trainer.trainer.Trainer"."""
    cls = kind.rsplit(".", 1)[-1]
    for prefixes, name in FRAMEWORKS:
        if kind.startswith(prefixes):
            return name, cls
    return None, cls


def _quote(path: str) -> str:
    """A path as a Python string literal, double-quoted as people write them."""
    return (
        f'"{path}"' if '"' not in path and "\\" not in path and path.isprintable() else repr(path)
    )


def _mirror_code(found: Found) -> str | None:
    """A log directory on a share: the writer or logger, writing to a local mirror."""
    fw, cls = _framework(found.kind)
    mirror = f"local_mirror({_quote(found.path)})"
    if fw == "tensorboard":
        return f"{IMPORT_MIRROR}\n{found.holder} = {cls}({mirror})"
    if fw == "keras" and cls == "TensorBoard":
        return f"{IMPORT_MIRROR}\n{found.holder} = keras.callbacks.TensorBoard(str({mirror}))"
    if fw == "lightning" and found.attr == "save_dir":
        if _framework(found.root_kind) != ("lightning", "Trainer"):
            return f"{IMPORT_MIRROR}\n{found.holder} = {cls}({mirror})"
        return "\n".join(
            [
                IMPORT_MIRROR,
                IMPORT_CALLBACK.format("lightning"),
                f"logger = {cls}({mirror})",
                f"{found.root} = Trainer(..., logger=logger, callbacks=[TrainWatchCallback()])",
            ]
        )
    return None


def _callback_code(found: Found) -> str | None:
    """A trainer, its arguments or a checkpoint callback: the framework's callback line."""
    fw, cls = _framework(found.kind)
    root_fw, root_cls = _framework(found.root_kind)
    if "lightning" in (fw, root_fw) and (root_cls == "Trainer" or cls == "ModelCheckpoint"):
        trainer = found.root if root_cls == "Trainer" else "trainer"
        call = f"{trainer} = Trainer(..., callbacks=[TrainWatchCallback(), ...])"
        return f"{IMPORT_CALLBACK.format('lightning')}\n{call}"
    if root_fw == "huggingface":
        head = IMPORT_CALLBACK.format("huggingface")
        if root_cls == "Trainer":
            return f"{head}\n{found.root}.add_callback(TrainWatchCallback())"
        call = f"Trainer(model, ..., args={found.root}, callbacks=[TrainWatchCallback()])"
        return f"{head}\ntrainer = {call}"
    if fw == "keras" and cls in ("ModelCheckpoint", "BackupAndRestore"):
        obj = found.holder
        call = f"model.fit(..., callbacks=[TrainWatchCallback({obj}), {obj}])"
        return f"{IMPORT_CALLBACK.format('keras')}\n{call}"
    return None


def fix_code(found: Found, code: str) -> str | None:
    """The fix for a warning ``code`` about ``found.path``, as code for the object found
    there: ``writer = SummaryWriter(local_mirror("/mnt/share/runs/exp1"))`` for a writer on a
    share, the callback line for a Lightning or Hugging Face trainer. None when there is
    no such line (the warning's own ``fix`` sentence stands)."""
    if code in MIRROR_CODES and found.what == "log directory":
        text = _mirror_code(found)
        if text is not None:
            return text
    if code in MIRROR_CODES | SPACE_CODES:
        return _callback_code(found)
    return None
