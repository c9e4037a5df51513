"""Server options are validated where Jupyter reads them: a bad value is one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
from traitlets import TraitError
from traitlets.config import Config

from tests.server.conftest import GRACE, INTERVAL
from trainwatch_lab.server.config import ServerSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("interval", 0.0, "at least"),
        ("interval", 0.001, "at least"),
        ("history_s", -1.0, "positive"),
        ("stop_grace_s", 0.0, "positive"),
        ("scrape_lease_s", 0.0, "positive"),
        ("prometheus_timeout_s", -1.0, "positive"),
        ("prometheus_url", "prometheus:9090", "http"),
        ("prometheus_url", "ftp://prometheus", "http"),
        ("fleet_rate_window", "5", "duration like"),
        ("fleet_rate_window", "1d", "duration like"),
    ],
)
def test_bad_values_are_refused(name: str, value: float, match: str) -> None:
    config = ServerSettings()
    with pytest.raises(TraitError, match=match):
        setattr(config, name, value)
    assert getattr(config, name) == ServerSettings.class_traits()[name].default_value


def test_good_values_are_kept() -> None:
    config = ServerSettings(interval=0.5, history_s=60.0)
    assert (config.interval, config.history_s) == (0.5, 60.0)


def test_the_prometheus_url_is_kept_without_its_trailing_slash() -> None:
    config = ServerSettings(prometheus_url=" http://prometheus:9090/prom/ ")
    assert config.prometheus_url == "http://prometheus:9090/prom"
    assert (
        ServerSettings().prometheus_url == "" and ServerSettings().authenticate_prometheus is True
    )


# A real server reads c.TrainWatch (conftest's section) and nothing under the class's own name.
IGNORED_HISTORY_S = 123.0


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.TrainWatch.history_s = 90.0
    jp_server_config.ServerSettings.history_s = IGNORED_HISTORY_S
    return jp_server_config


def test_the_documented_section_configures_the_running_extension(hub) -> None:
    """``c.TrainWatch.*`` reaches the extension's settings and its sampler's defaults."""
    assert (hub.config.interval, hub.config.stop_grace_s) == (INTERVAL, GRACE)
    assert (hub.defaults.interval_s, hub.config.history_s, hub.config.probe) == (
        INTERVAL,
        90.0,
        False,
    )


def test_the_class_name_is_not_a_config_section(hub) -> None:
    """``c.ServerSettings.*`` is not how users configure it: it is ignored, and no doc or
    message says it."""
    assert hub.config.history_s != IGNORED_HISTORY_S
    assert ServerSettings(config=Config({"ServerSettings": {"interval": 5.0}})).interval == (
        ServerSettings.class_traits()["interval"].default_value
    )
    docs = [ROOT / "README.md", *sorted((ROOT / "notebooks").glob("*.ipynb"))]
    assert [p.name for p in docs if "ServerSettings" in p.read_text()] == []


def test_help_and_generated_config_name_the_documented_section() -> None:
    """What traitlets writes for ``--help-all``/``--generate-config`` says ``TrainWatch``."""
    helptext = ServerSettings.class_get_help()
    section = ServerSettings.class_config_section()
    assert helptext.startswith("TrainWatch(Configurable) options\n" + "-" * 32 + "\n--")
    assert "--TrainWatch.interval=<Float>" in helptext and "ServerSettings" not in helptext
    assert "# c.TrainWatch.interval = 1.0" in section and "ServerSettings" not in section
