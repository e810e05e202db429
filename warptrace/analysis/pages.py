"""Memory pages for the analysis' big temporaries.

NumPy asks the kernel to back every array of 4 MiB or more with transparent huge pages
(``madvise(MADV_HUGEPAGE)``). Where THP runs in ``madvise`` mode with direct compaction
(``/sys/kernel/mm/transparent_hugepage/{enabled,defrag}`` both ``madvise``, the default of
many distributions), such an allocation can stall in the kernel while it compacts memory
into 2 MiB pages. The analysis allocates and frees gigabytes of short-lived per-row arrays
(the drone trace: 6.7M access rows), and on the development machine that advice cost 4-5
CPU s of system time, against under 2 s with ordinary pages (`docs/dev/history.md`).
:func:`small_pages` turns the advice off while an analysis runs and then restores it: the
setting is NumPy's, process-wide, and the rest of the program keeps its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
from collections.abc import Callable, Iterator

import pyarrow as pa


def _advice_setter() -> Callable[[bool], bool] | None:
    """NumPy's ``_set_madvise_hugepage(enabled) -> previous`` (``numpy._core`` from NumPy 2,
    ``numpy.core`` before), or None where this NumPy has none."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        setter = getattr(module, "_set_madvise_hugepage", None)
        if setter is not None:
            return setter  # type: ignore[no-any-return,unused-ignore]
    return None


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """Within the block, new NumPy arrays get ordinary pages (no huge-page advice)."""
    setter = _advice_setter()
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)


# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_INT_MAX = 2**31 - 1


def reuse_freed_memory() -> bool:
    """For a process that is ours (the CLI's analyze, diff, bisect, export, and a run's
    analysis after the program ended): glibc serves big blocks from its heap and keeps
    freed memory for reuse, instead of a fresh ``mmap`` (zeroed by the kernel, page fault
    by page fault) for every temporary of 128 KiB or more and ``munmap`` on free.

    Arrow's new buffers (the trace's tables as read, the expansion's events) come from the
    same heap (its system pool instead of its own mimalloc arenas), so that the memory Arrow
    frees is reused by NumPy's temporaries and the other way round.

    Process-wide and not undoable, so the library API never calls it. The drone trace:
    system time 1.8 -> 0.8 s, peak RSS +4 % (docs/dev/history.md); Arrow's pool: peak -30 MiB.
    False where there is no glibc ``mallopt`` (musl, macOS, Windows): nothing changes."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if not (mallopt(_M_MMAP_THRESHOLD, _INT_MAX) and mallopt(_M_TRIM_THRESHOLD, _INT_MAX)):
        return False
    pa.set_memory_pool(pa.system_memory_pool())
    return True
