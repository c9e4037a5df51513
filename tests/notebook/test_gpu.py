"""GPU charts and the %%trainwatch GPU summary in a real kernel, against the fake NVML
library (tests/core/fake_nvml: real pynvml bindings, scripted devices) since CI has no GPU."""

from __future__ import annotations

from pathlib import Path

from tests.core.fake_nvml import FakeNvml, fake_nvml, fake_nvml_lib, gpu

from .kernel import Kernel

__all__ = ["fake_nvml", "fake_nvml_lib"]  # fixtures

STATE = "__import__('trainwatch_lab.notebook', fromlist=['x']).current()"


def test_gpu_charts_filter_and_cell_summary(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.write([gpu(0, util=80, mem_used=40 * 2**30), gpu(1, util=2)])
    kernel = Kernel(tmp_path, env=fake_nvml.env())
    try:
        kernel.run("%load_ext trainwatch_lab")
        kernel.run(f"%trainwatch {tmp_path} --interval 0.3 --window 1m --gpu 1 --no-probe")
        kernel.run("import time; time.sleep(2)")
        labels = kernel.value(f"list({STATE}.charts['gpu'].lines.labels)")
        assert labels == ["GPU1 util", "GPU1 mem"]  # --gpu 1: GPU 0 is not drawn
        assert kernel.value(f"{STATE}.charts['gpu'].points") >= 2
        assert kernel.value(f"{STATE}.grid.children[0] is {STATE}.charts['gpu'].figure")
        assert kernel.value(f"{STATE}.gpu_note.value") == ""
        kernel.run("%trainwatch stop")

        cell = kernel.run("%%trainwatch --interval 0.3 --no-probe\ntime.sleep(1.5)")
        text = kernel.text(cell)
        assert "GPU 0: mean util 80 %" in text
        assert "GPU 1: mean util 2 %, idle" in text
    finally:
        kernel.close()


def test_no_driver_is_a_plain_note(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    kernel = Kernel(tmp_path, env=fake_nvml.env(library=False))
    try:
        kernel.run("%load_ext trainwatch_lab")
        kernel.run(f"%trainwatch {tmp_path} --interval 0.3 --no-probe")
        kernel.run("import time; time.sleep(1.5)")
        note = kernel.value(f"{STATE}.gpu_note.value")
        assert "GPU:" in note and "driver" in note.lower()
        assert not kernel.value(f"{STATE}.charts['gpu'].figure in {STATE}.grid.children")
    finally:
        kernel.close()
