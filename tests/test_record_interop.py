"""Host round trips carry content digests; bridges to other frameworks are events."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import warptrace
from tests.test_record_common import DEVICE, Trace
from warptrace.record.wrap import hostdata
from warptrace.trace.rows import HOST_WRITE, detail_text
from warptrace.trace.schema import FLAG_GRAD, ROLE_NONE, ROLE_READ

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture
def trace_path(tmp_path):
    yield tmp_path / "run.wtrace"
    warptrace.stop()


def _line(marker: str) -> int:
    for number, text in enumerate(Path(__file__).read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(marker)


def _facts(event: dict) -> dict:
    return json.loads(event["detail"]) if event["detail"] else {}


def test_a_host_checkpoint_and_its_restore_carry_the_same_digest(trace_path):
    warptrace.start(trace_path)
    x = wp.array(np.linspace(0.0, 1.0, 6), dtype=float, device=DEVICE, requires_grad=True)
    saved = x.numpy().copy()  # site:save
    y = wp.array(saved, dtype=float, device=DEVICE, requires_grad=True)  # site:restore
    y.grad.assign(np.full(6, 2.0, dtype=np.float32))  # site:seed
    warptrace.stop()
    t = Trace(trace_path)
    (read,) = [e for e in t.of_kind("value_read") if t.site_line(e) == _line("site:save")]
    (restore,) = [e for e in t.of_kind("copy") if t.site_line(e) == _line("site:restore")]
    (seed,) = [e for e in t.of_kind("copy") if t.site_line(e) == _line("site:seed")]
    assert _facts(read)["host"] == "read" and _facts(restore)["host"] == "write"
    assert _facts(read)["digest"] == _facts(restore)["digest"] and _facts(read)["nbytes"] == 24
    assert _facts(read)["view"] is True  # numpy() of a CPU array shares its memory
    assert _facts(seed)["digest"] != _facts(read)["digest"]
    assert t.access(seed["seq"], "dest")["flags"] & FLAG_GRAD


def test_a_copy_between_warp_arrays_is_not_a_host_transfer(trace_path):
    before = wp.array([1.0, 2.0], dtype=float, device=DEVICE)
    warptrace.start(trace_path)
    x = wp.zeros(2, dtype=float, device=DEVICE)
    y = wp.zeros(2, dtype=float, device=DEVICE)
    wp.copy(x, before)  # Warp memory made before start()
    wp.copy(y, x)
    y.assign(x.numpy())  # on the CPU a view of x: a device copy
    warptrace.stop()
    assert all("host" not in _facts(e) for e in Trace(trace_path).of_kind("copy"))


def test_transfers_above_the_cap_get_no_digest(trace_path, monkeypatch):
    monkeypatch.setattr(hostdata, "DIGEST_MAX_BYTES", 8)
    warptrace.start(trace_path)
    x = wp.array(np.arange(4.0), dtype=float, device=DEVICE)
    x.numpy()
    warptrace.stop()
    (read,) = Trace(trace_path).of_kind("value_read")
    assert _facts(read) == {"view": True, "host": "read", "nbytes": 16, "digest": None}


@pytest.mark.parametrize("cap", [16 << 20, 4])
def test_host_detail_text_is_json_dumps_of_its_facts(monkeypatch, cap):
    """The directly formatted details are the text json.dumps gives (key order included)."""
    monkeypatch.setattr(hostdata, "DIGEST_MAX_BYTES", cap)
    arrays = [np.ones(16, np.float32), np.zeros(0), np.arange(12).reshape(3, 4)[:, ::2], np.float64(3.0)]
    for values in arrays:
        for direction in ("read", "write"):
            for view in (False, True):
                nbytes, digest = hostdata.digest_of(values)
                facts = {
                    **({"view": True} if view else {}),
                    "host": direction,
                    "nbytes": nbytes,
                    "digest": digest,
                }
                assert hostdata.transfer_detail(direction, values, view) == json.dumps(facts)


def test_reads_at_one_call_site_carry_the_digest_of_the_values_read(trace_path):
    """The recorder leaves a small read's detail as (bytes, view) and the trace writer hashes
    them (hostdata.deferred_detail): the digest is of the values at the read, not later ones."""
    warptrace.start(trace_path)
    x = wp.array(np.arange(6.0), dtype=float, device=DEVICE)
    seen = []
    for k in range(3):
        x.fill_(float(k))
        seen.append(x.numpy().copy())  # site:loop_read
    x.fill_(7.0)
    warptrace.stop()
    t = Trace(trace_path)
    reads = [e for e in t.of_kind("value_read") if t.site_line(e) == _line("site:loop_read")]
    assert [_facts(e) for e in reads] == [json.loads(hostdata.transfer_detail("read", v, True)) for v in seen]
    assert len({_facts(e)["digest"] for e in reads}) == 3


@pytest.mark.parametrize("view", [False, True])
def test_a_deferred_read_detail_is_the_text_of_transfer_detail(view):
    arrays = [np.ones(16, np.float32), np.zeros(0, np.float32), np.arange(1024, dtype=np.float32)]
    for values in arrays:
        assert detail_text((values.tobytes(), view)) == hostdata.transfer_detail("read", values, view)
        assert detail_text((values.tobytes(), HOST_WRITE)) == hostdata.transfer_detail("write", values, False)
    assert detail_text("text") == "text"


def test_small_and_large_transfers_get_the_digest_of_their_c_order_bytes(monkeypatch):
    """Small ndarrays are hashed from a tobytes() copy, large ones from a contiguous view:
    the same digest either way, for any strides and dtypes."""
    import hashlib

    def reference(values):
        data = np.ascontiguousarray(np.asarray(values))
        return hashlib.blake2b(data.reshape(-1).view(np.uint8).data, digest_size=8).hexdigest()

    arrays = [
        np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2],
        np.arange(12, dtype=np.float64).reshape(3, 4).T,
        np.ones((2, 3), np.int16),
        np.zeros(0, np.float32),
        np.float64(3.0),
        np.arange(40000, dtype=np.float32)[::3],  # above the copy threshold
    ]
    for copy_max in (1 << 16, 0):
        monkeypatch.setattr(hostdata, "_COPY_MAX_BYTES", copy_max)
        for values in arrays:
            assert hostdata.digest_of(values) == (np.asarray(values).nbytes, reference(values))


def test_dlpack_and_array_interface_exports_are_bridge_events(trace_path):
    warptrace.start(trace_path)
    x = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE, requires_grad=True)
    view = np.from_dlpack(x.grad)  # site:dlpack
    host = np.asarray(x)  # site:interface
    x.numpy()  # warptrace's and Warp's own interface reads are not exports
    warptrace.stop()
    assert view.shape == host.shape == (3,)
    t = Trace(trace_path)
    bridges = t.of_kind("bridge")
    assert [(t.site_line(e), _facts(e)) for e in bridges] == [
        (_line("site:dlpack"), {"framework": "dlpack", "direction": "export"}),
        (_line("site:interface"), {"framework": "array_interface", "direction": "export"}),
    ]
    (grad_row,) = t.access_rows(bridges[0]["seq"])
    assert grad_row["role"] == ROLE_READ and t.arrays[grad_row["array_id"]]["grad_of"] >= 0


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed (the DLPack tests cover the mechanism)")
def test_torch_exports_share_the_grad_and_imports_are_marked(trace_path):
    import torch

    x = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE, requires_grad=True)
    warptrace.start(trace_path)
    t_x = wp.to_torch(x)  # site:to_torch
    back = wp.from_torch(torch.ones(3))  # site:from_torch
    warptrace.stop()
    assert t_x.grad is not None and back.shape == (3,)
    t = Trace(trace_path)
    export, imported = t.of_kind("bridge")
    assert t.site_line(export) == _line("site:to_torch") and _facts(export)["framework"] == "torch"
    rows = t.access_rows(export["seq"])
    assert sorted(bool(r["flags"] & FLAG_GRAD) for r in rows) == [False, True]
    assert all(r["role"] == ROLE_READ for r in rows)
    assert t.site_line(imported) == _line("site:from_torch") and _facts(imported)["direction"] == "import"
    assert all(r["role"] == ROLE_NONE for r in t.access_rows(imported["seq"]))


def test_results_are_unchanged_by_the_bridge_wrappers(trace_path):
    def program() -> tuple[np.ndarray, np.ndarray]:
        x = wp.array(np.arange(5.0), dtype=float, device=DEVICE, requires_grad=True)
        shared = np.from_dlpack(x)
        copy = wp.array(x.numpy().copy() * 2.0, dtype=float, device=DEVICE)
        return np.array(shared), copy.numpy()

    plain = program()
    warptrace.start(trace_path)
    traced = program()
    warptrace.stop()
    assert all(np.array_equal(a, b) for a, b in zip(plain, traced))


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
def test_torch_imports_name_the_tensor_object_and_its_version(trace_path):
    import torch

    wp.init()
    seed = torch.ones(3)
    other = torch.ones(3)
    warptrace.start(trace_path)
    first = wp.from_torch(seed)
    again = wp.from_torch(seed)  # the same tensor, unchanged
    seed.fill_(2.0)  # torch bumps its version counter
    changed = wp.from_torch(seed)
    fresh = wp.from_torch(other)
    with_grad = wp.from_torch(other, grad=seed)  # the grad lives in seed
    warptrace.stop()
    assert first.shape == again.shape == changed.shape == fresh.shape == with_grad.shape == (3,)
    facts = [_facts(e) for e in Trace(trace_path).of_kind("bridge")]
    assert [f["direction"] for f in facts] == ["import"] * 5
    assert facts[0]["tensor"] == facts[1]["tensor"] == facts[2]["tensor"] != facts[3]["tensor"]
    assert facts[0]["version"] == facts[1]["version"] < facts[2]["version"]
    assert facts[4]["tensor"] == facts[3]["tensor"] and facts[4]["grad_tensor"] == facts[0]["tensor"]
    assert facts[4]["grad_version"] == facts[2]["version"] and "leaf" not in facts[4]


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")
def test_a_torch_leaf_shared_with_warp_is_watched_for_torch_accumulations(trace_path):
    import torch

    wp.init()
    leaf = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    detached = leaf.detach()
    warptrace.start(trace_path)
    shared = wp.from_torch(leaf)  # site:leaf_import
    wp.from_torch(detached, requires_grad=True)  # not the leaf: its .grad is nobody's
    (leaf * leaf).sum().backward()  # site:accumulate
    (leaf * 2.0).sum().backward()  # site:accumulate_again
    warptrace.stop()
    (leaf * 3.0).sum().backward()  # after stop: the hook is gone
    assert shared.grad is not None and leaf.grad is not None
    t = Trace(trace_path)
    bridges = [(t.site_line(e), _facts(e)) for e in t.of_kind("bridge")]
    (line, imported), (_, detached_import), *accumulated = bridges
    assert line == _line("site:leaf_import") and imported["leaf"] is True
    assert "leaf" not in detached_import
    assert [(line, f["direction"]) for line, f in accumulated] == [
        (_line("site:accumulate"), "accumulate"),
        (_line("site:accumulate_again"), "accumulate"),
    ]
    for _, f in accumulated:
        assert f["tensor"] == imported["tensor"] and f["grad_tensor"] == imported["grad_tensor"]
    assert not leaf._post_accumulate_grad_hooks
