"""The names users import (README, notebooks, the package root) keep their paths now that
fix/ has rooms: ``trainwatch_lab.fix.mirror`` and ``trainwatch_lab.fix.checkpoint`` are
packages whose ``__init__`` re-exports them, and ``trainwatch_lab.fix`` names them all."""

from __future__ import annotations

import importlib

import trainwatch_lab.fix as fix
from trainwatch_lab.fix.checkpoint import save
from trainwatch_lab.fix.checkpoint import save_checkpoint as room_save_checkpoint
from trainwatch_lab.fix.mirror import local_mirror as room_local_mirror
from trainwatch_lab.fix.mirror import mirror


def test_the_documented_imports_are_the_real_functions() -> None:
    assert room_local_mirror is mirror.local_mirror
    assert room_save_checkpoint is save.save_checkpoint


def test_each_room_exports_only_public_names_the_package_also_has() -> None:
    for room in ("mirror", "checkpoint"):
        module = importlib.import_module(f"trainwatch_lab.fix.{room}")
        assert module.__all__ and set(module.__all__) <= set(fix.__all__), room
        for name in module.__all__:
            assert getattr(module, name) is getattr(fix, name), (room, name)


def test_every_name_of_the_package_resolves() -> None:
    assert all(getattr(fix, name) is not None for name in fix.__all__)
