"""Buffer identity by memory: allocations, array objects, and the address-range index.

Gradient bugs are about memory, not Python objects: a ``wp.array(ptr=...)`` alias, a
slice, a transpose and a numpy zero-copy view can all name the same bytes, and Warp
reuses a freed pointer at once. So every fresh allocation (``array._init_new``) gets a
monotonic ``alloc_id`` and an entry in a sorted interval index of live allocations;
every other array object is resolved to the allocation that contains its address
hull. Each array object gets an ``array_id`` and one row in the ``arrays`` table with
its geometry (byte offset in the allocation, shape, strides, itemsize), so an access
row only needs ``(array_id, alloc_id)``.

Per-array state lives in attributes on the array object (one ``dict`` lookup on the
launch path, measured cheaper than an ``id()``-keyed table with weakref finalizers).
Every attribute value carries the session token, so state left on an array by an
earlier ``start()``/``stop()`` session is ignored.

Array rows are written lazily, at the first event that touches the array: only then
are a view's parent (``_ref``, set by Warp after construction), the final
``requires_grad``/``retain_grad`` and the grad link known. The allocation itself is
registered eagerly, with the user call site that made it.

All methods expect the recorder lock to be held.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
import weakref
from bisect import bisect_left, bisect_right
from typing import Any, Protocol

import numpy as np
import warp

from warptrace.record.callsite import Sites
from warptrace.trace.schema import (
    ALLOC_EXTERNAL,
    ALLOC_OWNED,
    ARRAY_EXTERNAL,
    ARRAY_GRAD,
    ARRAY_OPAQUE,
    ARRAY_OWNED,
    ARRAY_PREEXISTING,
    ARRAY_PTR_ALIAS,
    ARRAY_VIEW,
    FLAG_GRAD,
)

# Attribute names stored on Warp objects. Values are tuples whose first item is the
# session token.
STATE = "_warptrace_state"  # (token, array_id, alloc_id, grad_flag, label)
NEW = "_warptrace_new"  # (token, site, seq, alloc_id or -1 for ptr-made arrays, labelled)
OWNER = "_warptrace_owner"  # (token, weakref to the array whose .grad this is)

# A registered array's state tuple. Indices used on the hot path.
ST_ARRAY, ST_ALLOC, ST_GRAD = 1, 2, 3

_warp_array = warp.array
_type_size = warp._src.types.type_size_in_bytes


def _type_repr(dtype: Any) -> str:
    try:
        return warp._src.types.type_repr(dtype)
    except Exception:
        return getattr(dtype, "__name__", str(dtype))


REAP_PENDING = 512  # deferred inserts kept before the index catches up on its own


class _Keeper(weakref.ref):  # type: ignore[type-arg,unused-ignore]
    """A weakref that carries the id of the allocation its referent keeps alive.

    Its callback is the bound ``append`` of :attr:`AllocIndex.dead`: no closure or
    ``functools.partial`` per allocation, and the id is read back at reaping.
    """

    __slots__ = ("alloc_id",)
    alloc_id: int


def hull(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Byte interval ``[lo, hi)`` covered by a strided view (``capacity`` is not its extent)."""
    lo = hi = ptr
    for extent, stride in zip(shape, strides):
        if extent <= 0:
            return ptr, ptr
        step = (extent - 1) * stride
        if step < 0:
            lo += step
        else:
            hi += step
    return lo, hi + itemsize


