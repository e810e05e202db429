"""User call sites: the first frame outside Warp and warptrace, interned to small ints.

A finding is only useful if it points at the line the user edits, so every event and
every allocation carries a ``site`` id. The frame walk runs on every recorded event, so
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
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import warp

import warptrace
from warptrace.record.compiled import compiled_piece

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

# id(code object) -> True when the frame belongs to Warp/warptrace. Shared by all
# sessions: it depends only on file names. _skip_keep holds the code objects, so that
# their ids stay unique.
_skip_code: dict[int, bool] = {}
_skip_keep: list[CodeType] = []

# `x = ...`, `state.q = ...`, `self.x: wp.array = ...`, `buffers[i] = ...`; not `x == y`,
# not `x += 1`, not tuple targets.
_LABEL = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\]=]*\])*)\s*(?::[^=]*)?=(?!=)")


def _is_internal(code: CodeType) -> bool:
    filename = code.co_filename
    internal = (
        (filename.startswith(_SKIP_PREFIXES) and not filename.startswith(_WARP_USER_CODE))
        or _WRAPT_MARK in filename
        or filename.startswith("<frozen ")  # runpy/importlib running `-m` or an import
    )
    if not internal and not os.path.isabs(filename) and filename[:1] != "<":
        # relative names come from scripts started with a relative path
        internal = os.path.abspath(filename).startswith(_SKIP_PREFIXES)
    if id(code) not in _skip_code:
        _skip_keep.append(code)
    _skip_code[id(code)] = internal
    return internal


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
        # (id(code), f_lasti) -> site_id; the code objects are kept alive in _skip_keep
        self.by_pos: dict[tuple[int, int], int] = {}
        self._by_key: dict[tuple[str, int, str], int] = {}
        # site_id -> (file, line, function, label, co_filename)
        self.info: list[tuple[str, int, str, str, str]] = []
        # site_id -> the {"file", "lineno", "func"} dict Warp's tape keeps as launch metadata.
        # Shared by all launches from the site (Warp only reads it, in Tape.visualize).
        self.caller_dicts: list[dict[str, Any]] = []
        # the compiled frame walk (_fastlaunch.caller_walk), or None: the Python loops below
        self._walk: Callable[..., Any] | None = compiled_piece("caller_walk")
        # the walk's table (code id -> internal), for the compiled wrappers, which call the
        # walk directly (the same dict object for the whole process: never rebound)
        self.skip_code = _skip_code

    def rebind(self, sink: Callable[[tuple[Any, ...]], None]) -> None:
        """New rows go to ``sink`` (the recorder swapped its buffers)."""
        self._sink = sink

    def site_of(self, frame: FrameType | None) -> int:
        """Site id of a *user* frame (``by_pos`` must hold user positions only: the launch
        wrapper takes a hit on its caller's position as "the caller is the user's line")."""
        if frame is None:
            return -1
        code = frame.f_code
        key = (id(code), frame.f_lasti)
        site = self.by_pos.get(key)
        if site is None:
            if id(code) not in _skip_code:
                _is_internal(code)  # keeps the code object alive: its id is in the key
            site = self._intern(code, frame.f_lineno or 0)
            self.by_pos[key] = site
        return site

    def caller(self, depth: int = 1) -> int:
        """Site id of the user frame above the caller's ``depth`` frames (-1 if none)."""
        walk = self._walk
        if walk is not None:  # the same walk in C; None where a new code or position needs Python
            site = walk(depth + 1, _skip_code, self.by_pos, None, None)
            if site is not None:
                return site
        frame: FrameType | None = sys._getframe(depth + 1)
        skip = _skip_code
        while frame is not None:
            code = frame.f_code
            internal = skip.get(id(code))
            if internal is None:
                internal = _is_internal(code)
            if not internal:
                site = self.by_pos.get((id(code), frame.f_lasti))
                if site is None:
                    site = self.site_of(frame)
                return site
            frame = frame.f_back
        return -1

    def caller_outside(self, prefixes: tuple[str, ...], depth: int = 1) -> int:
        """:meth:`caller`, skipping also the frames of files under ``prefixes`` (another
        framework's package: a hook PyTorch calls from inside ``loss.backward()`` belongs to
        the user line that called it)."""
        frame: FrameType | None = sys._getframe(depth + 1)
        while frame is not None:
            code = frame.f_code
            internal = _skip_code.get(id(code))
            if internal is None:
                internal = _is_internal(code)
            if not internal and not code.co_filename.startswith(prefixes):
                return self.site_of(frame)
            frame = frame.f_back
        return -1

    def alloc_caller(self, constructor: CodeType, depth: int) -> tuple[int, bool]:
        """Like :meth:`caller`, plus whether the user line made *this* array directly.

        The line's assignment target names the array only when the user called an
        array-making API (``wp.zeros``, ``wp.array``, ``clone``, a slice, ...) and the
        array is that call's result: an array built inside another array's
        construction (the staging array of ``wp.array(data=...)``) passes
        ``wp.array.__init__`` twice, and a buffer made inside ``wp.optim.SGD(...)`` is
        not called "optimizer".

        The walk starts above the caller's ``depth`` frames (all warptrace's own); the
        frame below the start counts as the callee of the first frame examined.
        """
        walk = self._walk
        if walk is not None:  # the same walk in C; None where a new code or position needs Python
            found = walk(depth + 1, _skip_code, self.by_pos, constructor, _ARRAY_MAKERS)
            if found is not None:
                return found
        called: CodeType | None = sys._getframe(depth).f_code
        frame: FrameType | None = sys._getframe(depth + 1)
        skip = _skip_code
        constructors = 0
        while frame is not None:
            code = frame.f_code
            if code is constructor:
                constructors += 1
            internal = skip.get(id(code))
            if internal is None:
                internal = _is_internal(code)
            if not internal:
                direct = called is constructor or (called is not None and called.co_name in _ARRAY_MAKERS)
                site = self.by_pos.get((id(code), frame.f_lasti))
                if site is None:
                    site = self.site_of(frame)
                return site, constructors <= 1 and direct
            called = code
            frame = frame.f_back
        return -1, False

    def _intern(self, code: CodeType, line: int) -> int:
        filename = code.co_filename
        function = code.co_name
        key = (filename, line, function)
        site = self._by_key.get(key)
        if site is not None:
            return site
        text = linecache.getline(filename, line).strip() if line > 0 else ""
        label = label_of(text)
        path = filename if filename[:1] == "<" else os.path.abspath(filename)
        with self._lock:
            site = self._by_key.get(key)
            if site is None:
                site = self._add(key, path, line, function, text, label, filename)
        return site

    def _add(self, key: tuple[str, int, str], path: str, line: int, function: str, text: str, label: str,
             filename: str) -> int:  # fmt: skip
        site = len(self.info)
        self.info.append((path, line, function, label, filename))
        self.caller_dicts.append({"file": filename, "lineno": line, "func": function})
        self._by_key[key] = site
        self._sink((site, path, line, function, text, label))
        return site

    def label(self, site: int) -> str:
        return self.info[site][3] if site >= 0 else ""
