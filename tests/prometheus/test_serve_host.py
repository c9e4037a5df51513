"""``trainwatch-lab serve --path.procfs --path.sysfs --path.rootfs``: the agent in a container
(a DaemonSet beside node_exporter), run as a real process against a fake host tree
(tests/support/fakehost) and scraped: the host's mounts, disks and training process, named as
the host names them, and nothing of the agent's own machine."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.prometheus.conftest import ROOT, stop, wait_for
from tests.prometheus.test_serve import tw
from tests.support import fakehost
from trainwatch_lab.cli import build_parser
from trainwatch_lab.core.defaults import DEFAULTS

# the prometheus-node-exporter chart's pod securityContext (its values.yaml)
NODE_EXPORTER_POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "runAsGroup": 65534,
    "fsGroup": 65534,
}


def series(body: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(body)
        for s in family.samples
    ]


def test_the_agent_exports_the_host_it_is_given(serve, tmp_path: Path) -> None:
    host = fakehost.build(tmp_path / "host")
    pid = str(host.pid)
    agent = serve(*host.flags(), "--gpu", "none", "--processes", "--pid", pid, "/data")
    wanted = {"/data", "/data/run", "/mnt/share/logs"}  # asked for, and found from the process

    def complete() -> str | None:
        body = agent.scrape()
        paths = {lb["path"] for n, lb, _ in series(body) if n == "trainwatch_path_info"}
        done = paths == wanted and 'trainwatch_checkpoint_count{path="/data/run"}' in body
        return body if done and "trainwatch_probe_p50_seconds" in body else None

    body = wait_for(complete, timeout=60)
    assert body, agent.scrape()
    got = series(body)
    info = {lb["path"]: lb for n, lb, _ in got if n == "trainwatch_path_info"}
    assert info["/data"] | {"path": "/data/run"} == info["/data/run"]
    assert info["/data"]["mountpoint"] == "/data" and info["/data"]["fstype"] == "ext4"
    assert info["/data"]["device"] == fakehost.DISK and info["/data"]["shared"] == "false"
    share = info["/mnt/share/logs"]
    assert (share["mountpoint"], share["fstype"], share["kind"], share["shared"]) == (
        "/mnt/share",
        "nfs4",
        "shared",
        "true",
    )
    # what lies under <rootfs>/data, reported for /data; writable though seen through our view
    checkpoints = {(n, lb["path"]): v for n, lb, v in got if n.startswith("trainwatch_checkp")}
    assert checkpoints[("trainwatch_checkpoint_count", "/data/run")] == 1
    assert checkpoints[("trainwatch_checkpoint_newest_bytes", "/data/run")] == (
        fakehost.CHECKPOINT_BYTES
    )
    size = {lb["mountpoint"]: v for n, lb, v in got if n == "node_filesystem_size_bytes"}
    st = os.statvfs(host.root / "data")
    assert size["/data"] == st.f_blocks * st.f_frsize
    readonly = {lb["mountpoint"]: v for n, lb, v in got if n == "node_filesystem_readonly"}
    assert readonly == {"/data": 0.0, "/mnt/share": 0.0}
    reads = {lb["device"]: v for n, lb, v in got if n == "node_disk_reads_completed_total"}
    assert reads == {fakehost.DISK: fakehost.DISK_READS}  # the host's disk, only it
    assert ("trainwatch_process_pids", {"pid": pid}, 1.0) in got
    codes = {(lb["code"], lb["subject"]) for n, lb, _ in got if n == "trainwatch_warning"}
    assert ("shared-mount", "/mnt/share/logs") in codes
    # nothing of the agent's own machine: its mounts, its disks, the prefixes themselves
    points = {lb["mountpoint"] for _, lb, _ in got if "mountpoint" in lb}
    assert points <= set(fakehost.MOUNTPOINTS)
    assert str(tmp_path) not in body and "overlay" not in body
    stop(agent.proc)
    assert agent.proc.returncode == 0
    left = {p.relative_to(host.root).as_posix() for p in host.root.rglob("*")}
    assert left == {"data", "data/run", "mnt", "mnt/share", "mnt/share/logs", "var", "var/tmp"} | {
        fakehost.CHECKPOINT.lstrip("/")
    }


@pytest.mark.parametrize(
    ("flag", "value", "needle"),
    [
        ("--path.procfs", "nope", "--path.procfs {t}/nope: no such directory"),
        (
            "--path.procfs",
            "empty",
            "--path.procfs {t}/empty: not a procfs (no 1/mountinfo or self/mountinfo in it)",
        ),
        ("--path.sysfs", "empty", "--path.sysfs {t}/empty: not a sysfs (no block in it)"),
        ("--path.rootfs", "nope", "--path.rootfs {t}/nope: no such directory"),
    ],
)
def test_bad_prefixes_are_one_line_and_exit_2(
    tmp_path: Path, flag: str, value: str, needle: str
) -> None:
    host = fakehost.build(tmp_path / "host")
    (tmp_path / "empty").mkdir()
    flags = [f for f in host.flags() if not f.startswith(flag + "=")]
    proc = tw("serve", "--no-probe", *flags, f"{flag}={tmp_path / value}", "/data")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"trainwatch-lab: error: {needle.format(t=tmp_path)}"]
    assert proc.stdout == ""


def test_a_path_that_cannot_exist_on_the_host_is_refused(tmp_path: Path) -> None:
    """PATHs are judged under the rootfs and named as the host names them: a checkpoint file
    of the host is in the way of /data/run/epoch-1.pt/x (here /data does not even exist)."""
    host = fakehost.build(tmp_path / "host")
    proc = tw("serve", "--no-probe", *host.flags(), f"{fakehost.CHECKPOINT}/x")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"trainwatch-lab: error: {fakehost.CHECKPOINT}/x cannot exist: "
        f"{fakehost.CHECKPOINT} is a file, not a directory"
    ]


def test_pid_is_a_process_of_the_host(tmp_path: Path) -> None:
    """``--pid`` names a host process: one the fake host does not list is refused, even
    though it runs here (this test's own)."""
    host = fakehost.build(tmp_path / "host")
    proc = tw("serve", "--no-probe", *host.flags(), "--pid", str(os.getpid()), "/data")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"trainwatch-lab: error: argument --pid: no process {os.getpid()} runs here"
    ]


