"""Synthetic ``.wtrace`` traces shaped like a real differentiable-simulation training run.

    python tools/synth_trace.py OUT.wtrace --launches 100000 [--substeps 16] [--part-rows 100000] [--accumulate 1]

Used by ``tools/bench_analyze.py`` (analysis speed and memory, DESIGN.md §7); no Warp
needed. The program it imitates (access rows follow ``warptrace/record/wrap/launch.py``:
``_forward_role`` for forward launches, ``_adjoint_roles`` for adjoint launches)::

    target = wp.array(np_target)                      # copy from numpy
    states = [State() for _ in range(S + 1)]          # state.q, state.qd: requires_grad
    w = wp.array(..., requires_grad=True)             # shared parameters
    forces = wp.zeros(..., requires_grad=True)        # scratch reused every substep (WT101)
    for it in range(iterations):
        loss = wp.zeros(1, requires_grad=True)        # fresh every iteration
        tape = wp.Tape()
        with tape:
            for s in range(S):
                wp.launch(compute_forces, inputs=[states[s], w, contacts], outputs=[forces])
                wp.launch(integrate, inputs=[states[s], forces, dt], outputs=[states[s + 1]])
                wp.launch(collide, inputs=[states[s + 1], contacts])
            wp.launch(loss_kernel, inputs=[states[S], target], outputs=[loss])
        tape.backward(loss)                           # seed memset + adjoints in reverse
        if (it + 1) % accumulate == 0:                # accumulate = 1 unless --accumulate
            wp.launch(sgd_step, inputs=[w, w.grad, lr])   # optimizer, untaped
            tape.zero()                               # memset of every grad on the tape
        print(loss.numpy())                           # value read

Every iteration has ``2 * (3 * S + 1)`` launches, plus one per optimizer step; with
``--accumulate K`` (gradient accumulation, a correct pattern) the grads collect K backward
calls before each optimizer step and ``tape.zero()``. ``State`` fields are struct-field
accesses (FLAG_FIELD); distinct per-substep state arrays keep the program correct except
for the reused ``forces`` buffer, which is read by ``integrate`` and rewritten by the next
``compute_forces`` on the same tape (one WT101 root cause, ``S - 1`` occurrences per
iteration). Tables are generated per chunk of blocks of iterations with numpy (no per-row Python
objects) and written through :class:`~warptrace.trace.writer.TraceWriter` in parts of
about ``part_rows`` access rows, dimension tables first, like the recorder.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warptrace.trace import schema as S
from warptrace.trace.writer import TraceWriter

FILE = "/home/user/sim/train.py"
KERNEL_FILE = "/home/user/sim/kernels.py"
WARP_VERSION = "1.19.0"

# kernel specs: key -> list of (arg, field, type, is_array, read, store, accumulate)
KERNELS: dict[str, list[tuple[str, str, str, bool, bool, bool, bool]]] = {
    "compute_forces": [
        ("state", "q", "array(dtype=vec3f)", True, True, False, False),
        ("w", "", "array(dtype=float32)", True, True, False, False),
        ("contacts", "", "array(dtype=int32)", True, True, False, False),
        ("f", "", "array(dtype=vec3f)", True, False, True, False),
    ],
    "integrate": [
        ("state_in", "q", "array(dtype=vec3f)", True, True, False, False),
        ("state_in", "qd", "array(dtype=vec3f)", True, True, False, False),
        ("f", "", "array(dtype=vec3f)", True, True, False, False),
        ("dt", "", "float32", False, True, False, False),
        ("state_out", "q", "array(dtype=vec3f)", True, False, True, False),
        ("state_out", "qd", "array(dtype=vec3f)", True, False, True, False),
    ],
    "collide": [
        ("state", "q", "array(dtype=vec3f)", True, True, False, False),
        ("state", "qd", "array(dtype=vec3f)", True, False, False, True),
        ("contacts", "", "array(dtype=int32)", True, True, False, False),
    ],
    "loss_kernel": [
        ("state", "q", "array(dtype=vec3f)", True, True, False, False),
        ("target", "", "array(dtype=vec3f)", True, True, False, False),
        ("loss", "", "array(dtype=float32)", True, False, False, True),
    ],
    "sgd_step": [
        ("w", "", "array(dtype=float32)", True, True, True, False),
        ("g", "", "array(dtype=float32)", True, True, False, False),
        ("lr", "", "float32", False, True, False, False),
    ],
}
KERNEL_IDS = {key: i for i, key in enumerate(KERNELS)}

# call sites: name -> (line, text, label)
SITES: dict[str, tuple[int, str, str]] = {
    "np_target": (10, "np_target = np.random.rand(n, 3)", "np_target"),
    "target": (11, "target = wp.array(np_target, dtype=wp.vec3)", "target"),
    "contacts": (12, "contacts = wp.array(np_contacts, dtype=wp.int32)", "contacts"),
    "states": (13, "states = [make_state(n) for _ in range(S + 1)]", "states"),
    "q": (5, "q = wp.zeros(n, dtype=wp.vec3, requires_grad=True)", "q"),
    "qd": (6, "qd = wp.zeros(n, dtype=wp.vec3, requires_grad=True)", "qd"),
    "w": (14, "w = wp.array(np_w, dtype=float, requires_grad=True)", "w"),
    "forces": (15, "forces = wp.zeros(n, dtype=wp.vec3, requires_grad=True)", "forces"),
    "loss": (18, "loss = wp.zeros(1, dtype=float, requires_grad=True)", "loss"),
    "tape": (19, "tape = wp.Tape()", "tape"),
    "with": (20, "with tape:", ""),
    "compute_forces": (
        22,
        "wp.launch(compute_forces, n, inputs=[states[s], w, contacts], outputs=[forces])",
        "",
    ),
    "integrate": (23, "wp.launch(integrate, n, inputs=[states[s], forces, dt], outputs=[states[s + 1]])", ""),
    "collide": (24, "wp.launch(collide, n, inputs=[states[s + 1], contacts])", ""),
    "loss_kernel": (25, "wp.launch(loss_kernel, n, inputs=[states[S], target], outputs=[loss])", ""),
    "backward": (26, "tape.backward(loss)", ""),
    "sgd_step": (27, "wp.launch(sgd_step, len(w), inputs=[w, w.grad, lr])", ""),
    "zero": (28, "tape.zero()", ""),
    "print": (29, "print(it, loss.numpy())", ""),
}
SITE_IDS = {name: i for i, name in enumerate(SITES)}


@dataclass
class SynthInfo:
    path: Path
    iterations: int
    launches: int
    events: int
    accesses: int
    arrays: int
    bytes_on_disk: int
    seconds: float


def launches_per_block(substeps: int, accumulate: int = 1) -> int:
    """Launches of ``accumulate`` iterations (forward and adjoint) and one optimizer step."""
    return accumulate * 2 * (3 * substeps + 1) + 1


# ----------------------------------------------------------------------------- dimension rows
class _Dims:
    """Global arrays and allocations (ids >= 0)."""

    def __init__(self, particles: int) -> None:
        self.n = particles
        self.arrays: list[dict[str, Any]] = []
        self.allocs: list[dict[str, Any]] = []
        self.grad: dict[int, int] = {}
        self.ptr = 0x7F0000000000

    def owned(
        self,
        label: str,
        site: str,
        shape: tuple[int, ...],
        itemsize: int,
        dtype: str,
        *,
        requires_grad: bool = False,
        kind: str = S.ARRAY_OWNED,
        seq: int = -1,
    ) -> int:
        array_id = self._alloc_array(label, site, shape, itemsize, dtype, kind, requires_grad, seq)
        if requires_grad:
            self.grad[array_id] = self._alloc_array(
                "", site, shape, itemsize, dtype, S.ARRAY_GRAD, False, seq, grad_of=array_id
            )
        return array_id

    def _alloc_array(
        self,
        label: str,
        site: str,
        shape: tuple[int, ...],
        itemsize: int,
        dtype: str,
        kind: str,
        requires_grad: bool,
        seq: int,
        grad_of: int = -1,
    ) -> int:
        nbytes = itemsize * int(np.prod(shape))
        alloc_id = len(self.allocs)
        external = kind == S.ARRAY_EXTERNAL
        self.allocs.append({
            "alloc_id": alloc_id, "ptr": self.ptr, "nbytes": nbytes, "device": "cpu" if external else "cuda:0",
            "kind": S.ALLOC_EXTERNAL if external else S.ALLOC_OWNED, "seq": seq, "site": SITE_IDS[site],
        })  # fmt: skip
        self.ptr += (nbytes + 255) // 256 * 256 + 256
        array_id = len(self.arrays)
        strides = [itemsize * int(np.prod(shape[i + 1 :])) for i in range(len(shape))]
        self.arrays.append({
            "array_id": array_id, "alloc_id": alloc_id, "offset": 0, "shape": list(shape), "strides": strides,
            "itemsize": itemsize, "dtype": dtype, "device": "cpu" if external else "cuda:0", "kind": kind,
            "requires_grad": requires_grad, "retain_grad": False, "grad_of": grad_of, "base_id": -1,
            "seq": seq, "site": SITE_IDS[site], "label": label,
        })  # fmt: skip
        return array_id


# ----------------------------------------------------------------------------- one iteration
_EV_COLS = ("kind", "tape", "recorded", "phase", "adjoint", "site", "kernel", "parent", "array_id", "value",
            "dim")  # fmt: skip
_ACC_COLS = ("ev", "array_id", "role", "flags", "arg", "field")


class _Template:
    """The events and access rows of one iteration, with relative references.

    A template covers one block of ``accumulate`` iterations. ``tape`` is the iteration's index
    in the block (its tape) or -1; ``parent`` is a local event index or -1; array refs >= 0 are
    global array ids, -1 is none, <= -2 are per-block arrays (-2 - local index)."""

    def __init__(self, grad: dict[int, int]) -> None:
        self.ev: dict[str, list[Any]] = {name: [] for name in _EV_COLS}
        self.acc: dict[str, list[Any]] = {name: [] for name in _ACC_COLS}
        self.grad = grad
        self.taped: list[tuple[int, dict[tuple[str, str], int]]] = []
        self.rel_tape = 0  # the current iteration's tape, relative to the block

    def event(
        self,
        kind: str,
        site: str,
        *,
        tape: bool = True,
        recorded: bool = False,
        phase: int = S.FORWARD,
        adjoint: bool = False,
        kernel: int = -1,
        parent: int = -1,
        array_id: int = -1,
        value: float = float("nan"),
        dim: str | None = None,
    ) -> int:
        index = len(self.ev["kind"])
        for name, val in (
            ("kind", kind),
            ("tape", self.rel_tape if tape else -1),
            ("recorded", recorded),
            ("phase", phase),
            ("adjoint", adjoint),
            ("site", SITE_IDS[site]),
            ("kernel", kernel),
            ("parent", parent),
            ("array_id", array_id),
            ("value", value),
            ("dim", dim),
        ):
            self.ev[name].append(val)
        return index

    def access(self, ev: int, array_id: int, role: int, flags: int, arg: str, field: str = "") -> None:
        for name, val in (
            ("ev", ev),
            ("array_id", array_id),
            ("role", role),
            ("flags", flags),
            ("arg", arg),
            ("field", field),
        ):
            self.acc[name].append(val)

    def launch(
        self, key: str, bind: dict[tuple[str, str], int], *, tape: bool = True, recorded: bool = True
    ) -> None:
        kernel = KERNEL_IDS[key]
        ev = self.event(S.LAUNCH, key, tape=tape, recorded=recorded, kernel=kernel, dim="4096")
        for arg, field, _type, is_array, read, store, accumulate in KERNELS[key]:
            if not is_array:
                continue
            array_id = bind[(arg, field)]
            role = (S.ROLE_READ if read else 0) | (S.ROLE_WRITE if store or accumulate else 0)
            flags = (S.FLAG_FIELD if field else 0) | (S.FLAG_STORE if store else 0)
            if accumulate and not store:
                flags |= S.FLAG_ACCUMULATE
            if self._is_grad(array_id):
                flags |= S.FLAG_GRAD
            self.access(ev, array_id, role, flags, arg, field)
        if recorded:
            self.taped.append((kernel, bind))

    def adjoint(self, key: str, bind: dict[tuple[str, str], int]) -> None:
        kernel = KERNEL_IDS[key]
        ev = self.event(S.LAUNCH, "backward", phase=S.BACKWARD, adjoint=True, kernel=kernel, dim="4096")
        for arg, field, _type, is_array, read, store, accumulate in KERNELS[key]:
            if not is_array:
                continue
            base = S.FLAG_FIELD if field else 0
            array_id = bind[(arg, field)]
            fwd_role = (S.ROLE_READ if read else 0) | (S.ROLE_WRITE if accumulate else 0)
            self.access(ev, array_id, fwd_role, base | (S.FLAG_ACCUMULATE if accumulate else 0), arg, field)
            grad = self.grad.get(array_id)
            if grad is None:
                continue
            role, flags = S.ROLE_NONE, base | S.FLAG_GRAD
            if read:
                role |= S.ROLE_WRITE
            if accumulate:
                role |= S.ROLE_READ
            if store:
                role |= S.ROLE_READ | S.ROLE_WRITE
                flags |= S.FLAG_CONSUME
            if role & S.ROLE_WRITE and not store:
                flags |= S.FLAG_ACCUMULATE
            self.access(ev, grad, role, flags, arg, field)

    def _is_grad(self, array_id: int) -> bool:
        return array_id in self.grad.values()


def _build(
    substeps: int, particles: int, accumulate: int
) -> tuple[_Dims, _Template, int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Global arrays, the prologue (as a template run once) and the template of one block of
    ``accumulate`` iterations."""
    dims = _Dims(particles)
    n = particles
    np_target = dims.owned("np_target", "np_target", (n, 3), 8, "float64", kind=S.ARRAY_EXTERNAL)
    target = dims.owned("target", "target", (n,), 12, "vec3f")
    contacts = dims.owned("contacts", "contacts", (2 * n,), 4, "int32")
    states = []
    for _ in range(substeps + 1):
        q = dims.owned("q", "q", (n,), 12, "vec3f", requires_grad=True)
        qd = dims.owned("qd", "qd", (n,), 12, "vec3f", requires_grad=True)
        states.append((q, qd))
    w = dims.owned("w", "w", (64,), 4, "float32", requires_grad=True)
    forces = dims.owned("forces", "forces", (n,), 12, "vec3f", requires_grad=True)

    prologue = _Template(dims.grad)
    copy = prologue.event(S.COPY, "target", tape=False)
    prologue.access(copy, np_target, S.ROLE_READ, 0, "src")
    prologue.access(copy, target, S.ROLE_WRITE, S.FLAG_STORE, "dest")
    copy = prologue.event(S.COPY, "contacts", tape=False)
    prologue.access(copy, np_target, S.ROLE_READ, 0, "src")
    prologue.access(copy, contacts, S.ROLE_WRITE, S.FLAG_STORE, "dest")

    # per-iteration arrays of iteration j of the block: loss (-2 - 2j) and loss.grad (-3 - 2j)
    grads = dict(dims.grad)
    it = _Template(grads)
    local_arrays: list[dict[str, Any]] = []
    for j in range(accumulate):
        loss, loss_grad = -2 - 2 * j, -3 - 2 * j
        grads[loss] = loss_grad
        first = len(it.ev["kind"])  # the loss is allocated right before the iteration's first event
        local_arrays.append({"label": "loss", "site": SITE_IDS["loss"], "kind": S.ARRAY_OWNED,
                             "requires_grad": True, "grad_of": None, "first_event": first})  # fmt: skip
        local_arrays.append({"label": "", "site": SITE_IDS["loss"], "kind": S.ARRAY_GRAD,
                             "requires_grad": False, "grad_of": loss, "first_event": first})  # fmt: skip
        it.rel_tape = j
        it.taped = []
        it.event(S.TAPE_CREATE, "tape")
        it.event(S.TAPE_ENTER, "with")
        for s in range(substeps):
            (q0, qd0), (q1, qd1) = states[s], states[s + 1]
            it.launch("compute_forces", {("state", "q"): q0, ("w", ""): w, ("contacts", ""): contacts,
                                         ("f", ""): forces})  # fmt: skip
            it.launch("integrate", {("state_in", "q"): q0, ("state_in", "qd"): qd0, ("f", ""): forces,
                                    ("state_out", "q"): q1, ("state_out", "qd"): qd1})  # fmt: skip
            it.launch("collide", {("state", "q"): q1, ("state", "qd"): qd1, ("contacts", ""): contacts})
        it.launch("loss_kernel", {("state", "q"): states[-1][0], ("target", ""): target, ("loss", ""): loss})
        it.event(S.TAPE_EXIT, "with")
        it.event(S.BACKWARD_BEGIN, "backward", phase=S.BACKWARD, array_id=loss)
        seed = it.event(S.MEMSET, "backward", phase=S.BACKWARD, array_id=loss_grad, value=1.0)
        it.access(seed, loss_grad, S.ROLE_WRITE, S.FLAG_STORE | S.FLAG_GRAD, "")
        for kernel, bind in reversed(list(it.taped)):
            it.adjoint(list(KERNELS)[kernel], bind)
        it.event(S.BACKWARD_END, "backward", phase=S.BACKWARD, array_id=loss)
        if j == accumulate - 1:  # gradient accumulation: one optimizer step and tape.zero() per block
            it.launch("sgd_step", {("w", ""): w, ("g", ""): dims.grad[w]}, tape=False, recorded=False)
            zero = it.event(S.TAPE_ZERO, "zero")
            seen: list[int] = []
            for _kernel, bind in it.taped:
                for array_id in bind.values():
                    grad = grads.get(array_id)
                    if grad is not None and grad not in seen:
                        seen.append(grad)
            for grad in seen:
                memset = it.event(S.MEMSET, "zero", tape=False, parent=zero, array_id=grad, value=0.0)
                it.access(memset, grad, S.ROLE_WRITE, S.FLAG_STORE | S.FLAG_GRAD, "")
        read = it.event(S.VALUE_READ, "print", tape=False, array_id=loss)
        it.access(read, loss, S.ROLE_READ, 0, "")

    n_prologue = len(prologue.ev["kind"])
    return dims, it, n_prologue, [prologue.ev, prologue.acc], local_arrays  # type: ignore[return-value]


