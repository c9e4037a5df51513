"""The wheel on every Python we claim (``requires-python >= 3.10``) while the suite itself runs on
one: the wheel is built once, installed with the test tools into a fresh virtual environment of
each claimed Python found here (pyenv's on CI), and the quick tier runs there against it, from a
copy of the tree without the package, so nothing imports the checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.env import need
from tests.test_wheel import REPO, build_wheel, run

# a venv, its downloads and the quick tier, twice: minutes, not the 300 s of one test
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
# the oldest we claim and the newest we know; the suite's own Python covers the one between
PYTHONS = ("3.10", "3.13")
# the test extra less the training frameworks: the quick tier trains nothing (-m framework is
# slow), and torch, JAX or TensorFlow would download gigabytes for a test that never imports them
NO_CACHE = ("-p", "no:cacheprovider")  # the copy is thrown away
FRAMEWORKS = ("torch", "lightning", "transformers", "accelerate", "jax", "keras", "orbax")


def interpreter(version: str) -> str | None:
    """A Python ``version`` that runs: ``pythonX.Y`` on PATH, else the newest pyenv build of it
    (CI's machines have pyenv; its shim for a version not selected is on PATH but fails)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    builds = sorted(
        root.glob(f"{version}.*/bin/python"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parts[-3])],
        reverse=True,
    )
    on_path = shutil.which(f"python{version}")
    for candidate in [*([on_path] if on_path else []), *map(str, builds)]:
        if _is_version(candidate, version):
            return candidate
    return None


def _is_version(python: str, version: str) -> bool:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError:
        return False
    return out.returncode == 0 and out.stdout.strip() == version


def quick_requirements(wheel: Path) -> list[str]:
    """The wheel's ``test`` extra (its METADATA), less the frameworks."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(name).decode()
    found = []
    for line in metadata.splitlines():
        requirement, _, marker = line.removeprefix("Requires-Dist: ").partition(";")
        requirement = requirement.strip()
        if (
            line.startswith("Requires-Dist: ")
            and re.search(r"extra\s*==\s*['\"]test['\"]", marker)
            and not requirement.lower().startswith(FRAMEWORKS)
        ):
            found.append(requirement)
    return found


def tree_without_package(dest: Path) -> Path:
    """The checkout's tracked files but ``trainwatch_lab/``: tests, js/, notebooks, README."""
    need(shutil.which("git") is not None and (REPO / ".git").exists(), "needs a git checkout")
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in (f.decode() for f in files if f):
        if name.startswith("trainwatch_lab/") or not (REPO / name).is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.mark.parametrize("version", PYTHONS)
def test_the_quick_tier_passes_from_the_wheel(version: str, wheel: Path, tmp_path: Path) -> None:
    python = interpreter(version)
    need(python is not None, f"needs Python {version} (pyenv install {version})")
    assert python is not None
    venv = tmp_path / "venv"
    run([python, "-m", "venv", str(venv)])
    venv_python = str(venv / "bin" / "python")
    run([venv_python, "-m", "pip", "install", "-q", str(wheel), *quick_requirements(wheel)])
    tree = tree_without_package(tmp_path / "tree")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"  # its trainwatch-lab
    where = run(
        [venv_python, "-c", "import trainwatch_lab; print(trainwatch_lab.__file__)"],
        cwd=tree,
        env=env,
    )
    assert where.strip().startswith(str(venv)), where  # the wheel's copy, never the checkout
    quick = subprocess.run(
        [
            venv_python,
            "-m",
            "pytest",
            "-m",
            "not slow",
            "-n",
            "auto",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    output = quick.stdout + quick.stderr
    assert quick.returncode == 0, (
        f"Python {version}, the quick tier from the wheel:\n{output[-6000:]}"
    )


def test_a_claimed_python_is_found_by_its_version(tmp_path: Path, monkeypatch) -> None:
    """The newest build that runs; a shim that fails (pyenv's, for a version not selected)
    or a build of another version is passed over."""
    for build, says in (("3.10.9", "3.10"), ("3.10.13", "3.10"), ("3.13.0", "3.12")):
        python = tmp_path / "versions" / build / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(f"#!/bin/sh\necho {says}\n")
        python.chmod(0o755)
    shim = tmp_path / "shims" / "python3.10"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.10: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    assert interpreter("3.10") == str(tmp_path / "versions" / "3.10.13" / "bin" / "python")
    assert interpreter("3.13") is None  # that build says it is 3.12
