"""Two notebooks of one Jupyter server read its one sampler (issue 33): a real ``jupyter lab``
with the extension, two real kernels it started, a real tmpfs filled by one of them.

The second notebook adds no process (no helper for either: their paths are local, and the
kernels sample nothing themselves); the server watches each notebook's paths under its
kernel's role; the notebook that fills its disk and the server's snapshot tell the same
warning, and the other notebook, which watches elsewhere, is not told it."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
from jupyter_client import BlockingKernelClient

from tests.support.lab import LabServer, jupyter_lab
from tests.support.mounts import wait_until

HELPER = "trainwatch_lab.core.worker.main"


class Notebook:
    """A kernel the server started, driven over its connection file."""

    def __init__(self, lab: LabServer) -> None:
        self.id = lab.api("api/kernels", "POST", {"name": "python3"})["id"]
        runtime = lab.log_path.parent / "runtime"
        self.client = BlockingKernelClient()
        self.client.load_connection_file(str(runtime / f"kernel-{self.id}.json"))
        self.client.start_channels()
        self.client.wait_for_ready(120)

    def run(self, code: str) -> str:
        out: list[str] = []

        def keep(msg: dict) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        self.client.execute_interactive(code, timeout=120, output_hook=keep)
        return "".join(out)

    def close(self) -> None:
        self.client.stop_channels()


def server_tree(lab: LabServer) -> list[psutil.Process]:
    return psutil.Process(lab.proc.pid).children(recursive=True)


def snapshot(lab: LabServer) -> dict:
    return lab.api("trainwatch-lab/api/snapshot", timeout=60)


def test_two_notebooks_read_one_sampler_and_tell_one_story(tmp_path: Path, tmpfs_mount) -> None:
    fills = tmpfs_mount("16m")  # only notebook A watches it
    root = tmp_path / "root"
    elsewhere = root / "b-logs"  # notebook B's, on another filesystem
    elsewhere.mkdir(parents=True)
    with jupyter_lab(root, extra_args=["--TrainWatch.probe=False"]) as lab:
        a = Notebook(lab)
        try:
            a.run("%load_ext trainwatch_lab")
            a.run(f"%trainwatch {fills.path}")
            assert "the Jupyter server's" in a.run("%trainwatch status")
            alone = server_tree(lab)
            b = Notebook(lab)
            try:
                b.run("%load_ext trainwatch_lab")
                b.run(f"%trainwatch {elsewhere}")
                assert "the Jupyter server's" in b.run("%trainwatch status")
                # the second notebook added its kernel, and nothing else; no helper anywhere
                tree = server_tree(lab)
                assert len(tree) == len(alone) + 1
                assert not [p for p in tree if HELPER in " ".join(p.cmdline())]
                roles = snapshot(lab)["watched"]
                assert roles[str(fills.path)] == [f"notebook:{a.id}"]
                assert roles[str(elsewhere)] == [f"notebook:{b.id}"]

                # notebook A fills its disk to 97 %
                size = 15 * 1024 * 1024 + 512 * 1024
                a.run(f"open({str(fills.path / 'big.bin')!r}, 'wb').write(bytes({size}))")

                def machine_warns() -> bool:
                    codes = {(w["code"], w["subject"]) for w in snapshot(lab)["warnings"]}
                    return ("disk-almost-full", str(fills.path)) in codes

                assert wait_until(machine_warns, 120)
                assert wait_until(lambda: "[disk-almost-full]" in a.run("%trainwatch status"), 60)
                told_a = a.run("%trainwatch status")
                told_b = b.run("%trainwatch status")
                # the same sentence in the notebook as in the panel's snapshot
                panel = next(
                    w for w in snapshot(lab)["warnings"] if w["code"] == "disk-almost-full"
                )
                assert panel["message"].split(" (")[0] in told_a
                assert "disk-almost-full" not in told_b
                assert "this notebook's 1 path" in told_a and "this notebook's 1 path" in told_b
            finally:
                b.close()
        finally:
            a.close()


def test_a_kernel_no_server_started_samples_by_itself(tmp_path: Path) -> None:
    """Plain ``jupyter_client`` (as VS Code does): no socket named, the sampler in the kernel,
    said in %trainwatch status."""
    from jupyter_client.manager import start_new_kernel

    env = {k: v for k, v in os.environ.items() if k != "TRAINWATCH_HUB"}
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        out: list[str] = []
        kc.execute_interactive("%load_ext trainwatch_lab", timeout=120)
        kc.execute_interactive(f"%trainwatch {tmp_path}", timeout=120)
        kc.execute_interactive(
            "%trainwatch status",
            timeout=120,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
        assert "in this kernel (no Jupyter server" in "".join(out)
        # and even alone, a local path costs no helper process
        assert psutil.Process(km.provisioner.process.pid).children(recursive=True) == []
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
