"""``c.TrainWatch.notify_url``/``notify_format``: refused in one line when bad; when set, the
server's sampler tells the webhook of a warning."""

from __future__ import annotations

from typing import Any

import pytest
from traitlets import TraitError
from traitlets.config import Config

from tests.advice.test_notify import FULL, Webhook
from tests.support.mounts import wait_until
from trainwatch_lab.core.sampler import Sampler
from trainwatch_lab.server.config import ServerSettings
from trainwatch_lab.server.hub import Hub


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("notify_url", "ftp://example.com/hook", "http:// or https://"),
        ("notify_url", "example.com/hook", "http:// or https://"),
        ("notify_format", "teams", "one of json, slack, dingtalk, feishu, wecom"),
    ],
)
def test_bad_notify_settings_are_refused(name: str, value: str, match: str) -> None:
    with pytest.raises(TraitError, match=match) as info:
        ServerSettings(config=Config({"TrainWatch": {name: value}}))
    assert "\n" not in str(info.value) and f"TrainWatch.{name}" in str(info.value)
    config = ServerSettings()
    with pytest.raises(TraitError):
        setattr(config, name, value)
    assert (config.notify_url, config.notify_format) == ("", "json")  # nothing changed


def test_good_notify_settings_are_kept() -> None:
    config = ServerSettings(notify_url=" https://hooks.slack.com/x ", notify_format="Slack")
    assert (config.notify_url, config.notify_format) == ("https://hooks.slack.com/x", "slack")
    assert Hub(ServerSettings()).notifier is None  # no URL: no thread


def test_a_url_and_format_that_do_not_go_together_leave_the_server_up(caplog) -> None:
    """A #secret= for a robot that does not sign is only known wrong with both settings: the
    extension still loads (the panel works), notifications are off, one line says why in the
    settings' own names, and the secret is not in it."""
    config = ServerSettings(notify_url="https://h.example/hook#secret=SECx")  # format: json
    with caplog.at_level("ERROR", logger="trainwatch_lab.server.config"):
        hub = Hub(config)
    assert hub.notifier is None
    # ours only: a pending task of an earlier test, garbage-collected here, logs through asyncio
    (line,) = [r.getMessage() for r in caplog.records if r.name.startswith("trainwatch_lab")]
    assert "TrainWatch.notify_format json" in line and "notifications are off" in line
    assert "SECx" not in line and "--notify" not in line and "\n" not in line


def test_the_servers_sampler_tells_the_webhook() -> None:
    hook = Webhook()

    def factory(paths: list[str], **kw: Any) -> Sampler:
        return Sampler([], interval=0.05, evaluate=lambda s, h: [FULL])

    config = ServerSettings(notify_url=hook.url, notify_format="wecom", watch_processes=False)
    hub = Hub(config, sampler_factory=factory)
    try:
        hub.sampler = hub._create_and_start()
        assert wait_until(lambda: hook.requests, 10)
    finally:
        hub.close_now()
        hook.close()
    (body,) = hook.bodies()
    assert body["msgtype"] == "text" and "disk-almost-full" in body["text"]["content"]


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def jp_server_config(jp_server_config, webhook):
    jp_server_config.TrainWatch.notify_url = webhook.url
    return jp_server_config


async def test_a_server_with_a_webhook_samples_with_no_client_connected(jp_serverapp) -> None:
    """Word when you are away needs a sampler while nobody has the panel open."""
    import asyncio

    from trainwatch_lab.server.extension import SETTINGS_KEY

    hub = jp_serverapp.web_app.settings[SETTINGS_KEY]
    try:
        for _ in range(100):
            if hub.sampler is not None and hub.sampler.ticks >= 2:
                break
            await asyncio.sleep(0.1)
        assert hub.sampler is not None and hub.sampler.running and hub.sampler.ticks >= 2
        assert hub.lease.clients == 1 and hub.lease.held  # the webhook's, never released
    finally:
        hub.close_now()  # its sampler would outlive the test's loop