class AllocIndex:
    """Sorted, non-overlapping byte intervals of the live allocations.

    Frees arrive from weakref callbacks (any thread, any time, possibly while the
    recorder lock is held by the same thread), so a callback only appends its keeper
    to ``dead``; the index reaps them before every lookup.

    Inserts are deferred: :meth:`add` appends ``(start, end, alloc_id)`` to ``pending``
    and the sorted lists are brought up to date only when a lookup needs them
    (:meth:`find`, ``len``). Most allocations of a training loop die before any view or
    alias is resolved, so their interval is never inserted at all (measured: the
    allocation path of ``wp.zeros(n, requires_grad=True)`` spent about a third of its
    recording cost in ``insert``). The result is the same as inserting eagerly: pending
    entries go in in allocation order (a later one evicts the stale entries it
    overlaps), then the dead are removed.
    """

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.ids: list[int] = []
        self.where: dict[int, int] = {}  # alloc_id -> start
        self.dead: list[_Keeper] = []
        self.on_free = self.dead.append  # every keeper's callback (bound once)
        self.pending: list[tuple[int, int, int]] = []  # (start, end, alloc_id) not inserted yet
        # alloc_id -> weakref whose callback reports the free; kept alive until reaped
        self.keepers: dict[int, weakref.ref[Any]] = {}
        # alloc_id -> the allocs row of an allocation made while a recording schedule paused the
        # session (Identity.defer), written when a recorded event first reaches it; dropped at free
        self.unwritten: dict[int, tuple[Any, ...]] = {}

    def add(self, start: int, end: int, alloc_id: int, keeper: Any) -> None:
        """Register an allocation (inserted at the next lookup); ``keeper`` dying frees it."""
        pending = self.pending
        pending.append((start, end, alloc_id))
        if len(pending) >= REAP_PENDING:  # bounded memory when nothing looks up for a long time
            self._reap()
        try:
            ref = _Keeper(keeper, self.on_free)
        except TypeError:  # not weak-referenceable: the entry lives until an allocation replaces it
            return
        ref.alloc_id = alloc_id
        self.keepers[alloc_id] = ref

    def _reap(self) -> None:
        pending = self.pending
        dead = self.dead
        starts = self.starts
        if pending:
            self.pending = []
            gone = {ref.alloc_id for ref in dead} if dead else ()
            for start, end, alloc_id in pending:
                if alloc_id not in gone:
                    self.insert(start, end, alloc_id)
                else:  # freed before anyone looked: evict what it overlapped, insert nothing
                    i = bisect_left(starts, end)
                    if i > 0 and self.ends[i - 1] > start:  # (most overlap nothing: no call)
                        self._evict(start, end)
        while dead:
            alloc_id = dead.pop().alloc_id
            self.keepers.pop(alloc_id, None)
            if self.unwritten:
                self.unwritten.pop(alloc_id, None)
            where = self.where.pop(alloc_id, None)
            if where is None:
                continue
            i = bisect_left(self.starts, where)
            if i < len(self.ids) and self.ids[i] == alloc_id:
                del self.starts[i], self.ends[i], self.ids[i]

    def _evict(self, start: int, end: int) -> int:
        """Drop the entries overlapping ``[start, end)`` (their memory was freed); their position."""
        starts, ends, ids = self.starts, self.ends, self.ids
        i = bisect_left(starts, end)
        while i > 0 and ends[i - 1] > start:
            i -= 1
            self.where.pop(ids[i], None)
            del starts[i], ends[i], ids[i]
        return i

    def insert(self, start: int, end: int, alloc_id: int) -> None:
        """Add an allocation now; entries it overlaps are stale (their memory was freed) and go."""
        i = self._evict(start, end)
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        self.ids.insert(i, alloc_id)
        self.where[alloc_id] = start

    def find(self, lo: int, hi: int) -> tuple[int, int] | None:
        """``(alloc_id, start)`` of the live allocation containing ``[lo, hi)``, else None."""
        if self.pending or self.dead:
            self._reap()
        i = bisect_right(self.starts, lo) - 1
        if i >= 0 and self.ends[i] >= hi:
            return self.ids[i], self.starts[i]
        return None

    def __len__(self) -> int:
        self._reap()
        return len(self.ids)


class RowSink(Protocol):
    """What identity needs of the session (a :class:`~warptrace.record.session.Recorder`)."""

    tok: object  # session token
    seq: int  # next event sequence number
    sites: Sites
    alloc_rows: list[Any]
    array_rows: list[Any]