# ----------------------------------------------------------------------------- tiling
def _np(values: list[Any], dtype: Any) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


class _Tiler:
    """Repeats the block template over blocks ``bs`` (numpy arrays of block numbers)."""

    def __init__(
        self,
        tmpl: _Template,
        n_prologue: int,
        n_global_arrays: int,
        n_global_allocs: int,
        n_local: int,
        alloc_of_global: np.ndarray,
        accumulate: int,
    ) -> None:
        ev, acc = tmpl.ev, tmpl.acc
        self.E = len(ev["kind"])
        self.A = len(acc["ev"])
        self.P = n_prologue
        self.G, self.GA, self.L = n_global_arrays, n_global_allocs, n_local
        self.kind = _np(ev["kind"], object)
        self.tape_rel = _np(ev["tape"], np.int64)
        self.recorded = _np(ev["recorded"], bool)
        self.phase = _np(ev["phase"], np.int8)
        self.adjoint = _np(ev["adjoint"], bool)
        self.site = _np(ev["site"], np.int32)
        self.kernel = _np(ev["kernel"], np.int32)
        self.parent = _np(ev["parent"], np.int64)
        self.ev_array = _np(ev["array_id"], np.int64)
        self.value = _np(ev["value"], np.float64)
        self.dim = _np(ev["dim"], object)
        self.acc_ev = _np(acc["ev"], np.int64)
        self.acc_array = _np(acc["array_id"], np.int64)
        self.role = _np(acc["role"], np.int8)
        self.flags = _np(acc["flags"], np.int8)
        self.arg = _np(acc["arg"], object)
        self.field = _np(acc["field"], object)
        self.alloc_of_global = alloc_of_global
        self.k = accumulate

    def _resolve(self, refs: np.ndarray, bs: np.ndarray, base: int) -> np.ndarray:
        """refs (template) x blocks -> ids; global refs and -1 pass through, local -2-k -> base + b*L + k."""
        local = refs <= -2
        out = np.broadcast_to(refs, (len(bs), len(refs))).copy()
        out[:, local] = base + bs[:, None] * self.L + (-2 - refs[local])[None, :]
        return out.ravel()

    def events(self, bs: np.ndarray, t0_ns: int) -> dict[str, Any]:
        n, E = len(bs), self.E
        seq = (self.P + bs[:, None] * E + np.arange(E)[None, :]).ravel()
        tape = np.where(self.tape_rel[None, :] >= 0, bs[:, None] * self.k + self.tape_rel[None, :], -1)
        tape = tape.ravel().astype(np.int32)
        parent = np.where(
            self.parent[None, :] >= 0, self.P + bs[:, None] * E + self.parent[None, :], -1
        ).ravel()
        array_id = self._resolve(self.ev_array, bs, self.G)
        value = np.tile(self.value, n)
        return {
            "seq": seq,
            "kind": np.tile(self.kind, n),
            "tape": tape,
            "recorded": np.tile(self.recorded, n),
            "phase": np.tile(self.phase, n),
            "adjoint": np.tile(self.adjoint, n),
            "executed": np.ones(n * E, dtype=bool),
            "site": np.tile(self.site, n),
            "kernel": np.tile(self.kernel, n),
            "thread": np.zeros(n * E, dtype=np.int32),
            "t_ns": t0_ns + seq * 4000,
            "parent": parent,
            "array_id": array_id,
            "ref_id": np.full(n * E, -1, dtype=np.int64),
            "value": pa.array(value, mask=np.isnan(value)),
            "dim": np.tile(self.dim, n),
            "detail": np.full(n * E, None, dtype=object),
        }

    def accesses(self, bs: np.ndarray) -> dict[str, Any]:
        n = len(bs)
        seq = (self.P + bs[:, None] * self.E + self.acc_ev[None, :]).ravel()
        array_id = self._resolve(self.acc_array, bs, self.G)
        alloc_id = np.empty_like(array_id)
        is_global = array_id < self.G
        alloc_id[is_global] = self.alloc_of_global[array_id[is_global]]
        alloc_id[~is_global] = array_id[~is_global] - self.G + self.GA  # one alloc per local array
        return {
            "seq": seq,
            "array_id": array_id,
            "alloc_id": alloc_id,
            "role": np.tile(self.role, n),
            "flags": np.tile(self.flags, n),
            "arg": np.tile(self.arg, n),
            "field": np.tile(self.field, n),
        }


