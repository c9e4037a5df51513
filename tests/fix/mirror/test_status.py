"""fix.mirror.status: the mirror's line says its state first, the share by its last two names,
the full paths last (issue 36 item 4: at 820 px the dashboard cut the line inside the scratch
path, before the state)."""

from __future__ import annotations

import time

from trainwatch_lab.fix.mirror.status import MirrorStatus

LOCAL = "/tmp/trainwatch-mirror-0/runs-exp1-0123456789abcdef"
SHARE = "/mnt/lab-share/alice/runs/exp1"


def status(**kw) -> MirrorStatus:
    base = dict(
        local=LOCAL,
        share=SHARE,
        state="in-sync",
        last_sync=time.time(),
        lag_s=0.0,
        bytes_pending=0,
        bytes_copied=4096,
        files=1,
    )
    return MirrorStatus(**{**base, **kw})


def test_the_state_comes_first_and_the_full_paths_last() -> None:
    text = status().text()
    assert text.startswith("mirror to …/runs/exp1: in sync (1 file, last sync "), text
    assert text.endswith(f"; {LOCAL} -> {SHARE}"), text
    copying = status(state="copying", bytes_pending=12 * 1024, lag_s=31).text()
    assert copying.startswith("mirror to …/runs/exp1: copying, 12.0 KiB pending, 31 s behind;")


def test_what_was_dropped_is_said_before_the_paths() -> None:
    dropped = [{"file": f"{LOCAL}/events.out.tfevents.1", "start": 0, "end": 512}]
    text = status(bytes_dropped=512, dropped=dropped).text()
    words, paths = text.rsplit("; ", 1)
    assert "the local disk filled: 512 B of logs never copied were dropped" in words
    assert paths == f"{LOCAL} -> {SHARE}"


def test_a_short_share_is_named_whole_and_control_characters_are_shown_escaped() -> None:
    text = status(share="/share", local="/tmp/a\nb").text()
    assert text.startswith("mirror to /share: in sync") and "\n" not in text
