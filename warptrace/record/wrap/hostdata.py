"""Content digests of host transfers: the link between a value that left Warp memory and
the array later made or assigned from it.

A value read (``numpy()``) and a copy from host memory Warp did not allocate (the copy
behind ``wp.array(data=ndarray)`` and ``a.assign(ndarray)``) carry, in the event's
``detail``, ``{"host": "read"|"write", "nbytes": n, "digest": hex}`` (a read that returned a
zero-copy view of the array, as ``numpy()`` does on the CPU, adds ``"view": true``): a 64-bit BLAKE2b of
the bytes transferred. The analyzer links a host write to the latest earlier host read
with the same digest (:mod:`warptrace.analysis.dataflow.host`). Digests are computed
only for these transfers and only up to :data:`DIGEST_MAX_BYTES` (above it the detail
says ``"digest": null``); ``tools/bench_host_digest.py`` measures the cost.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from warptrace.trace.rows import HOST_WRITE, host_detail

# Largest transfer that gets a digest: 16 MiB (about 10 ms of BLAKE2b on one core).
DIGEST_MAX_BYTES = 16 << 20

# Up to this size the bytes are hashed from a ``tobytes()`` copy (C order whatever the
# strides): cheaper than making a contiguous uint8 view for small transfers (0.37 vs 0.93 µs
# for 64 bytes), and the same digest.
_COPY_MAX_BYTES = 1 << 16


def digest_of(values: Any) -> tuple[int, str | None]:
    """(nbytes, hex digest or None above the cap) of an ndarray-like's bytes in C order."""
    if values.__class__ is np.ndarray:
        nbytes = values.nbytes
        if nbytes <= _COPY_MAX_BYTES and nbytes <= DIGEST_MAX_BYTES:
            return nbytes, hashlib.blake2b(values.tobytes(), digest_size=8).hexdigest()
    data = np.asarray(values)
    nbytes = int(data.nbytes)
    if nbytes > DIGEST_MAX_BYTES:
        return nbytes, None
    if not data.flags.c_contiguous:
        data = np.ascontiguousarray(data)
    return nbytes, hashlib.blake2b(data.reshape(-1).view(np.uint8).data, digest_size=8).hexdigest()


# Up to this many bytes a transfer's detail is left as (its bytes, how) for the trace writer to
# hash and format (rows.host_transfer_text, the same text): a copy of the bytes costs the
# program's thread less than their digest (~3,500 instructions of hashlib's object, BLAKE2b and
# the hex text). The bound keeps a part's buffered bytes small (4,096 transfers of 4 KiB at most).
DEFER_MAX_BYTES = 4096


def deferred_detail(direction: str, values: Any, view: bool) -> str | tuple[bytes, int]:
    """:func:`transfer_detail`, or for a small ndarray, its bytes and ``how`` (a read's
    zero-copy flag, a write's :data:`~warptrace.trace.rows.HOST_WRITE`) for the trace writer."""
    if values.__class__ is np.ndarray:
        nbytes = values.nbytes
        if nbytes <= DEFER_MAX_BYTES and nbytes <= DIGEST_MAX_BYTES:
            return values.tobytes(), HOST_WRITE if direction == "write" else view
    return transfer_detail(direction, values, view)


def transfer_detail(direction: str, values: Any, view: bool) -> str:
    """The ``detail`` JSON of a host transfer event ("read" or "write"), with the digest of
    ``values`` (:func:`~warptrace.trace.rows.host_detail`)."""
    nbytes, digest = digest_of(values)
    return host_detail(direction, nbytes, digest, view)


__all__ = ["DEFER_MAX_BYTES", "DIGEST_MAX_BYTES", "deferred_detail", "digest_of", "transfer_detail"]
