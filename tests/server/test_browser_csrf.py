"""Issue 24, finding 3 in the real browser: a page served from another local port, opened by
a user logged in to JupyterLab, aims an ``<img>``, two forms and ``fetch`` calls at the write
probe and at the watched paths. Cookies do not tell ports apart, so the browser sends the
login cookie with every one of them; nothing may be written and nothing watched."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from tests.support.lab import REPO_ROOT, chromium_page, free_port, jupyter_lab

SERVER_CONFIG = REPO_ROOT / "trainwatch_lab" / "server" / "etc" / "trainwatch_lab.json"

PAGE = """<!doctype html><html><body>
<img id="img1" src="{api}check?probe=true&path={d1}">
<img id="img2" src="{api}check?path={d2}">
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="f1" method="POST" action="{api}check" enctype="text/plain" target="sink1">
<input name='{{"path": "{d3}", "probe": true, "x": "' value='"}}'></form>
<form id="f2" method="POST" action="{api}paths" target="sink2">
<input name="_xsrf" id="xsrf"><input name="path" value="{d4}"></form>
<script>
const cookie = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || "";
document.getElementById("xsrf").value = decodeURIComponent(cookie);
document.getElementById("f1").submit();
document.getElementById("f2").submit();
const opts = {{credentials: "include", mode: "no-cors"}};
const post = (what, body) => fetch("{api}" + what, {{...opts, method: "POST",
    headers: {{"Content-Type": "text/plain"}}, body: JSON.stringify(body)}});
Promise.allSettled([
  fetch("{api}check?probe=true&path={d5}", opts),
  post("check", {{path: "{d6}", probe: true}}),
  post("paths", {{path: "{d6}"}}),
]).then(() => {{ window.fetched = true; }});
</script></body></html>
"""


@contextlib.contextmanager
def attacker_site(directory: Path) -> Iterator[str]:
    """``python -m http.server`` on another port of the same host, in a thread."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_on_another_port_writes_nothing_and_watches_nothing(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    targets = {f"d{i}": tmp_path / f"target{i}" for i in range(1, 7)}
    for d in targets.values():
        d.mkdir()
    before = {k: os.stat(d).st_mtime_ns for k, d in targets.items()}
    config = tmp_path / "jupyter-config" / "jupyter_server_config.d"
    config.mkdir(parents=True)
    shutil.copy(SERVER_CONFIG, config / "trainwatch_lab.json")
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {"JUPYTER_CONFIG_PATH": str(config.parent), "PYTHONPATH": pythonpath}
    site = tmp_path / "site"
    site.mkdir()
    with (
        jupyter_lab(root, extra_args=["--ServerApp.log_level=DEBUG"], env=env) as lab,
        attacker_site(site) as evil,
        chromium_page() as page,
    ):
        api = f"{lab.base}trainwatch-lab/api/"
        (site / "index.html").write_text(
            PAGE.format(api=api, **{k: str(v) for k, v in targets.items()})
        )
        page.goto(lab.url("tree"))  # logged in: the login and _xsrf cookies are set
        assert any(c["name"].startswith("username-") for c in page.context.cookies())
        page.goto(evil)
        page.wait_for_function("window.fetched === true", timeout=30_000)
        page.wait_for_function(
            "['img1', 'img2'].every(i => document.getElementById(i).complete)", timeout=30_000
        )
        # the forms' answers land in the iframes; then every request has been answered
        for frame in ("sink1", "sink2"):
            page.wait_for_function(
                f"() => {{ try {{ return !!window.frames['{frame}'].location.href; }}"
                " catch (e) { return true; } }",
                timeout=30_000,
            )
        page.wait_for_timeout(500)  # a last answer on its way back (nothing races on it)
        watched = {p["path"] for p in lab.api("trainwatch-lab/api/paths")["paths"]}
        log = lab.log()
    seen = log.count("/trainwatch-lab/api/check") + log.count("/trainwatch-lab/api/paths")
    assert seen >= 7, log[-3000:]  # every request reached the server (and was answered)
    after = {k: os.stat(d).st_mtime_ns for k, d in targets.items()}
    assert after == before, "a cross-origin request wrote a probe file"
    assert not watched & {str(d) for d in targets.values()}
    assert all(os.listdir(d) == [] for d in targets.values())
