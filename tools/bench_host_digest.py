"""Cost of the host-transfer digest (``warptrace.record.wrap.hostdata.digest_of``) by size.

Usage: python tools/bench_host_digest.py
Prints, for transfer sizes from 1 KiB to the cap, the time of one digest and the time of
the ``numpy()`` copy it rides on (a device-to-host copy costs at least a memcpy).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from warptrace.record.wrap.hostdata import DIGEST_MAX_BYTES, digest_of


def _best(fn: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    print(f"digest cap: {DIGEST_MAX_BYTES >> 20} MiB")
    print(f"{'bytes':>12} {'digest ms':>10} {'memcpy ms':>10} {'GB/s':>7}")
    size = 1024
    while size <= DIGEST_MAX_BYTES:
        data = np.random.default_rng(0).random(size // 4, dtype=np.float32)
        t_digest = _best(lambda data=data: digest_of(data))
        t_copy = _best(lambda data=data: data.copy())
        print(f"{size:>12} {t_digest * 1e3:>10.3f} {t_copy * 1e3:>10.3f} {size / t_digest / 1e9:>7.2f}")
        size *= 8
    print(
        f"above the cap: {_best(lambda: digest_of(np.zeros(DIGEST_MAX_BYTES // 4 + 1, np.float32))) * 1e6:.1f} us"
    )


if __name__ == "__main__":
    main()
