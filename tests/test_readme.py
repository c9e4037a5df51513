"""README leads a newcomer (issue 36): contents first, what root needs, what is watched and
found, no made-up command, the reference after; the quickstart's time as measured."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def test_contents_come_first_and_every_link_lands_on_a_heading() -> None:
    headings = re.findall(r"^#{2,3} (.+)$", README, re.M)
    assert headings[0] == "Contents"
    anchors = {_anchor(h) for h in headings}
    links = re.findall(r"\]\(#([^)]+)\)", _section("Contents"))
    assert len(links) >= 10 and set(links) <= anchors, set(links) - anchors


def test_the_newcomers_path_comes_before_the_reference() -> None:
    order = [README.index(f"## {t}\n") for t in ("Try it", "In a notebook", "In JupyterLab")]
    reference = [README.index(f"## {t}\n") for t in ("Warnings", "Run the tests")]
    assert order == sorted(order) and max(order) < min(reference)


def test_try_it_says_what_root_needs_what_is_watched_and_found() -> None:
    text = _section("Try it")
    assert "--allow-root" in text
    assert "watched by" in text and "holds a GPU" in text
    assert "trainwatch-lab run -- python train.py" in text
    assert "There is no `trainwatch-lab status`" in text and "`%trainwatch status`" in text


def test_the_quickstart_says_15_seconds() -> None:
    nb = json.loads((ROOT / "notebooks" / "quickstart.ipynb").read_text())
    intro = "".join(nb["cells"][0]["source"])
    assert "about 15 seconds" in intro and "30 seconds" not in intro
