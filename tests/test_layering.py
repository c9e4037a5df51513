"""The layering of ARCHITECTURE.md, enforced: core/, advice/ and cli/ never import Jupyter;
fix/ imports core only; integrations/ imports a framework only in the module named for it."""

from __future__ import annotations

import ast
import graphlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import trainwatch_lab
from tests.support.env import need

# the package imported: the checkout's, or a wheel's when the quick tier runs against one
PKG = Path(trainwatch_lab.__file__).resolve().parent
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


def import_statements(
    path: Path, pkg: Path = PKG, runtime_only: bool = False
) -> list[tuple[str, list[str]]]:
    """Each import of ``path`` as (module, the names imported from it), relative imports
    resolved; ``runtime_only`` leaves out what only the type checker imports
    (``if TYPE_CHECKING:``): those lines never run."""
    tree = ast.parse(path.read_text(), filename=str(path))
    if runtime_only:
        for node in list(ast.walk(tree)):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = [ast.Pass()]
    found: list[tuple[str, list[str]]] = []
    package = "trainwatch_lab." + ".".join(path.relative_to(pkg).parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # resolve relative imports against the file's package
                base = package.rstrip(".").split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module or ""]).rstrip(".")
            else:
                module = node.module or ""
            found.append((module, [alias.name for alias in node.names]))
    return found


def imported_modules(path: Path, pkg: Path = PKG) -> set[str]:
    names: set[str] = set()
    for module, imported in import_statements(path, pkg):
        names.add(module)
        # `from .. import monitor` imports trainwatch_lab.monitor, not just the package
        names.update(f"{module}.{name}" for name in imported)
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
    # issue 37: advice.registry assembles the GPU detectors
    "advice": {"(top)": {"(top)", "gpu"}, "gpu": {"(top)"}},
    # the fleet's folding and dashboard read the recording rules' names
    "prometheus": {"(top)": {"(top)", "rules"}, "rules": set()},
    # extension.py serves both rooms, the hub starts the recorder
    "server": {
        "(top)": {"(top)", "fleet", "recording"},
        "fleet": {"(top)"},
        "recording": {"(top)"},
    },
}
# the top modules a room may use, where a floor's top both assembles its rooms and serves
# them: leaves, which import no room (never the magics, the registry or the hub)
LEAVES = {
    "notebook": {"export", "fix_status", "inline", "settings", "ticks", "warnings_html"},
    "advice": {"context", "io_bound", "storage", "text"},
    "server": {"config", "handlers", "kernels", "kernel_requests"},
}


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
            if floor in LEAVES and room != "(top)" and target == "(top)":
                bad = leaf not in LEAVES[floor]
            if floor in LEAVES and room == "(top)" and file.stem in LEAVES[floor]:
                bad = bad or target != "(top)"  # a leaf importing a room closes a circle
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


def shared_prefixes(folder: Path, pattern: str = "*.py") -> dict[str, list[str]]:
    """Modules of one folder that share a name prefix (the first word: ``gpu_feed``,
    ``panelCharts``): three or more is a missing folder."""
    groups: dict[str, list[str]] = {}
    for file in folder.glob(pattern):
        if file.stem not in ("__init__", "index"):
            groups.setdefault(re.split(r"_|(?=[A-Z])", file.stem)[0], []).append(file.stem)
    return {k: sorted(v) for k, v in groups.items() if len(v) >= 3}


# every folder of the package (issue 37)
FOLDERS = sorted({str(p.parent.relative_to(PKG.parent)) for p in PKG.rglob("*.py")})


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_prefix_stands_for_a_missing_folder(folder: str) -> None:
    assert shared_prefixes(PKG.parent / folder) == {}


def test_prefix_checker_catches_a_family(tmp_path: Path) -> None:
    for name in ("beam.py", "beam_plan.py", "beam_files.py", "beamish.py", "plan.py"):
        (tmp_path / name).write_text("")
    assert shared_prefixes(tmp_path) == {"beam": ["beam", "beam_files", "beam_plan"]}


def test_every_room_says_what_it_owns() -> None:
    """Each package's __init__ docstring is the map a newcomer reads."""
    missing = [
        str(init.relative_to(PKG.parent))
        for init in PKG.rglob("__init__.py")
        if not (ast.get_docstring(ast.parse(init.read_text())) or "").strip()
        or "TODO" in init.read_text()
    ]
    assert missing == []


