"""The session the wrappers report to, and what they cache for it.

:func:`bind` is the only writer: :mod:`warptrace.record.install` binds the session at
``start()`` and unbinds it (``None``) at ``stop()``. Every wrapper reads :data:`rec`
once per call (see :mod:`warptrace.record.wrap` for the guard idiom); a wrapper left in
some alias after ``stop()`` sees ``None`` and is exactly the original call.

The caches are per session (codes and ids belong to one trace) and are cleared, never
replaced, by :func:`bind`, so a wrapper may hold them in a closure.
"""

from __future__ import annotations

import contextlib
from typing import Any

from warptrace.record.session import Recorder

rec: Recorder | None = None  # the active session, None when not recording
# The session while it is started, also while a recording schedule pauses it (rec is None
# then: warptrace.record.gate): what the wrappers that keep identity (allocations, grads,
# array attributes) and count steps (tapes) read.
tracker: Recorder | None = None

# kernel object -> LaunchPlan; id(facts) -> (facts, plan); (generic kernel, type key) -> plan
plans: dict[Any, Any] = {}
plans_by_facts: dict[int, tuple[Any, Any]] = {}
generic_plans: dict[tuple[Any, ...], Any] = {}
generic_args: dict[Any, tuple[int, ...] | None] = {}  # generic kernel -> positions of generic args
# (Warp module, kernel key) -> the planned kernels of that key (templates for generic ones):
# a new kernel of the same key replaces them (wrap.plans.make_register_kernel)
planned: dict[tuple[Any, str], set[Any]] = {}
dims: dict[Any, int] = {}  # launch dim -> Recorder.dim_code of "64" / "32x3"
json_names: dict[str, str] = {}  # record_func name -> its JSON string
src_dest: tuple[int, int] = (0, 0)  # name codes of a copy's "src" and "dest"

# Code of the originals whose nested events share the enclosing event's call site (set
# when the wrappers are made): wp.copy (its grad copy and record_func) and Tape.zero
# (its memsets). A nested event takes the shortcut only when its wrapper's caller is
# that very code, so no user frame can sit in between.
copy_code: Any = None
tape_zero_code: Any = None
# Tape.backward: the original's code. An adjoint launch whose caller is the original, called
# by the wrapper (from ThreadState.bw_frame), has the wrapper's call site (ThreadState.bw_site).
backward_code: Any = None

# PyTorch tensors the bridge wrappers have seen (wrap/bridge.py): id(tensor) -> (weak reference,
# token), the token a number that names one tensor object for the session (an id is reused once
# the tensor is freed, a token never), the next token; the leaves they watch (id -> weak
# reference) and the hooks they put on them, removed when the session ends.
torch_tokens: dict[int, tuple[Any, int]] = {}
torch_next: list[int] = [0]
torch_watched: dict[int, Any] = {}
torch_hooks: list[Any] = []


def bind(session: Recorder | None) -> None:
    """Point every wrapper at ``session`` (None: all wrappers become pass-through)."""
    global rec, src_dest, tracker
    rec = None  # first: no wrapper starts an event against half-reset caches
    tracker = None
    plans.clear()
    plans_by_facts.clear()
    generic_plans.clear()
    generic_args.clear()
    planned.clear()
    dims.clear()
    torch_tokens.clear()
    torch_next[0] = 0
    torch_watched.clear()
    while torch_hooks:
        handle = torch_hooks.pop()
        with contextlib.suppress(Exception):  # the tensor may be gone
            handle.remove()
    if session is None:
        return
    src_dest = (session.name_code("src"), session.name_code("dest"))
    tracker = session
    rec = session


__all__ = ["bind", "rec", "tracker"]
