"""Which elements of an array one thread reads and then overwrites, and whether an adjoint
needs what it read: the per-element question of WT102 (in-kernel overwrite).

Warp's adjoint re-reads array elements from memory (loads are replayed, stores are not)
after every thread has finished its forward pass. A value the forward pass read from element
``x[e]`` reaches the adjoint intact unless something wrote ``x[e]`` after the read: a plain
store (``x[i] = f(x[i])``) or an additive update (``x[i] += c``, ``wp.atomic_add``), which
is exact by itself but hands every *other* statement that read ``x[i]`` before it the
updated value (verified on Warp 1.19: ``loss[0] = y[1] * b[0]; b[0] += 100.0`` gives
``y.grad[1] = 110`` instead of ``10``). Only reads whose value an adjoint needs matter: a
product with something that carries a gradient, a division, a nonlinear function, a branch
or an index (the linearity of :mod:`.linearity`, per load).

:func:`overwrites` walks the kernel in program order (:mod:`.element_walk`: the
``@wp.func`` callees inlined with their arrays bound to the kernel's argument paths, values
numbered so that two index expressions with the same number address the same element, each
load tainted) and answers, for an argument path:

- ``PROVEN``: a load whose value an adjoint needs, and a later store or update in the same
  thread to the same element (same index value): the adjoint sees the new value.
- ``POSSIBLE``: such a load and a write to the same array at an index that may or may not be
  the same (a tree walk reading the parent's entry and writing the child's, a gather, a
  scatter, a write in a later iteration of the same loop, native code): not proven.
- ``NONE``: no needed load is written after it.

A function with a ``@wp.func_grad`` is not differentiated by Warp: loads in its forward body
are not adjoint reads; its custom adjoint reads the arrays it is handed after the call, by
design (its author wrote it against the memory as the call leaves it).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from warptrace.kernel_source.element_walk import ANY, Event, walk_kernel
from warptrace.kernel_source.facts import FunctionFacts

__all__ = ["NONE", "POSSIBLE", "PROVEN", "Overwrite", "overwrites"]

NONE, POSSIBLE, PROVEN = 0, 1, 2


@dataclass(frozen=True)
class Overwrite:
    """The answer for one argument path: ``kind`` (NONE/POSSIBLE/PROVEN), and for the first
    pair that decided it the load and the write (function name, absolute line) and whether
    the write is an additive update."""

    kind: int = NONE
    read_function: str = ""
    read_file: str = ""
    read_line: int = -1
    write_function: str = ""
    write_file: str = ""
    write_line: int = -1
    additive: bool = False


def overwrites(
    kernel: FunctionFacts,
    functions: tuple[FunctionFacts, ...],
    custom: frozenset[str],
    active: frozenset[str],
) -> dict[str, Overwrite] | None:
    """Per argument path the kernel reads, the :class:`Overwrite` answer; None when the kernel
    source does not parse. ``custom``: names of the functions that have a ``@wp.func_grad``;
    ``active``: argument paths whose arrays carry a gradient at the launch."""
    walker = walk_kernel(kernel, functions, custom, active)
    if walker is None:
        return None
    return _answers(walker.events, walker.needed, walker.everything)


def _answers(events: list[Event], needed: set[int], everything: bool) -> dict[str, Overwrite]:
    """Per path: the strongest (PROVEN > POSSIBLE > NONE) load-then-write pair of the walk."""
    out: dict[str, Overwrite] = {}
    writes: dict[str, list[Event]] = {}
    for event in events:
        if event.kind in ("store", "update", "write"):
            writes.setdefault(event.path, []).append(event)
    paths = {e.path for e in events} - {ANY}
    for load in events:
        if load.kind not in ("load", "read"):
            continue
        if not (everything or load.kind == "read" or load.label in needed):
            continue
        for path in paths if load.path == ANY else (load.path,):
            found = out.get(path, Overwrite())
            if found.kind == PROVEN:
                continue
            for write in writes.get(path, []) + writes.get(ANY, []):
                later = write.seq > load.seq
                if not (later or set(write.loops) & set(load.loops)):
                    continue
                if _distinct_literals(load.index, write.index):
                    continue  # b[0] read, b[1] written: different elements in every thread
                same = (
                    later
                    and write.kind in ("store", "update")
                    and load.kind == "load"
                    and write.path == load.path
                    and load.index is not None
                    and write.index == load.index
                )
                kind = PROVEN if same else POSSIBLE
                if kind > found.kind:
                    found = Overwrite(
                        kind,
                        load.function,
                        load.file,
                        load.line,
                        write.function,
                        write.file,
                        write.line,
                        write.kind == "update",
                    )
                    if kind == PROVEN:
                        break
            out[path] = found
    return out


def _distinct_literals(left: Hashable, right: Hashable) -> bool:
    """Two index numbers made of literals only, and different."""
    return _literal(left) and _literal(right) and left != right


def _literal(number: Hashable) -> bool:
    if not isinstance(number, tuple):
        return False
    if number and number[0] == "const":
        return True
    return bool(number) and all(_literal(part) for part in number)
