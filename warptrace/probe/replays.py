"""What a probe run does around graph replays (see :mod:`warptrace.analysis.graphs`).

A backward captured into a graph (``wp.ScopedCapture``) is one Python call that runs
nothing; every ``wp.capture_launch`` runs it. The probe keeps, at capture time, the tape
and the arrays of each of its positions (and the ``loss``/``grads=`` handed to the
backward); just before the capture_launch call that runs the measured operations it
perturbs the parameters (the graph reads their memory); just after the one that runs the
measured backward it reads the objective, the cuts (from the copies
:meth:`~warptrace.probe.hooks.Probe._snapshot` captured into the graph) and the gradient.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# ``probe`` below is a :class:`warptrace.probe.hooks.Probe` (typed Any: hooks imports this
# module, and the architecture keeps modules free of import cycles)
Probe = Any
Tape = Any
_TapeState = Any


def captured_backward(probe: Probe, number: int, tape: Tape, loss: Any, grads: Any, original: Any) -> None:
    """A backward call captured into a graph: keep what the replays measured need."""
    state = probe._state(tape)
    target = probe.target
    if (
        target is not None
        and number == probe.cut_backward
        and probe.target_replay()
        and (not probe._is_target(state, target) or len(tape.launches) != target["n_events"])
    ):
        probe._mismatch(
            f"the captured backward {number} holds {len(tape.launches)} operations of tape {state.ordinal}, "
            f"the recording had {target['n_events']} on tape {target['tape']}"
        )
    probe.captured[number] = (tape, dataclasses.replace(state, args=list(state.args)), loss, grads, original)


def replayed(probe: Probe, number: int) -> tuple[Tape, _TapeState, Any, Any, Any]:
    found = probe.captured.get(number)
    if found is None:
        probe._mismatch(f"the graph replay of backward {number} came before that backward was captured")
    return found


def before_replay(probe: Probe, replay: int) -> None:
    """Just before capture_launch call ``replay``: perturb the parameters first read in it (the
    graph reads their memory; the recording checked that it does not write them before)."""
    for index, param in enumerate(probe.params):
        if index in probe.param_arrays or int(param.get("replay", 0) or 0) != replay:
            continue
        captured = probe.captured.get(int(param["backward"]))
        if captured is not None:
            state: _TapeState | None = captured[1]
        else:  # a forward captured alone: its tape, backpropagated eagerly later
            state = next(
                (s for s in probe.tapes.values() if s.ordinal == param["tape"] and s.epoch == param["epoch"]),
                None,
            )
        if state is None or state.ordinal != param["tape"] or state.epoch != param["epoch"]:
            probe._mismatch(f"parameter {param['label']} is not on the captured tape the recording had")
        arr = probe._resolve_at(state, param)
        if arr is None:
            probe._mismatch(f"parameter {param['label']} is not at its recorded place in the graph")
        probe._perturb(index, arr)


def after_replay(probe: Probe, replay: int) -> None:
    """Just after capture_launch call ``replay``: read its objective terms (the loss, Σ seed·y),
    the cuts of a replayed target, and at the window's last replay the gradient; then stop."""
    for number in probe.replays[replay]:
        _, state, loss, grads, _ = replayed(probe, number)
        term = probe.objective.term(-replay, state, loss, grads)
        if term is None:
            probe._mismatch(probe.objective.problem or f"replay {replay}: no objective")
        probe.result["objective"].append(term[0])
        probe.result["objective_resolution"].append(term[1])
    last = max(probe.replays)
    ad = probe._projected_gradients() if replay == last and probe.compute_ad else None
    if probe.target_replay() == replay:
        tape, state, _, _, original = replayed(probe, probe.cut_backward)
        for cut, buffers in sorted(probe.cuts.items()):
            probe.result["surrogates"][str(cut)] = probe._surrogate(
                state, cut, buffers, probe.snapshots.get(cut, {})
            )
        if probe.compute_ad and probe.cuts:
            probe._cut_adjoints(tape, state, original)
    if replay == last:
        probe.result["ad"] = ad
        probe._finish()
