"""The objective a probe run reads at each backward of the measured window.

A backward differentiates its ``loss=`` (Warp seeds ``loss.grad`` with 1) plus, for every
array ``y`` whose gradient was seeded by hand (``grads={y: seed}``, ``y.grad = seed``,
``y.grad.fill_(c)``, ``y.grad.assign(...)``), the function Σ seed·y. A backward replayed by
a graph is read after the replay, when its backward may have consumed the seed (Warp zeroes
the adjoint of a plain store): a ``fill_(c)`` seed then comes from the recording (``constant``). The seed's values are
those of the first unperturbed run (the *reference*, kept in a file the driver hands to
every later run): a seed that depends on the forward (a VJP handed in by an outer
framework) then weighs every perturbed run the same way, so the finite difference is that
of one fixed function, whose gradient the unperturbed run computed. A run that is not the
reference reports a digest of its own seeds: two unperturbed runs must seed alike.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

import numpy as np


def float_view(values: np.ndarray) -> np.ndarray:
    """A float64 copy of an array's values, vector/matrix components flattened."""
    return np.asarray(values, dtype=np.float64).reshape(-1)


def ulps(values: np.ndarray) -> np.ndarray:
    """The float32 spacing at each value (what one stored float32 resolves)."""
    return np.spacing(np.abs(values).astype(np.float32)).astype(np.float64)


class Objective:
    """Per window backward: the loss and the hand-seeded terms, and their float32 resolution."""

    def __init__(self, config: dict[str, Any], resolve: Callable[[Any, dict[str, Any]], Any]) -> None:
        self.resolve = resolve  # (tape state, {"position", "arg", "field"}) -> the array there, or None
        self.seeds: dict[int, list[dict[str, Any]]] = {}
        for seed in config.get("seeds", []):
            self.seeds.setdefault(int(seed["backward"]), []).append(seed)
        self.seed_in: str | None = config.get("seed_in")
        self.seed_out: str | None = config.get("seed_out")
        self.reference: dict[str, np.ndarray] | None = None
        if self.seed_in and os.path.exists(self.seed_in):
            with np.load(self.seed_in) as stored:
                self.reference = {key: stored[key] for key in stored.files}
        self.own: dict[str, np.ndarray] = {}
        self.problem: str | None = None

    def term(self, number: int, state: Any, loss: Any, grads: Any) -> tuple[float, float] | None:
        """(value, resolution) of backward ``number``'s objective term, before Warp runs it."""
        value = 0.0
        resolution = 0.0
        if loss is not None:
            loss_value = float(float_view(loss.numpy())[0])
            value += loss_value
            resolution += float(ulps(np.array([loss_value]))[0])
        for index, seed in enumerate(self.seeds.get(number, [])):
            y = self.resolve(state, seed)
            if y is None:
                self.problem = (
                    f"backward {number}: the seeded array {seed['label']} is not at its recorded place"
                )
                return None
            constant = seed.get("constant")
            weights = (
                np.full(float_view(y.numpy()).size, float(constant))
                if constant is not None
                else _seed_values(y, grads)
            )
            if weights is None:
                self.problem = f"backward {number}: the seeded array {seed['label']} has no gradient to seed"
                return None
            key = f"{number}_{index}"
            self.own[key] = weights
            if self.reference is not None and key in self.reference:
                weights = self.reference[key]
            values = float_view(y.numpy())
            if weights.size != values.size:
                self.problem = f"backward {number}: the seed of {seed['label']} changed size"
                return None
            value += float(np.dot(weights, values))
            resolution += float(np.dot(np.abs(weights), ulps(values)))
        if loss is None and not self.seeds.get(number):
            self.problem = f"backward {number} has no loss= and no recorded seed"
            return None
        return value, resolution

    def save(self) -> None:
        """The reference run keeps its seeds for the others."""
        if self.seed_out and self.own:
            np.savez(self.seed_out, **self.own)  # type: ignore[arg-type]

    def digest(self) -> str | None:
        if not self.own:
            return None
        digest = hashlib.blake2b(digest_size=8)
        for key in sorted(self.own):
            digest.update(key.encode())
            digest.update(np.ascontiguousarray(self.own[key]).tobytes())
        return digest.hexdigest()


def _seed_values(y: Any, grads: Any) -> np.ndarray | None:
    """The seed of ``y``: its entry in ``grads=`` (Warp copies it into ``y.grad`` inside the
    backward), else what ``y.grad`` holds when the backward starts."""
    if grads:
        for key, value in grads.items():
            if key is y or (getattr(key, "ptr", None) == y.ptr and key.shape == y.shape):
                return float_view(value.numpy())
    if y.grad is None:
        return None
    return float_view(y.grad.numpy())
