"""User call sites: the first frame of the user's code, interned to small ints.

A finding is only useful if it points at the line the user edits, so every event and
every allocation carries a ``site`` id. Frames fall in three kinds (:func:`frame_kind`):

- *internal*: Warp and warptrace themselves (and wrapt, contextlib, the frozen import
  machinery). Never shown: a walk passes them.
- *library*: installed packages (any ``site-packages`` or ``dist-packages`` folder) and the
  standard library, e.g. Newton's solvers calling ``wp.launch``. Not the line the user
  edits, but worth naming: the walk passes them too and keeps the innermost one.
- *user*: everything else, plus the script being run (``__main__``, also when it is a
  module run with ``-m`` from an installed package) and Warp's own examples and tests.

The site of an event is its first user frame; when a library frame lies between it and
Warp, the site is the *pair* (user line, innermost library line): the ``sites`` row of the
user line names the library line's own row in ``library_site`` ("solver.step(...) on line
48, inside newton/.../solver_featherstone.py:594"). A stack with library frames only (a
thread of the library's own) gets the library line's row. Two environment variables,
read when tracing starts for the first time in a process, move the boundary:
``WARPTRACE_USER_PATHS`` (folders or files whose code is the user's even inside
``site-packages``, e.g. a package being developed) and ``WARPTRACE_LIBRARY_PATHS``
(folders whose code is library code, e.g. a vendored package next to the script); both
``os.pathsep``-separated. The frame walk runs on every recorded event, so
it is built for speed: whether a code object belongs to Warp/warptrace is decided once
per code object, and ``(code, instruction offset) -> site_id`` is a dict hit after the
first time.

Every cache is keyed by ``id(code)``, never by the code object: hashing a code object
hashes its constants (nested code objects included) on every lookup, ~0.3-0.8 µs for a
Warp function and ~80 µs for the code of a large module. The code objects are kept
alive in :data:`_skip_keep`, so an id is never reused while it is a key. Positions use
``f_lasti`` (O(1)) rather than ``f_lineno`` (a scan of the line table).

The site of an allocation also names the array: ``stage1 = wp.zeros(...)`` labels the
allocation "stage1", ``state.q = wp.zeros(...)`` "state.q". Analysis messages use the
label instead of an address.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import sys
import sysconfig
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import warp

import warptrace
from warptrace.record.native import FRAMES

# Frames in these trees are never the user's: Warp itself, warptrace (including the
# runner that exec's the user script), wrapt, and contextlib (``with`` helpers).
_SKIP_PREFIXES: tuple[str, ...] = (
    *tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (warp.__file__, warptrace.__file__)),
    os.path.abspath(contextlib.__file__),
)
_WRAPT_MARK = os.sep + "wrapt" + os.sep
# ...except the programs that ship inside the Warp package: `python -m warp.examples.X`
# runs user code that happens to live under warp/.
_WARP_USER_CODE: tuple[str, ...] = tuple(
    os.path.join(os.path.dirname(os.path.abspath(warp.__file__)), folder) + os.sep
    for folder in ("examples", "tests")
)

# Warp functions whose result is a new array object (what `name = <call>` names), besides
# wp.array's own constructor.
_ARRAY_MAKERS = frozenset(
    {
        "__getitem__", "array", "zeros", "zeros_like", "ones", "ones_like", "empty",
        "empty_like", "full", "full_like", "clone", "from_numpy", "from_ptr", "reshape", "flatten",
        "view", "transpose", "contiguous", "to", "from_torch", "from_jax", "from_paddle",
        "from_dlpack", "_init_new", "_init_from_ptr", "_init_from_data",
    }
)  # fmt: skip

# What a frame's code is (the values of _skip_code).
USER = 0
INTERNAL = 1
LIBRARY = 2
USER_PATHS_ENV = "WARPTRACE_USER_PATHS"
LIBRARY_PATHS_ENV = "WARPTRACE_LIBRARY_PATHS"
_PACKAGE_DIRS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


def _roots(value: str) -> tuple[str, ...]:
    """Absolute path prefixes from an os.pathsep-separated list (a folder gets a trailing sep)."""
    roots = []
    for part in value.split(os.pathsep):
        if part.strip():
            path = os.path.abspath(os.path.expanduser(part.strip()))
            roots.append(path + os.sep if os.path.isdir(path) else path)
    return tuple(roots)


def _stdlib_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib") if paths.get(key)}
    return tuple(sorted(found))


# Read once per process, like the answers they give (see _skip_code).
_USER_ROOTS = _roots(os.environ.get(USER_PATHS_ENV, ""))
_LIBRARY_ROOTS = _roots(os.environ.get(LIBRARY_PATHS_ENV, "")) + _stdlib_roots()

# id(code object) -> USER, INTERNAL or LIBRARY. Shared by all sessions: it depends only on
# file names. _skip_keep holds the code objects, so that their ids stay unique.
_skip_code: dict[int, int] = {}
_skip_keep: list[CodeType] = []

# `x = ...`, `state.q = ...`, `self.x: wp.array = ...`, `buffers[i] = ...`; not `x == y`,
# not `x += 1`, not tuple targets.
_LABEL = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\]=]*\])*)\s*(?::[^=]*)?=(?!=)")


def frame_kind(filename: str) -> int:
    """USER, INTERNAL or LIBRARY for code from ``filename`` (see the module docstring)."""
    if filename[:1] == "<":
        return INTERNAL if filename.startswith("<frozen ") else USER  # runpy/importlib; exec'd code
    path = filename if os.path.isabs(filename) else os.path.abspath(filename)  # a relative script name
    if path.startswith(_WARP_USER_CODE):
        return USER  # `python -m warp.examples.X` runs user code that happens to live under warp/
    if path.startswith(_SKIP_PREFIXES) or _WRAPT_MARK in path:
        return INTERNAL
    if _USER_ROOTS and path.startswith(_USER_ROOTS):
        return USER
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main and os.path.abspath(main) == path:
        return USER  # the program being run, even a module of an installed package run with -m
    if path.startswith(_LIBRARY_ROOTS) or any(mark in path for mark in _PACKAGE_DIRS):
        return LIBRARY
    return USER


def _classify(code: CodeType) -> int:
    kind = frame_kind(code.co_filename)
    if id(code) not in _skip_code:
        _skip_keep.append(code)
    _skip_code[id(code)] = kind
    return kind


def label_of(text: str) -> str:
    """The assignment target on a source line ("stage1", "state.q", "self.x") or ""."""
    if text.endswith(","):  # a keyword argument line inside a multi-line call
        return ""
    match = _LABEL.match(text)
    return match.group(1) if match else ""


class Sites:
    """Interned call sites; new ones are handed to ``sink`` as ``sites`` table rows."""

    def __init__(self, sink: Callable[[tuple[Any, ...]], None], lock: Any) -> None:
        self._sink = sink
        self._lock = lock  # the recorder's: interning appends to its buffers
        # Position -> site_id; the code objects are kept alive in _skip_keep. A user frame with no
        # library frame below it: (id(code), f_lasti) (only those: the launch wrapper takes a hit
        # on its caller's position as "the caller is the user's line"); a user frame with the
        # innermost library frame below it: (id(code), f_lasti, id(library code), its f_lasti);
        # a library frame with no user frame above it: (0, -1, id(library code), its f_lasti).
        self.by_pos: dict[tuple[int, ...], int] = {}
        self._by_key: dict[tuple[str, int, str, int], int] = {}
        # site_id -> (file, line, function, label, co_filename). The label is the one an array
        # made directly at the site takes: for a (user, library) pair, the library line's.
        self.info: list[tuple[str, int, str, str, str]] = []
        # site_id -> the {"file", "lineno", "func"} dict Warp's tape keeps as launch metadata.
        # Shared by all launches from the site (Warp only reads it, in Tape.visualize).
        self.caller_dicts: list[dict[str, Any]] = []

    def rebind(self, sink: Callable[[tuple[Any, ...]], None]) -> None:
        """New rows go to ``sink`` (the recorder swapped its buffers)."""
        self._sink = sink

    def site_of(self, frame: FrameType | None, library: FrameType | None = None) -> int:
        """Site id of a *user* frame, with the innermost library frame below it (or None); of a
        library frame alone when ``frame`` is None (a stack without a user frame)."""
        if frame is None and library is None:
            return -1
        if library is None:
            code = frame.f_code  # type: ignore[union-attr]
            key: tuple[int, ...] = (id(code), frame.f_lasti)  # type: ignore[union-attr]
        else:
            inner = library.f_code
            key = (id(frame.f_code), frame.f_lasti) if frame is not None else (0, -1)
            key += (id(inner), library.f_lasti)
        site = self.by_pos.get(key)
        if site is None:
            for each in (frame, library):
                if each is not None and id(each.f_code) not in _skip_code:
                    _classify(each.f_code)  # keeps the code object alive: its id is in the key
            lib_site = -1 if library is None else self._intern(library.f_code, library.f_lineno or 0)
            if frame is None:
                site = lib_site
            else:
                site = self._intern(frame.f_code, frame.f_lineno or 0, lib_site)
            self.by_pos[key] = site
        return site

    def caller(self, depth: int = 1) -> int:
        """Site id of the user frame above the caller's ``depth`` frames (-1 if none).

        ``depth`` and every frame count of this module count the frames of warptrace's
        functions as Python source has them; compiled, they have none (``native.FRAMES``)."""
        frame: FrameType | None = sys._getframe((depth + 1) * FRAMES)
        skip = _skip_code
        library: FrameType | None = None
        while frame is not None:
            code = frame.f_code
            kind = skip.get(id(code))
            if kind is None:
                kind = _classify(code)
            if kind == USER:
                if library is None:
                    site = self.by_pos.get((id(code), frame.f_lasti))
                    return site if site is not None else self.site_of(frame)
                return self.site_of(frame, library)
            if kind == LIBRARY and library is None:
                library = frame
            frame = frame.f_back
        return self.site_of(None, library)

    def caller_outside(self, prefixes: tuple[str, ...], depth: int = 1) -> int:
        """:meth:`caller`, skipping also the frames of files under ``prefixes`` (another
        framework's package: a hook PyTorch calls from inside ``loss.backward()`` belongs to
        the user line that called it); the first user frame, else the first library frame."""
        frame: FrameType | None = sys._getframe((depth + 1) * FRAMES)
        library: FrameType | None = None
        while frame is not None:
            code = frame.f_code
            kind = _skip_code.get(id(code))
            if kind is None:
                kind = _classify(code)
            if kind != INTERNAL and not code.co_filename.startswith(prefixes):
                if kind == USER:
                    return self.site_of(frame)
                if library is None:
                    library = frame
            frame = frame.f_back
        return self.site_of(library) if library is not None else -1

    def alloc_caller(self, constructor: CodeType, depth: int, maker: bool = True) -> tuple[int, bool]:
        """Like :meth:`caller`, plus whether the line the array is named by made *this* array
        directly: the innermost library line when there is one (``self.M = wp.zeros(...)``
        inside a solver's constructor), else the user line.

        The line's assignment target names the array only when the code called an
        array-making API (``wp.zeros``, ``wp.array``, ``clone``, a slice, ...) and the
        array is that call's result: an array built inside another array's
        construction (the staging array of ``wp.array(data=...)``) passes
        ``wp.array.__init__`` twice, and a buffer made inside ``wp.optim.SGD(...)`` is
        not called "optimizer".

        The walk starts above the caller's ``depth`` frames (all warptrace's own, counted as
        in :meth:`caller`); the first frame examined is the caller of the wrapper that asks,
        an array-making API itself when ``maker`` (the wrapper's name is one, as
        ``_init_new``).
        """
        frame: FrameType | None = sys._getframe((depth + 1) * FRAMES)
        direct = maker  # whether the frame below the one examined makes an array
        skip = _skip_code
        constructors = 0
        library: FrameType | None = None
        library_direct = False
        while frame is not None:
            code = frame.f_code
            if code is constructor:
                constructors += 1
            kind = skip.get(id(code))
            if kind is None:
                kind = _classify(code)
            if kind != INTERNAL:
                made = constructors <= 1 and direct
                if kind == USER:
                    if library is not None:
                        return self.site_of(frame, library), library_direct
                    site = self.by_pos.get((id(code), frame.f_lasti))
                    return (site if site is not None else self.site_of(frame)), made
                if library is None:
                    library, library_direct = frame, made
            direct = code is constructor or code.co_name in _ARRAY_MAKERS
            frame = frame.f_back
        if library is not None:
            return self.site_of(None, library), library_direct
        return -1, False

    def _intern(self, code: CodeType, line: int, library_site: int = -1) -> int:
        filename = code.co_filename
        # a library line is named by its qualified name ("SolverFeatherstone._allocate_model_aux_vars"):
        # the class says which library object a buffer made there belongs to
        library = _skip_code.get(id(code)) == LIBRARY
        function = getattr(code, "co_qualname", code.co_name) if library else code.co_name
        key = (filename, line, function, library_site)
        site = self._by_key.get(key)
        if site is not None:
            return site
        text = linecache.getline(filename, line).strip() if line > 0 else ""
        label = label_of(text)
        path = filename if filename[:1] == "<" else os.path.abspath(filename)
        with self._lock:
            site = self._by_key.get(key)
            if site is None:
                site = self._add(key, path, line, function, text, label, filename, library_site)
        return site

    def _add(self, key: tuple[str, int, str, int], path: str, line: int, function: str, text: str, label: str,
             filename: str, library_site: int) -> int:  # fmt: skip
        site = len(self.info)
        # an array made at a (user, library) site is made by the library line: its label
        own_label = self.info[library_site][3] if library_site >= 0 else label
        self.info.append((path, line, function, own_label, filename))
        self.caller_dicts.append({"file": filename, "lineno": line, "func": function})
        self._by_key[key] = site
        self._sink((site, path, line, function, text, label, library_site))
        return site

    def label(self, site: int) -> str:
        return self.info[site][3] if site >= 0 else ""
