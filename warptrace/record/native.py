"""The recorder's compiled twin: its hot modules built by Cython from their own source.

The modules named in :data:`NATIVE_MODULES` (the wrappers, the session, identity and the
call-site walk) are plain Python, and the only source of what is recorded. ``setup.py``
compiles the same files with Cython (no hand-written C; ``docs/architecture-native.md``
says why) into extension modules that sit beside them (``launch.cpython-311-....so``), and
Python's import system prefers an extension module to the source of the same name. So
which one runs is decided here, once per process, when :mod:`warptrace.record` is first
imported (before any of these modules is):

- the compiled modules, when every one of them is built for this interpreter and the
  build's stamp (``native-<cache tag>.json``, written by ``setup.py`` once all of them
  built) holds the SHA-256 of each module's current source: an edited checkout whose build
  is older than its ``.py`` files runs the source, not a stale build;
- else, or with ``WARPTRACE_PURE_PYTHON=1``, the source of every one of them: a finder put
  first on ``sys.meta_path`` loads their ``.py`` files. All or none: the compiled and the
  interpreted functions count their frames differently (:data:`FRAMES`).

:data:`REASON` says why the source runs (``""`` when compiled); :func:`summary` is the
line tools print.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from types import ModuleType

PURE_PYTHON_ENV = "WARPTRACE_PURE_PYTHON"

# The modules compiled by setup.py (and nothing else of warptrace): the wrappers and what
# every recorded event passes through. This list is read by setup.py.
NATIVE_MODULES = (
    "warptrace.record.callsite",
    "warptrace.record.identity",
    "warptrace.record.session",
    "warptrace.record.wrap.common",
    "warptrace.record.wrap.launch",
    "warptrace.record.wrap.memory",
    "warptrace.record.wrap.allocation",
    "warptrace.record.wrap.tape",
    "warptrace.record.wrap.plans",
)

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../warptrace


def source_path(name: str, root: str = _PACKAGE_ROOT) -> str:
    """The ``.py`` file of module ``name`` (under the ``warptrace`` folder ``root``)."""
    return os.path.join(root, *name.split(".")[1:]) + ".py"


def source_digest(path: str) -> str:
    with open(path, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()


def stamp_path(root: str = _PACKAGE_ROOT, tag: str | None = None) -> str:
    """Where ``setup.py`` records what it compiled for the interpreter of cache tag ``tag``."""
    return os.path.join(root, "record", f"native-{tag or sys.implementation.cache_tag}.json")


def stamp_of(root: str = _PACKAGE_ROOT) -> dict[str, str]:
    """What the stamp of a build for ``root`` holds: module name -> SHA-256 of its source."""
    return {name: source_digest(source_path(name, root)) for name in NATIVE_MODULES}


def _compiled_path(name: str) -> str | None:
    folder = os.path.dirname(source_path(name))
    stem = name.rsplit(".", 1)[1]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, stem + suffix)
        if os.path.exists(path):
            return path
    return None


def _why_not_compiled() -> str:
    """'' when the compiled modules are usable, else why not (a short phrase)."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return f"{PURE_PYTHON_ENV} is set"
    if sys.implementation.name != "cpython":
        return f"{sys.implementation.name} (the compiled modules are built for CPython)"
    try:
        with open(stamp_path()) as stamp_file:
            built = json.load(stamp_file).get("modules", {})
    except (OSError, ValueError):
        return f"not built for this Python ({sys.implementation.cache_tag})"
    for name in NATIVE_MODULES:
        if _compiled_path(name) is None:
            return f"{name} not built"
        try:
            if built.get(name) != source_digest(source_path(name)):
                return f"the build of {name} is older than its source (rebuild: pip install -e .)"
        except OSError:
            return f"{name} has no source"
    return ""


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Loads the ``.py`` file of a native module even where its compiled twin is built."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in NATIVE_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


REASON = _why_not_compiled()
COMPILED = not REASON
# Frames each recorder function of the native modules has on the stack: 1 as Python source,
# 0 compiled (a compiled function runs without a frame). Every ``sys._getframe(n)`` of these
# modules counts ``n`` in their own frames, times this.
FRAMES = 0 if COMPILED else 1

if not COMPILED and not any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _SourceFinder())


def summary() -> str:
    """One line: which recorder modules run (what the benchmarks print)."""
    if COMPILED:
        return f"recorder: compiled modules (Cython, {sys.implementation.cache_tag})"
    return f"recorder: Python source ({REASON})"


__all__ = [
    "COMPILED", "FRAMES", "NATIVE_MODULES", "PURE_PYTHON_ENV", "REASON", "source_digest", "source_path",
    "stamp_of", "stamp_path", "summary",
]  # fmt: skip
