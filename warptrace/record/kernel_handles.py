"""Arrays a kernel reaches through a handle: ``wp.Mesh``, ``wp.Bvh`` and ``wp.Volume`` ids.

A kernel that queries a mesh takes a ``wp.uint64`` argument (``mesh.id``), not the mesh's
arrays, so the argument walk of :mod:`warptrace.record.kernels` sees no memory at all. This
module finds, per integer argument, whether the kernel (or a ``@wp.func`` it hands the
argument to) uses it as a handle, of which kind, and which of the handle's arrays it
touches and how; the recorder resolves the id to the live object at launch time
(:mod:`warptrace.record.handles`) and records those arrays like any other argument.

How Warp differentiates through handles (measured on Warp 1.19, CPU, against central
finite differences): an element read through the mesh's own array, ``wp.mesh_get(id).points[i]``
(also ``.velocities``), is an ordinary array load whose adjoint accumulates into the
points' gradient (when they have one). Every query and evaluation builtin
(``mesh_query_point*``, ``mesh_query_ray``, ``mesh_eval_position``,
``mesh_eval_face_normal``, ``mesh_get_point``, ...; ``bvh_query_*``; ``volume_sample*``)
reads the handle's arrays again in its adjoint but sends *no* gradient to them (only to the
query point): those reads are marked "no gradient flows" (``FLAG_NO_GRAD``). A volume's
voxels are written by ``volume_store*``.

The scan is syntactic and flow-insensitive, like the argument walk: a name bound to the
handle (the argument, a local copy of it, a ``@wp.func`` parameter it is passed to) is
followed; anything it cannot follow is not reported (no access rather than a guessed one).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from warptrace.record.kernel_refs import ACC, READ, STORE
from warptrace.record.kernel_walk import function_def

MESH, BVH, VOLUME = "mesh", "bvh", "volume"

# The arrays of each kind of handle, by the attribute of the Python object that holds them.
HANDLE_FIELDS = {MESH: ("points", "indices", "velocities"), BVH: ("lowers", "uppers"), VOLUME: ("buffer",)}

# builtin -> (kind, arrays its forward and adjoint read; none of them gets a gradient)
_QUERY_READS: dict[str, tuple[str, tuple[str, ...]]] = {}
for _name in (
    "mesh_query_point", "mesh_query_point_no_sign", "mesh_query_point_sign_normal",
    "mesh_query_point_sign_parity", "mesh_query_point_sign_winding_number",
    "mesh_query_furthest_point_no_sign", "mesh_query_ray", "mesh_query_ray_anyhit",
    "mesh_query_ray_count_intersections", "mesh_query_aabb", "mesh_query_aabb_tiled",
    "mesh_query_sphere", "mesh_eval_position", "mesh_eval_face_normal", "mesh_get_point",
    "mesh_get_index",
):  # fmt: skip
    _QUERY_READS[_name] = (MESH, ("points", "indices"))
for _name in ("mesh_eval_velocity", "mesh_get_velocity"):
    _QUERY_READS[_name] = (MESH, ("velocities", "indices"))
for _name in (
    "bvh_query_aabb", "bvh_query_aabb_tiled", "bvh_query_ray", "bvh_query_ray_tiled",
    "bvh_query_sphere", "bvh_query_capsule",
):  # fmt: skip
    _QUERY_READS[_name] = (BVH, ("lowers", "uppers"))
for _name in (
    "volume_sample", "volume_sample_f", "volume_sample_i", "volume_sample_v", "volume_sample_grad",
    "volume_sample_grad_f", "volume_sample_index", "volume_sample_grad_index", "volume_lookup",
    "volume_lookup_f", "volume_lookup_i", "volume_lookup_v", "volume_lookup_index",
):  # fmt: skip
    _QUERY_READS[_name] = (VOLUME, ("buffer",))
_VOLUME_STORES = frozenset({"volume_store", "volume_store_f", "volume_store_i", "volume_store_v"})
_MESH_STRUCT = "mesh_get"  # returns the Mesh struct: its .points/.velocities/.indices are arrays
_ATOMIC_PREFIX = "atomic_"


@dataclass(frozen=True)
class HandleUse:
    """What a kernel does to one array of a handle argument."""

    index: int  # argument position
    name: str  # argument name
    kind: str  # MESH, BVH or VOLUME
    field: str  # the handle's array ("points", "lowers", "buffer", ...)
    read: bool
    store: bool
    accumulate: bool
    gradient: bool  # some read sends a gradient to the array (an element load, not a query)


def handle_uses(walker_of: Any, func: Any, tree: ast.FunctionDef, params: dict[str, int], names: list[str]
                ) -> tuple[HandleUse, ...]:  # fmt: skip
    """The handle uses of a kernel: ``params`` maps its integer parameters to their positions,
    ``walker_of(func, tree)`` makes a walker whose ``resolve`` names callees as Warp does."""
    found: dict[tuple[int, str], dict[str, Any]] = {}
    _Scan(walker_of, found, set()).function(func, tree, {name: {index} for name, index in params.items()})
    out = []
    for (index, field), use in sorted(found.items()):
        out.append(
            HandleUse(
                index=index,
                name=names[index],
                kind=use["kind"],
                field=field,
                read=use["read"],
                store=use["store"],
                accumulate=use["acc"],
                gradient=use["gradient"],
            )
        )
    return tuple(out)


class _Scan:
    def __init__(self, walker_of: Any, found: dict[tuple[int, str], dict[str, Any]], seen: set[Any]) -> None:
        self.walker_of = walker_of
        self.found = found
        self.seen = seen

    def function(self, func: Any, tree: ast.FunctionDef, handles: dict[str, set[int]]) -> None:
        key = (id(func), tuple(sorted((name, tuple(sorted(ix))) for name, ix in handles.items())))
        if key in self.seen or not handles:
            return
        self.seen.add(key)
        walker = self.walker_of(func, tree)
        ids = {name: set(ix) for name, ix in handles.items()}  # names bound to a handle id
        structs: dict[str, set[int]] = {}  # names bound to wp.mesh_get(id)
        for _ in range(3):  # flow-insensitive: aliases may be bound after their use
            grown = False
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                ):
                    target = node.targets[0].id
                    grown |= _bind(ids, target, self._ids(node.value, ids))
                    grown |= _bind(structs, target, self._struct(walker, node.value, ids, structs))
            if not grown:
                break
        stores = _store_targets(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self.call(walker, node, ids, structs)
            elif isinstance(node, ast.Subscript):
                base = node.value
                if isinstance(base, ast.Attribute) and base.attr in HANDLE_FIELDS[MESH]:
                    owners = self._struct(walker, base.value, ids, structs)
                    what = stores.get(id(node), READ)
                    for index in owners:
                        self.note(index, MESH, base.attr, what, gradient=what == READ)

    def call(
        self, walker: Any, node: ast.Call, ids: dict[str, set[int]], structs: dict[str, set[int]]
    ) -> None:
        callee = walker.resolve(node.func)
        key = getattr(callee, "key", None)
        builtin = callee is not None and getattr(callee, "func", None) is None
        first = node.args[0] if node.args else None
        if builtin and key is not None:
            if key in _QUERY_READS and first is not None:
                kind, fields = _QUERY_READS[key]
                for index in self._ids(first, ids):
                    for field in fields:
                        self.note(index, kind, field, READ, gradient=False)
            elif key in _VOLUME_STORES and first is not None:
                for index in self._ids(first, ids):
                    self.note(index, VOLUME, "buffer", STORE, gradient=False)
            elif (
                key.startswith(_ATOMIC_PREFIX)
                and isinstance(first, ast.Attribute)
                and first.attr in HANDLE_FIELDS[MESH]
            ):
                # wp.atomic_add(wp.mesh_get(id).points, i, v): accumulation into the handle's array
                for index in self._struct(walker, first.value, ids, structs):
                    self.note(index, MESH, first.attr, ACC, gradient=False)
            return
        user = getattr(callee, "func", None) is not None and getattr(callee, "adj", None) is not None
        if not user:
            return
        try:
            inner = function_def(callee.adj)
        except Exception:
            return
        params = [a.arg for a in inner.args.args]
        passed: dict[str, set[int]] = {}
        for position, arg in enumerate(node.args):
            if position < len(params):
                passed.setdefault(params[position], set()).update(self._ids(arg, ids))
        for keyword in node.keywords:
            if keyword.arg in params:
                passed.setdefault(keyword.arg, set()).update(self._ids(keyword.value, ids))
        passed = {name: ix for name, ix in passed.items() if ix}
        if passed:
            self.function(callee.func, inner, passed)

    def note(self, index: int, kind: str, field: str, what: int, gradient: bool) -> None:
        use = self.found.setdefault(
            (index, field), {"kind": kind, "read": False, "store": False, "acc": False, "gradient": False}
        )
        if what == READ:
            use["read"] = True
            use["gradient"] |= gradient
        elif what == STORE:
            use["store"] = True
        else:
            use["acc"] = True

    @staticmethod
    def _ids(node: ast.expr, ids: dict[str, set[int]]) -> set[int]:
        if isinstance(node, ast.Name):
            return set(ids.get(node.id, ()))
        return set()

    def _struct(
        self, walker: Any, node: ast.expr, ids: dict[str, set[int]], structs: dict[str, set[int]]
    ) -> set[int]:
        """Handle arguments whose Mesh struct ``node`` is (``wp.mesh_get(id)`` or a name bound to it)."""
        if isinstance(node, ast.Name):
            return set(structs.get(node.id, ()))
        if isinstance(node, ast.Call) and node.args:
            callee = walker.resolve(node.func)
            if getattr(callee, "key", None) == _MESH_STRUCT:
                return self._ids(node.args[0], ids)
        return set()


def _bind(table: dict[str, set[int]], name: str, indices: set[int]) -> bool:
    if not indices or indices <= table.get(name, set()):
        return False
    table.setdefault(name, set()).update(indices)
    return True


def _store_targets(tree: ast.FunctionDef) -> dict[int, int]:
    """id(subscript node) -> STORE or ACC for subscripts assigned to (``a[i] = v``, ``a[i] += v``)."""
    out: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript):
                    out[id(target)] = STORE
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
            out[id(node.target)] = ACC if isinstance(node.op, (ast.Add, ast.Sub)) else STORE
    return out


__all__ = ["BVH", "HANDLE_FIELDS", "MESH", "VOLUME", "HandleUse", "handle_uses"]
