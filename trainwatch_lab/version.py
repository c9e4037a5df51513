"""The package's version, written once in ``js/package.json``: ``trainwatch_lab.__version__``
and the generated files that name it read it here. A module of its own so that a layer can
name the version without importing the package root, which loads every layer on demand."""

from __future__ import annotations


def package_version() -> str:
    """The installed distribution's version, else js/package.json's (a checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trainwatch_lab")
    except PackageNotFoundError:  # a checkout on sys.path, never installed: read the source
        import json
        from pathlib import Path

        package_json = Path(__file__).resolve().parents[1] / "js" / "package.json"
        try:
            return str(json.loads(package_json.read_text())["version"])
        except (OSError, ValueError, KeyError):
            return "0+unknown"
