"""The kernel-source model: the one place where Warp kernel source is parsed and questioned.

Pure Python (no Warp import): the recorder (``warptrace.record.kernels``) gathers the
sources of a kernel and of the ``@wp.func`` callees and custom adjoints it reaches, and
calls :func:`build`; the analyzer reads the stored model back (or rebuilds it from the
kernel source of an older trace). Neither side parses source: they ask the model.

- :class:`KernelSource` - the model of one kernel: :class:`FunctionFacts` of the kernel
  and of each function of its call tree, JSON round trip, line texts, and the questions
  the rules ask (stores repeated, arrays passed to replayed functions, stores after a
  read, values the adjoint needs, which kernel arguments a value depends on, in-place
  updates at a line).
- :class:`FunctionFacts` - the syntax facts of one body, as plain dataclasses:
  statements, loops (static trip count or dynamic), augmented assignments (array
  element, local, component), component assignments of local vectors/matrices,
  ``wp.where``/``wp.select``/conditional-expression operands, calls (``sqrt``, ``log``,
  casts, ...), divisions, comparisons, ``wp.adjoint[x] =``/``+=`` in custom adjoints, atomics whose result is used.
- :mod:`.local_flow` - def-use of locals, the state a loop carries from one iteration to
  the next, the history of local vector components (what the facts record about them).
- :mod:`.guards` - what "possibly zero" and "possibly non-finite" mean, from syntax.
- :mod:`.unroll` - whether Warp unrolls a loop (its own decision, restated on the AST).
- :mod:`.replay` - what the adjoint's replay sees after a loop Warp does not unroll (the
  facts' ``stale_reads``, WT403).
- :mod:`.elements` - which elements one thread reads and then overwrites, and whether an
  adjoint needs what it read (:meth:`KernelSource.overwrite`, WT102).
- :mod:`.result_uses` - how a function uses the value an atomic (or a user function) returns:
  as an index, in a branch, as a factor, or as data.
"""

from __future__ import annotations

from warptrace.kernel_source.facts import (
    FUNC,
    FUNC_GRAD,
    FUNC_REPLAY,
    KERNEL,
    AdjointAssign,
    AtomicCall,
    AugAssign,
    Call,
    Comparison,
    ComponentAssign,
    Division,
    FunctionFacts,
    FunctionSource,
    Loop,
    Select,
    StaleRead,
    Statement,
    function_facts,
)
from warptrace.kernel_source.model import MODEL_VERSION, KernelSource, build
from warptrace.kernel_source.stores import NOT_REPLAYED, RESULT_DISCARDED, RESULT_USED
from warptrace.kernel_source.syntax import parse_function

__all__ = [
    "FUNC",
    "FUNC_GRAD",
    "FUNC_REPLAY",
    "KERNEL",
    "MODEL_VERSION",
    "NOT_REPLAYED",
    "RESULT_DISCARDED",
    "RESULT_USED",
    "AdjointAssign",
    "AtomicCall",
    "AugAssign",
    "Call",
    "Comparison",
    "ComponentAssign",
    "Division",
    "FunctionFacts",
    "FunctionSource",
    "KernelSource",
    "Loop",
    "Select",
    "StaleRead",
    "Statement",
    "build",
    "function_facts",
    "parse_function",
]
