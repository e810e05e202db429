"""warptrace: find gradient bugs in NVIDIA Warp programs from a recorded launch graph.

Importing this package patches nothing. ``start()``/``trace()`` install the recorder,
``stop()`` removes it and restores every original Warp attribute.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

__version__ = "0.1.0"

# The subpackage warptrace.trace shares its name with the trace() function below. Import
# it first (it is empty and cheap) so the function, defined later, is what the package
# attribute names; later imports of warptrace.trace.* do not rebind the attribute.
import warptrace.trace  # noqa: F401  (pyarrow is not imported by this)

if TYPE_CHECKING:
    from os import PathLike

    from warptrace.analysis.diff import TraceDiff
    from warptrace.analysis.report import Report
    from warptrace.trace.reader import Trace

__all__ = ["__version__", "analyze", "diff", "load", "start", "stop", "trace"]


def start(path: str | PathLike[str] = "warptrace.wtrace", *, numerics: bool = False, **meta: Any) -> None:
    """Start recording every Warp memory effect into the trace directory ``path`` (idempotent).

    ``numerics=True`` also summarizes the values every launch, copy and memset writes
    (``--check-numerics``: rules WT501-WT504 and the gradient health timeline).
    ``record_steps="0-4,100-104"`` records only those steps, ``record_last=K`` keeps the last
    ``K`` (``--record-steps``, ``--record-last``: docs/guide/long-runs.md)."""
    from warptrace.record import recorder

    recorder.start(path, numerics=numerics, **meta)


def stop(exit_status: int | None = None, error: str | None = None) -> str | None:
    """Stop recording, finish the trace on disk and restore Warp; returns the trace path (idempotent)."""
    from warptrace.record import recorder

    return recorder.stop(exit_status=exit_status, error=error)


@contextmanager
def trace(
    path: str | PathLike[str] = "warptrace.wtrace", *, numerics: bool = False, **meta: Any
) -> Iterator[str]:
    """``with warptrace.trace("run.wtrace"):`` records the block (``numerics=True``: see :func:`start`)."""
    start(path, numerics=numerics, **meta)
    error = None
    try:
        yield str(path)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        stop(error=error)


def load(path: str | PathLike[str]) -> Trace:
    """Load a trace directory (no Warp needed)."""
    from warptrace.trace.reader import read_trace

    return read_trace(path)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext warptrace`` registers the ``%%warptrace`` cell magic (IPython imported only then)."""
    from warptrace.notebook import load_ipython_extension as load

    load(ipython)


def analyze(path: str | PathLike[str]) -> Report:
    """Analyze a trace directory and return the report (no Warp needed)."""
    from warptrace.analysis.report import analyze_trace

    return analyze_trace(load(path))


def diff(before: str | PathLike[str], after: str | PathLike[str]) -> TraceDiff:
    """Compare two trace directories (no Warp needed): findings resolved / introduced / unchanged
    and the structural changes between the runs; ``.exit_code()`` is the CI gate."""
    from warptrace.analysis.diff import diff_traces

    return diff_traces(lambda: load(before), lambda: load(after))
