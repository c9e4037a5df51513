"""What a ``%%trainwatch`` cell wrote where (issue 23, item 9).

The summary's "written" column came from block-device counters: blank for tmpfs and network
mounts (no block device), and for a local disk the bytes every process wrote to it, merged
with "space used" in one line per filesystem. A real cell here writes checkpoint files to two
paths on two tmpfs filesystems (a file from before the cell sits beside them): each path's row
says what the cell wrote there, in bytes and files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from IPython.utils.capture import capture_output

from trainwatch_lab.core.defaults import MIB
from trainwatch_lab.core.paths.written import written_since


def summary_of(shell: Any, cell: str) -> dict[str, str]:
    with capture_output() as cap:
        result = shell.run_cell(cell)
    assert result.success, result.error_in_exec
    bundles = [o.data for o in cap.outputs if "tw-cell-summary" in o.data.get("text/html", "")]
    assert bundles, [o.data.get("text/plain") for o in cap.outputs]
    return bundles[-1]


def test_each_path_says_what_the_cell_wrote_there(shell: Any, tmpfs_mount: Any) -> None:
    a = Path(tmpfs_mount("32m").path) / "ckpt"
    b = Path(tmpfs_mount("32m").path) / "run" / "checkpoints"
    a.mkdir()
    b.mkdir(parents=True)
    (a / "before.pt").write_bytes(b"\0" * (5 * MIB))  # written before the cell: not counted
    cell = (
        f"%%trainwatch {a} {b.parent} --interval 0.2 --no-probe\n"
        "import os\n"
        "for i in range(3):\n"
        f"    with open({str(a)!r} + f'/ckpt-{{i}}.pt', 'wb') as fh:\n"
        "        fh.write(os.urandom(2 << 20))\n"
        "for i in range(2):\n"
        f"    with open({str(b)!r} + f'/step-{{i}}.ckpt', 'wb') as fh:\n"
        "        fh.write(os.urandom(1 << 20))\n"
    )
    out = summary_of(shell, cell)
    text, html = out["text/plain"], out["text/html"]
    assert f"{a}: 6 MiB in 3 files written" in text, text
    assert f"{b.parent}: 2 MiB in 2 files written" in text, text
    rows = dict(re.findall(r'<tr data-path="([^"]+)">.*?<td class="tw-files">([^<]+)</td>', html))
    assert rows == {str(a): "6 MiB in 3 files", str(b.parent): "2 MiB in 2 files"}, rows


def test_the_listing_is_bounded_and_says_so(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i}").write_bytes(b"x" * 10)
    whole = written_since(str(tmp_path), 0.0)
    assert (whole.files, whole.bytes, whole.complete) == (30, 300, True)
    cut = written_since(str(tmp_path), 0.0, max_entries=10)
    assert cut.files <= 10 and not cut.complete
    assert written_since(str(tmp_path), 2**40).files == 0  # nothing newer than the future


def test_an_appended_log_counts_what_the_cell_appended(shell: Any, tmpfs_mount: Any) -> None:
    """A cell that appended 1 KiB to a 29 KiB event file said "29 KiB in 1 file" (issue 36):
    the file's size, not what the cell wrote."""
    run = Path(tmpfs_mount("8m").path) / "run"
    run.mkdir()
    (run / "events.out").write_bytes(b"e" * (29 << 10))
    cell = (
        f"%%trainwatch {run} --interval 0.2 --no-probe\n"
        f"with open({str(run / 'events.out')!r}, 'ab') as fh:\n"
        "    fh.write(b'x' * 1024)\n"
        f"with open({str(run / 'new.log')!r}, 'wb') as fh:\n"
        "    fh.write(b'y' * 2048)\n"
    )
    text = summary_of(shell, cell)["text/plain"]
    assert f"{run}: 3 KiB in 2 files written" in text, text


def test_growth_counts_only_for_the_same_file_grown(tmp_path: Path) -> None:
    """Measured against a listing: grown -> the new bytes; shorter or another inode -> whole."""
    from trainwatch_lab.core.paths.written import file_sizes

    grown, shrunk, moved = tmp_path / "grown", tmp_path / "shrunk", tmp_path / "moved"
    for f in (grown, shrunk, moved):
        f.write_bytes(b"a" * 1000)
    before = file_sizes(str(tmp_path))
    grown.write_bytes(b"a" * 1500)  # same inode, 500 more
    shrunk.write_bytes(b"b" * 10)  # rewritten shorter: all of it is new
    (tmp_path / "moved.new").write_bytes(b"c" * 1000)
    (tmp_path / "moved.new").replace(moved)  # another file now (inode), all new
    found = written_since(str(tmp_path), 0.0, before=before)
    assert (found.files, found.bytes) == (3, 500 + 10 + 1000)
