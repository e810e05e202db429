"""Install and uninstall the wrappers; restore exactly the objects that were replaced.

One table (:data:`_installed`) holds every replaced attribute with its original and
its wrapper, so ``uninstall()`` puts back the very same objects (a test checks ``is``)
and only where our wrapper is still in place: someone who patched over us keeps their
patch. Module-level functions are patched under every name that holds them: the
canonical module (``warp._src.context.launch``), the package alias (``warp.launch``)
and any module attribute that ``is`` the original (``from warp import launch`` done
before tracing started, ``from warp._src.utils import array_scan`` in ``warp.fem``).
``uninstall()`` also rescans for wrappers bound while tracing ran.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import warp._src.context as _context
import warp._src.dlpack as _dlpack
import warp._src.jax as _jax
import warp._src.tape as _tape
import warp._src.torch as _torch
import warp._src.types as _types
import warp._src.utils as _utils

from warptrace.record import handles, state
from warptrace.record.kernel_handles import BVH, MESH, VOLUME
from warptrace.record.numerics import wrap_factory
from warptrace.record.session import Recorder
from warptrace.record.wrap import allocation, bridge, capture, launch, memory, plans, tape
from warptrace.record.wrap.common import ORIGINAL_ATTR
from warptrace.trace.schema import SET_REQUIRES_GRAD, SET_RETAIN_GRAD


@dataclass
class Patch:
    owner: Any  # module or class
    name: str
    original: Any
    wrapper: Any


_installed: list[Patch] = []

# Module-level functions: (module, name, factory). Patched under every alias.
_FUNCTIONS: tuple[tuple[ModuleType, str, Callable[[Any], Any]], ...] = (
    (_context, "launch", launch.make_launch),
    (_context, "copy", memory.make_copy),
    (_context, "capture_begin", capture.make_capture_begin),
    (_context, "capture_end", capture.make_capture_end),
    (_context, "capture_launch", capture.make_capture_launch),
    *(
        (_utils, name, lambda original, name=name: memory.make_native(original, name))
        for name in memory.NATIVE_ROLES
    ),
    (_torch, "to_torch", lambda f: bridge.make_export(f, "torch", with_grad=True)),
    (_jax, "to_jax", lambda f: bridge.make_export(f, "jax", with_grad=False)),
    (_dlpack, "to_dlpack", lambda f: bridge.make_export(f, "dlpack", with_grad=False)),
    (_torch, "from_torch", lambda f: bridge.make_import(f, "torch")),
    (_jax, "from_jax", lambda f: bridge.make_import(f, "jax")),
    (_dlpack, "from_dlpack", lambda f: bridge.make_import(f, "dlpack")),
)


def _class_patches() -> Iterator[tuple[type, str, Callable[[Any], Any]]]:
    """(class, attribute, factory) for methods and properties; absent ones are skipped."""
    array = _types.array
    yield array, "_init_new", allocation.make_init_new
    yield array, "_init_from_ptr", allocation.make_init_from_ptr
    yield array, "_alloc_grad", allocation.make_alloc_grad
    yield array, "zero_", lambda f: memory.make_memset(f, zero=True)
    yield array, "fill_", lambda f: memory.make_memset(f, zero=False)
    yield array, "numpy", memory.make_value_read
    yield array, "list", memory.make_value_read
    yield (
        array,
        "requires_grad",
        lambda p: allocation.wrap_property(p, lambda f: allocation.make_flag_setter(f, SET_REQUIRES_GRAD)),
    )
    yield (
        array,
        "retain_grad",
        lambda p: allocation.wrap_property(p, lambda f: allocation.make_flag_setter(f, SET_RETAIN_GRAD)),
    )
    yield array, "grad", lambda p: allocation.wrap_property(p, allocation.make_grad_setter)
    yield array, "__array_interface__", lambda p: bridge.wrap_interface(p, "array_interface")
    yield array, "__cuda_array_interface__", lambda p: bridge.wrap_interface(p, "cuda_array_interface")
    base = getattr(_types, "noncontiguous_array_base", None)
    if base is not None:
        yield base, "zero_", lambda f: memory.make_memset(f, zero=True)
        yield base, "fill_", lambda f: memory.make_memset(f, zero=False)
        yield base, "numpy", memory.make_value_read
        yield base, "list", memory.make_value_read
    launch_cls = getattr(_context, "Launch", None)
    if launch_cls is not None:
        yield launch_cls, "launch", launch.make_launch_replay
    tape_cls = _tape.Tape
    yield tape_cls, "__init__", tape.make_tape_init
    yield tape_cls, "__enter__", tape.make_tape_enter
    yield tape_cls, "__exit__", tape.make_tape_exit
    yield tape_cls, "backward", tape.make_tape_backward
    yield tape_cls, "zero", tape.make_tape_zero
    yield tape_cls, "reset", tape.make_tape_reset
    yield tape_cls, "record_func", tape.make_record_func
    yield _context.Module, "mark_modified", plans.make_mark_modified
    yield _context.Module, "register_kernel", plans.make_register_kernel
    # handles: their ids resolve to their arrays at launch time
    for cls_name, kind in (("Mesh", MESH), ("Bvh", BVH), ("Volume", VOLUME)):
        cls = getattr(_types, cls_name, None)
        if cls is None:
            continue
        yield cls, "__init__", handles.make_handle_init
        if kind != VOLUME:
            yield cls, "refit", functools.partial(_refit_factory, kind=kind)


def _refit_factory(original: Any, kind: str) -> Any:
    return handles.make_refit(original, kind)


def _modules() -> list[ModuleType]:
    own = "warptrace.record"
    return [
        module
        for name, module in list(sys.modules.items())
        if isinstance(module, ModuleType) and not name.startswith(own)
    ]


def _module_items(module: ModuleType) -> list[tuple[str, Any]]:
    try:
        return list(vars(module).items())
    except Exception:
        return []


def install(rec: Recorder, numerics: bool = False) -> None:
    """Install every wrapper (no-op when installed) and point them at ``rec``; with
    ``numerics``, the value-summary wrappers of :mod:`warptrace.record.numerics` go around
    the ordinary ones (without it they are not installed at all)."""
    if _installed:
        state.bind(rec)
        return
    state.bind(rec)

    def made(name: str, factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return wrap_factory(name, factory) if numerics else factory

    for owner, name, factory in _class_patches():
        original = owner.__dict__.get(name)
        if original is None:
            continue
        wrapper = made(f"{owner.__name__}.{name}", factory)(original)
        setattr(owner, name, wrapper)
        _installed.append(Patch(owner, name, original, wrapper))

    # module functions: one wrapper per distinct original, bound under every alias
    wrappers: dict[int, tuple[Any, Any]] = {}
    for module, name, factory in _FUNCTIONS:
        original = getattr(module, name, None)
        if original is None or getattr(original, ORIGINAL_ATTR, None) is not None:
            continue
        if id(original) not in wrappers:
            wrappers[id(original)] = (original, made(name, factory)(original))
    for module in _modules():
        for name, value in _module_items(module):
            hit = wrappers.get(id(value))
            if hit is None or hit[0] is not value:
                continue
            try:
                setattr(module, name, hit[1])
            except Exception:
                continue
            _installed.append(Patch(module, name, value, hit[1]))


def uninstall() -> None:
    """Unbind the recorder and restore every replaced attribute to its original object."""
    state.bind(None)
    for patch in reversed(_installed):
        if isinstance(patch.owner, type):
            if patch.owner.__dict__.get(patch.name) is patch.wrapper:
                setattr(patch.owner, patch.name, patch.original)
        elif getattr(patch.owner, patch.name, None) is patch.wrapper:
            setattr(patch.owner, patch.name, patch.original)
    # wrappers picked up while tracing ran (`from warp import launch` after start())
    wrappers = {id(p.wrapper): p for p in _installed if not isinstance(p.owner, type)}
    if wrappers:
        for module in _modules():
            try:  # the common case first, in C: no wrapper among the module's values
                if wrappers.keys().isdisjoint(map(id, vars(module).values())):
                    continue
            except Exception:
                continue
            for name, value in _module_items(module):
                bound = wrappers.get(id(value))
                if bound is not None and bound.wrapper is value:
                    try:
                        setattr(module, name, bound.original)
                    except Exception:
                        continue
    _installed.clear()


def installed() -> list[Patch]:
    """The patches in place now (for tests and ``show``)."""
    return list(_installed)


__all__ = ["Patch", "install", "installed", "uninstall"]
