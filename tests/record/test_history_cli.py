"""``trainwatch-lab history``: windows, formats, events, the export's redaction, and bad
input as one line with exit 2."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from trainwatch_lab.core.record import Event, Store
from trainwatch_lab.core.record.export import redact

ROOT = Path(__file__).resolve().parents[2]


def tw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainwatch_lab", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "h.sqlite"
    s = Store(str(path), role="t")
    s.register()
    now = time.time()
    ts = [now - 7200 + 10 * i for i in range(720)]
    s.close_blocks(
        {
            "disk:sda:util": (ts, [float(i % 100) for i in range(720)]),
            "path:/data:avail_bytes": (ts, [4096.0 * (720 - i) for i in range(720)]),
        }
    )
    s.add_events(
        [
            Event(
                now - 3000,
                "process-seen",
                "train.py",
                "train.py (pid 9) is training: gpu",
                {"pid": 9, "command": "python train.py --token s3cret --lr 3"},
            ),
            Event(
                now - 60,
                "warning-raised",
                "/data",
                "disk-filling: labelled by pid 9 `python train.py --token s3cret`",
                {"code": "disk-filling"},
            ),
        ]
    )
    s.close()
    return path


def test_samples_in_a_window_as_table_csv_and_json(store: Path) -> None:
    table = tw("history", "--since", "1h", "--store", str(store))
    assert table.returncode == 0, table.stderr
    assert "disk:sda:util" in table.stdout and "path:/data:avail_bytes" in table.stdout
    rows = list(
        csv.reader(
            io.StringIO(
                tw(
                    "history",
                    "--since",
                    "1h",
                    "--series",
                    "disk:*",
                    "--format",
                    "csv",
                    "--store",
                    str(store),
                ).stdout
            )
        )
    )
    assert rows[0] == ["time", "t", "disk:sda:util"] and 355 <= len(rows) - 1 <= 361
    data = json.loads(
        tw(
            "history", "--since", "30m", "--until", "10m", "--format", "json", "--store", str(store)
        ).stdout
    )
    times = data["disk:sda:util"]["t"]
    assert 115 <= len(times) <= 121 and times[-1] <= time.time() - 590


def test_csv_has_iso_times_and_whole_bytes(store: Path) -> None:
    """Pasted into a sheet, "1733318605.000" and "2.94912e+06" were a number and a rounded
    one (issue 36): an ISO time with its offset beside the epoch, and bytes as integers."""
    out = tw(
        "history", "--since", "3h", "--series", "path:*", "--format", "csv", "--store", str(store)
    )
    assert out.returncode == 0, out.stderr
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert rows[0] == ["time", "t", "path:/data:avail_bytes"]
    first = rows[1]
    when = datetime.fromisoformat(first[0])
    assert when.tzinfo is not None and abs(when.timestamp() - float(first[1])) < 0.001
    assert first[2] == str(4096 * 720) and all(re.fullmatch(r"\d+", r[2]) for r in rows[1:])


def test_events_and_an_export_never_show_a_command_s_arguments(store: Path) -> None:
    events = tw("history", "events", "--store", str(store))
    assert events.returncode == 0 and "warning-raised" in events.stdout
    assert "s3cret" not in events.stdout
    out = tw(
        "history",
        "export",
        "--since",
        "2h",
        "--store",
        str(store),
        "-o",
        str(store.parent / "report.json"),
    )
    assert out.returncode == 0, out.stderr
    text = (store.parent / "report.json").read_text()
    assert "s3cret" not in text and "python train.py --token *** --lr 3" in text
    report = json.loads(text)
    assert set(report["series"]) == {"disk:sda:util", "path:/data:avail_bytes"}


def test_the_export_redacts_through_the_one_redaction() -> None:
    """Every string of an event, an argv list too, goes through core.redact."""
    event = {
        "command": "python train.py --hf-token=hf_abc --lr 3",
        "argv": ["python", "train.py", "--password", "pw"],
        "data": {"url": "https://u:pw@host/x"},
    }
    assert redact(event) == {
        "command": "python train.py --hf-token=*** --lr 3",
        "argv": "python train.py --password ***",
        "data": {"url": "https://u:***@host/x"},
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday-ish"], "expected 8h, 30m, 2d"),
        (["--since", "1h", "--until", "2h"], "--since must be before --until"),
        (["--store", "/nonexistent/h.sqlite"], "no recorded history at /nonexistent/h.sqlite"),
        (["--format", "xml"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    out = tw("history", *args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr


def test_a_file_that_is_no_history_is_one_line_and_left_alone(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    out = tw("history", "--store", str(notes))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "is no trainwatch history" in out.stderr
    assert notes.read_text() == "my notes\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt"
    ]


def test_run_needs_a_command() -> None:
    out = tw("run", "--store", "/tmp/x.sqlite", "--")
    assert out.returncode == 2 and "run needs a command" in out.stderr


def test_serve_record_writes_the_history_and_flushes_on_sigterm(tmp_path: Path) -> None:
    from tests.prometheus.conftest import free_port, http_get
    from tests.support.mounts import wait_until

    store = tmp_path / "state" / "h.sqlite"
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainwatch_lab",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--interval",
            "0.2",
            "--no-probe",
            "--gpu",
            "none",
            "--record",
            "--record-every",
            "0.2",
            "--store",
            str(store),
            str(tmp_path),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "serving http://" in (proc.stderr.readline() if proc.stderr else "")
        seen: set[str] = set()

        def sampled() -> bool:  # distinct samples the agent served: each went to the recorder
            text = http_get(f"http://127.0.0.1:{port}/metrics")[1]
            seen.update(re.findall(r"^trainwatch_sample_timestamp_seconds (\S+)", text, re.M))
            return len(seen) >= 4  # (the newest may still be on its way to the recorder)

        # SIGTERM comes before the first flush (10 s) when the machine is not too loaded;
        # either way the samples must be in the history after it
        assert wait_until(sampled, timeout=120), seen
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    out = tw(
        "history",
        "--series",
        f"path:{tmp_path}:free_bytes",
        "--format",
        "json",
        "--store",
        str(store),
    )
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)[f"path:{tmp_path}:free_bytes"]["t"]) >= 2


def one_ending(path: Path, kind: str, name: str, text: str, **data: object) -> Path:
    """A history whose one event is an ending 5 s ago of what started 10 min ago."""
    s = Store(str(path), role="t")
    s.register()
    now = time.time()
    s.add_events([Event(now - 5, kind, name, text, {"pid": 7, "started": now - 600, **data})])
    s.close()
    return path


def test_why_redacts_the_sentence_and_its_json(tmp_path: Path) -> None:
    """The last stderr line is evidence, and it can hold a password or a token."""
    leak = "fetch failed: https://bob:hunter2secret@hub.example/x --token=hf_abcdef123456"
    path = one_ending(
        tmp_path / "h.sqlite",
        "run-ended",
        "train.py",
        "train.py (pid 7) ended: exit status 1",
        exit={"code": 1},
        stderr_tail=[leak],
    )
    for fmt in ("table", "json"):
        out = tw("history", "why", "--format", fmt, "--store", str(path))
        assert out.returncode == 0, out.stderr
        assert "last stderr line: fetch failed: https://" in out.stdout, out.stdout
        assert "hunter2secret" not in out.stdout and "hf_abcdef123456" not in out.stdout


def test_why_writes_no_control_character_to_the_terminal(tmp_path: Path) -> None:
    """A notebook's name and a run's stderr are anyone's text: an escape sequence in them
    (a title change, a screen clear) is shown escaped, never sent to the terminal."""
    name = "kernel python3 of \x1b]2;owned\x07x.ipynb"
    path = one_ending(
        tmp_path / "h.sqlite",
        "kernel-ended",
        name,
        f"{name} (pid 7) ended",
        stderr_tail=["\x1b[2Jboom\rgone"],
    )
    for view in ("why", "events"):
        out = tw("history", view, "--store", str(path))
        assert out.returncode == 0, out.stderr
        assert "owned" in out.stdout, out.stdout
        assert not any(c in out.stdout for c in "\x1b\x07\r"), repr(out.stdout)


def test_why_takes_the_name_after_its_options(tmp_path: Path) -> None:
    """``history why --since 1h train.py`` as typed (issue 35, item 12: the name after an
    option was refused as an unrecognized argument)."""
    path = tmp_path / "h.sqlite"
    s = Store(str(path), role="t")
    s.register()
    now = time.time()
    for name, pid in (("train.py", 7), ("eval.py", 8)):
        data = {"pid": pid, "name": name, "command": f"python {name}", "started": now - 60}
        s.add_events(
            [
                Event(now - 60, "run-started", name, f"{name} (pid {pid}) started", data),
                Event(now - 30, "run-ended", name, f"{name} ended", {**data, "exit": {"code": 0}}),
            ]
        )
    s.close()
    for args in (
        ["history", "why", "--since", "1h", "train.py", "--store", str(path)],
        ["history", "--store", str(path), "why", "--since", "1h", "train.py"],
        ["history", "why", "train.py", "--since", "1h", "--store", str(path)],
    ):
        out = tw(*args)
        assert out.returncode == 0, (args, out.stderr)
        assert "train.py" in out.stdout and "eval.py" not in out.stdout, out.stdout
    bad = tw("history", "why", "--since", "1h", "a.py", "b.py", "--store", str(path))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
