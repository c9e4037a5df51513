"""Server-side settings, configurable like any Jupyter option (``c.TrainWatch.interval = 0.5``).

Defaults come from core.defaults so the panel, the CLI and the notebook never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

from traitlets import Bool, Float, HasTraits, Int, List, TraitError, Unicode, Union, validate
from traitlets.config import Configurable

from ..advice.notify import FORMATS, Notifier, check_target, make_notifier
from ..core.defaults import DEFAULTS
from ..core.gpu.select import parse_gpu_selection
from ..core.processes.source import MAX_PATHS, MAX_PROCESSES
from ..core.redact import redact
from ..prometheus.rules.ruleset import WINDOW

log = logging.getLogger(__name__)
SECTION = "TrainWatch"
"""The documented config section (``c.TrainWatch.*``); the class has its own name because
``TrainWatch`` is the notebook widget (``from trainwatch_lab import TrainWatch``)."""


def _as_section(text: str) -> str:
    """traitlets writes help under ``cls.__name__``: say the section users write instead."""
    return text.replace(f"{ServerSettings.__name__}(", f"{SECTION}(").replace(
        f"{ServerSettings.__name__}.", f"{SECTION}."
    )


class ServerSettings(Configurable):
    """Options of the trainwatch_lab server extension (section ``c.TrainWatch``)."""

    @classmethod
    def section_names(cls) -> list[str]:
        """Config is read from ``c.TrainWatch`` (traitlets' ``_find_my_config`` and
        ``_load_config`` take the sections from here), never from ``c.ServerSettings``."""
        own = ServerSettings.__name__
        return [SECTION if name == own else name for name in super().section_names()]

    @classmethod
    def class_get_help(cls, inst: HasTraits | None = None) -> str:
        """``--TrainWatch.interval=<Float>``, as users write it (the title re-underlined)."""
        title, _, rest = _as_section(super().class_get_help(inst)).split("\n", 2)
        return "\n".join([title, "-" * len(title), rest])

    @classmethod
    def class_config_section(cls, classes: Sequence[type[HasTraits]] | None = None) -> str:
        """``# c.TrainWatch.interval = 1.0``, as users write it (``--generate-config``)."""
        return _as_section(super().class_config_section(classes))

    interval = Float(
        DEFAULTS.interval_s, help="Seconds between two samples of the server's sampler."
    ).tag(config=True)
    history_s = Float(
        DEFAULTS.history_s, help="Seconds of history kept per series in the server."
    ).tag(config=True)
    stop_grace_s = Float(
        10.0,
        help="The sampler stops this many seconds after the last client left (WebSocket "
        "closed, or last REST call), so a page reload does not restart it.",
    ).tag(config=True)
    snapshot_wait_s = Float(
        15.0, help="How long GET snapshot waits for the first sample of a fresh sampler."
    ).tag(config=True)
    watch_root_dir = Bool(True, help="Watch the Jupyter root directory.").tag(config=True)
    watch_kernel_dirs = Bool(True, help="Watch the working directory of every running kernel.").tag(
        config=True
    )
    attach_kernels = Bool(
        True,
        help="Kernels this server starts read its sampler instead of running their own "
        "(one watcher per machine): %trainwatch in a notebook registers its paths here and "
        "shows this server's samples and warnings. Off: every kernel samples by itself.",
    ).tag(config=True)
    watch_processes = Bool(
        True,
        help="Find training processes of this server's user (all users when it runs as "
        "root) that hold a GPU or write TensorBoard event files or checkpoints, or (as root) "
        "write files of 1 MiB or more into a watched path - scripts in terminals, tmux or "
        "nohup - and watch their log, checkpoint and working directories.",
    ).tag(config=True)
    max_processes = Int(
        MAX_PROCESSES, help="At most this many training processes are listed and watched."
    ).tag(config=True)
    max_process_paths = Int(
        MAX_PATHS, help="At most this many directories of training processes are watched."
    ).tag(config=True)
    paths = List(Unicode(), help="Extra paths watched from the start.").tag(config=True)
    probe = Bool(True, help="Measure small write + fsync latency in watched directories.").tag(
        config=True
    )
    probe_other_users = Bool(
        False,
        help="Also write the latency probe into directories of other users' training "
        "processes found on the machine (a server running as root). Off: those directories "
        "get read-only facts (mount, device, space); a path someone asked for is probed.",
    ).tag(config=True)
    gpu = Union(
        [Bool(), Unicode()],
        default_value=True,
        help="Sample NVIDIA GPUs through NVML: True, False, or the GPUs to show as CUDA "
        "indices or GPU/MIG UUIDs (or unique prefixes), e.g. '0,MIG-4f1c'; 'none' is False.",
    ).tag(config=True)
    authenticate_prometheus = Bool(
        True,
        help="Require Jupyter's authentication (a token: Prometheus's `authorization` "
        "setting) to scrape <base_url>/trainwatch-lab/metrics, as ServerApp."
        "authenticate_prometheus does for Jupyter's own /metrics.",
    ).tag(config=True)
    scrape_lease_s = Float(
        180.0,
        help="A scrape of /trainwatch-lab/metrics keeps the sampler running this many "
        "seconds (or three intervals between scrapes when that is longer), so the next "
        "scrape finds rates and trends instead of a freshly started sampler.",
    ).tag(config=True)
    prometheus_url = Unicode(
        "",
        help="Prometheus's base URL (http://prometheus:9090). When set, the panel shows the "
        "fleet: every host Prometheus scrapes (trainwatch agents, node_exporter, DCGM "
        "exporter), read by this server, never by the browser.",
    ).tag(config=True)
    prometheus_timeout_s = Float(
        2.0, help="How long the server waits for Prometheus before saying it did not answer."
    ).tag(config=True)
    fleet_rate_window = Unicode(
        "1m",
        help="Range of rate() in the fleet's disk numbers (at least 4 scrape intervals).",
    ).tag(config=True)

    record = Bool(
        True,
        help="Record what the sampler sees (numbers while something trains, and events) to "
        "the history on a local disk, for replay after a restart (`trainwatch-lab history`). "
        "While on, the sampler runs from the server's start.",
    ).tag(config=True)
    record_path = Unicode(
        "",
        help="The history file (default: /var/lib/trainwatch-lab as root, else "
        "$XDG_STATE_HOME/trainwatch-lab, on a local filesystem; never a network mount).",
    ).tag(config=True)
    record_every_s = Float(
        DEFAULTS.record_every_s, help="Seconds between recorded samples while nobody looks."
    ).tag(config=True)
    record_look_every_s = Float(
        DEFAULTS.record_look_every_s, help="Seconds between recorded samples while a panel is open."
    ).tag(config=True)
    record_idle_stop = Bool(
        True,
        help="Stop the sampler while nothing is worth recording (no training process, busy "
        "kernel, added path, warning or open panel, for record_tail_s) and look for training "
        "processes and busy kernels every record_idle_check_s instead. Off: it runs always.",
    ).tag(config=True)
    record_tail_s = Float(
        DEFAULTS.record_tail_s,
        help="Seconds numbers are still recorded after the last thing worth recording.",
    ).tag(config=True)
    record_idle_after_s = Float(
        DEFAULTS.record_idle_after_s,
        help="A sampler started or woken runs at least this many seconds before it stops "
        "for idleness.",
    ).tag(config=True)
    record_idle_check_s = Float(
        DEFAULTS.record_idle_check_s,
        help="While the sampler is stopped for idleness, look for training processes and "
        "busy kernels this often (seconds).",
    ).tag(config=True)
    record_keep_days = Float(
        DEFAULTS.record_keep_s / 86_400, help="Days of history kept (older is dropped)."
    ).tag(config=True)
    record_max_mb = Float(
        DEFAULTS.record_max_bytes / 2**20,
        help="Size cap of the history file in MiB: older data is thinned, then dropped.",
    ).tag(config=True)

    notify_url = Unicode(
        "",
        help="Webhook POSTed to when a warning of severity warning or above starts and when "
        "it clears, at most once per warning per 10 min (only while the server samples).",
    ).tag(config=True)
    notify_format = Unicode(
        "json", help=f"Body of the notify_url POST: one of {', '.join(FORMATS)}."
    ).tag(config=True)

    @validate("notify_url")
    def _check_notify_url(self, proposal: dict) -> str:
        value = proposal["value"].strip()
        try:
            return check_target(value)[0] if value else ""
        except ValueError as exc:
            raise TraitError(f"{SECTION}.notify_url: {exc}") from None

    def notifier(self) -> Notifier | None:
        """The webhook of ``notify_url``; a URL and format that do not go together (a
        #secret= for a robot that does not sign) is one line in the log and no notifier:
        the panel still loads."""
        try:
            return make_notifier(self.notify_url, self.notify_format)
        except ValueError as exc:
            why = str(exc).replace("--notify-format", f"{SECTION}.notify_format")
            why = why.replace("--notify", f"{SECTION}.notify_url")
            log.error("trainwatch: %s; notifications are off", why)
            return None

    @validate("notify_format")
    def _check_notify_format(self, proposal: dict) -> str:
        try:
            return check_target("http://x", proposal["value"])[1]
        except ValueError as exc:
            raise TraitError(f"{SECTION}.notify_format: {exc}") from None

    @validate("gpu")
    def _check_gpu(self, proposal: dict) -> bool | str:
        """A selection string stays as given (``gpu_selection`` parses it); one that selects
        nothing is False, so ``if config.gpu`` keeps meaning "sample GPUs"."""
        value = proposal["value"]
        if isinstance(value, bool):
            return value
        try:
            selection = parse_gpu_selection(value)
        except ValueError as exc:
            raise TraitError(f"{SECTION}.gpu: {exc.args[0].removeprefix('--gpu ')}") from None
        return ",".join(map(str, selection)) if selection else False

    @property
    def gpu_selection(self) -> list[int | str] | None:
        """The GPUs to show (core.gpu.select.GpuSelection; ``gpu in selection`` takes a GPU
        row), None for all."""
        return parse_gpu_selection(self.gpu) if isinstance(self.gpu, str) else None

    @validate("interval")
    def _check_interval(self, proposal: dict) -> float:
        value = proposal["value"]
        if not value >= DEFAULTS.min_interval_s:
            raise TraitError(
                f"{SECTION}.interval must be at least {DEFAULTS.min_interval_s} s, got {value}"
            )
        return value

    @validate("max_processes", "max_process_paths")
    def _check_count(self, proposal: dict) -> int:
        value = proposal["value"]
        if value < 0:
            raise TraitError(f"{SECTION}.{proposal['trait'].name} must be 0 or more, got {value}")
        return value

    @validate("prometheus_url")
    def _check_url(self, proposal: dict) -> str:
        value = proposal["value"].strip()
        parts = urlsplit(value)
        if value and (parts.scheme not in ("http", "https") or not parts.netloc):
            raise TraitError(
                f"{SECTION}.prometheus_url must be an http(s) URL like "
                f"http://prometheus:9090, got {redact(value)!r}"
            )
        return value.rstrip("/")

    @validate("fleet_rate_window")
    def _check_window(self, proposal: dict) -> str:
        value = proposal["value"]
        if not WINDOW.fullmatch(value):
            raise TraitError(
                f"{SECTION}.fleet_rate_window must be a duration like 30s, 1m or 1h, got {value!r}"
            )
        return value

    @validate(
        "history_s",
        "stop_grace_s",
        "snapshot_wait_s",
        "scrape_lease_s",
        "prometheus_timeout_s",
        "record_every_s",
        "record_look_every_s",
        "record_tail_s",
        "record_idle_after_s",
        "record_idle_check_s",
        "record_keep_days",
        "record_max_mb",
    )
    def _check_positive(self, proposal: dict) -> float:
        value = proposal["value"]
        if not value > 0:
            raise TraitError(f"{SECTION}.{proposal['trait'].name} must be positive, got {value}")
        return value
