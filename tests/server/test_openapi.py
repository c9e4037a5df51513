"""The OpenAPI document shipped with the package (trainwatch_lab/server/openapi.json) describes
every endpoint the extension registers, with every method it answers, and the limits it
states are the ones the code enforces (issue 24)."""

from __future__ import annotations

import json
from importlib import resources

from trainwatch_lab.core.defaults import PARAM_MAX, PATH_MAX, REQUEST_BODY_MAX, WS_MESSAGE_MAX
from trainwatch_lab.server import scrape
from trainwatch_lab.server.fleet import api as fleet
from trainwatch_lab.server.handlers import handlers
from trainwatch_lab.server.recording import api as recorded

METHODS = ("get", "post", "delete", "put", "patch")


def document() -> dict:
    return json.loads(resources.files("trainwatch_lab.server").joinpath("openapi.json").read_text())


def served() -> dict[str, set[str]]:
    """Route (under /trainwatch-lab) -> the methods its handler defines itself."""
    routes = handlers("/") + scrape.routes("/") + fleet.routes("/") + recorded.routes("/")
    out = {}
    for pattern, handler in routes:
        own = {
            m
            for m in METHODS
            for cls in handler.__mro__
            if cls.__module__.startswith("trainwatch_lab") and m in vars(cls)
        }
        out[pattern.removeprefix("/trainwatch-lab")] = own
    return out


def test_every_endpoint_and_method_is_described() -> None:
    paths = document()["paths"]
    described = {p: {m for m in ops if m in METHODS} for p, ops in paths.items()}
    assert described == served()


def test_the_stated_limits_are_the_enforced_ones() -> None:
    text = document()["info"]["description"]
    for number in (REQUEST_BODY_MAX, PARAM_MAX, PATH_MAX - 1, WS_MESSAGE_MAX):
        assert f"{number} bytes" in text
    assert document()["openapi"].startswith("3.")