class Identity:
    """Allocation ids, array ids and their table rows for one recording session."""

    def __init__(self, rec: RowSink) -> None:
        self.rec = rec
        self.tok = rec.tok
        self.index = AllocIndex()
        self.next_alloc = 0
        self.next_array = 0
        self.external: set[int] = set()  # alloc ids of ALLOC_EXTERNAL allocations
        # a recording schedule paused the session (warptrace.record.gate): fresh allocations keep
        # their allocs row in AllocIndex.unwritten until an event reaches them
        self.defer = False
        self._dtype_cache: dict[Any, tuple[str, int]] = {}
        self._device_cache: dict[int, tuple[Any, str]] = {}  # Device is unhashable

    # ------------------------------------------------------------------ helpers
    def _dtype(self, dtype: Any) -> tuple[str, int]:
        try:
            hit = self._dtype_cache.get(dtype)
        except TypeError:
            hit = None
        if hit is None:
            try:
                size = _type_size(dtype)
            except Exception:
                size = 0
            hit = (_type_repr(dtype), size)
            with contextlib.suppress(TypeError):
                self._dtype_cache[dtype] = hit
        return hit

    def device_name(self, device: Any) -> str:
        hit = self._device_cache.get(id(device))
        if hit is not None and hit[0] is device:
            return hit[1]
        name = "" if device is None else str(getattr(device, "alias", device))
        self._device_cache[id(device)] = (device, name)
        return name

    def _new_alloc(self, ptr: int, nbytes: int, device: Any, kind: str, site: int, keeper: Any) -> int:
        alloc_id = self.next_alloc
        self.next_alloc = alloc_id + 1
        self.index.add(ptr, ptr + (nbytes if nbytes > 0 else 1), alloc_id, keeper)
        if kind == ALLOC_EXTERNAL:
            self.external.add(alloc_id)
        self.rec.alloc_rows.extend(
            (alloc_id, ptr, nbytes, self.device_name(device), kind, self.rec.seq - 1, site)
        )
        return alloc_id

    # ------------------------------------------------------------------ creation hooks
    def on_new(self, arr: Any, site: int, owner: Any, labelled: bool = True) -> None:
        """``array._init_new`` returned: fresh memory gets a new alloc_id right away.

        The allocation hot path: :meth:`_new_alloc` and the device-name cache hit are inlined
        (same rows).
        """
        ptr = arr.ptr
        alloc_id = -1
        seq = self.rec.seq - 1
        if ptr is not None:
            alloc_id = self.next_alloc
            self.next_alloc = alloc_id + 1
            nbytes = arr.capacity
            self.index.add(ptr, ptr + (nbytes if nbytes > 0 else 1), alloc_id, arr)
            device = arr.device
            hit = self._device_cache.get(id(device))
            name = hit[1] if hit is not None and hit[0] is device else self.device_name(device)
            if self.defer:
                self.index.unwritten[alloc_id] = (alloc_id, ptr, nbytes, name, ALLOC_OWNED, seq, site)
            else:
                self.rec.alloc_rows.extend((alloc_id, ptr, nbytes, name, ALLOC_OWNED, seq, site))
        attrs = arr.__dict__
        attrs[NEW] = (self.tok, site, seq, alloc_id, labelled)
        if owner is not None:
            attrs[OWNER] = (self.tok, weakref.ref(owner))

    def on_ptr(self, arr: Any, site: int, labelled: bool = True) -> None:
        """``array._init_from_ptr`` returned: remember where; resolve lazily (``_ref`` comes later)."""
        arr.__dict__[NEW] = (self.tok, site, self.rec.seq - 1, -1, labelled)

    def link_grad(self, owner: Any, grad: Any) -> None:
        """``owner.grad = grad`` inside Warp's constructor: remember the owner for the grad's row."""
        if grad is not None and isinstance(grad, _warp_array):
            st = grad.__dict__.get(STATE)
            if st is None or st[0] is not self.tok:
                grad.__dict__[OWNER] = (self.tok, weakref.ref(owner))

    def scan_preexisting(self) -> int:
        """Put the memory of arrays created before ``start()`` into the index.

        Without this, a ``ptr=`` alias registered before its owner would invent an
        external allocation that the owner then only partly overlaps.
        """
        found = 0
        with warnings.catch_warnings():  # isinstance() on lazy module proxies (torch) may warn
            warnings.simplefilter("ignore")
            candidates = [obj for obj in gc.get_objects() if isinstance(obj, _warp_array)]
        owners = []
        for obj in candidates:
            try:
                ptr = obj.ptr
                if not isinstance(ptr, int) or obj.deleter is None or getattr(obj, "_ref", None) is not None:
                    continue
                owners.append((ptr, obj))
            except Exception:
                continue
        # in address order: the collector's lists order them by its own history, which would
        # number the same arrays differently in two sessions of one process
        owners.sort(key=lambda owner: owner[0])
        for ptr, obj in owners:
            try:
                if self.index.find(ptr, ptr + max(obj.capacity, 1)) is not None:
                    continue
                self._new_alloc(ptr, obj.capacity, obj.device, ALLOC_EXTERNAL, -1, obj)
                found += 1
            except Exception:
                continue
        return found

    # ------------------------------------------------------------------ registration
    def register(
        self, arr: Any, grad_of: int = -1, owner_label: str = "", adopted: bool = False
    ) -> tuple[Any, ...]:
        """Write the ``arrays`` row of ``arr`` (and of its parents and grad) and return its state.

        ``grad_of``/``owner_label``: ``arr`` is that array's grad. A grad Warp made
        (allocated or sliced with its owner) is labelled "<owner>.grad"; an array the
        user ``adopted`` as a grad (``a.grad = g``) keeps its own label.
        """
        tok = self.tok
        st = getattr(arr, STATE, None)
        if st is not None and st[0] is tok:
            return st
        if not isinstance(arr, _warp_array):
            return self._register_other(arr)
        attrs = arr.__dict__

        # A grad registered before its owner: register the owner, which registers us.
        if grad_of < 0:
            link = attrs.get(OWNER)
            if link is not None and link[0] is tok:
                owner = link[1]()
                if owner is not None and getattr(owner, "_grad", None) is arr:
                    owner_st = self.register(owner)
                    st = attrs.get(STATE)
                    if st is not None and st[0] is tok:
                        return st
                    grad_of, owner_label = owner_st[ST_ARRAY], owner_st[4]

        new = attrs.get(NEW)
        if new is not None and new[0] is not tok:
            new = None

        base = attrs.get("_ref")
        base_id = -1
        if isinstance(base, _warp_array):
            base_id = self.register(base)[ST_ARRAY]

        # the dtype and device caches are read inline (a method call each costs more than the hit)
        dtype = arr.dtype
        try:
            dtype_hit = self._dtype_cache.get(dtype)
        except TypeError:
            dtype_hit = None
        dtype_name, itemsize = dtype_hit if dtype_hit is not None else self._dtype(dtype)
        shape = tuple(arr.shape)
        strides = tuple(arr.strides)
        device = arr.device
        device_hit = self._device_cache.get(id(device))
        device_name = (
            device_hit[1] if device_hit is not None and device_hit[0] is device else self.device_name(device)
        )
        ptr = arr.ptr
        site = new[1] if new is not None else -1
        seq = new[2] if new is not None else self.rec.seq - 1

        offset = 0
        external = False
        if ptr is None or arr.size == 0:
            alloc_id = -1
        elif new is not None and new[3] >= 0:
            alloc_id = new[3]
        else:
            lo, hi = hull(ptr, shape, strides, itemsize)
            hit = self.index.find(lo, hi)
            if hit is not None:
                alloc_id, start = hit
                offset = ptr - start
                external = alloc_id in self.external
            else:
                keeper: Any = arr
                if base is None and getattr(arr, "deleter", None) is not None:
                    lo, hi = min(lo, ptr), max(hi, ptr + arr.capacity)
                elif isinstance(base, np.ndarray):
                    root = base
                    while isinstance(root.base, np.ndarray):
                        root = root.base
                    keeper = root
                    try:
                        root_ptr = root.__array_interface__["data"][0]
                        root_lo, root_hi = hull(root_ptr, root.shape, root.strides, root.itemsize)
                        lo, hi = min(lo, root_lo), max(hi, root_hi)
                    except Exception:
                        pass
                alloc_id = self._new_alloc(lo, hi - lo, device, ALLOC_EXTERNAL, site, keeper)
                offset = ptr - lo
                external = True
        if alloc_id >= 0 and self.index.unwritten:
            row = self.index.unwritten.pop(alloc_id, None)
            if row is not None:  # made while the session was paused: its row now
                self.rec.alloc_rows.extend(row)

        if new is None:
            kind = ARRAY_PREEXISTING
        elif new[3] >= 0:
            kind = ARRAY_GRAD if grad_of >= 0 else ARRAY_OWNED
        elif base_id >= 0:
            kind = ARRAY_VIEW
        elif external or isinstance(base, np.ndarray):
            kind = ARRAY_EXTERNAL
        elif ptr is None:
            kind = ARRAY_OWNED
        else:
            kind = ARRAY_PTR_ALIAS

        own_label = self.rec.sites.info[site][3] if new is not None and new[4] and site >= 0 else ""
        if grad_of >= 0 and not (adopted and own_label):
            label = owner_label + ".grad" if owner_label else ""
        else:
            label = own_label

        array_id = self.next_array
        self.next_array = array_id + 1
        self.rec.array_rows.extend(
            (
                array_id,
                alloc_id,
                offset,
                shape,  # tuples: a list per row survived in the buffers and made the GC walk the heap
                strides,
                itemsize,
                dtype_name,
                device_name,
                kind,
                bool(attrs.get("_requires_grad", False)),
                bool(attrs.get("_retain_grad", False)),
                grad_of,
                base_id,
                seq,
                site,
                label,
            )
        )
        st = (tok, array_id, alloc_id, FLAG_GRAD if grad_of >= 0 else 0, label)
        attrs[STATE] = st

        grad = attrs.get("_grad")
        if grad is not None and grad is not arr and isinstance(grad, _warp_array):
            gst = getattr(grad, STATE, None)
            if gst is None or gst[0] is not tok:
                self.register(grad, grad_of=array_id, owner_label=label)
        return st

    def mark_grad(self, grad: Any, owner_st: tuple[Any, ...]) -> tuple[Any, ...]:
        """``owner.grad = grad`` by the user: register ``grad`` as the owner's grad (or flag it)."""
        gst = getattr(grad, STATE, None)
        if gst is None or gst[0] is not self.tok:
            return self.register(grad, grad_of=owner_st[ST_ARRAY], owner_label=owner_st[4], adopted=True)
        if not gst[ST_GRAD]:
            gst = (*gst[:ST_GRAD], FLAG_GRAD, gst[4])
            grad.__dict__[STATE] = gst
        return gst

    def _register_other(self, arr: Any) -> tuple[Any, ...]:
        """indexedarray resolves to its data array; fabric and unknown arrays are opaque."""
        data = getattr(arr, "data", None)
        if isinstance(data, _warp_array):
            st = self.register(data)
        else:
            array_id = self.next_array
            self.next_array = array_id + 1
            shape = getattr(arr, "shape", ()) or ()
            try:
                shape_list = [int(x) for x in shape]
            except Exception:
                shape_list = []
            dtype_name, itemsize = self._dtype(getattr(arr, "dtype", None))
            self.rec.array_rows.extend(
                (
                    array_id,
                    -1,
                    0,
                    shape_list,
                    [],
                    itemsize,
                    dtype_name,
                    self.device_name(getattr(arr, "device", None)),
                    ARRAY_OPAQUE,
                    bool(getattr(arr, "requires_grad", False)),
                    False,
                    -1,
                    -1,
                    self.rec.seq - 1,
                    -1,
                    "",
                )
            )
            st = (self.tok, array_id, -1, 0, "")
        with contextlib.suppress(Exception):
            arr.__dict__[STATE] = st
        return st
