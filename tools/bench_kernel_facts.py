"""Kernel read/write facts (``warptrace.record.kernels``): cost of a first analysis and of a hit.

    python tools/bench_kernel_facts.py

Uses the test kernels (tests/kernels_for_facts.py). Reports the wall seconds to analyse
every kernel of that module from empty caches (target: under 50 ms for the module) and
the ns per cache hit (target: under 5 µs, a dict lookup). Exit status 1 when a target is
missed. The tests assert the facts only; these figures are this tool's.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import warp as wp

from tests import kernels_for_facts as K
from warptrace.record import kernel_walk
from warptrace.record import kernels as facts_module
from warptrace.record.kernels import kernel_facts

MODULE_TARGET_S = 0.05
HIT_TARGET_S = 5e-6


def first_analysis_seconds() -> float:
    kernels = [k for k in vars(K).values() if isinstance(k, wp.Kernel)]
    for cache in (facts_module._BY_KERNEL, facts_module._BY_SIGNATURE, kernel_walk.SUMMARIES):
        cache.clear()
    facts_module._BY_GENERIC_ARGS.clear()
    start = time.perf_counter()
    for kernel in kernels:
        kernel_facts(kernel)
    return time.perf_counter() - start


def hit_seconds(calls: int = 20_000) -> float:
    kernel_facts(K.k_callees)
    start = time.perf_counter()
    for _ in range(calls):
        kernel_facts(K.k_callees)
    return (time.perf_counter() - start) / calls


def main() -> int:
    wp.init()
    module = min(first_analysis_seconds() for _ in range(5))
    hit = min(hit_seconds() for _ in range(5))
    print(f"first analysis of every kernel in tests/kernels_for_facts.py: {module * 1e3:.1f} ms "
          f"(target < {MODULE_TARGET_S * 1e3:.0f} ms)")  # fmt: skip
    print(f"cache hit: {hit * 1e9:.0f} ns (target < {HIT_TARGET_S * 1e9:.0f} ns)")
    return 0 if module < MODULE_TARGET_S and hit < HIT_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
