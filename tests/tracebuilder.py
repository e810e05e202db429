"""Build small synthetic traces for rule tests, without Warp.

A :class:`TraceBuilder` plays the part of the recorder: it keeps the active tape,
numbers events, registers allocations, array objects, kernels and call sites, and
writes a real ``.wtrace`` directory through :class:`~warptrace.trace.writer.TraceWriter`.
Tests then read it back with ``warptrace.load`` / ``analyze_trace`` exactly like a
recorded trace::

    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True)
    y = tb.array("y", requires_grad=True)
    loss = tb.array("loss", shape=(1,), requires_grad=True)
    k = tb.kernel("step", x="r", y="w")          # roles: r, w (store), a (accumulate), rw, ra
    s = tb.kernel("total", y="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(k, x=x, y=y, line=10)
        tb.launch(s, y=y, loss=loss, line=11)
    tb.backward(tape, loss, line=12)
    report = tb.analyze(tmp_path)

Struct fields are spelled ``state__q`` in keyword arguments (argument ``state``,
field ``q``). Lines without an explicit site are interned in ``tb.file``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from warptrace.trace import schema as S
from warptrace.trace.writer import TraceWriter

_EVENT_DEFAULTS: dict[str, Any] = {
    "tape": -1,
    "recorded": False,
    "phase": S.FORWARD,
    "adjoint": False,
    "executed": True,
    "site": -1,
    "kernel": -1,
    "thread": 0,
    "parent": -1,
    "array_id": -1,
    "ref_id": -1,
    "value": None,
    "dim": None,
    "detail": None,
}

_ROLE_SPEC = {  # kernel argument spec -> (read, store, accumulate)
    "": (False, False, False),
    "r": (True, False, False),
    "w": (False, True, False),
    "a": (False, False, True),
    "rw": (True, True, False),
    "ra": (True, False, True),
    "wa": (False, True, True),
    "rwa": (True, True, True),
}


class TraceBuilder:
    """Accumulates the rows of every table; ``write(path)`` produces the trace directory."""

    def __init__(
        self,
        file: str = "/home/user/project/train.py",
        warp_version: str = "1.19.0",
        cwd: str = "/home/user/project",
        kernel_file: str | None = None,
    ) -> None:
        self.file = file
        self.kernel_file = kernel_file or file
        self.meta: dict[str, Any] = {"warp_version": warp_version, "cwd": cwd, "argv": [file]}
        self.rows: dict[str, dict[str, list[Any]]] = {
            name: {f.name: [] for f in S.SCHEMAS[name]} for name in S.TABLES
        }
        self.seq = 0
        self.active_tape = -1
        self.phase = S.FORWARD
        self._sites: dict[tuple[str, int], int] = {}
        self._arrays: dict[int, dict[str, Any]] = {}
        self._grad: dict[int, int] = {}
        self._kernels: dict[int, dict[str, tuple[bool, bool, bool]]] = {}
        self._kernel_lines: dict[int, dict[str, tuple[int, int]]] = {}
        self._next_array = 0
        self._next_alloc = 0
        self._next_tape = 0
        self._next_kernel = 0
        self._alloc_ptr = 0x10000
        self._tape_launches: dict[int, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------ raw rows
    def _append(self, table: str, **values: Any) -> None:
        columns = self.rows[table]
        for name, column in columns.items():
            column.append(values.get(name))

    def event(self, kind: str, **columns: Any) -> int:
        """Append one event (any column of the events table) and return its seq."""
        seq = self.seq
        self.seq += 1
        row = dict(_EVENT_DEFAULTS)
        row.update(columns)
        row.update(seq=seq, kind=kind)
        self._append("events", **row)
        return seq

    def access(
        self, seq: int, array_id: int, role: int, flags: int = 0, arg: str = "", field: str = ""
    ) -> None:
        """Append one access row; FLAG_GRAD and FLAG_FIELD are added when they apply."""
        if self.is_grad(array_id):
            flags |= S.FLAG_GRAD
        if field:
            flags |= S.FLAG_FIELD
        self._append(
            "accesses",
            seq=seq,
            array_id=array_id,
            alloc_id=self._arrays[array_id]["alloc_id"],
            role=role,
            flags=flags,
            arg=arg,
            field=field,
        )

    def site(
        self, line: int, text: str = "", *, file: str | None = None, function: str = "run", label: str = ""
    ) -> int:
        """Intern a call site (file defaults to ``self.file``); returns its site_id."""
        key = (file or self.file, int(line))
        if key not in self._sites:
            site_id = len(self._sites)
            self._sites[key] = site_id
            self._append(
                "sites",
                site_id=site_id,
                file=key[0],
                line=key[1],
                function=function,
                text=text or f"<line {line}>",
                label=label,
            )
        return self._sites[key]

    def _site_of(self, line: int | None, site: int | None, text: str = "") -> int:
        if site is not None:
            return site
        if line is None:
            return -1
        return self.site(line, text)

    # ------------------------------------------------------------ arrays
    def array(
        self,
        label: str = "",
        shape: Sequence[int] = (4,),
        *,
        itemsize: int = 4,
        dtype: str = "float32",
        requires_grad: bool = False,
        retain_grad: bool = False,
        line: int | None = None,
        site: int | None = None,
        kind: str = S.ARRAY_OWNED,
        device: str = "cpu",
    ) -> int:
        """A fresh allocation and its owning array object (plus its .grad when requires_grad)."""
        nbytes = itemsize
        for extent in shape:
            nbytes *= extent
        alloc_id = self._next_alloc
        self._next_alloc += 1
        site_id = self._site_of(line, site, f"{label} = wp.zeros(...)" if label else "")
        self._append(
            "allocs",
            alloc_id=alloc_id,
            ptr=self._alloc_ptr,
            nbytes=nbytes,
            device=device,
            kind=S.ALLOC_OWNED if kind == S.ARRAY_OWNED else S.ALLOC_EXTERNAL,
            seq=self.seq - 1,
            site=site_id,
        )
        self._alloc_ptr += max(nbytes, 1) + 256
        array_id = self._register(
            alloc_id=alloc_id,
            offset=0,
            shape=tuple(shape),
            strides=_contiguous_strides(shape, itemsize),
            itemsize=itemsize,
            dtype=dtype,
            kind=kind,
            requires_grad=requires_grad,
            retain_grad=retain_grad,
            site=site_id,
            label=label,
            device=device,
        )
        if requires_grad:
            self.grad(array_id)
        return array_id

    def grad(self, array_id: int) -> int:
        """The .grad array of ``array_id`` (created on first use, own allocation)."""
        if array_id in self._grad:
            return self._grad[array_id]
        owner = self._arrays[array_id]
        if owner["kind"] == S.ARRAY_VIEW and owner["base_id"] in self._grad:
            base = self._arrays[owner["base_id"]]
            grad_base = self._grad[owner["base_id"]]
            grad_id = self._register(
                alloc_id=self._arrays[grad_base]["alloc_id"],
                offset=owner["offset"] - base["offset"],
                shape=owner["shape"],
                strides=owner["strides"],
                itemsize=owner["itemsize"],
                dtype=owner["dtype"],
                kind=S.ARRAY_GRAD,
                grad_of=array_id,
                base_id=grad_base,
                site=owner["site"],
            )
        else:
            size = owner["itemsize"]
            for extent in owner["shape"]:
                size *= extent
            alloc_id = self._next_alloc
            self._next_alloc += 1
            self._append(
                "allocs",
                alloc_id=alloc_id,
                ptr=self._alloc_ptr,
                nbytes=size,
                device=owner["device"],
                kind=S.ALLOC_OWNED,
                seq=self.seq - 1,
                site=owner["site"],
            )
            self._alloc_ptr += max(size, 1) + 256
            grad_id = self._register(
                alloc_id=alloc_id,
                offset=0,
                shape=owner["shape"],
                strides=_contiguous_strides(owner["shape"], owner["itemsize"]),
                itemsize=owner["itemsize"],
                dtype=owner["dtype"],
                kind=S.ARRAY_GRAD,
                grad_of=array_id,
                site=owner["site"],
            )
        self._grad[array_id] = grad_id
        return grad_id

    def view(
        self,
        base: int,
        *,
        offset: int = 0,
        shape: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        label: str = "",
        line: int | None = None,
        kind: str = S.ARRAY_VIEW,
    ) -> int:
        """A view of ``base``: ``offset`` in elements from base's element 0, ``strides`` in elements.

        ``kind=ptr_alias`` / ``external`` makes an alias with no owner link (base_id -1)."""
        parent = self._arrays[base]
        item = parent["itemsize"]
        shape = tuple(shape if shape is not None else parent["shape"])
        if strides is None:
            byte_strides = _contiguous_strides(shape, item)
        else:
            byte_strides = tuple(s * item for s in strides)
        view_id = self._register(
            alloc_id=parent["alloc_id"],
            offset=parent["offset"] + offset * item,
            shape=shape,
            strides=byte_strides,
            itemsize=item,
            dtype=parent["dtype"],
            kind=kind,
            requires_grad=parent["requires_grad"] and kind == S.ARRAY_VIEW,
            base_id=base if kind == S.ARRAY_VIEW else -1,
            site=self._site_of(line, None, f"{label} = ..." if label else ""),
            label=label,
            device=parent["device"],
        )
        if kind == S.ARRAY_VIEW and base in self._grad:
            self.grad(view_id)
        return view_id

    def alias(
        self, base: int, label: str = "", *, line: int | None = None, kind: str = S.ARRAY_PTR_ALIAS
    ) -> int:
        """``wp.array(ptr=base.ptr, ...)``: same memory, distinct object, no owner link."""
        return self.view(base, label=label, line=line, kind=kind)

    def _register(self, **row: Any) -> int:
        array_id = self._next_array
        self._next_array += 1
        full = {
            "array_id": array_id,
            "alloc_id": -1,
            "offset": 0,
            "shape": (),
            "strides": (),
            "itemsize": 4,
            "dtype": "float32",
            "device": "cpu",
            "kind": S.ARRAY_OWNED,
            "requires_grad": False,
            "retain_grad": False,
            "grad_of": -1,
            "base_id": -1,
            "seq": self.seq - 1,
            "site": -1,
            "label": "",
        }
        full.update(row)
        self._arrays[array_id] = full
        self._append("arrays", **{**full, "shape": list(full["shape"]), "strides": list(full["strides"])})
        return array_id

    def is_grad(self, array_id: int) -> bool:
        info = self._arrays[array_id]
        return info["kind"] == S.ARRAY_GRAD or info["grad_of"] >= 0

    # ------------------------------------------------------------ kernels
    def kernel(
        self,
        key: str,
        *,
        line: int = 1,
        file: str | None = None,
        source: str = "",
        arg_lines: dict[str, tuple[int, int]] | None = None,
        **args: str,
    ) -> int:
        """Register a kernel. ``args`` maps argument name (``state__q`` for a struct field)
        to a role spec: ``r`` read, ``w`` plain store, ``a`` accumulate, or combinations
        ``rw``, ``ra``, ``wa``; an empty string means passed but untouched.
        Kernel-line facts: argument i reads at ``line + 1 + 2*i`` and writes at ``line + 2 + 2*i``
        unless ``arg_lines`` gives ``{name: (read_line, write_line)}`` (absolute lines, -1 for none);
        ``source`` (starting with the ``def`` at ``line``) replaces the generated body."""
        kernel_id = self._next_kernel
        self._next_kernel += 1
        args = {name.replace("__", "."): spec for name, spec in args.items()}
        names = list(args)
        if not source:
            body = [f"def {key}(...):"]
            for name in names:
                body += [f"    read {name}", f"    write {name}"]
            source = "\n".join(body)
        self._append(
            "kernels",
            kernel_id=kernel_id,
            key=key,
            module="__main__",
            file=file or self.kernel_file,
            line=line,
            source=source,
            enable_backward=True,
            custom_grad="[]",
            custom_replay="[]",
            native_snippets=False,
            analysis="codegen+ast",
            source_model="",
        )
        facts: dict[str, tuple[bool, bool, bool]] = {}
        lines: dict[str, tuple[int, int]] = {}
        arg_index: dict[str, int] = {}
        for i, name in enumerate(names):
            read, store, accumulate = _ROLE_SPEC[args[name]]
            arg, _, field = name.partition(".")
            index = arg_index.setdefault(arg, len(arg_index))
            read_line = line + 1 + 2 * i if read else -1
            write_line = line + 2 + 2 * i if (store or accumulate) else -1
            if arg_lines and name.replace(".", "__") in arg_lines:
                read_line, write_line = arg_lines[name.replace(".", "__")]
            self._append(
                "kernel_args",
                kernel_id=kernel_id,
                index=index,
                name=arg,
                type="array(float32)",
                field=field,
                is_array=True,
                read=read,
                write=store or accumulate,
                store=store,
                accumulate=accumulate,
                write_line=write_line,
                read_line=read_line,
            )
            facts[name] = (read, store, accumulate)
            lines[name] = (read_line, write_line)
        self._kernels[kernel_id] = facts
        self._kernel_lines[kernel_id] = lines
        return kernel_id

    # ------------------------------------------------------------ memory events
    def launch(
        self,
        kernel: int,
        *,
        line: int | None = None,
        site: int | None = None,
        record: bool = True,
        kind: str = S.LAUNCH,
        uncertain: bool = False,
        dim: str = "4",
        **arrays: int,
    ) -> int:
        """A forward launch; arrays are passed by argument name (struct fields as ``state__q``).
        Recorded when a tape is active and ``record``; ``kind=cmd_launch`` for a Launch replay;
        ``uncertain`` marks every argument read+write with FLAG_UNCERTAIN (unanalysable kernel)."""
        facts = self._kernels[kernel]
        bound = {name.replace("__", "."): array_id for name, array_id in arrays.items()}
        recorded = kind == S.LAUNCH and record and self.active_tape >= 0
        seq = self.event(
            kind,
            tape=self.active_tape,
            recorded=recorded,
            phase=self.phase,
            site=self._site_of(line, site, "wp.launch(...)"),
            kernel=kernel,
            dim=dim,
        )
        for name, array_id in bound.items():
            read, store, accumulate = facts.get(
                name, (True, True, False) if uncertain else (False, False, False)
            )
            if uncertain:
                read, store, accumulate = True, True, False
            role = (S.ROLE_READ if read else 0) | (S.ROLE_WRITE if (store or accumulate) else 0)
            flags = (S.FLAG_STORE if store else 0) | (S.FLAG_ACCUMULATE if accumulate and not store else 0)
            if uncertain:
                flags |= S.FLAG_UNCERTAIN
            arg, _, field = name.partition(".")
            self.access(seq, array_id, role, flags, arg, field)
        if recorded:
            self._tape_launches.setdefault(self.active_tape, []).append(
                {"kernel": kernel, "arrays": bound, "seq": seq}
            )
        return seq

    def copy(
        self,
        dest: int,
        src: int,
        *,
        line: int | None = None,
        site: int | None = None,
        record: bool | None = None,
        dest_offset: int = 0,
        src_offset: int = 0,
        count: int = 0,
    ) -> int:
        """``wp.copy(dest, src, dest_offset, src_offset, count)``: recorded when a tape is active
        and both arrays have grads."""
        both_grad = dest in self._grad and src in self._grad
        recorded = self.active_tape >= 0 and (both_grad if record is None else record)
        detail = None
        if dest_offset or src_offset or count:
            detail = json.dumps({"dest_offset": dest_offset, "src_offset": src_offset, "count": count})
        seq = self.event(
            S.COPY,
            tape=self.active_tape,
            recorded=recorded,
            phase=self.phase,
            site=self._site_of(line, site, "wp.copy(...)"),
            detail=detail,
        )
        self.access(seq, src, S.ROLE_READ, 0, "src")
        self.access(seq, dest, S.ROLE_WRITE, S.FLAG_STORE, "dest")
        if both_grad:  # the nested copy of src.grad into dest.grad
            child = self.event(
                S.COPY,
                tape=self.active_tape,
                recorded=False,
                phase=self.phase,
                site=self._site_of(line, site),
                parent=seq,
            )
            self.access(child, self._grad[src], S.ROLE_READ, 0, "src")
            self.access(child, self._grad[dest], S.ROLE_WRITE, S.FLAG_STORE, "dest")
        return seq

    def memset(
        self, array: int, value: float = 0.0, *, line: int | None = None, site: int | None = None
    ) -> int:
        """``array.zero_()`` / ``fill_(value)``: never recorded, but carries the active tape."""
        seq = self.event(
            S.MEMSET,
            tape=self.active_tape,
            phase=self.phase,
            site=self._site_of(line, site, "x.zero_()"),
            value=value,
            array_id=array,
        )
        self.access(seq, array, S.ROLE_WRITE, S.FLAG_STORE, "")
        return seq

    def native(
        self,
        reads: Sequence[int] = (),
        writes: Sequence[int] = (),
        *,
        line: int | None = None,
        name: str = "array_scan",
    ) -> int:
        seq = self.event(
            S.NATIVE,
            tape=self.active_tape,
            phase=self.phase,
            site=self._site_of(line, None, f"wp.utils.{name}(...)"),
            detail=json.dumps({"func": name}),
        )
        for array in reads:
            self.access(seq, array, S.ROLE_READ, 0, "in")
        for array in writes:
            self.access(seq, array, S.ROLE_WRITE, S.FLAG_STORE, "out")
        return seq

    def value_read(self, array: int, *, line: int | None = None, text: str = "x.numpy()") -> int:
        seq = self.event(
            S.VALUE_READ,
            tape=self.active_tape,
            phase=self.phase,
            site=self._site_of(line, None, text),
            array_id=array,
        )
        self.access(seq, array, S.ROLE_READ, 0, "")
        return seq

    # ------------------------------------------------------------ tapes
    def tape(self, *, line: int | None = None) -> int:
        tape_id = self._next_tape
        self._next_tape += 1
        self.event(S.TAPE_CREATE, tape=tape_id, site=self._site_of(line, None, "tape = wp.Tape()"))
        return tape_id

    @contextmanager
    def recording(self, tape: int, *, line: int | None = None) -> Iterator[int]:
        """``with tape:``"""
        self.event(S.TAPE_ENTER, tape=tape, site=self._site_of(line, None, "with tape:"))
        previous, self.active_tape = self.active_tape, tape
        try:
            yield tape
        finally:
            self.active_tape = previous
            self.event(S.TAPE_EXIT, tape=tape, site=self._site_of(line, None, "with tape:"))

    def backward(
        self,
        tape: int,
        loss: int | None = None,
        *,
        grads: Sequence[int] = (),
        line: int | None = None,
        adjoints: bool = True,
    ) -> int:
        """``tape.backward(loss)``: seed memset, adjoint launches in reverse order, end event."""
        site = self._site_of(line, None, "tape.backward(loss)")
        begin = self.event(
            S.BACKWARD_BEGIN,
            tape=tape,
            phase=S.BACKWARD,
            site=site,
            array_id=-1 if loss is None else loss,
            detail=json.dumps([int(g) for g in grads]) if grads else None,
        )
        self.phase = S.BACKWARD
        if loss is not None and loss in self._grad:
            seed = self.event(
                S.MEMSET, tape=tape, phase=S.BACKWARD, site=site, value=1.0, array_id=self._grad[loss]
            )
            self.access(seed, self._grad[loss], S.ROLE_WRITE, S.FLAG_STORE, "")
        if adjoints:
            for launch in reversed(self._tape_launches.get(tape, [])):
                self._adjoint(tape, launch, site)
        self.phase = S.FORWARD
        self.event(S.BACKWARD_END, tape=tape, phase=S.BACKWARD, site=site)
        return begin

    def _adjoint(self, tape: int, launch: dict[str, Any], site: int) -> None:
        facts = self._kernels[launch["kernel"]]
        seq = self.event(
            S.LAUNCH, tape=tape, phase=S.BACKWARD, adjoint=True, site=site, kernel=launch["kernel"]
        )
        for name, array_id in launch["arrays"].items():
            read, store, accumulate = facts.get(name, (False, False, False))
            arg, _, field = name.partition(".")
            self.access(seq, array_id, S.ROLE_READ, 0, arg, field)
            grad = self._grad.get(array_id)
            if grad is None:
                continue
            if read:
                self.access(seq, grad, S.ROLE_WRITE, S.FLAG_ACCUMULATE, "adj_" + arg, field)
            if store or accumulate:
                self.access(seq, grad, S.ROLE_READ, S.FLAG_CONSUME if store else 0, "adj_" + arg, field)

    def zero(self, tape: int, *, line: int | None = None) -> int:
        site = self._site_of(line, None, "tape.zero()")
        seq = self.event(S.TAPE_ZERO, tape=tape, site=site)
        grads = {
            self._grad[array_id]: None
            for launch in self._tape_launches.get(tape, [])
            for array_id in launch["arrays"].values()
            if array_id in self._grad
        }
        for grad in grads:  # each grad buffer once, in first-use order
            memset = self.event(S.MEMSET, tape=-1, site=site, value=0.0, array_id=grad, parent=seq)
            self.access(memset, grad, S.ROLE_WRITE, S.FLAG_STORE, "")
        return seq

    def reset(self, tape: int, *, line: int | None = None) -> int:
        self._tape_launches.pop(tape, None)
        return self.event(S.TAPE_RESET, tape=tape, site=self._site_of(line, None, "tape.reset()"))

    # ------------------------------------------------------------ output
    def write(self, path: str | os.PathLike[str], *, complete: bool = True) -> Path:
        """Write the trace directory (``complete=False`` leaves it as a crashed run would)."""
        writer = TraceWriter(path, meta=self.meta)
        for table in S.TABLES:
            writer.write(table, self.rows[table])
        if complete:
            writer.close(exit_status=0)
        return Path(path)

    def model(self, path: str | os.PathLike[str]):
        from warptrace.analysis.model import Model
        from warptrace.trace.reader import read_trace

        return Model(read_trace(self.write(path)))

    def analyze(self, path: str | os.PathLike[str]):
        from warptrace.analysis.report import analyze_trace
        from warptrace.trace.reader import read_trace

        return analyze_trace(read_trace(self.write(path)))


def _contiguous_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides = []
    step = itemsize
    for extent in reversed(tuple(shape)):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))
