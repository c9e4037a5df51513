"""The guard helper's operations that fix/ uses, through a real MountGuard."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainwatch_lab.core.guard import MountGuard


@pytest.fixture
def guard() -> Iterator[MountGuard]:
    g = MountGuard(timeout_s=10.0)
    yield g
    g.close()


def test_copy_ranges_appends_in_place_and_replaces_through_a_temporary_name(
    guard: MountGuard, tmp_path: Path
) -> None:
    src, dst = tmp_path / "src", tmp_path / "share" / "sub" / "f"
    src.write_bytes(b"0123456789")
    tmp = tmp_path / "share" / "sub" / ".twmirror-x.tmp"
    whole = {"src": str(src), "dst": str(tmp), "offset": 0, "length": 6, "create": True,
             "rename_to": str(dst), "mtime_ns": 1_000_000_000}  # fmt: skip
    append = {"src": str(src), "dst": str(dst), "offset": 6, "length": 4}
    gone = {"src": str(tmp_path / "vanished"), "dst": str(tmp_path / "share" / "g"),
            "offset": 0, "length": 3}  # fmt: skip
    results = guard.call("/", "copy_ranges", items=[whole, append, gone])
    assert [{k: r[k] for k in ("copied", "end")} for r in results] == [
        {"copied": 6, "end": 6},
        {"copied": 4, "end": 10},
        {"copied": 0, "end": 0},
    ]
    assert results[2]["gone"] and results[1]["src"][:1] == [10]
    assert results[1]["digest"] == hashlib.blake2b(b"6789", digest_size=16).hexdigest()
    assert dst.read_bytes() == b"0123456789" and not tmp.exists()
    assert not (tmp_path / "share" / "g").exists()
    (tmp_path / "share" / "x").write_text("a file where a directory must go")
    blocked = {"src": str(src), "dst": str(tmp_path / "share" / "x" / "f"), "offset": 0,
               "length": 1, "create": True}  # fmt: skip
    (error,) = guard.call("/", "copy_ranges", items=[blocked])
    assert error["error"]["strerror"] in ("Not a directory", "File exists")


def test_tree_lists_regular_files_and_says_what_else_a_path_is(
    guard: MountGuard, tmp_path: Path
) -> None:
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f").write_bytes(b"abc")
    (tmp_path / "d" / ".twmirror-1.tmp").write_bytes(b"x")
    (tmp_path / "d" / "link").symlink_to(tmp_path / "d" / "e" / "f")
    tree = guard.call("/", "tree", directory=str(tmp_path / "d"), skip_prefix=".twmirror-")
    assert list(tree["files"]) == ["e/f"] and tree["files"]["e/f"][0] == 3
    assert guard.call("/", "tree", directory=str(tmp_path / "d" / "e" / "f"))["file_type"] == "file"
    assert not guard.call("/", "tree", directory=str(tmp_path / "missing"))["exists"]


def test_saves_commit_and_remove(guard: MountGuard, tmp_path: Path) -> None:
    (tmp_path / "epoch-1.pt").write_bytes(b"1" * 10)
    (tmp_path / "epoch-2.pt").write_bytes(b"2" * 20)
    (tmp_path / "other.txt").write_text("x")
    (tmp_path / ".tw-partial-abc").write_text("x")
    plan = guard.call("/", "saves", directory=str(tmp_path), pattern=r"epoch-\d+\.pt",
                      partial_prefix=".tw-partial-")  # fmt: skip
    assert sorted((n, b) for n, b, _ in plan["saves"]) == [("epoch-1.pt", 10), ("epoch-2.pt", 20)]
    assert plan["partials"] == [".tw-partial-abc"] and plan["exists"] and plan["is_dir"]
    assert guard.call("/", "saves", directory=str(tmp_path / "new" / "dir"), pattern="x",
                      partial_prefix=".p")["target"] == str(tmp_path)  # fmt: skip
    (tmp_path / "new.tmp").mkdir()
    (tmp_path / "new.tmp" / "w").write_bytes(b"new")
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "w").write_bytes(b"old")
    assert guard.call("/", "commit", tmp=str(tmp_path / "new.tmp"), dst=str(tmp_path / "ck")) == {
        "bytes": 3
    }
    assert (tmp_path / "ck" / "w").read_bytes() == b"new" and not (tmp_path / "new.tmp").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".old")]
    (tmp_path / "f.tmp").write_bytes(b"file")
    with pytest.raises(IsADirectoryError, match="is a directory; the save wrote the other"):
        guard.call("/", "commit", tmp=str(tmp_path / "f.tmp"), dst=str(tmp_path / "ck"))
    removed = guard.call("/", "remove", paths=[str(tmp_path / "ck"), str(tmp_path / "nope")])
    assert removed == [str(tmp_path / "ck")] and not (tmp_path / "ck").exists()
