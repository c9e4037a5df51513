"""REST + WebSocket endpoints under ``<base_url>/trainwatch-lab/api/``.

Every handler requires Jupyter's authentication. Anything that may touch a filesystem (a path
check, an existence test of a new watched path) runs in the hub's executor with a timeout, so
a dead mount never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from ..advice.check import run_check
from ..core.guard.guard import MountUnresponsive, WorkerFailed, WorkerUnavailable
from ..core.limits import (
    PARAM_MAX,
    REQUEST_BODY_MAX,
    WS_MESSAGE_MAX,
    WS_STALLED_CLOSE_S,
    abbreviate,
    clamp,
    path_problem,
    shown,
)
from ..core.paths.names import Located, locate
from .hub import SETTINGS_KEY, Hub, dumps, path_key

API = "trainwatch-lab/api"
# what an Authorizer is asked about (JupyterHub roles, read-only users): GET is "read" and
# POST/DELETE are "write" on this resource
AUTH_RESOURCE = "trainwatch"
# query parameters that jupyter_server's auth reads before a handler runs, accepted on every
# endpoint: Jupyter's query-token login (``?token=...``, the URL ``jupyter server list``
# prints and scripts use)
AUTH_PARAMS = frozenset({"token"})
MAX_STREAM_INTERVAL_S = 3600.0
# history replies built at once (per server); the others wait their turn, holding nothing
HISTORY_REPLIES = 2
HISTORY_KEY = "trainwatch_history_replies"
PID_DIGITS = 10  # Linux's pid_max is at most 2**22: a longer number names no process


class BadRequest(web.HTTPError):
    """Junk input: raised anywhere in a handler, answered by ``write_error`` with a 400 and
    one clear line ``{"error": ...}``."""

    def __init__(self, message: str) -> None:
        super().__init__(400)
        self.message = message

    def __str__(self) -> str:
        return self.message


class TooLarge(BadRequest):
    """A request body over ``REQUEST_BODY_MAX``: 413, read and dropped, never kept."""

    def __init__(self) -> None:
        super().__init__(f"the request body is larger than {REQUEST_BODY_MAX} bytes")
        self.status_code = 413


def parse_path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadRequest("'path' must be a non-empty string")
    problem = path_problem(value)
    if problem is not None:
        raise BadRequest(f"'path' {problem}: {shown(value)}")
    value = value.strip()
    if not (os.path.isabs(value) or value.startswith("~")):
        raise BadRequest(f"'path' must be absolute or start with ~, got {shown(value)}")
    return value


def parse_float(name: str, value: str | None, low: float, high: float) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise BadRequest(f"{name!r} must be a number, got {shown(value)}") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise BadRequest(f"{name!r} must be between {low:g} and {high:g}, got {shown(value)}")
    return number


def parse_bool(name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    lowered = value.lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise BadRequest(f"{name!r} must be true or false, got {shown(value)}")


def judge_new_path(key: str, timeout: float) -> Located:
    """Asks the mount's helper process (core.paths.names.locate, judged by core.paths.names.judge as
    the CLI and the notebook judge it), so a dead mount raises MountUnresponsive within
    ``timeout`` instead of leaving a server thread stuck in stat."""
    return locate(key, timeout=timeout)


@web.stream_request_body
class BaseHandler(APIHandler):
    """Bodies are streamed in, so one over ``REQUEST_BODY_MAX`` is dropped as it arrives
    (never held whole) and answered 413; a client that sent ``Expect: 100-continue`` is
    answered before it sends any of it."""

    auth_resource = AUTH_RESOURCE
    _body: bytearray
    _too_large = False

    async def prepare(self) -> None:  # type: ignore[override]
        self._body = bytearray()
        declared = self.request.headers.get("Content-Length", "0")
        if not declared.isdigit() or int(declared) > REQUEST_BODY_MAX:
            self._too_large = True
        await super().prepare()
        if self._too_large and self.request.headers.get("Expect", "").lower() == "100-continue":
            raise TooLarge()

    def data_received(self, chunk: bytes) -> None:
        if len(self._body) + len(chunk) > REQUEST_BODY_MAX:
            self._too_large = True
            self._body = bytearray()
        if not self._too_large:
            self._body += chunk

    @property
    def hub(self) -> Hub:
        return self.settings[SETTINGS_KEY]

    def send_json(self, obj: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(dumps(obj))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, BadRequest):
            self.bad(exc.message, exc.status_code)
            return
        super().write_error(status_code, **kwargs)

    def bad(self, message: str, status: int = 400) -> None:
        """A refusal: one line under 1 KB, whatever it quotes."""
        self.send_json({"error": clamp(message)}, status)

    def body_json(self) -> dict[str, Any]:
        if self._too_large:
            raise TooLarge()
        try:
            data = json.loads(bytes(self._body) or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise BadRequest("the request body must be JSON") from None
        if not isinstance(data, dict):
            raise BadRequest('the request body must be a JSON object like {"path": "..."}')
        return data

    def only(self, *names: str) -> None:
        """Refuse (400) a query parameter that is neither in ``names`` nor Jupyter's own."""
        args = self.request.query_arguments
        # JupyterLab's ServerConnection appends a cache buster "?1712345678901" to GETs
        unknown = sorted(
            n
            for n in set(args) - set(names) - AUTH_PARAMS
            if not (n.isdigit() and args[n] == [b""])
        )
        if unknown:
            raise BadRequest(f"unknown parameter {shown(unknown[0])}")

    def value_from_request(self, name: str, *, delete_reads_body: bool) -> Any:
        """The one value a write names (``path``, ``pid``): from the JSON body, or for a
        DELETE from the query string (``?name=``; no other parameter allowed), where some
        clients cannot send a body. ``delete_reads_body``: a DELETE without the parameter
        falls back to its body too; None when the value is given nowhere."""
        if self.request.method != "DELETE":
            self.only()
            return self.body_fields(name).get(name)
        self.only(name)
        value = self.arg(name)
        if value is None and delete_reads_body:
            value = self.body_fields(name).get(name)
        return value

    def body_fields(self, *names: str) -> dict[str, Any]:
        """The JSON body, refused (400) when it holds a field not in ``names``: every write
        takes only what it documents (a misspelt field is never silently ignored)."""
        data = self.body_json()
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise BadRequest(f"unknown field {shown(unknown[0])}")
        return data

    def arg(self, name: str) -> str | None:
        values = self.request.query_arguments.get(name)
        if not values:
            return None
        if len(values) > 1:
            raise BadRequest(f"{name!r} given more than once")
        if len(values[0]) > PARAM_MAX:
            raise BadRequest(f"{name!r} is longer than {PARAM_MAX} bytes")
        try:
            return values[0].decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(f"{name!r} must be UTF-8") from None


class SnapshotHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only()
        sample = await self.hub.fresh_sample()
        if sample is None:
            return self.bad("no sample yet; the sampler is starting", 503)
        self.send_json(self.hub.sample_json(sample))


class HistoryHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only("since")
        since = parse_float("since", self.arg("since"), 0.0, 1e12)
        await self.hub.ensure_running()
        # the sampler's interval comes along: the panel calls its data stale after three
        # intervals without a sample, and decides that in the browser
        interval, started = self.hub.config.interval, self.hub.started_at
        points = self.hub.defaults.history_reply_points
        # forty at once would hold the GIL from the loop
        async with self.settings.setdefault(HISTORY_KEY, asyncio.Semaphore(HISTORY_REPLIES)):
            text = await self.hub.in_executor(
                lambda: dumps(
                    {
                        **self.hub.history.columns(since, max_points=points),
                        "interval_s": interval,
                        "started_at": started,
                    }
                )
            )
        self.set_header("Content-Type", "application/json")
        self.finish(text)


class CheckHandler(BaseHandler):
    """``GET check?path=P`` diagnoses a path from what can be read (never writes anything);
    ``POST check {"path": P, "probe": true}`` also measures write + fsync latency there, so
    the probe passes the XSRF check and the Authorizer's ``write`` action like every write."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only("path", "probe", "timeout")
        raw = self.arg("path")
        if raw is None:
            raise BadRequest("missing parameter 'path'")
        if parse_bool("probe", self.arg("probe"), False):
            raise BadRequest(
                'GET check never writes; the write probe is POST check {"path": ..., "probe": true}'
            )
        timeout = parse_float("timeout", self.arg("timeout"), 0.1, 60.0)
        await self._check(parse_path(raw), False, timeout)

    @web.authenticated
    @authorized
    async def post(self) -> None:
        self.only()
        data = self.body_fields("path", "probe", "timeout")
        probe = data.get("probe", True)
        if not isinstance(probe, bool):
            raise BadRequest(f"'probe' must be true or false, got {type(probe).__name__}")
        timeout = data.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float)
        ):
            raise BadRequest("'timeout' must be a number of seconds")
        timeout = parse_float("timeout", None if timeout is None else str(timeout), 0.1, 60.0)
        await self._check(parse_path(data.get("path")), probe and self.hub.config.probe, timeout)

    async def _check(self, path: str, probe: bool, timeout: float | None) -> None:
        hub = self.hub
        limit = (timeout or hub.defaults.mount_timeout_s) + hub.defaults.probe_budget_s + 10.0
        try:
            report = await hub.in_thread(
                lambda: run_check([path], probe=probe, timeout=timeout, defaults=hub.defaults),
                timeout=limit,
            )
        except asyncio.TimeoutError:
            return self.bad(f"checking {abbreviate(path)} did not finish within {limit:.0f} s", 504)
        except (ValueError, OSError) as exc:
            return self.bad(f"cannot check {abbreviate(path)}: {exc}")
        self.send_json(report.to_json())


class PathsHandler(BaseHandler):
    def listing(self) -> dict[str, Any]:
        latest = self.hub.latest
        states = latest.paths if latest is not None else {}
        return {
            "paths": [
                {
                    "path": p,
                    "roles": roles,
                    "state": states[p].to_json() if p in states else None,
                }
                for p, roles in self.hub.roles().items()
            ]
        }

    def path_from_request(self) -> str:
        # DELETE paths also takes {"path": ...} in its body (DELETE processes: the query only)
        return parse_path(self.value_from_request("path", delete_reads_body=True))

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only()
        self.send_json(self.listing())

    @web.authenticated
    @authorized
    async def post(self) -> None:
        path = self.path_from_request()
        key = path_key(path)
        limit = self.hub.defaults.max_watched_paths
        if key not in self.hub.watched() and len(self.hub.watched()) >= limit:
            return self.bad(f"already watching {limit} paths; remove one first")
        responsive, note = True, None
        try:
            timeout = self.hub.defaults.mount_timeout_s
            found = await self.hub.in_thread(judge_new_path, key, timeout, timeout=timeout + 1.0)
        except (asyncio.TimeoutError, MountUnresponsive):  # a hung mount is worth watching
            responsive = False
        except (WorkerUnavailable, WorkerFailed, LookupError):  # cannot tell: the sampler will
            pass
        except OSError as exc:  # ELOOP, ENAMETOOLONG, EACCES: no logdir can be made there
            return self.bad(f"{abbreviate(key)}: {exc.strerror or exc}")
        else:
            # a logdir not created yet is watched where it will be (with a note); one that
            # can never be created, or that is no storage (/dev, a FIFO), is refused
            if found.refusal is not None:
                return self.bad(found.refusal)
            note = found.note
        # off the loop: the paths source reads the mount table and starts a helper process
        await self.hub.in_executor(self.hub.add_user_path, key)
        await self.hub.ensure_running()
        listing = self.listing()
        listing["added"] = key
        listing["responsive"] = responsive
        listing["note"] = note  # e.g. "not created yet; checked at /mnt/share/runs"
        self.send_json(listing, 201)

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        path = self.path_from_request()
        if not self.hub.remove_path(path):
            return self.bad(f"{abbreviate(path_key(path))} is not watched", 404)
        self.send_json(self.listing())


class ProcessesHandler(BaseHandler):
    """Training processes found on the machine: ``GET`` lists them (and the hidden pids),
    ``DELETE ?pid=N`` hides one in the panel (its row and its directories go), ``POST
    {"pid": N}`` shows it again."""

    def listing(self) -> dict[str, Any]:
        latest = self.hub.latest
        rows = latest.processes if latest is not None else []
        hidden = sorted({pid for pid, _ in self.hub.hidden_processes()})
        return {"processes": [p.to_json() for p in rows], "hidden": hidden}

    def pid_from_request(self) -> int:
        value = self.value_from_request("pid", delete_reads_body=False)
        text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""
        if not text.isdigit() or len(text) > PID_DIGITS or int(text) <= 0:
            raise BadRequest(f"'pid' must be a process id, got {shown(value)}")
        return int(text)

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.only()
        self.send_json(self.listing())

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        pid = self.pid_from_request()
        if not self.hub.hide_process(pid):
            return self.bad(f"no training process {pid} is listed", 404)
        self.send_json(self.listing())

    @web.authenticated
    @authorized
    async def post(self) -> None:
        pid = self.pid_from_request()
        if not self.hub.show_process(pid):
            return self.bad(f"training process {pid} is not hidden", 404)
        self.send_json(self.listing())


class StreamHandler(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """Pushes every sample (the ``GET snapshot`` shape) to the browser.

    The client may send ``{"interval": S}`` to receive at most one sample every S seconds
    (0 = every sample); the shared sampler's own interval is a server setting.
    """

    min_interval = 0.0
    max_message_size = WS_MESSAGE_MAX  # past it tornado closes the stream (1009, too big)
    stalled_close_s = WS_STALLED_CLOSE_S
    _last_sent = 0.0
    # one message in flight at most: a client that does not read gets the latest sample when
    # it reads again, never a queue of every sample since (issue 34: 100 such sockets took
    # the server from 441 to 916 MiB)
    _in_flight: asyncio.Future[None] | None = None
    _latest: tuple[str, float] | None = None
    _stalled_since: float | None = None
    _unlisten = None
    _acquired = False

    @property
    def hub(self) -> Hub:
        return self.settings[SETTINGS_KEY]

    async def get(self, *args: Any, **kwargs: Any) -> None:
        if self.current_user is None:
            self.log.warning("trainwatch stream: unauthenticated WebSocket request refused")
            raise web.HTTPError(403)
        if not self.authorizer.is_authorized(self, self.current_user, "read", AUTH_RESOURCE):
            raise web.HTTPError(403)
        await super().get(*args, **kwargs)

    async def open(self, *args: Any, **kwargs: Any) -> None:
        self._loop = asyncio.get_running_loop()
        self._acquired = True
        await self.hub.acquire()
        latest = self.hub.latest
        if latest is not None and self.hub.running:
            self._send(dumps(self.hub.sample_json(latest)), latest.t)
        self._unlisten = self.hub.add_listener(self._on_sample)

    def _on_sample(self, sample: Any, text: str) -> None:  # sampler thread
        self._loop.call_soon_threadsafe(self._send, text, sample.t)

    def _send(self, text: str, t: float) -> None:
        if self.ws_connection is None or self.ws_connection.is_closing():
            return
        if self.min_interval and t - self._last_sent < self.min_interval * 0.95:
            return
        if self._in_flight is not None and not self._in_flight.done():
            self._latest = (text, t)  # replaces any sample still waiting
            now = time.monotonic()
            if self._stalled_since is None:
                self._stalled_since = now
            elif now - self._stalled_since > self.stalled_close_s:
                self.log.info("trainwatch stream: closing a client that stopped reading")
                self.close(1013, "not reading")
            return
        self._write(text, t)

    def _write(self, text: str, t: float) -> None:
        self._last_sent = t
        try:
            self._in_flight = self.write_message(text)
        except WebSocketClosedError:
            return
        self._in_flight.add_done_callback(self._written)

    def _written(self, done: asyncio.Future[None]) -> None:
        if not done.cancelled():
            done.exception()  # a closed stream: on_close cleans up
        self._stalled_since = None
        latest, self._latest = self._latest, None
        if latest is not None and self.ws_connection and not self.ws_connection.is_closing():
            self._write(*latest)

    def on_message(self, message: str | bytes) -> None:
        try:
            data = json.loads(message)
            if not isinstance(data, dict) or "interval" not in data:
                raise BadRequest('expected {"interval": seconds}')
            value = data["interval"]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadRequest("'interval' must be a number of seconds")
            if not 0 <= value <= MAX_STREAM_INTERVAL_S:
                raise BadRequest(f"'interval' must be between 0 and {MAX_STREAM_INTERVAL_S:g}")
        except (ValueError, BadRequest) as exc:
            self.write_message(dumps({"error": str(exc)}))
            return
        self.min_interval = float(value)
        self._last_sent = 0.0

    def on_close(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        if self._acquired:
            self._acquired = False
            self.hub.release()


def handlers(base_url: str) -> list[tuple[str, type]]:
    def route(name: str) -> str:
        return url_path_join(base_url, API, name)

    return [
        (route("snapshot"), SnapshotHandler),
        (route("history"), HistoryHandler),
        (route("check"), CheckHandler),
        (route("paths"), PathsHandler),
        (route("processes"), ProcessesHandler),
        (route("stream"), StreamHandler),
    ]
