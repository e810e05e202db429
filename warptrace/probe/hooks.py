"""Light hooks a probe run installs on Warp: find tape positions, perturb, read, cut, stop.

A probe run is one execution of the user's unmodified script in a fresh process (see
:mod:`warptrace.probe.child`). Everything it does is addressed by *tape position*, the
index of a recorded operation in ``tape.launches`` within one recording epoch of one
tape (tapes are numbered in creation order, epochs by ``tape.reset()`` calls): the
recording run gave every recorded event such a position, and a deterministic program
reaches the same positions again. The hooks:

- ``Tape.__init__`` / ``Tape.reset``: number tapes and epochs;
- ``Tape.record_launch`` / ``Tape.record_func``: keep the arrays of each position, read
  the surrogate of a cut right after the operation before it executed;
- ``launch`` / ``copy`` (both bindings): perturb a parameter just before the operation
  that first reads it on the tape executes (its array object is known only there);
- ``Tape.backward``: read the objective (:mod:`~warptrace.probe.objective`), check that
  no parameter gradient was cleared out of the recording's sight, compute the cut
  adjoints (backpropagating only the launches recorded before each cut), let the
  program's own backward run, read the gradient it produced, and stop the script with
  :class:`ProbeStop`.

A parameter is the same *role* in every run (``params[i]["role"]``: allocation site,
ordinal of the arrays of its kind and shape made there, shape), whatever its address;
the tape position of its first read is how a probe run reaches that array. Memory read
only by a graph replay has no tape position: reaching it there means finding the array
by its role.

Warp's results are untouched except where the probe perturbs on purpose; the probe's
own copies run with no tape active so they are never recorded.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
import warp
import warp._src.context as wp_context
from warp._src.tape import Tape

from warptrace.probe import replays
from warptrace.probe.objective import Objective, float_view


class ProbeStop(BaseException):
    """Raised by the probe to end the script at the chosen backward (``except Exception`` cannot swallow it)."""


class ProbeMismatch(ProbeStop):
    """The run did not reach the positions the recording promised (a non-deterministic program)."""


@dataclass
class _TapeState:
    ordinal: int
    epoch: int = 0
    args: list[list[Any]] = field(default_factory=list)  # arrays of each position of the epoch


def direction(seed: int, index: int, size: int) -> np.ndarray:
    """The fixed random unit direction of parameter ``index``."""
    rng = np.random.default_rng([seed, 1, index])
    d = rng.standard_normal(size)
    norm = float(np.linalg.norm(d))
    return d / norm if norm > 0 else d


def weights(seed: int, cut: int, index: int, size: int) -> np.ndarray:
    """The fixed random weighting of live buffer ``index`` in the surrogate of ``cut``."""
    rng = np.random.default_rng([seed, 2, cut, index])
    return rng.standard_normal(size) / np.sqrt(max(size, 1))


def _is_float(arr: Any) -> bool:
    try:
        scalar = warp._src.types.type_scalar_type(arr.dtype)
    except Exception:
        return False
    return scalar in warp._src.types.float_types


def _arrays_in(values: Sequence[Any]) -> list[Any]:
    """The Warp arrays among launch arguments, including those inside ``wp.struct`` instances."""
    found: list[Any] = []
    pending = list(values)
    while pending:
        value = pending.pop()
        if isinstance(value, warp.array):
            found.append(value)
        elif hasattr(value, "_cls") and hasattr(value._cls, "vars"):
            pending.extend(getattr(value, name, None) for name in value._cls.vars)
    return found


def _runtime() -> Any:
    return wp_context.runtime


def _resolve(arrays: Sequence[Any], arg: int, path: str) -> Any:
    if arg < 0 or arg >= len(arrays):
        return None
    value = arrays[arg]
    for name in filter(None, path.split(".")):
        value = getattr(value, name, None)
    return value if isinstance(value, warp.array) else None


class Probe:
    """One probe run's plan (the config written by the driver) and what it measured."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.seed = int(config.get("seed", 0))
        self.window: list[int] = [int(b) for b in config.get("window", [])]
        self.target = config.get("target")  # {"tape": ordinal, "epoch": e, "n_events": n}
        self.cut_backward = int(config.get("cut_backward", -1))
        self.cuts: dict[int, list[dict[str, Any]]] = {
            int(cut["k"]): cut["buffers"] for cut in config.get("cuts", [])
        }
        self.params: list[dict[str, Any]] = config.get("params", [])
        self.step = float(config.get("step", 0.0))  # the signed perturbation t (0: unperturbed)
        self.sweep: list[float] = [float(h) for h in config.get("sweep", [])]
        self.compute_ad = bool(config.get("ad", False))
        # the window's backward calls replayed by a graph: capture_launch call number -> captured call
        self.replays: dict[int, list[int]] = {}
        for entry in config.get("replays", []):
            self.replays.setdefault(int(entry["replay"]), []).append(int(entry["backward"]))
        self.captured_numbers = {number for numbers in self.replays.values() for number in numbers}
        # captured backward call -> (tape, its state then, loss, grads, Warp's backward)
        self.captured: dict[int, tuple[Tape, _TapeState, Any, Any, Any]] = {}
        self.n_replays = 0
        # capture_launch calls before which parameters are perturbed (their first read is in the graph)
        self.perturb_replays = {int(p.get("replay", 0) or 0) for p in self.params} - {0}
        self.snapshots: dict[int, dict[int, Any]] = {}  # cut -> buffer index -> its copy made in the graph

        self.tapes: weakref.WeakKeyDictionary[Tape, _TapeState] = weakref.WeakKeyDictionary()
        self.n_tapes = 0
        self.n_backward = 0
        self.copy_args: list[list[Any]] = []  # (dest, src) of the copies in progress
        self.param_arrays: dict[int, Any] = {}
        # parameter index -> {str(h): (delta applied for +h, delta applied for -h)}
        self.param_deltas: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        self.result: dict[str, Any] = {
            "objective": [],
            "surrogates": {},
            "ad": None,
            "cut_ad": {},
            "perturbed": [],
            "notes": [],
            "objective_resolution": [],
        }
        self.objective = Objective(config, self._resolve_at)
        self.filled: dict[int, tuple[int, bool]] = {}  # param index -> (backward, grad held values after it)
        self._originals: list[tuple[Any, str, Any]] = []

    @staticmethod
    def _resolve_at(state: _TapeState, spec: dict[str, Any]) -> Any:
        """The array at a recorded place of a tape: operation ``position``, argument ``arg``, field."""
        position = int(spec["position"])
        if position >= len(state.args):
            return None
        return _resolve(state.args[position], int(spec["arg"]), spec.get("field", ""))

    def _mismatch(self, message: str) -> NoReturn:
        self.result["mismatch"] = message
        raise ProbeMismatch(message)

    # ------------------------------------------------------------------ install

    def install(self) -> None:
        self._patch(Tape, "__init__", self._wrap_init)
        self._patch(Tape, "reset", self._wrap_reset)
        self._patch(Tape, "record_launch", self._wrap_record_launch)
        self._patch(Tape, "record_func", self._wrap_record_func)
        self._patch(Tape, "backward", self._wrap_backward)
        launch = wp_context.launch
        wrapped_launch = self._wrap_launch(launch)
        for owner in (wp_context, warp):
            if getattr(owner, "launch", None) is launch:
                self._set(owner, "launch", wrapped_launch)
        copy = wp_context.copy
        wrapped_copy = self._wrap_copy(copy)
        for owner in (wp_context, warp):
            if getattr(owner, "copy", None) is copy:
                self._set(owner, "copy", wrapped_copy)
        for name in ("capture_begin", "capture_launch"):
            original = getattr(wp_context, name, None)
            if original is not None:
                wrapped = self._wrap_capture(name, original)
                for owner in (wp_context, warp):
                    if getattr(owner, name, None) is original:
                        self._set(owner, name, wrapped)

    def uninstall(self) -> None:
        while self._originals:
            owner, name, original = self._originals.pop()
            setattr(owner, name, original)

    def _set(self, owner: Any, name: str, value: Any) -> None:
        self._originals.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        self._set(owner, name, make(owner.__dict__[name]))

    # ------------------------------------------------------------------ tapes

    def _wrap_init(self, original: Any) -> Any:
        probe = self

        def __init__(tape: Tape, *args: Any, **kwargs: Any) -> None:
            original(tape, *args, **kwargs)
            probe.tapes[tape] = _TapeState(probe.n_tapes)
            probe.n_tapes += 1

        return __init__

    def _state(self, tape: Tape) -> _TapeState:
        state = self.tapes.get(tape)
        if state is None:  # a tape built before the hooks (cannot happen in a fresh run)
            state = self.tapes[tape] = _TapeState(-1)
        return state

    def _wrap_reset(self, original: Any) -> Any:
        probe = self

        def reset(tape: Tape, *args: Any, **kwargs: Any) -> Any:
            result = original(tape, *args, **kwargs)
            state = probe._state(tape)
            state.epoch += 1
            state.args = []
            return result

        return reset

    def target_replay(self) -> int:
        """The capture_launch call whose replay runs the cut tape's operations (0: none)."""
        return int(self.target.get("replay", 0) or 0) if self.target is not None else 0

    def _is_target(self, state: _TapeState, spec: dict[str, Any] | None) -> bool:
        return spec is not None and state.ordinal == spec["tape"] and state.epoch == spec["epoch"]

    def _recorded(self, tape: Tape, arrays: list[Any]) -> None:
        """After operation ``pos`` executed and was recorded: keep its arrays, read a cut, perturb."""
        state = self._state(tape)
        position = len(tape.launches) - 1
        while len(state.args) < position:
            state.args.append([])
        state.args.append(arrays)
        if self._is_target(state, self.target):
            buffers = self.cuts.get(position + 1)
            if buffers is not None and self.target_replay():
                self._snapshot(state, position + 1, buffers)
            elif buffers is not None:
                self.result["surrogates"][str(position + 1)] = self._surrogate(state, position + 1, buffers)

    def _wrap_record_launch(self, original: Any) -> Any:
        probe = self

        def record_launch(
            tape: Tape,
            kernel: Any,
            dim: Any,
            max_blocks: Any,
            inputs: Any,
            outputs: Any,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            result = original(tape, kernel, dim, max_blocks, inputs, outputs, *args, **kwargs)
            probe._recorded(tape, [*list(inputs or ()), *list(outputs or ())])
            return result

        return record_launch

    def _wrap_record_func(self, original: Any) -> Any:
        probe = self

        def record_func(tape: Tape, backward: Any, arrays: Any) -> Any:
            result = original(tape, backward, arrays)
            # a copy in progress is recorded as (dest, src): its own arguments, in order
            recorded = probe.copy_args[-1] if probe.copy_args else list(arrays or ())
            probe._recorded(tape, list(recorded))
            return result

        return record_func

    # ------------------------------------------------------------------ launch / copy

    def _before_operation(self, arrays: list[Any]) -> None:
        """Just before an operation that the active tape will record: perturb a parameter it first reads."""
        tape = _runtime().tape
        if tape is None:
            return
        state = self.tapes.get(tape)
        if state is None:
            return
        position = len(tape.launches)
        for index, param in enumerate(self.params):
            if index in self.param_arrays or param["position"] != position or param.get("replay"):
                continue
            if state.ordinal != param["tape"] or state.epoch != param["epoch"]:
                continue
            arr = _resolve(arrays, int(param["arg"]), param.get("field", ""))
            if arr is None:
                self._mismatch(f"parameter {param['label']} is not at its recorded place")
            self._perturb(index, arr)

    def _wrap_launch(self, original: Any) -> Any:
        signature = inspect.signature(original)
        probe = self

        def launch(*args: Any, **kwargs: Any) -> Any:
            if probe.params and _runtime().tape is not None and len(probe.param_arrays) < len(probe.params):
                bound = signature.bind_partial(*args, **kwargs)
                options = bound.arguments
                if (
                    not options.get("adjoint", False)
                    and options.get("record_tape", True)
                    and not options.get("record_cmd", False)
                ):
                    probe._before_operation(
                        [*list(options.get("inputs") or ()), *list(options.get("outputs") or ())]
                    )
            return original(*args, **kwargs)

        launch.__wrapped__ = original  # type: ignore[attr-defined]
        return launch

    def _wrap_copy(self, original: Any) -> Any:
        probe = self

        def copy(dest: Any, src: Any, *args: Any, **kwargs: Any) -> Any:
            if probe.copy_args:  # the nested grad copy: not a tape position of its own
                return original(dest, src, *args, **kwargs)
            # Warp records a copy on the tape only when both sides have a gradient
            recorded = getattr(src, "grad", None) is not None and getattr(dest, "grad", None) is not None
            if recorded and probe.params and len(probe.param_arrays) < len(probe.params):
                probe._before_operation([dest, src])
            probe.copy_args.append([dest, src])
            try:
                return original(dest, src, *args, **kwargs)
            finally:
                probe.copy_args.pop()

        copy.__wrapped__ = original  # type: ignore[attr-defined]
        return copy

    def _wrap_capture(self, name: str, original: Any) -> Any:
        probe = self

        def capture(*args: Any, **kwargs: Any) -> Any:
            note = f"the program calls wp.{name}"
            if note not in probe.result["notes"]:
                probe.result["notes"].append(note)
            probe.result["captured"] = True
            if name != "capture_launch":
                return original(*args, **kwargs)
            probe.n_replays += 1
            number = probe.n_replays
            if number in probe.perturb_replays:
                replays.before_replay(probe, number)
            out = original(*args, **kwargs)
            if number in probe.replays:
                replays.after_replay(probe, number)
            return out

        return capture

    # ------------------------------------------------------------------ values

    def _write(self, arr: Any, values: np.ndarray) -> None:
        """Write values into ``arr`` without any tape seeing it."""
        runtime = _runtime()
        saved, runtime.tape = runtime.tape, None
        try:
            layout = arr.numpy()
            staging: Any = warp.array(
                values.reshape(layout.shape).astype(layout.dtype), dtype=arr.dtype, device=arr.device
            )
            wp_context.copy(arr, staging)
        finally:
            runtime.tape = saved

    def _perturb(self, index: int, arr: Any) -> None:
        if not _is_float(arr):
            self._mismatch(f"parameter {self.params[index]['label']} is not a float array")
        self.param_arrays[index] = arr
        raw = arr.numpy()
        base = float_view(raw)
        scale = float(np.linalg.norm(base)) or float(np.sqrt(base.size))
        d = direction(self.seed, index, base.size) * scale
        stored = raw.dtype

        def applied(t: float) -> np.ndarray:
            return (base + t * d).astype(stored).astype(np.float64) - base

        self.param_deltas[index] = {str(h): (applied(h), applied(-h)) for h in self.sweep}
        if self.step != 0.0:
            delta = applied(self.step)
            self._write(arr, base + delta)
            self.result["perturbed"].append(
                {"param": index, "scale": scale, "applied_norm": float(np.linalg.norm(delta))}
            )

    def _snapshot(self, state: _TapeState, cut: int, buffers: list[dict[str, Any]]) -> None:
        """While a graph is captured, right after the operation before ``cut``: capture a copy of
        each live buffer into fresh memory, so that every replay leaves the values the buffers
        held at the cut there (later operations of the replay may overwrite the buffers)."""
        runtime = _runtime()
        saved, runtime.tape = runtime.tape, None
        copies: dict[int, Any] = {}
        try:
            for index, buffer in enumerate(buffers):
                arrays = state.args[buffer["position"]] if buffer["position"] < len(state.args) else []
                arr = _resolve(arrays, int(buffer["arg"]), buffer.get("field", ""))
                if arr is None or not _is_float(arr):
                    continue
                copy = warp.empty(shape=arr.shape, dtype=arr.dtype, device=arr.device)
                wp_context.copy(copy, arr)
                copies[index] = copy
        finally:
            runtime.tape = saved
        self.snapshots[cut] = copies

    def _surrogate(
        self,
        state: _TapeState,
        cut: int,
        buffers: list[dict[str, Any]],
        snapshot: dict[int, Any] | None = None,
    ) -> dict[str, float]:
        """The weighted sum of the live buffers of ``cut`` (from ``snapshot``, the copies a
        replay made at the cut, when given)."""
        total = 0.0
        magnitude = 0.0
        for index, buffer in enumerate(buffers):
            if snapshot is not None:
                arr = snapshot.get(index)
            else:
                arrays = state.args[buffer["position"]] if buffer["position"] < len(state.args) else []
                arr = _resolve(arrays, int(buffer["arg"]), buffer.get("field", ""))
            if arr is None or not _is_float(arr):
                continue
            values = float_view(arr.numpy())
            w = weights(self.seed, cut, index, values.size)
            total += float(np.dot(w, values))
            magnitude += float(np.dot(np.abs(w), np.abs(values)))
        return {"value": total, "magnitude": magnitude}

    # ------------------------------------------------------------------ backward

    def _wrap_backward(self, original: Any) -> Any:
        probe = self

        def backward(tape: Tape, loss: Any = None, grads: Any = None) -> Any:
            probe.n_backward += 1
            number = probe.n_backward
            if number in probe.captured_numbers:
                replays.captured_backward(probe, number, tape, loss, grads, original)
                return original(tape, loss, grads)
            if number not in probe.window:
                return original(tape, loss, grads)
            state = probe._state(tape)
            probe._check_cleared(number)
            term = probe.objective.term(number, state, loss, grads)
            if term is None:
                probe._mismatch(probe.objective.problem or f"backward {number}: no objective")
            probe.result["objective"].append(term[0])
            probe.result["objective_resolution"].append(term[1])
            if number == probe.cut_backward and probe.target is not None:
                if (
                    not probe._is_target(state, probe.target)
                    or len(tape.launches) != probe.target["n_events"]
                ):
                    self._mismatch(
                        f"backward {number} replays {len(tape.launches)} operations of tape {state.ordinal}, "
                        f"the recording had {probe.target['n_events']} on tape {probe.target['tape']}"
                    )
                if probe.target_replay():  # a forward captured alone: the copies made at each cut
                    for cut, buffers in sorted(probe.cuts.items()):
                        probe.result["surrogates"][str(cut)] = probe._surrogate(
                            state, cut, buffers, probe.snapshots.get(cut, {})
                        )
                if probe.compute_ad and probe.cuts:
                    probe._cut_adjoints(tape, state, original)
            if number == probe.window[-1] and not probe.compute_ad:
                probe._finish()
            result = original(tape, loss, grads)
            if number == probe.window[-1]:
                probe.result["ad"] = probe._projected_gradients()
                probe._finish()
            probe._note_filled(number)
            return result

        return backward

    def _finish(self) -> None:
        """End the run after the window's last backward (the objective terms are all read)."""
        self.objective.save()
        self.result["seed_digest"] = self.objective.digest()
        raise ProbeStop

    def _note_filled(self, number: int) -> None:
        """After window backward ``number``: which parameters' gradients hold something."""
        for index, arr in self.param_arrays.items():
            if arr.grad is not None and number in self.params[index].get("window", ()):
                self.filled[index] = (number, bool(np.any(arr.grad.numpy() != 0)))

    def _check_cleared(self, number: int) -> None:
        """A parameter gradient that held values after the previous backward of its window and is
        all zero before this one was cleared where the recording did not see it (another
        framework zeroed shared memory: ``optimizer.zero_grad()`` on a ``from_torch`` leaf)."""
        for index, arr in self.param_arrays.items():
            window = self.params[index].get("window", ())
            held = self.filled.get(index)
            if held is None or number not in window or not held[1] or arr.grad is None:
                continue
            if not np.any(arr.grad.numpy() != 0):
                self.result["unseen_clear"] = {"param": index, "after": held[0], "before": number}
                self._mismatch(
                    f"the gradient of {self.params[index]['label']} was cleared between backward {held[0]} and "
                    f"{number} where warptrace cannot see it (memory shared with another framework?)"
                )

    def _projected_gradients(self, only: set[int] | None = None) -> dict[str, float] | None:
        """For each eps: sum over parameters of grad . (delta_plus - delta_minus) / 2h. ``only``:
        the ids of the arrays to count (a cut's adjoint: the parameters its tape reads, perturbed
        so far; the others cannot change its surrogates)."""
        if len(self.param_arrays) < len(self.params) and only is None:
            missing = [p["label"] for i, p in enumerate(self.params) if i not in self.param_arrays]
            self._mismatch(f"parameter(s) {', '.join(missing)} never reached their recorded first read")
        projected: dict[str, float] = {}
        for h in self.sweep:
            total = 0.0
            for index, arr in self.param_arrays.items():
                if arr.grad is None or (only is not None and id(arr) not in only):
                    continue
                plus, minus = self.param_deltas[index][str(h)]
                total += float(np.dot(float_view(arr.grad.numpy()), plus - minus)) / (2.0 * h)
            projected[str(h)] = total
        return projected

    def _cut_adjoints(self, tape: Tape, state: _TapeState, original: Any) -> None:
        """AD of every cut's surrogate: seed the live buffers' grads, backpropagate the prefix, restore."""
        grad_arrays: dict[int, Any] = {}
        forward_arrays: dict[int, Any] = {}
        for arrays in state.args:
            for arr in _arrays_in(arrays):
                forward_arrays.setdefault(id(arr), arr)
                if arr.grad is not None:
                    grad_arrays.setdefault(id(arr.grad), arr.grad)
        for key in grad_arrays:
            forward_arrays.pop(key, None)
        saved_grads = {key: g.numpy().copy() for key, g in grad_arrays.items()}
        # an adjoint that writes forward memory (a replayed atomic counter) must not change what
        # the next cut, or the program's own backward, runs against
        saved_forward = {key: a.numpy().copy() for key, a in forward_arrays.items()}
        saved_launches = tape.launches
        runtime = _runtime()
        saved_tape, runtime.tape = runtime.tape, None
        try:
            for cut, buffers in sorted(self.cuts.items()):
                for g in grad_arrays.values():
                    g.zero_()
                for index, buffer in enumerate(buffers):
                    arrays = state.args[buffer["position"]]
                    arr = _resolve(arrays, int(buffer["arg"]), buffer.get("field", ""))
                    if arr is None or not _is_float(arr) or arr.grad is None:
                        continue
                    size = float_view(arr.numpy()).size
                    self._write(arr.grad, weights(self.seed, cut, index, size))
                tape.launches = saved_launches[:cut]
                try:
                    original(tape)
                finally:
                    tape.launches = saved_launches
                for key, arr in forward_arrays.items():
                    if not np.array_equal(arr.numpy(), saved_forward[key]):
                        self._write(arr, float_view(saved_forward[key]))
                        note = "an adjoint launch writes forward memory (restored after each cut's backward)"
                        if note not in self.result["notes"]:
                            self.result["notes"].append(note)
                self.result["cut_ad"][str(cut)] = self._projected_gradients(set(forward_arrays))
        finally:
            tape.launches = saved_launches
            for key, g in grad_arrays.items():
                self._write(g, saved_grads[key])
            runtime.tape = saved_tape
