"""Shared by the device scenarios: the device to run on and a digest of the results.

Every scenario prints only deterministic lines (digests of array bytes), so its plain and
traced runs can be compared byte for byte.
"""

from __future__ import annotations

import hashlib
import logging
import os

import warp as wp

wp.config.log_level = logging.WARNING  # no module-load lines: they carry timings


def device() -> str:
    """``WARPTRACE_CHECK_DEVICE`` (set by tools/check_device.py), else cuda:0 when present."""
    return os.environ.get("WARPTRACE_CHECK_DEVICE") or ("cuda:0" if wp.get_cuda_device_count() else "cpu")


def report(name: str, arr: wp.array) -> None:
    data = arr.numpy()
    print(f"{name} {data.dtype} {data.shape} {hashlib.sha256(data.tobytes()).hexdigest()[:16]}")
