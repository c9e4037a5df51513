"""Row 5: bytes on the wire per sampler tick, for the notebook widget and for the panel.

- Widget: a real kernel runs ``%trainwatch --logdir D`` (default 10 min window, and 1 min);
  its sampler's history is then filled as after an hour, so charts carry full windows (steady
  state); a raw ZMQ SUB socket on the kernel's iopub port counts the wire bytes of every
  ``comm_msg`` (what the server relays to the browser) over ``cfg.traffic_ticks`` ticks after
  a warm-up; ticks come from the sampler's own counter.
- Panel: a Jupyter server with the trainwatch extension and one WebSocket client on
  ``/trainwatch-lab/api/stream``; bytes per message after the first (which may carry history).

    python -m tests.benchmarks.run --only traffic [--quick]
"""

from __future__ import annotations

import shutil
import tempfile
import time

from .common import (
    Config,
    Row,
    fmt_bytes,
    guarded,
    jupyter_server,
    median,
    nbytes,
    need_attr,
    skipped,
    storage_workload,
)

GROUP = "5 traffic"
WIDGET_TARGET_BYTES = 2000  # issue 11: the compact default, at the default window


def widget(cfg: Config) -> list[Row]:
    _, why = need_attr("trainwatch_lab.notebook.magics", "load_ipython_extension")
    if why:
        return [skipped(GROUP, "widget bytes per tick", why)]
    return [widget_bytes(cfg, ""), widget_bytes(cfg, "--window 1m")]


def widget_bytes(cfg: Config, option: str) -> Row:
    """Wire bytes of the widget's comm messages per sampler tick, for one ``%trainwatch``."""
    from .kernel import FIND_SAMPLER, PREFILL_HISTORY, IopubBytes, kernel_session

    workdir = tempfile.mkdtemp(prefix="twbench-traffic-")
    try:
        with storage_workload() as work, kernel_session() as k:
            k.check("%load_ext trainwatch_lab")
            k.check(f"%trainwatch --logdir {workdir} {work} {option}")
            k.check(FIND_SAMPLER)
            k.drain(2.0, lambda t, m: None)  # a first real sample to copy
            k.check(PREFILL_HISTORY)
            counter = IopubBytes(k)
            counter.start()
            try:
                k.drain(5.0, lambda t, m: None)  # warm-up: first probes, first full state
                ticks0 = int(k.check("print(_tw_sampler.ticks)").stdout)
                b0, c0 = counter.snapshot()
                k.drain(float(cfg.traffic_ticks), lambda t, m: None)
                ticks1 = int(k.check("print(_tw_sampler.ticks)").stdout)
                b1, c1 = counter.snapshot()
            finally:
                counter.close()
            k.execute("%trainwatch stop")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    ticks = ticks1 - ticks0
    comm_bytes = b1.get("comm_msg", 0) - b0.get("comm_msg", 0)
    comm_count = c1.get("comm_msg", 0) - c0.get("comm_msg", 0)
    other = {
        kind: b1[kind] - b0.get(kind, 0)
        for kind in b1
        if kind != "comm_msg" and b1[kind] - b0.get(kind, 0) > 0
    }
    per_tick = comm_bytes / ticks if ticks else float("nan")
    window = option.split()[-1] if option else "10m (default)"
    default = not option
    return Row(
        GROUP,
        f"widget, window {window}: kernel-to-browser bytes per tick (iopub comm_msg, wire)",
        fmt_bytes(per_tick),
        target="<= 2 KB" if default else "",
        status=("ok" if per_tick <= WIDGET_TARGET_BYTES else "MISS") if default else "",
        note=(
            f"{comm_count / ticks if ticks else 0:.1f} comm messages per tick over {ticks} "
            f"ticks, 2 watched paths, history full (as after an hour); other iopub traffic: "
            + (", ".join(f"{k} {v} B" for k, v in sorted(other.items())) or "none")
        ),
        data={"bytes_per_tick": per_tick, "ticks": ticks, "comm_msgs": comm_count},
    )


def panel(cfg: Config) -> list[Row]:
    _, why = need_attr("trainwatch_lab.server.extension", "__name__")
    if why:
        return [skipped(GROUP, "panel WebSocket bytes per tick", why)]
    import websocket

    from .bench_peers import add_watched_path

    with storage_workload() as work, jupyter_server(extensions={"trainwatch_lab": True}) as srv:
        add_watched_path(srv, str(work))
        url = srv.url.replace("http://", "ws://") + "trainwatch-lab/api/stream"
        ws = websocket.create_connection(
            url, header=[f"Authorization: token {srv.token}"], timeout=10
        )
        try:
            sizes: list[int] = []
            times: list[float] = []
            first = nbytes(ws.recv())
            end = time.monotonic() + cfg.traffic_ticks + 2
            while len(sizes) < cfg.traffic_ticks and time.monotonic() < end:
                sizes.append(nbytes(ws.recv()))
                times.append(time.monotonic())
        finally:
            ws.close()
    if len(sizes) < 2:
        raise RuntimeError(f"only {len(sizes)} stream messages after the first")
    rate = (len(times) - 1) / (times[-1] - times[0])
    return [
        Row(
            GROUP,
            "panel: WebSocket bytes per tick (stream message, median)",
            fmt_bytes(median(sizes)),
            note=(
                f"{len(sizes)} messages at {rate:.2f}/s, max {fmt_bytes(max(sizes))}; "
                f"first message {fmt_bytes(first)}; 2 watched paths (root dir + workload)"
            ),
            data={"sizes": sizes, "first": first},
        )
    ]


def run(cfg: Config) -> list[Row]:
    return [
        *guarded(GROUP, "widget bytes per tick", lambda: widget(cfg)),
        *guarded(GROUP, "panel bytes per tick", lambda: panel(cfg)),
    ]
