"""The recorder keeps no kernel alive that the program dropped.

Warp's module hash covers every live kernel object of the module (``Module._live_kernels``,
a WeakSet): a kernel the recorder kept alive after ``importlib.reload`` replaced it stayed in
the hash, so ``warp.tests.aot.test_module_aot`` ``test_enable_hashing`` loaded the binary of
the old source and failed under warptrace only."""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import os
import sys
import weakref

import numpy as np
import pytest
import warp as wp

import warptrace
from tests.test_record_common import DEVICE, Trace

SOURCE = """import warp as wp


@wp.kernel
def bump(a: wp.array[float]):
    i = wp.tid()
    a[i] = a[i] + {step}
"""


@pytest.fixture
def reloadable(tmp_path, monkeypatch):
    """A module of one kernel that the test rewrites and reloads."""
    name = f"wt_reloadable_{tmp_path.name}"
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE.format(step="1.0"))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    yield module, path
    sys.modules.pop(name, None)
    warptrace.stop()


def _launch(module) -> float:
    a = wp.zeros(2, dtype=float, device=DEVICE)
    wp.launch(module.bump, 2, [a], device=DEVICE)
    return float(a.numpy()[0])


def _reload(module, path, step: str):
    path.write_text(SOURCE.format(step=step))
    with contextlib.suppress(FileNotFoundError):  # the .pyc of a same-size source in the same second
        os.remove(importlib.util.cache_from_source(str(path)))
    return importlib.reload(module)


def test_a_kernel_replaced_by_a_reload_is_released(reloadable, tmp_path):
    module, path = reloadable
    warptrace.start(tmp_path / "run.wtrace")
    assert _launch(module) == 1.0
    old = weakref.ref(module.bump)
    module = _reload(module, path, "2.0")
    assert _launch(module) == 2.0
    gc.collect()
    assert old() is None
    warp_module = module.bump.module
    assert [k.key for k in warp_module._get_live_kernels()] == ["bump"]
    warptrace.stop()


def test_the_module_hash_follows_the_source_as_without_recording(reloadable, tmp_path):
    module, path = reloadable
    hashes = {}
    for recorded in (False, True):
        if recorded:
            warptrace.start(tmp_path / "run.wtrace")
        for step in ("3.0", "4.0"):
            module = _reload(module, path, step)
            _launch(module)
            gc.collect()
            hashes[(recorded, step)] = module.bump.module.hash_module()
        warptrace.stop()
    assert hashes[(True, "3.0")] == hashes[(False, "3.0")]
    assert hashes[(True, "4.0")] == hashes[(False, "4.0")]
    assert hashes[(True, "3.0")] != hashes[(True, "4.0")]


def test_a_replaced_kernel_launched_again_is_recorded_again(tmp_path):
    """Two kernels of one key (a factory called twice), both kept: launching the first after
    the second replaced it plans it again under the same kernels row."""

    def make(scale: float):
        @wp.kernel
        def scaled(a: wp.array[float]):
            i = wp.tid()
            a[i] = a[i] * scale

        return scaled

    path = tmp_path / "run.wtrace"
    warptrace.start(path)
    a = wp.ones(2, dtype=float, device=DEVICE)
    first = make(2.0)
    wp.launch(first, 2, [a], device=DEVICE)
    second = make(3.0)
    wp.launch(second, 2, [a], device=DEVICE)
    wp.launch(first, 2, [a], device=DEVICE)
    warptrace.stop()
    assert np.allclose(a.numpy(), 12.0)
    trace = Trace(path)
    kernels = [e["kernel"] for e in trace.launches() if trace.kernels[e["kernel"]]["key"].endswith("scaled")]
    assert len(kernels) == 3 and kernels[0] == kernels[2] != kernels[1]
