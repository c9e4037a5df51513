"""Server options are validated where Jupyter reads them: a bad value is one clear error."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from trainwatch_lab.server.config import TrainWatch


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
    config = TrainWatch()
    with pytest.raises(TraitError, match=match):
        setattr(config, name, value)
    assert getattr(config, name) == TrainWatch.class_traits()[name].default_value


def test_good_values_are_kept() -> None:
    config = TrainWatch(interval=0.5, history_s=60.0)
    assert (config.interval, config.history_s) == (0.5, 60.0)


def test_the_prometheus_url_is_kept_without_its_trailing_slash() -> None:
    config = TrainWatch(prometheus_url=" http://prometheus:9090/prom/ ")
    assert config.prometheus_url == "http://prometheus:9090/prom"
    assert TrainWatch().prometheus_url == "" and TrainWatch().authenticate_prometheus is True
