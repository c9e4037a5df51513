"""core.attach.source: which of the server's warnings concern one notebook."""

from __future__ import annotations

from trainwatch_lab.core.attach.source import in_scope
from trainwatch_lab.core.model import Alert, DiskRates, PathState, Sample


def alert(code: str, subject: str) -> Alert:
    return Alert(code, "warning", subject, "m", "f")


def machine() -> Sample:
    """The server's sample: the notebook's logdir and the root dir on / (vda), a data dir
    on /data (nvme0n1), a share."""

    def state(path: str, mount: str, device: str | None) -> PathState:
        return PathState(path, mountpoint=mount, device=device, disks=[device] if device else [])

    sample = Sample(t=0.0)
    sample.paths = {
        "/work/runs": state("/work/runs", "/", "vda"),
        "/work": state("/work", "/", "vda"),
        "/data/set": state("/data/set", "/data", "nvme0n1"),
        "/mnt/share/x": state("/mnt/share/x", "/mnt/share", None),
    }
    rates = dict(r_s=0, w_s=0, rmb_s=0, wmb_s=0, r_await=0, w_await=0, aqu_sz=0, util=0)
    sample.disks = {d: DiskRates(device=d, **rates) for d in ("vda", "nvme0n1")}
    return sample


def test_a_notebook_sees_its_paths_its_filesystems_and_its_disks_only() -> None:
    sample, mine = machine(), ["/work/runs"]
    assert in_scope(alert("disk-filling", "/work/runs"), mine, sample)
    assert in_scope(alert("disk-almost-full", "/work"), mine, sample)  # the same filesystem
    assert in_scope(alert("disk-saturated", "vda"), mine, sample)
    assert in_scope(alert("disk-almost-full", "/"), mine, sample)  # its mount point
    assert not in_scope(alert("disk-saturated", "nvme0n1"), mine, sample)
    assert not in_scope(alert("disk-almost-full", "/data/set"), mine, sample)
    assert not in_scope(alert("shared-mount", "/mnt/share/x"), mine, sample)
    assert not in_scope(alert("disk-almost-full", "/data"), mine, sample)


def test_warnings_about_no_storage_concern_every_notebook() -> None:
    sample = machine()
    assert in_scope(alert("gpu-stalled", "GPU 0"), ["/work/runs"], sample)
    assert in_scope(alert("gpu-unavailable", "gpu"), [], sample)
