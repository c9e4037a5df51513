"""Property tests (hypothesis) for the parsers and guards that read untrusted text (issue 24):
mount table lines with escapes, /proc files, the one redaction, the input limits. Whatever the
text, a parser answers or skips, never raises; a secret planted anywhere never survives
redaction; a refusal is one short line."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainwatch_lab.core.limits import LINE_CHARS, PATH_MAX, abbreviate, clamp, path_problem
from trainwatch_lab.core.processes.discovery import opened_for_writing, short_command, status_uid
from trainwatch_lab.core.redact import MASK, redact
from trainwatch_lab.core.storage.diskstats import parse_line
from trainwatch_lab.core.storage.mounts import parse_mountinfo

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PATH_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
    min_size=1,
    max_size=30,
)


def kernel_escape(text: str) -> str:
    """How the kernel writes a path in mountinfo (fs/proc_namespace.c: mangle)."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in text)


@SETTINGS
@given(st.lists(PATH_TEXT, min_size=1, max_size=4))
def test_a_mountpoint_with_any_characters_comes_back_as_written(parts: list[str]) -> None:
    mountpoint = "/" + "/".join(parts)
    line = f"36 35 8:1 / {kernel_escape(mountpoint)} rw,noatime shared:1 - ext4 /dev/sda1 rw"
    (entry,) = parse_mountinfo(line)
    assert entry.mountpoint == mountpoint and entry.fstype == "ext4"


@SETTINGS
@given(st.text(max_size=400))
def test_any_mount_table_text_is_parsed_or_skipped(text: str) -> None:
    assert isinstance(parse_mountinfo(text), list)


@SETTINGS
@given(st.text(max_size=300))
def test_any_proc_text_is_answered(text: str) -> None:
    status_uid(text)
    opened_for_writing(text)
    parse_line(text)


TOKEN = st.text(alphabet=string.ascii_letters + string.digits, min_size=8, max_size=40).filter(
    lambda t: any(c.isdigit() for c in t) and any(c.isalpha() for c in t)
)
NAME = st.sampled_from(
    ["token", "api_key", "SECRET", "password", "passwd", "auth", "credentials", "hf-token"]
)
WORDS = st.lists(st.sampled_from(["python", "train.py", "--lr", "3e-4", "/data", "-v"]))


@SETTINGS
@given(
    TOKEN,
    NAME,
    WORDS,
    WORDS,
    st.sampled_from(
        [
            "--{n}={s}",
            "--{n} {s}",
            "{n}={s}",
            "-{n}={s}",
            "http://user:{s}@host:9090/x",
            "https://{s}@github.com/x.git",
            "{n}: Bearer {s}",
        ]
    ),
)
def test_a_planted_secret_never_survives(token, name, before, after, form) -> None:
    text = " ".join([*before, form.format(n=name, s=token), *after])
    shown = redact(text)
    assert token not in shown and MASK in shown
    assert redact(shown) == shown  # redacting twice changes nothing more


@SETTINGS
@given(TOKEN, WORDS)
def test_a_command_line_row_never_shows_a_secret(token, words) -> None:
    argv = ["/usr/bin/python3", "train.py", *words, "--hf-token", token, *words]
    assert token not in short_command(argv, limit=10_000)


@SETTINGS
@given(st.text(max_size=6000))
def test_a_refusal_is_one_short_line(text: str) -> None:
    line = clamp(f"'path' {path_problem(text) or 'is fine'}: {abbreviate(text)}")
    assert "\n" not in line and "\r" not in line and len(line) <= LINE_CHARS
    assert all(c.isprintable() or c == " " for c in abbreviate(text))


@SETTINGS
@given(st.text(max_size=50))
def test_a_path_within_the_limits_and_without_controls_is_accepted(text: str) -> None:
    if all(c.isprintable() for c in text) and len(text.encode(errors="surrogatepass")) < PATH_MAX:
        assert path_problem(text) is None


def test_a_process_name_cannot_forge_its_uid() -> None:
    """/proc/PID/status escapes only newline and backslash in ``Name:``; a process that calls
    itself "\\x1eUid:\\t0" must not read as root's."""
    text = "Name:\t\x1eUid:\t0\t0\t0\t0\nUmask:\t0022\nUid:\t1000\t1000\t1000\t1000\n"
    assert status_uid(text) == 1000
