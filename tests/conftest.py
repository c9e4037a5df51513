"""Shared pytest setup: the real-filesystem fixtures of tests/support/mounts.py for every test."""

from __future__ import annotations

pytest_plugins = ["tests.support.mounts"]
