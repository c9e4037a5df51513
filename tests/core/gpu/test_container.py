"""core.gpu.container: NVML's host PIDs matched to a container's processes by device file."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.core.fake_nvml import GIB
from tests.support.env import need_root, need_tool
from trainwatch_lab.core.gpu.container import attribute, nested_pid_namespace, note


def test_one_holder_gets_all_the_memory_nvml_lists() -> None:
    assert attribute([(91234, 3 * GIB)], [1]) == ({1: 3 * GIB}, True)


def test_two_holders_split_evenly_and_nothing_without_holders() -> None:
    assert attribute([(91234, 3 * GIB), (91235, 1 * GIB)], [7, 1]) == (
        {1: 2 * GIB, 7: 2 * GIB},
        True,
    )
    assert attribute([(91234, 3 * GIB)], []) == ({}, True)


def test_a_gpu_shared_with_another_container_gives_a_lower_bound() -> None:
    shares, exact = attribute([(91234, 3 * GIB), (55555, 1 * GIB)], [1])
    assert shares == {1: 1 * GIB} and not exact
    assert "lower bound" in note(exact) and "lower bound" not in note(True)


def _in_namespace(code: str) -> str:
    """Run ``code`` as PID 1 of a new PID namespace with a private /dev holding nvidia3."""
    need_root()
    need_tool("unshare")
    setup = "mount -t tmpfs tmpfs /dev && mknod -m 666 /dev/null c 1 3 && : > /dev/nvidia3"
    done = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            f'{setup} && exec "$0" -c "$1"',
            sys.executable,
            code,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_host_namespace_is_not_nested_a_new_one_is() -> None:
    assert nested_pid_namespace() is False  # the test machine runs in the host's namespace
    code = "from trainwatch_lab.core.gpu.container import *; print(nested_pid_namespace())"
    assert _in_namespace(code).strip() == "True"


def test_device_holders_reads_open_nvidia_files() -> None:
    code = (
        "import json; from trainwatch_lab.core.gpu.container import device_holders\n"
        "f = open('/dev/nvidia3'); g = open('/dev/null')\n"
        "print(json.dumps({p: sorted(m) for p, m in device_holders().items()}))"
    )
    assert json.loads(_in_namespace(code)) == {"1": [3]}
