"""``KernelSource``: everything warptrace knows about the source of one kernel.

The recorder builds it once per kernel from the kernel and the ``@wp.func`` callees,
``@wp.func_grad`` and ``@wp.func_replay`` bodies it reaches, and stores it in the trace
as JSON (``kernels.source_model``); the analyzer loads it back, or, for traces written
before it existed (schema version 1), rebuilds it from the stored kernel source. Rules
ask it questions; they never parse source themselves.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from functools import cached_property
from typing import Any

from warptrace.kernel_source import facts as F
from warptrace.kernel_source import linearity, stores
from warptrace.kernel_source.facts import FunctionFacts, FunctionSource, function_facts
from warptrace.kernel_source.syntax import parse_function

__all__ = ["MODEL_VERSION", "KernelSource", "build"]

# Version of the JSON layout inside the trace (independent of the trace schema version).
MODEL_VERSION = 1

_NESTED: dict[str, type] = {
    "statements": F.Statement,
    "loops": F.Loop,
    "aug_assigns": F.AugAssign,
    "component_assigns": F.ComponentAssign,
    "selects": F.Select,
    "calls": F.Call,
    "divisions": F.Division,
    "comparisons": F.Comparison,
    "adjoint_assigns": F.AdjointAssign,
    "atomics": F.AtomicCall,
}


def build(kernel: FunctionSource, functions: tuple[FunctionSource, ...] = ()) -> KernelSource:
    """Parse ``kernel`` and every function of its call tree once."""
    seen: set[tuple[str, str, str, int]] = set()
    facts = []
    for function in functions:
        key = (function.role, function.name, function.file, function.line)
        if key not in seen:
            seen.add(key)
            facts.append(function_facts(function))
    return KernelSource(function_facts(kernel), tuple(facts))


@dataclass(frozen=True)
class KernelSource:
    """The kernel's facts and those of the functions it reaches (callees, custom adjoints)."""

    kernel: FunctionFacts
    functions: tuple[FunctionFacts, ...] = ()

    # ---------------------------------------------------------------- serialization

    def to_json(self) -> str:
        return json.dumps({"version": MODEL_VERSION, **asdict(self)}, separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> KernelSource | None:
        """The model stored in a trace; None when ``text`` is empty or of an unknown layout."""
        if not text:
            return None
        try:
            data = json.loads(text)
            if data.get("version") != MODEL_VERSION:
                return None
            return KernelSource(_function(data["kernel"]), tuple(_function(f) for f in data["functions"]))
        except (ValueError, KeyError, TypeError):
            return None

    # ---------------------------------------------------------------- lines

    @property
    def all_functions(self) -> tuple[FunctionFacts, ...]:
        return (self.kernel, *self.functions)

    def custom_adjoints(self) -> tuple[FunctionFacts, ...]:
        """The ``@wp.func_grad`` bodies reached by the kernel."""
        return tuple(f for f in self.functions if f.role == F.FUNC_GRAD)

    @cached_property
    def _def_index(self) -> int:
        """Index in the kernel source of the ``def`` line (the source starts with decorators)."""
        tree = parse_function(self.kernel.source)
        if tree is not None:
            return tree.lineno - 1
        for index, text in enumerate(self.kernel.source.splitlines()):
            if text.lstrip().startswith(("def ", "async def ")):
                return index
        return 0

    @cached_property
    def _lines(self) -> list[str]:
        return self.kernel.source.splitlines()

    def kernel_line_text(self, line: int) -> str | None:
        """Stripped text of absolute line ``line`` when it lies inside the kernel's own source
        (not a callee), else None."""
        if not self.kernel.source or self.kernel.line <= 0:
            return None
        index = line - self.kernel.line + self._def_index
        if 0 <= index < len(self._lines):
            return self._lines[index].strip()
        return None

    def line_text(self, line: int, file: str = "") -> str | None:
        """Stripped text of absolute ``line`` in the kernel or any function of its call tree
        (``file`` narrows the search when given), else None."""
        text = self.kernel_line_text(line)
        if text is not None and (not file or file == self.kernel.file):
            return text
        for function in self.functions:
            first, last = function.lines
            if first <= line <= last and (not file or file == function.file):
                return function.source.splitlines()[line - first].strip()
        return None

    # ---------------------------------------------------------------- questions the rules ask

    def stores_twice(self, target: str) -> list[int] | None:
        """Lines of two plain stores to the same element of ``target`` (``arg``/``arg.field``),
        or of one store a ``for`` loop repeats; None when not proven."""
        return stores.stores_twice(self.kernel.source, self.kernel.line, target)

    def passes_to_function(self, target: str, custom_replay: tuple[str, ...]) -> int:
        """How the adjoint replays ``target``: stores.NOT_REPLAYED / RESULT_DISCARDED / RESULT_USED."""
        if not self.kernel.source:
            return stores.RESULT_USED
        return stores.passes_to_function(self.kernel.source, target, custom_replay)

    def stores_after(self, line: int, target: str) -> bool:
        """Whether the kernel body stores into ``target`` (or hands it to a call) at or after
        absolute ``line``."""
        return stores.stores_after(self._lines, line - self.kernel.line + self._def_index, target)

    def adjoint_needs_value(
        self, target: str, array_params: tuple[str, ...], active: tuple[str, ...]
    ) -> bool:
        """Whether the kernel's adjoint uses the values read from ``target`` (see
        :func:`warptrace.kernel_source.linearity.adjoint_needs_value`)."""
        if not self.kernel.source:
            return True
        return linearity.adjoint_needs_value(self.kernel.source, target, array_params, active)


def _function(data: dict[str, Any]) -> FunctionFacts:
    values: dict[str, Any] = {}
    for spec in fields(FunctionFacts):
        value = data.get(spec.name)
        if value is None:
            continue
        if spec.name in _NESTED:
            cls = _NESTED[spec.name]
            value = tuple(cls(**{k: _tuples(v) for k, v in item.items()}) for item in value)
        else:
            value = _tuples(value)
        values[spec.name] = value
    return FunctionFacts(**values)


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
