"""Shared pytest setup: the real-filesystem fixtures of tests/support/mounts.py for every test,
and the markers of tests/support/tiers.py (``pytest -m "not slow"`` is the quick run)."""

from __future__ import annotations

pytest_plugins = ["tests.support.mounts", "tests.support.tiers"]