def _rows_to_columns(rows: list[dict[str, Any]], table: str) -> dict[str, list[Any]]:
    return {name: [row[name] for row in rows] for name in S.SCHEMAS[table].names}


def generate(
    path: str | Path,
    launches: int,
    *,
    substeps: int = 16,
    particles: int = 4096,
    part_rows: int = 100_000,
    accumulate: int = 1,
) -> SynthInfo:
    """Write a synthetic trace with at least ``launches`` launches (whole blocks) to ``path``.

    ``accumulate`` > 1 is gradient accumulation: ``accumulate`` iterations (tapes, backward
    calls) per optimizer step and ``tape.zero()``."""
    start = time.perf_counter()
    path = Path(path)
    per_block = launches_per_block(substeps, accumulate)
    blocks = max(1, -(-launches // per_block))
    dims, tmpl, n_prologue, (pro_ev, pro_acc), local = _build(substeps, particles, accumulate)
    G, GA, L = len(dims.arrays), len(dims.allocs), len(local)
    alloc_of_global = np.array([a["alloc_id"] for a in dims.arrays], dtype=np.int64)
    tiler = _Tiler(tmpl, n_prologue, G, GA, L, alloc_of_global, accumulate)
    t0_ns = 1_000_000_000

    writer = TraceWriter(path, meta={"warp_version": WARP_VERSION, "argv": [FILE], "cwd": str(Path(FILE).parent),
                                     "devices": ["cpu", "cuda:0"], "synthetic": True})  # fmt: skip
    # dimension tables and the prologue
    writer.write("sites", {
        "site_id": list(SITE_IDS.values()), "file": [FILE] * len(SITES),
        "line": [s[0] for s in SITES.values()], "function": ["main"] * len(SITES),
        "text": [s[1] for s in SITES.values()], "label": [s[2] for s in SITES.values()],
        "library_site": [-1] * len(SITES),
    })  # fmt: skip
    krows, arows = [], []
    for key, args in KERNELS.items():
        kid = KERNEL_IDS[key]
        line = 10 + 20 * kid
        source = "\n".join([f"def {key}({', '.join(dict.fromkeys(a[0] for a in args))}):", "    i = wp.tid()"]
                           + [f"    # {a[0]}{'.' + a[1] if a[1] else ''}" for a in args])  # fmt: skip
        krows.append({"kernel_id": kid, "key": key, "module": "kernels", "file": KERNEL_FILE, "line": line,
                      "source": source, "enable_backward": True, "custom_grad": "[]", "custom_replay": "[]",
                      "native_snippets": False, "analysis": "codegen+ast", "source_model": ""})  # fmt: skip
        index: dict[str, int] = {}
        for j, (arg, field, typ, is_array, read, store, atomic) in enumerate(args):
            arows.append({"kernel_id": kid, "index": index.setdefault(arg, len(index)), "name": arg,
                          "type": "State" if field else typ, "field": field, "is_array": is_array,
                          "read": read, "write": store or atomic, "store": store, "accumulate": atomic,
                          "write_line": line + 2 + j if store or atomic else -1,
                          "read_line": line + 2 + j if read else -1})  # fmt: skip
    writer.write("kernels", _rows_to_columns(krows, "kernels"))
    writer.write("kernel_args", _rows_to_columns(arows, "kernel_args"))
    writer.write("allocs", _rows_to_columns(dims.allocs, "allocs"))
    writer.write("arrays", _rows_to_columns(dims.arrays, "arrays"))
    p = n_prologue
    writer.write("accesses", {
        "seq": pro_acc["ev"], "array_id": pro_acc["array_id"],
        "alloc_id": [int(alloc_of_global[a]) for a in pro_acc["array_id"]], "role": pro_acc["role"],
        "flags": pro_acc["flags"], "arg": pro_acc["arg"], "field": pro_acc["field"],
    })  # fmt: skip
    writer.write("events", {
        "seq": list(range(p)), "kind": pro_ev["kind"], "tape": [-1] * p, "recorded": pro_ev["recorded"],
        "phase": pro_ev["phase"], "adjoint": pro_ev["adjoint"], "executed": [True] * p, "site": pro_ev["site"],
        "kernel": pro_ev["kernel"], "thread": [0] * p, "t_ns": [t0_ns + 4000 * i for i in range(p)],
        "parent": [-1] * p, "array_id": [-1] * p, "ref_id": [-1] * p, "value": [None] * p, "dim": [None] * p,
        "detail": [None] * p,
    })  # fmt: skip

    chunk = max(1, part_rows // tiler.A)
    n_events = p + blocks * tiler.E
    n_acc = len(pro_acc["ev"]) + blocks * tiler.A
    for b0 in range(0, blocks, chunk):
        bs = np.arange(b0, min(b0 + chunk, blocks), dtype=np.int64)
        # per-iteration arrays, registered right before their iteration's first event
        alloc_rows, array_rows = [], []
        for b in bs.tolist():
            for k, spec in enumerate(local):
                seq = p + b * tiler.E + spec["first_event"] - 1
                array_id, alloc_id = G + b * L + k, GA + b * L + k
                alloc_rows.append(
                    {
                        "alloc_id": alloc_id,
                        "ptr": 0x7E0000000000 + 512 * (b * L + k),
                        "nbytes": 4,
                        "device": "cuda:0",
                        "kind": S.ALLOC_OWNED,
                        "seq": seq,
                        "site": spec["site"],
                    }
                )
                array_rows.append({
                    "array_id": array_id, "alloc_id": alloc_id, "offset": 0, "shape": [1], "strides": [4],
                    "itemsize": 4, "dtype": "float32", "device": "cuda:0", "kind": spec["kind"],
                    "requires_grad": spec["requires_grad"], "retain_grad": False,
                    "grad_of": -1 if spec["grad_of"] is None else G + b * L + (-2 - spec["grad_of"]),
                    "base_id": -1, "seq": seq, "site": spec["site"], "label": spec["label"],
                })  # fmt: skip
        writer.write("allocs", _rows_to_columns(alloc_rows, "allocs"))
        writer.write("arrays", _rows_to_columns(array_rows, "arrays"))
        writer.write("accesses", tiler.accesses(bs))
        writer.write("events", tiler.events(bs, t0_ns))
    writer.close(exit_status=0)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return SynthInfo(path=path, iterations=blocks * accumulate, launches=blocks * per_block, events=n_events,
                     accesses=n_acc, arrays=G + blocks * L, bytes_on_disk=size,
                     seconds=time.perf_counter() - start)  # fmt: skip


def parse_size(text: str) -> int:
    """A count from the command line: ``"10k"`` is 10 000, ``"1M"`` 1 000 000 (bench_* tools)."""
    text = text.strip().lower().replace("_", "")
    scale = 1
    if text.endswith("k"):
        scale, text = 1_000, text[:-1]
    elif text.endswith("m"):
        scale, text = 1_000_000, text[:-1]
    return int(float(text) * scale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--launches", type=int, default=100_000)
    parser.add_argument("--substeps", type=int, default=16)
    parser.add_argument("--particles", type=int, default=4096)
    parser.add_argument("--part-rows", type=int, default=100_000)
    parser.add_argument(
        "--accumulate", type=int, default=1, help="iterations (backward calls) per optimizer step"
    )
    args = parser.parse_args(argv)
    info = generate(args.path, args.launches, substeps=args.substeps, particles=args.particles,
                    part_rows=args.part_rows, accumulate=args.accumulate)  # fmt: skip
    print(f"{info.path}: {info.iterations} iterations, {info.launches} launches, {info.events} events, "
          f"{info.accesses} access rows, {info.bytes_on_disk} bytes, {info.seconds:.1f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
