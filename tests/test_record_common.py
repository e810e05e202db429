"""Shared kernels and trace-reading helpers for the recorder tests (no tests here).

Kernels live in this real file (Warp needs their source); traces are read with plain
pyarrow so these tests do not depend on warptrace's reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import warp as wp

from warptrace.record import session

wp.config.quiet = True
session.STRICT = True  # a recorder bug raises in tests instead of being logged

DEVICE = "cpu"


@wp.kernel
def store_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


@wp.kernel
def left_operand_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 3.0 + 1.0


@wp.kernel
def accumulate_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] += x[i]


@wp.kernel
def atomic_kernel(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])


@wp.kernel
def inplace_kernel(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * 0.5


@wp.kernel
def square_sum_kernel(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


@wp.kernel
def tile_rows_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i, lane = wp.tid()
    if lane == 0:
        y[i] = x[i] + 1.0


@wp.kernel
def matrix_kernel(m: wp.array2d(dtype=float), out: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(out, 0, m[i, j])


@wp.struct
class Inner:
    q: wp.array(dtype=float)


@wp.struct
class State:
    q: wp.array(dtype=float)
    qd: wp.array(dtype=float)
    inner: Inner


@wp.func
def write_through(state: State, i: int, value: float):
    state.qd[i] = value


@wp.kernel
def struct_inplace_kernel(state: State, dt: float):
    i = wp.tid()
    state.q[i] = state.q[i] + state.qd[i] * dt


@wp.kernel
def struct_func_kernel(state: State, x: wp.array(dtype=float)):
    i = wp.tid()
    write_through(state, i, x[i])


@wp.kernel
def nested_struct_kernel(state: State, x: wp.array(dtype=float)):
    i = wp.tid()
    state.inner.q[i] = x[i]


def read(path: str | Path, table: str) -> list[dict[str, Any]]:
    """All rows of one table of a trace, events sorted by seq."""
    folder = Path(path) / table
    files = sorted(str(f) for f in folder.glob("part-*.parquet"))
    if not files:
        return []
    rows = ds.dataset(files, format="parquet").to_table().to_pylist()
    if table == "events":
        rows.sort(key=lambda row: row["seq"])
    return rows


class Trace:
    """The tables of a finished trace, with a few lookups the tests need."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.events = read(path, "events")
        self.accesses = read(path, "accesses")
        self.arrays = {row["array_id"]: row for row in read(path, "arrays")}
        self.allocs = {row["alloc_id"]: row for row in read(path, "allocs")}
        self.kernels = {row["kernel_id"]: row for row in read(path, "kernels")}
        self.sites = {row["site_id"]: row for row in read(path, "sites")}

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]

    def launches(self, key: str | None = None, adjoint: bool | None = None) -> list[dict[str, Any]]:
        rows = [e for e in self.of_kind("launch") if key is None or self.kernels[e["kernel"]]["key"] == key]
        if adjoint is not None:
            rows = [e for e in rows if e["adjoint"] == adjoint]
        return rows

    def access_rows(self, seq: int) -> list[dict[str, Any]]:
        return [a for a in self.accesses if a["seq"] == seq]

    def access(self, seq: int, arg: str, field: str = "", grad: bool | None = None) -> dict[str, Any]:
        rows = [a for a in self.access_rows(seq) if a["arg"] == arg and a["field"] == field]
        if grad is not None:
            rows = [a for a in rows if bool(a["flags"] & 2) == grad]
        assert len(rows) == 1, f"expected one access for {arg!r}/{field!r} at seq {seq}, got {rows}"
        return rows[0]

    def label(self, array_id: int) -> str:
        return self.arrays[array_id]["label"]

    def site_line(self, event: dict[str, Any]) -> int:
        return self.sites[event["site"]]["line"]


def arr(values: list[float], requires_grad: bool = False) -> wp.array:
    import numpy as np

    return wp.array(
        np.asarray(values, dtype=np.float32), dtype=float, device=DEVICE, requires_grad=requires_grad
    )
