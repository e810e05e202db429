"""``KernelSource``: everything warptrace knows about the source of one kernel.

The recorder gathers the sources of a kernel and of the ``@wp.func`` callees,
``@wp.func_grad`` and ``@wp.func_replay`` bodies it reaches, and stores them in the trace
as JSON (``kernels.source_model``, :func:`inputs_json`); the analyzer builds the model
from them. Traces of schema 2-4 stored the built model, which is loaded back (or upgraded,
see ``MODEL_VERSION``); for traces written before either existed (schema version 1) the
model is rebuilt from the stored kernel source. Rules ask it questions; they never parse
source themselves.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields, replace
from functools import cached_property, lru_cache
from typing import Any

from warptrace.kernel_source import elements, linearity, local_flow, replay, stores
from warptrace.kernel_source import facts as F
from warptrace.kernel_source.facts import FunctionFacts, FunctionSource, function_facts
from warptrace.kernel_source.result_uses import BRANCH, FACTOR, INDEX, ResultUse, result_uses
from warptrace.kernel_source.syntax import call_name, parse_function, text_of, walk

__all__ = ["MODEL_VERSION", "KernelSource", "build", "inputs_json"]

# Version of the JSON layout inside the trace (independent of the trace schema version).
#   1  statements, loops, in-place operators, components, selects, calls, divisions,
#      comparisons, adjoint assignments, atomics
#   2  loops know whether Warp unrolls them (module max_unroll, integer constants) and the
#      state they carry; component history; guards and hazards; def-use of locals.
#   3  locals bound to an array (a slice or sub-array of an array argument, an array
#      constructor) are array aliases: a subscript store into one is an array store
#      (``aug_assigns`` target kind "array"), never a component assignment; array
#      parameters include ``wp.array2d[float]``-style annotations. A version-2 model is
#      upgraded from the stored source of each function (``_upgrade_v2``).
#      A version-1 model is rebuilt from the stored kernel source.
#      Atomics know how the returned value is used (``AtomicCall.uses``/``returned``); a
#      stored model without them gets them from the stored source (``_with_atomic_uses``).
#   4  ``stale_reads``: statements after a dynamic loop whose adjoint needs a local the loop
#      changed (the replay skips the loop). Versions 2 and 3 are upgraded from the stored
#      source and loops of each function (``_upgrade_stale``).
MODEL_VERSION = 4

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
    "stale_reads": F.StaleRead,
}


# The recorder stores what the model is built from rather than the model (schema 5): the
# sources are gathered from Warp objects, which only the recorder can do, while building
# (parsing and walking every function) is pure and costs 5-15 ms per kernel of a real
# program, paid by the analyzer instead of the recorded program.
INPUTS_KEY = "inputs"
INPUTS_VERSION = 1


def inputs_json(kernel: FunctionSource, functions: tuple[FunctionSource, ...] = ()) -> str:
    """The sources :func:`build` takes, as the JSON :meth:`KernelSource.from_json` builds from."""
    return json.dumps(
        {INPUTS_KEY: INPUTS_VERSION, "kernel": asdict(kernel), "functions": [asdict(f) for f in functions]},
        separators=(",", ":"),
    )


def _source(data: dict[str, Any]) -> FunctionSource:
    return FunctionSource(
        **{**data, "constants": tuple((str(name), int(value)) for name, value in data.get("constants", ()))}
    )


def build(kernel: FunctionSource, functions: tuple[FunctionSource, ...] = ()) -> KernelSource:
    """Parse ``kernel`` and every function of its call tree once."""
    seen: set[tuple[str, str, str, int]] = set()
    facts = [_shared_facts(kernel)]
    for function in functions:
        key = (function.role, function.name, function.file, function.line)
        if key not in seen:
            seen.add(key)
            found = _shared_facts(function)
            # KernelSource.index_of tells its functions apart by identity
            facts.append(found if all(found is not f for f in facts) else function_facts(function))
    return KernelSource(facts[0], tuple(facts[1:]))


@lru_cache(maxsize=2048)
def _shared_facts(function: FunctionSource) -> FunctionFacts:
    """:func:`function_facts`, once per source in a process: the kernels of a program reach the
    same ``@wp.func`` helpers (warp.fem's traces: 282 distinct sources of 785), and a diff
    builds both runs' kernels. The facts are frozen all the way down, so they can be shared."""
    return function_facts(function)


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
        """The model stored in a trace; None when ``text`` is empty or of an unknown layout.

        ``text`` is either a built model (``to_json``: traces of schema 2-4) or the sources
        it is built from (``inputs_json``: schema 5 on), which are built here."""
        if not text:
            return None
        try:
            data = json.loads(text)
            if INPUTS_KEY in data:
                if data[INPUTS_KEY] != INPUTS_VERSION:
                    return None
                try:
                    return build(_source(data["kernel"]), tuple(_source(f) for f in data["functions"]))
                except Exception:  # a source the builder cannot take: the kernel's alone is rebuilt
                    return None
            version = data.get("version")
            if version not in (2, 3, MODEL_VERSION):
                return None
            read = {2: _upgrade_v2, 3: _upgrade_v3}.get(version, _function)
            return KernelSource(read(data["kernel"]), tuple(read(f) for f in data["functions"]))
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
        """How the adjoint replays ``target``: stores.NOT_REPLAYED / RESULT_DISCARDED / RESULT_USED.
        NOT_REPLAYED too when every user function the kernel hands ``target`` to (with its
        source known) provably never writes it, directly or through its own callees: the
        replay of a call that only reads an array writes nothing."""
        if not self.kernel.source:
            return stores.RESULT_USED
        found = stores.passes_to_function(self.kernel.source, target, custom_replay)
        if (
            found != stores.NOT_REPLAYED
            and "." not in target
            and not self._calls_may_write(self.kernel, target, 0)
        ):
            return stores.NOT_REPLAYED
        return found

    def _calls_may_write(self, function: FunctionFacts, name: str, depth: int) -> bool:
        """Whether a user function that ``function`` hands array ``name`` to may write it."""
        if depth > 8:
            return True
        _, passed = stores.writes_array(function.source, name)
        for called, last, position in passed:
            if called.startswith(("wp.", "warp.")):
                continue
            callees = [f for f in self.functions if f.role == F.FUNC and _names_function(called, last, f)]
            if not callees:
                return True  # a native function or a source warptrace does not have
            for callee in callees:
                if position >= len(callee.params):
                    return True
                param = callee.params[position]
                writes, _ = stores.writes_array(callee.source, param)
                if writes or self._calls_may_write(callee, param, depth + 1):
                    return True
        return False

    def stores_after(self, line: int, target: str) -> bool:
        """Whether the kernel body stores into ``target`` (or hands it to a call) at or after
        absolute ``line``."""
        return stores.stores_after(self._lines, line - self.kernel.line + self._def_index, target)

    def stores_first_in_calls(self, arg: str) -> bool:
        """Whether the kernel uses array argument ``arg`` only by handing it whole to user
        functions (``f(arg, ...)``), each of which stores into it before it reads it
        (:func:`stores.stores_before_reads`) and has no custom adjoint or replay. The
        adjoint replays each call, which stores the same values again before reading them:
        the in-callee form of a kernel that stores first and reads its own result back."""
        uses = stores.whole_array_calls(self.kernel.source, arg) if self.kernel.source else None
        if not uses:
            return False
        for called, last, position in uses:
            callees = [f for f in self.functions if f.role == F.FUNC and _names_function(called, last, f)]
            if not callees:
                return False  # a Warp builtin or a function whose source is not known
            for function in callees:
                if (
                    self.has_custom_adjoint(function)
                    or self.has_replay(function)
                    or position >= len(function.params)
                    or not stores.stores_before_reads(function.source, function.params[position])
                ):
                    return False
        return True

    def adjoint_needs_value(
        self, target: str, array_params: tuple[str, ...], active: tuple[str, ...]
    ) -> bool:
        """Whether the kernel's adjoint uses the values read from ``target`` (see
        :func:`warptrace.kernel_source.linearity.adjoint_needs_value`)."""
        if not self.kernel.source:
            return True
        return linearity.adjoint_needs_value(self.kernel.source, target, array_params, active)

    def overwrite(self, path: str, active: frozenset[str]) -> elements.Overwrite | None:
        """Whether one thread of the kernel reads an element of ``path`` whose value an adjoint
        needs and then writes that element (PROVEN), maybe writes it (POSSIBLE) or not (NONE),
        when the argument paths ``active`` carry a gradient (see :mod:`.elements`); None when
        the source does not parse."""
        cache = self._overwrites
        if active not in cache:
            custom = frozenset(f.name for f in self.functions if self.has_custom_adjoint(f))
            cache[active] = elements.overwrites(self.kernel, self.functions, custom, active)
        answers = cache[active]
        if answers is None:
            return None
        return answers.get(path, elements.Overwrite())

    @cached_property
    def _overwrites(self) -> dict[frozenset[str], dict[str, elements.Overwrite] | None]:
        return {}

    # ---------------------------------------------------------------- values and kernel arguments

    @cached_property
    def _arg_sources(self) -> dict[int, dict[str, frozenset[str]]]:
        """Per function (by position in :attr:`all_functions`), each parameter with the kernel
        arguments its value can come from: the kernel's own parameters are themselves; a
        callee's are what its call sites pass (all call sites, any depth); a custom adjoint's
        or replay's are those of the function it belongs to."""
        functions = self.all_functions
        sources: dict[int, dict[str, frozenset[str]]] = {0: {p: frozenset((p,)) for p in self.kernel.params}}
        for _ in range(len(functions)):
            changed = False
            for index, function in enumerate(functions[1:], start=1):
                current = sources.setdefault(index, {p: frozenset() for p in function.params})
                if function.role in (F.FUNC_GRAD, F.FUNC_REPLAY):
                    owner = next(
                        (i for i, f in enumerate(functions) if f.role == F.FUNC and f.name == function.of), -1
                    )
                    incoming = sources.get(owner, {})
                    for param in function.params:
                        new = current[param] | incoming.get(param, frozenset())
                        changed |= new != current[param]
                        current[param] = new
                    continue
                for caller_index, caller in enumerate(functions):
                    if caller_index not in sources or caller.role == F.FUNC_GRAD:
                        continue
                    for call in caller.calls:
                        if not _calls_function(call, function):
                            continue
                        for position, names in enumerate(call.arg_names[: len(function.params)]):
                            param = function.params[position]
                            new = current[param] | self.kernel_args(caller_index, names, sources)
                            changed |= new != current[param]
                            current[param] = new
            if not changed:
                break
        return sources

    def kernel_args(
        self,
        function: int | FunctionFacts,
        names: tuple[str, ...] | list[str] | set[str],
        _sources: dict[int, dict[str, frozenset[str]]] | None = None,
    ) -> frozenset[str]:
        """The kernel arguments whose values can flow into an expression of ``function`` (an
        index in :attr:`all_functions` or the facts) that reads ``names``: through the def-use of
        its locals to its parameters, then through its call sites to the kernel's arguments."""
        index = function if isinstance(function, int) else self.index_of(function)
        if index < 0:
            return frozenset()
        facts = self.all_functions[index]
        sources = self._arg_sources if _sources is None else _sources
        params = sources.get(index, {})
        deps = self._deps(index)
        seen: set[str] = set()
        todo = list(names)
        out: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in facts.params:
                out |= params.get(name, frozenset())
            todo.extend(deps.get(name, ()))
        return frozenset(out)

    def closure(
        self, function: FunctionFacts, names: tuple[str, ...] | list[str] | set[str]
    ) -> frozenset[str]:
        """``names`` and every name the locals among them are computed from, transitively."""
        deps = self._deps(self.index_of(function))
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(deps.get(name, ()))
        return frozenset(seen)

    def index_of(self, function: FunctionFacts) -> int:
        for index, candidate in enumerate(self.all_functions):
            if candidate is function:
                return index
        return -1

    @cached_property
    def _deps_by_function(self) -> list[dict[str, tuple[str, ...]]]:
        return [dict(function.deps) for function in self.all_functions]

    def _deps(self, index: int) -> dict[str, tuple[str, ...]]:
        return self._deps_by_function[index] if index >= 0 else {}

    def inplace_update_at(self, line: int) -> bool:
        """Whether ``line`` (kernel or callee) updates an array element in place with a
        non-additive operator (``a[i] *= s``), itself or through the functions called there
        (whose updates the recorder attributes to the call line): WT401 reports it."""
        for function in self.all_functions:
            for aug in function.aug_assigns:
                if aug.line == line and aug.target_kind == "array" and aug.op not in _ADDITIVE:
                    return True
        for function in self.all_functions:
            for call in function.calls:
                if call.line != line:
                    continue
                for callee in self.functions:
                    if (
                        callee.role == F.FUNC
                        and _calls_function(call, callee)
                        and any(
                            a.target_kind == "array" and a.op not in _ADDITIVE for a in callee.aug_assigns
                        )
                    ):
                        return True
        return False

    def differentiated_functions(self) -> Iterator[FunctionFacts]:
        """The functions whose own statements Warp differentiates with its built-in adjoints:
        the kernel and the functions its differentiated bodies call, not the bodies of
        ``@wp.func_grad``/``@wp.func_replay``, not a function that has a ``@wp.func_grad`` (its
        calls are differentiated by that body only), and not what only those call (Newton's
        ``dense_subs``, reached through ``dense_solve`` and its custom adjoint). The
        kernel-source rules look for adjoint hazards here and nowhere else."""
        yield from self._differentiated

    @cached_property
    def _differentiated(self) -> tuple[FunctionFacts, ...]:
        """The kernel and every function Warp differentiates. A function whose callers are all
        known and none of them differentiated is left out; one with no caller found by name
        (warp.fem calls shape functions and integrands indirectly) stays in."""
        kept = [
            f
            for f in self.all_functions
            if f.role not in (F.FUNC_GRAD, F.FUNC_REPLAY) and not self.has_custom_adjoint(f)
        ]
        callers: dict[int, list[FunctionFacts]] = {}
        for function in self.functions:
            if function.role == F.FUNC:
                callers[id(function)] = [
                    caller
                    for caller in self.all_functions
                    if caller is not function and any(_calls_function(c, function) for c in caller.calls)
                ]
        changed = True
        while changed:
            changed = False
            for function in kept[1:]:
                found = callers.get(id(function), [])
                if found and not any(caller in kept for caller in found):
                    kept.remove(function)
                    changed = True
        return tuple(kept)

    def has_custom_adjoint(self, function: FunctionFacts) -> bool:
        """Whether a ``@wp.func_grad`` belongs to ``function``: Warp differentiates its calls
        with that body, never with the built-in adjoints of what ``function`` calls."""
        return function.role == F.FUNC and any(
            f.role == F.FUNC_GRAD and f.of == function.name for f in self.functions
        )

    def has_replay(self, function: FunctionFacts) -> bool:
        """Whether a ``@wp.func_replay`` belongs to ``function``."""
        return any(f.role == F.FUNC_REPLAY and f.of == function.name for f in self.functions)

    def replayed_results_steer(self, target: str, custom_replay: tuple[str, ...]) -> bool:
        """Whether the kernel uses the value of a user-function call it passes ``target`` to
        (see :meth:`passes_to_function`) in a way its adjoint reads: as an index, in a branch or
        as a factor (:mod:`~warptrace.kernel_source.result_uses`). The adjoint replays the
        call, which hands out another value where the function has a side effect; stored,
        added or cast, that value is never read. Unparseable source: True."""
        tree = parse_function(self.kernel.source) if self.kernel.source else None
        if tree is None:
            return True
        replayed = {name.rsplit(".", 1)[-1] for name in custom_replay}
        nodes = [
            node
            for node in walk(tree)
            if isinstance(node, ast.Call)
            and not text_of(node.func).startswith(("wp.", "warp."))
            and text_of(node.func) not in stores._NOT_USER_CALLS
            and text_of(node.func).rsplit(".", 1)[-1] not in replayed
            and any(text_of(a) == target for a in (*node.args, *(k.value for k in node.keywords)))
        ]
        memory = set(self.kernel.params) | local_flow.array_locals(tree)
        return any(use.kind in (INDEX, BRANCH, FACTOR) for use in result_uses(tree, nodes, memory).values())

    def returned_value_uses(self, function: FunctionFacts) -> list[tuple[FunctionFacts, ResultUse]]:
        """How the callers of ``function`` use the value it returns: per call site, the
        calling function and the :class:`~warptrace.kernel_source.result_uses.ResultUse` of
        the call's value there."""
        found: list[tuple[FunctionFacts, ResultUse]] = []
        for caller in self.all_functions:
            if caller.role == F.FUNC_GRAD or not caller.parsed:
                continue
            lines = {call.line for call in caller.calls if _calls_function(call, function)}
            tree = parse_function(caller.source) if lines else None
            if tree is None:
                continue
            first = caller.lines[0]
            nodes = [
                node
                for node in walk(tree)
                if isinstance(node, ast.Call)
                and first + node.lineno - 1 in lines
                and _names_function(text_of(node.func), call_name(node.func), function)
            ]
            uses = result_uses(tree, nodes, set(caller.params) | local_flow.array_locals(tree))
            found += [(caller, uses[id(node)]) for node in nodes]
        return found

    def line_text_of(self, function: FunctionFacts, line: int) -> str:
        first, last = function.lines
        if function.source and first <= line <= last:
            return function.source.splitlines()[line - first].strip()
        return ""


_ADDITIVE = ("+=", "-=", "&=", "|=", "^=")


def _calls_function(call: F.Call, function: FunctionFacts) -> bool:
    """Whether ``call`` calls ``function``: the last part of its name (``Sim.meth`` is the
    function key ``Sim__meth``; generic overloads keep the template's name)."""
    return _names_function(call.func, call.name, function)


def _names_function(called: str, last: str, function: FunctionFacts) -> bool:
    """Whether the called expression ``called`` (last name part ``last``) names ``function``."""
    name = function.name.replace(".", "__").split("__")[-1]
    return last == name or called.replace(".", "__") == function.name


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
    return _with_atomic_uses(FunctionFacts(**values))


def _with_atomic_uses(function: FunctionFacts) -> FunctionFacts:
    """A stored model's function whose atomics predate ``AtomicCall.uses``: the uses of their
    results, from the stored source (matched by line, name and array)."""
    if not function.parsed or not any(
        a.result_used and not a.uses and not a.returned for a in function.atomics
    ):
        return function
    tree = parse_function(function.source)
    if tree is None:
        return function
    first = function.lines[0]
    nodes = {
        (first + node.lineno - 1, call_name(node.func), text_of(node.args[0])): node
        for node in walk(tree)
        if isinstance(node, ast.Call) and call_name(node.func).startswith("atomic_") and node.args
    }
    found = result_uses(tree, nodes.values(), set(function.params) | local_flow.array_locals(tree))
    atomics = []
    for atomic in function.atomics:
        node = nodes.get((atomic.line, atomic.name, atomic.array))
        use = found.get(id(node)) if node is not None else None
        atomics.append(atomic if use is None else replace(atomic, uses=use.uses, returned=use.returned))
    return replace(function, atomics=tuple(atomics))


def _upgrade_v3(data: dict[str, Any]) -> FunctionFacts:
    """A version-3 function model with the stale reads of version 4."""
    return _upgrade_stale(_function(data))


def _upgrade_stale(function: FunctionFacts) -> FunctionFacts:
    """``function`` with its stale reads computed from its source and stored loops."""
    tree = parse_function(function.source) if function.parsed else None
    if tree is None:
        return function
    offset = function.line - tree.lineno if function.line >= 0 else 0
    arrays = {a.arg for a in tree.args.args if local_flow.array_annotation_ndim(a.annotation) is not None}
    arrays |= local_flow.array_locals(tree)
    return replace(
        function,
        stale_reads=replay.stale_reads(
            tree, [loop.line for loop in function.loops if not loop.unrolled], offset, arrays
        ),
    )


def _upgrade_v2(data: dict[str, Any]) -> FunctionFacts:
    """A version-2 function model with the array aliases of version 3 and the stale reads of
    version 4 applied: subscript stores into a local bound to an array view are array stores,
    not components."""
    function = _upgrade_stale(_function(data))
    tree = parse_function(function.source) if function.parsed else None
    if tree is None:
        return function
    aliases = local_flow.array_locals(tree)
    params = tuple(
        sorted(a.arg for a in tree.args.args if local_flow.array_annotation_ndim(a.annotation) is not None)
    )
    return replace(
        function,
        array_params=params,
        component_assigns=tuple(c for c in function.component_assigns if c.local not in aliases),
        aug_assigns=tuple(
            replace(a, target_kind="array" if "[" in a.target else "other")
            if a.target_kind == "component" and a.root in aliases
            else a
            for a in function.aug_assigns
        ),
    )


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
