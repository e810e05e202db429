"""Memory shared with PyTorch: what the BRIDGE events of a trace say about torch tensors.

A torch import (``wp.from_torch``) names the torch tensor object behind the new Warp array
and behind its grad (a session token each) with their version counters, and whether that
grad is the ``.grad`` of a torch leaf that requires grad; an "accumulate" event says torch's
autograd added a gradient into such a leaf's ``.grad`` (schema comment of ``BRIDGE``). The
rules about gradients shared with PyTorch (WT205, WT311) read them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from warptrace.analysis.model import K, Model
from warptrace.trace import schema as S

__all__ = ["Bridges", "TorchAccumulate", "TorchImport", "bridges_of", "import_label"]


@dataclass(frozen=True)
class TorchImport:
    """One ``wp.from_torch`` call."""

    ev: int
    array_id: int  # the Warp array over the tensor
    grad_id: int  # its grad, -1 when none
    tensor: int  # token of the source tensor, -1 unknown (traces before these facts)
    version: int  # its version counter at the import
    grad_tensor: int  # token of the tensor holding the grad memory, -1 unknown or none
    grad_version: int
    leaf: bool  # the grad is the .grad of a torch leaf that requires grad


@dataclass(frozen=True)
class TorchAccumulate:
    """PyTorch's autograd accumulated a gradient into the ``.grad`` of a watched leaf."""

    ev: int
    tensor: int  # the leaf's token
    grad_tensor: int  # token of its .grad after the accumulation (-1 none)


@dataclass
class Bridges:
    imports: list[TorchImport] = field(default_factory=list)
    accumulates: list[TorchAccumulate] = field(default_factory=list)
    exports: list[int] = field(default_factory=list)  # events handing Warp memory to a framework
    by_array: dict[int, TorchImport] = field(default_factory=dict)  # array or grad id -> import
    shared_allocs: set[int] = field(default_factory=set)  # allocations a bridge event touches
    # allocations the host holds a zero-copy view of (numpy() of a CPU array): written invisibly
    host_views: set[int] = field(default_factory=set)

    def tensor_of(self, array_id: int) -> tuple[int, int]:
        """(token, version) of the torch tensor whose memory the Warp array ``array_id`` was made
        over by an import (as the imported array, or as its grad); (-1, -1) when none is known."""
        found = self.by_array.get(int(array_id))
        if found is None:
            return (-1, -1)
        if found.array_id == array_id:
            return (found.tensor, found.version)
        return (found.grad_tensor, found.grad_version)


def import_label(model: Model, bridges: Bridges, array_id: int) -> str:
    """The user's name for an array: :meth:`Model.array_label`, else the name the import line
    binds (``ctx.x = wp.from_torch(x)``: the recorder registers imported arrays without a site)."""
    label = model.array_label(int(array_id))
    found = bridges.by_array.get(int(array_id))
    if not label.startswith("array#") or found is None:
        return label
    site = model.sites.get(int(model.site[found.ev])) or {}
    name = str(site.get("label") or "")
    if not name:
        return label
    return name if found.array_id == array_id else name + ".grad"


def bridges_of(model: Model) -> Bridges:
    """The bridge facts of ``model`` (computed once per model)."""
    cached: Bridges | None = model.derived.get("bridges")
    if cached is None:
        cached = model.derived["bridges"] = _build(model)
    return cached


def _int(facts: dict, key: str) -> int:
    value = facts.get(key, -1)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else -1


def _build(model: Model) -> Bridges:
    out = Bridges()
    reads = np.nonzero(model.kind == K[S.VALUE_READ])[0]
    for ev, text in zip(reads.tolist(), model.detail_texts(reads)):
        if text and '"view": true' in text:
            out.host_views.update(
                int(model.acc_alloc[row]) for row in range(int(model.acc_start[ev]), int(model.acc_stop[ev]))
            )
    for ev in np.nonzero(model.kind == K[S.BRIDGE])[0].tolist():
        rows = range(int(model.acc_start[ev]), int(model.acc_stop[ev]))
        for row in rows:
            alloc = int(model.acc_alloc[row])
            if alloc >= 0:
                out.shared_allocs.add(alloc)
        facts = model.detail(ev)
        if not isinstance(facts, dict):
            continue
        direction = facts.get("direction")
        if direction == S.BRIDGE_EXPORT:
            out.exports.append(ev)
        if facts.get("framework") != "torch":
            continue
        if direction == S.BRIDGE_ACCUMULATE:
            out.accumulates.append(TorchAccumulate(ev, _int(facts, "tensor"), _int(facts, "grad_tensor")))
        elif direction == S.BRIDGE_IMPORT and len(rows):
            array_id = int(model.acc_array[rows[0]])
            grad_id = next((int(model.acc_array[r]) for r in rows if model.acc_flags[r] & S.FLAG_GRAD), -1)
            found = TorchImport(
                ev=ev,
                array_id=array_id,
                grad_id=grad_id,
                tensor=_int(facts, "tensor"),
                version=_int(facts, "version"),
                grad_tensor=_int(facts, "grad_tensor"),
                grad_version=_int(facts, "grad_version"),
                leaf=facts.get("leaf") is True,
            )
            out.imports.append(found)
            out.by_array.setdefault(array_id, found)
            if grad_id >= 0:
                out.by_array.setdefault(grad_id, found)
    return out
