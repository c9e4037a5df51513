"""The layering of ARCHITECTURE.md, enforced: core/, advice/ and cli/ never import Jupyter;
fix/ imports core only; integrations/ imports a framework only in the module named for it."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "trainwatch_lab"
JUPYTER_SIDE = {
    "IPython",
    "ipywidgets",
    "bqplot",
    "traitlets",
    "tornado",
    "jupyter_server",
    "jupyterlab",
    "jupyter_client",
    "jupyter_core",
    "ipykernel",
    "nbformat",
}
RULES = {
    "core": JUPYTER_SIDE
    | {"trainwatch_lab.advice", "trainwatch_lab.notebook", "trainwatch_lab.server"},
    "advice": JUPYTER_SIDE | {"trainwatch_lab.notebook", "trainwatch_lab.server"},
    "cli": JUPYTER_SIDE | {"trainwatch_lab.notebook", "trainwatch_lab.server"},
    "monitor.py": JUPYTER_SIDE | {"trainwatch_lab.notebook", "trainwatch_lab.server"},
    # core, advice and prometheus_client only: the server reuses it for its own /metrics,
    # cli/ builds the agent's sampler (trainwatch_lab.monitor) and hands it over
    "prometheus": JUPYTER_SIDE
    | {
        "trainwatch_lab.notebook",
        "trainwatch_lab.server",
        "trainwatch_lab.fix",
        "trainwatch_lab.integrations",
        "trainwatch_lab.cli",
        "trainwatch_lab.monitor",
    },
    # core and the standard library only: training code imports it in any process
    "fix": JUPYTER_SIDE
    | {
        "trainwatch_lab.advice",
        "trainwatch_lab.notebook",
        "trainwatch_lab.server",
        "trainwatch_lab.prometheus",
        "trainwatch_lab.integrations",
        "trainwatch_lab.cli",
        "trainwatch_lab.monitor",
    },
    "integrations": JUPYTER_SIDE | {"trainwatch_lab.notebook", "trainwatch_lab.server"},
    "notebook": {"tornado", "jupyter_server", "trainwatch_lab.server"},
    "server": {"IPython", "ipywidgets", "bqplot", "ipykernel", "trainwatch_lab.notebook"},
}


# training frameworks: imported by integrations/<module> only, the one named for each
FRAMEWORKS = {
    "lightning": "lightning.py",
    "pytorch_lightning": "lightning.py",
    "lightning_fabric": "lightning.py",
    "transformers": "huggingface.py",
    "keras": "keras.py",
    "tf_keras": "keras.py",
    "torch": None,
    "tensorflow": None,
    "jax": None,
    "tensorboardX": None,
}


def imported_modules(path: Path, pkg: Path = PKG) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    package = "trainwatch_lab." + ".".join(path.relative_to(pkg).parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # resolve relative imports against the file's package
                base = package.rstrip(".").split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module or ""]).rstrip(".")
            else:
                module = node.module or ""
            names.add(module)
            # `from .. import monitor` imports trainwatch_lab.monitor, not just the package
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


# one module may import what its layer may not, and why: the agent's HTTP server is tornado's
# (issue 34: a well-kept server, not one of our own); tornado is a plain dependency, no Jupyter
EXCEPTIONS = {"prometheus/agent_http.py": {"tornado"}}


def violations(layer: str, forbidden: set[str], pkg: Path = PKG) -> list[str]:
    target = pkg / layer
    files = [target] if target.is_file() else sorted(target.rglob("*.py"))
    found = []
    for file in files:
        allowed = EXCEPTIONS.get(file.relative_to(pkg).as_posix(), set())
        for mod in imported_modules(file, pkg):
            if mod.split(".")[0] in allowed:
                continue
            if any(mod == f or mod.startswith(f + ".") for f in forbidden):
                found.append(f"{file.relative_to(pkg.parent)} imports {mod}")
    return found


def framework_violations(pkg: Path = PKG) -> list[str]:
    """A framework imported anywhere in the package but integrations/<its module>."""
    found = []
    for file in sorted(pkg.rglob("*.py")):
        rel = file.relative_to(pkg)
        for mod in imported_modules(file, pkg):
            top = mod.split(".")[0]
            if top not in FRAMEWORKS:
                continue
            allowed = FRAMEWORKS[top]
            if not (rel.parts[0] == "integrations" and allowed and rel.name == allowed):
                found.append(f"{file.relative_to(pkg.parent)} imports {mod}")
    return found


def package_copy(tmp_path: Path) -> Path:
    """The package's Python files under ``tmp_path``: a test that proves a checker can fail
    plants its bad module there, never in the tree that other tests (other pytest-xdist
    workers) read at the same moment."""

    def not_python(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n in ("__pycache__", "labextension")
            or not (n.endswith(".py") or (Path(folder) / n).is_dir())
        ]

    return Path(shutil.copytree(PKG, tmp_path / "trainwatch_lab", ignore=not_python))


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    if not (PKG / layer).exists():
        pytest.skip(f"{layer} not present")
    assert violations(layer, RULES[layer]) == []


def test_checker_catches_a_violation(tmp_path: Path) -> None:
    pkg = package_copy(tmp_path)
    assert violations("core", RULES["core"], pkg) == []
    (pkg / "core" / "_layering_probe_tmp.py").write_text(
        "import ipywidgets\nfrom ..notebook import magics\n"
    )
    found = violations("core", RULES["core"], pkg)
    assert any("ipywidgets" in v for v in found)
    assert any("trainwatch_lab.notebook" in v for v in found)


def test_checker_catches_a_prometheus_violation(tmp_path: Path) -> None:
    pkg = package_copy(tmp_path)
    assert violations("prometheus", RULES["prometheus"], pkg) == []
    (pkg / "prometheus" / "_layering_probe_tmp.py").write_text(
        "from ..server import handlers\nfrom .. import monitor\nimport tornado\n"
    )
    found = violations("prometheus", RULES["prometheus"], pkg)
    assert any("trainwatch_lab.server" in v for v in found)
    assert any("trainwatch_lab.monitor" in v for v in found)
    assert any("tornado" in v for v in found)


def test_frameworks_only_in_their_integration_module() -> None:
    assert framework_violations() == []


def test_checker_catches_fix_and_framework_violations(tmp_path: Path) -> None:
    pkg = package_copy(tmp_path)
    assert violations("fix", RULES["fix"], pkg) == framework_violations(pkg) == []
    (pkg / "fix" / "_layering_probe_tmp.py").write_text(
        "from ..advice import check\nimport IPython\n"
    )
    (pkg / "integrations" / "_layering_probe_tmp.py").write_text(
        "import lightning\nfrom ..notebook import inline\n"
    )
    fix_found = violations("fix", RULES["fix"], pkg)
    integration_found = violations("integrations", RULES["integrations"], pkg)
    framework_found = framework_violations(pkg)
    assert any("trainwatch_lab.advice" in v for v in fix_found)
    assert any("IPython" in v for v in fix_found)
    assert any("trainwatch_lab.notebook" in v for v in integration_found)
    assert any("_layering_probe_tmp.py imports lightning" in v for v in framework_found)


def test_fix_and_integrations_import_no_framework() -> None:
    """The framework modules load only when the user imports them."""
    code = (
        "import sys, trainwatch_lab, trainwatch_lab.fix as f, trainwatch_lab.integrations\n"
        "import trainwatch_lab.integrations.watch\n"
        "[getattr(f, n) for n in f.__all__]\n"
        "print(','.join(m for m in ('torch', 'lightning', 'transformers', 'keras', 'jax', "
        "'tensorboardX', 'IPython', 'ipywidgets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_import_is_cheap() -> None:
    """`import trainwatch_lab` must not pull in Jupyter, widgets or psutil."""
    code = (
        "import sys, trainwatch_lab; heavy = [m for m in "
        "('IPython','ipywidgets','bqplot','tornado','jupyter_server','pynvml','psutil') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# The rooms inside core/ and notebook/ (issue 28): what each may import from its own floor.
# "(top)" is the floor's own modules (core: defaults, model, history, ...; notebook: the
# magics, options, warnings_html, ...). Arrows run one way: a room never imports a room that
# imports it, and the floor's top modules import no room, except where listed.
ROOMS = {
    "core": {
        "(top)": set(),
        "gpu": {"(top)"},
        "guard": {"(top)"},
        "storage": {"(top)", "guard"},
        "processes": {"(top)", "guard"},
        "paths": {"(top)", "guard", "storage"},
        "worker": {"(top)", "storage", "paths"},
        "record": {"(top)", "storage", "processes"},
        "attach": {"(top)", "guard", "paths"},
    },
    "notebook": {
        # the magics and the kernel's watch assemble the rooms
        "(top)": {"(top)", "cell", "dashboard"},
        "cell": {"(top)"},
        "dashboard": {"(top)"},
    },
    "fix": {
        # the package's __init__ names the rooms' public names (lazily); space, scratch and
        # report are what both rooms use, and the two rooms never import each other
        "(top)": {"mirror", "checkpoint"},
        "mirror": {"(top)"},
        "checkpoint": {"(top)"},
    },
}
# the notebook's top modules a room may use: leaves, never the magics or the kernel's watch
NOTEBOOK_LEAVES = {"export", "fix_status", "inline", "settings", "ticks", "warnings_html"}


def room_of(floor: str, module: str, pkg: Path = PKG) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["trainwatch_lab", floor] or len(parts) < 3:
        return None
    return parts[2] if (pkg / floor / parts[2]).is_dir() else "(top)"


def room_violations(floor: str, pkg: Path = PKG) -> list[str]:
    found = []
    for file in sorted((pkg / floor).rglob("*.py")):
        rel = file.relative_to(pkg / floor)
        room = rel.parts[0] if len(rel.parts) > 1 else "(top)"
        if room not in ROOMS[floor]:
            found.append(f"{file.relative_to(pkg.parent)}: room {room!r} has no rule")
            continue
        for mod in imported_modules(file, pkg):
            target = room_of(floor, mod, pkg)
            if target is None or target == room:
                continue
            leaf = mod.split(".")[2]
            bad = target not in ROOMS[floor][room]
            if floor == "notebook" and room != "(top)" and target == "(top)":
                bad = leaf not in NOTEBOOK_LEAVES
            if bad:
                found.append(f"{file.relative_to(pkg.parent)} ({room}) imports {mod}")
    return found


@pytest.mark.parametrize("floor", sorted(ROOMS))
def test_rooms_import_one_way(floor: str) -> None:
    assert room_violations(floor) == []


def test_room_checker_catches_a_backward_arrow(tmp_path: Path) -> None:
    pkg = package_copy(tmp_path)
    assert room_violations("core", pkg) == room_violations("notebook", pkg) == []
    (pkg / "core" / "storage" / "_layering_probe_tmp.py").write_text(
        "from ..gpu import source\nfrom ..paths import names\n"
    )
    (pkg / "notebook" / "dashboard" / "_layering_probe_tmp.py").write_text(
        "from ..kernel_watch import KernelWatch\nfrom ..cell import report\n"
    )
    core_found = room_violations("core", pkg)
    notebook_found = room_violations("notebook", pkg)
    assert any("imports trainwatch_lab.core.gpu" in v for v in core_found)
    assert any("imports trainwatch_lab.core.paths" in v for v in core_found)
    assert any("imports trainwatch_lab.notebook.kernel_watch" in v for v in notebook_found)
    assert any("imports trainwatch_lab.notebook.cell" in v for v in notebook_found)


def shared_prefixes(folder: Path) -> dict[str, list[str]]:
    """Modules of one folder that share a name prefix: three or more is a missing folder."""
    groups: dict[str, list[str]] = {}
    for file in folder.glob("*.py"):
        if file.stem != "__init__":
            groups.setdefault(file.stem.split("_")[0], []).append(file.stem)
    return {k: sorted(v) for k, v in groups.items() if len(v) >= 3}


# the floors issue 28 gave rooms, and fix/ (issue 37: mirror/, checkpoint/); advice/gpu_* and
# prometheus/rules_* are the next candidates
FOLDERS = sorted(
    {str(p.parent.relative_to(PKG.parent)) for floor in ROOMS for p in (PKG / floor).rglob("*.py")}
)


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_prefix_stands_for_a_missing_folder(folder: str) -> None:
    assert shared_prefixes(PKG.parent / folder) == {}


def test_every_room_says_what_it_owns() -> None:
    """Each package's __init__ docstring is the map a newcomer reads."""
    missing = [
        str(init.relative_to(PKG.parent))
        for init in PKG.rglob("__init__.py")
        if not (ast.get_docstring(ast.parse(init.read_text())) or "").strip()
        or "TODO" in init.read_text()
    ]
    assert missing == []