def readme_daemonset() -> dict[str, Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    docs = [yaml.safe_load(block) for block in blocks]
    (found,) = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DaemonSet"]
    return found


def prefixes(args: list[str]) -> tuple[str, str, str]:
    parsed = build_parser().parse_args(["serve", *args])
    return parsed.path_procfs, parsed.path_sysfs, parsed.path_rootfs


def test_the_readme_daemonset_gives_the_agent_the_host_as_node_exporter_s_chart_does() -> None:
    """The manifest in README: host pids, the host's /proc, /sys and / read-only where the
    agent's --path.* flags (parsed by the real parser) look, the agent's port announced to
    Prometheus, node_exporter's securityContext; and the Containerfile's image runs
    ``serve`` with the same flags and exposes the same port."""
    pod = readme_daemonset()["spec"]["template"]
    spec = pod["spec"]
    assert spec["hostPID"] is True
    assert spec["securityContext"] == NODE_EXPORTER_POD_SECURITY
    (container,) = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    mounted = {volumes[m["name"]]: m for m in container["volumeMounts"]}
    assert all(m["readOnly"] for m in mounted.values())
    assert mounted["/"]["mountPropagation"] == "HostToContainer"  # shares mounted later too
    where = tuple(mounted[p]["mountPath"] for p in ("/proc", "/sys", "/"))
    assert where == ("/host/proc", "/host/sys", "/host/root")
    assert prefixes(container["args"]) == where
    port = DEFAULTS.serve_port
    assert build_parser().parse_args(["serve", *container["args"]]).listen == f":{port}"
    assert [p["containerPort"] for p in container["ports"]] == [port]
    notes = pod["metadata"]["annotations"]
    assert (notes["prometheus.io/scrape"], notes["prometheus.io/port"]) == ("true", str(port))
    image = (ROOT / ".container" / "Containerfile").read_text()
    assert re.search(r"^ENTRYPOINT \[\"trainwatch-lab\", \"serve\"\]$", image, re.M)
    assert re.search(rf"^EXPOSE {port}$", image, re.M)
    cmd = re.search(r"^CMD (.*)$", image, re.M)
    assert cmd and prefixes(json.loads(cmd.group(1))) == where