def module_name(file: Path, pkg: Path = PKG) -> str:
    parts = list(file.relative_to(pkg.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """Module -> the package's modules it imports when it runs (lazy imports in functions
    included: a circle closed late is a circle all the same)."""
    files = {module_name(f, pkg): f for f in pkg.rglob("*.py")}

    def module_of(name: str) -> str:  # a name defined in a module: that module
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, file in files.items():
        targets = set()
        for module, imported in import_statements(file, pkg, runtime_only=True):
            # `from . import codec` imports the module codec, not the package's __init__
            targets.update(module_of(f"{module}.{n}") for n in imported or [""])
        graph[name] = {t for t in targets if t and t != name}
    return graph


def import_circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of imports, each module importing the next (the first repeated at its end),
    or [] when none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib lists each module after what it imports
    return []


def test_no_module_imports_itself_in_a_circle() -> None:
    """Arrows between modules run one way (issue 37: core/storage/mounts <-> quota_tools,
    notebook/dashboard/layout <-> view <-> warnings were the last)."""
    assert import_circle(import_graph()) == []


def test_circle_checker_catches_a_lazy_circle(tmp_path: Path) -> None:
    pkg = package_copy(tmp_path)
    assert import_circle(import_graph(pkg)) == []
    (pkg / "core" / "_circle_a.py").write_text("from ._circle_b import B\nA = 1\n")
    (pkg / "core" / "_circle_b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .model import Sample\n"
        "B = 2\ndef late():\n    from ._circle_a import A\n    return A\n"
    )
    circle = import_circle(import_graph(pkg))
    assert set(circle) == {"trainwatch_lab.core._circle_a", "trainwatch_lab.core._circle_b"}


def test_room_checker_catches_a_backward_arrow_on_the_new_floors(tmp_path: Path) -> None:
    pkg = package_copy(tmp_path)
    assert room_violations("advice", pkg) == room_violations("server", pkg) == []
    (pkg / "advice" / "gpu" / "_layering_probe_tmp.py").write_text(
        "from ..registry import all_detectors\n"
    )
    (pkg / "server" / "handlers.py").write_text(
        (pkg / "server" / "handlers.py").read_text() + "\nfrom .fleet import api\n"
    )
    assert any(
        "imports trainwatch_lab.advice.registry" in v for v in room_violations("advice", pkg)
    )
    assert any("handlers.py ((top)) imports" in v for v in room_violations("server", pkg))


# The extension's TypeScript (js/src), the same habits: rooms by what they show, each with a
# README.md that says what it owns, arrows one way, no circle.
JS_SRC = Path(__file__).resolve().parents[1] / "js" / "src"
JS_ROOMS = {  # room -> the rooms it may import; every room may import the top modules
    "panel": {"charts", "fleet", "replay"},
    "fleet": {"charts"},
    "charts": set(),
    "replay": set(),
}
JS_ASSEMBLER = "index.ts"  # the one top module that imports a room: it registers the panel
JS_IMPORT = re.compile(r"""(?:from|import)\s+['"](\.{1,2}/[^'"]+)['"]""")


def js_imports(src: Path = JS_SRC) -> dict[str, set[str]]:
    """Each .ts file under ``src`` (relative, no suffix) -> the files of src it imports."""
    graph: dict[str, set[str]] = {}
    for file in sorted(src.rglob("*.ts")):
        name = file.relative_to(src).with_suffix("").as_posix()
        graph[name] = {
            (file.parent / spec).resolve().relative_to(src.resolve()).as_posix()
            for spec in JS_IMPORT.findall(file.read_text())
        }
    return graph


def js_violations(src: Path = JS_SRC) -> list[str]:
    found = []
    folders = sorted({f.parent for f in src.rglob("*.ts")})
    for folder in folders:
        if families := shared_prefixes(folder, "*.ts"):
            found.append(f"{folder.relative_to(src.parent)}: prefix families {families}")
        readme = folder / "README.md"
        words = readme.read_text().split("\n", 1)[-1].strip() if readme.exists() else ""
        if not words or "TODO" in words:
            found.append(f"{folder.relative_to(src.parent)}: no README.md saying what it owns")
    for name, targets in js_imports(src).items():
        room = name.split("/")[0] if "/" in name else "(top)"
        if room != "(top)" and room not in JS_ROOMS:
            found.append(f"{name}.ts: room {room!r} has no rule")
            continue
        for target in targets:
            to = target.split("/")[0] if "/" in target else "(top)"
            if to in (room, "(top)"):
                continue
            if room == "(top)" and name != JS_ASSEMBLER.removesuffix(".ts"):
                found.append(f"{name}.ts (top) imports {target}")
            elif room != "(top)" and to not in JS_ROOMS[room]:
                found.append(f"{name}.ts ({room}) imports {target}")
    if circle := import_circle(js_imports(src)):
        found.append("import circle: " + " -> ".join(circle))
    return found


def test_js_src_has_rooms_that_say_what_they_own() -> None:
    need(JS_SRC.is_dir(), "no js/src here (an installed wheel)")
    assert js_violations() == []


def test_js_checker_catches_a_family_a_silent_room_and_a_backward_arrow(tmp_path: Path) -> None:
    need(JS_SRC.is_dir(), "no js/src here (an installed wheel)")
    src = Path(shutil.copytree(JS_SRC, tmp_path / "src"))
    assert js_violations(src) == []
    for name in ("gaugeA.ts", "gaugeB.ts", "gauge.ts"):
        (src / name).write_text("export const x = 1;\n")
    (src / "charts" / "README.md").write_text("# js/src/charts\n")
    (src / "charts" / "axes.ts").write_text(
        (src / "charts" / "axes.ts").read_text()
        + "\nimport { PANEL_CHARTS } from '../panel/chartList';\n"
    )
    found = js_violations(src)
    assert any("prefix families {'gauge'" in v for v in found)
    assert any("charts: no README.md" in v for v in found)
    assert any("charts/axes.ts (charts) imports panel/chartList" in v for v in found)
    assert any(v.startswith("import circle:") for v in found)  # chartList imports charts/axes
