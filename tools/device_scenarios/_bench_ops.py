"""Per-operation recording cost on the device (run by ``tools/check_device.py --bench``).

    python tools/device_scenarios/_bench_ops.py [--ops 500] [--repeat 3]

Each operation runs ``--ops`` times plainly and then inside a ``warptrace.start()`` /
``stop()`` session (the session's first pass untimed, its rows flushed inside the timed
span), alternating ``--repeat`` times; the row is the least disturbed block of each, in µs
per operation, and the cost warptrace adds. The device is ``WARPTRACE_CHECK_DEVICE`` (else
cuda:0 when present). Prints one JSON line. The full CPU benchmark is tools/bench_record.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import warp as wp
from _common import device

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import warptrace
from warptrace.record import recorder
from warptrace.record.recorder import flush

DEV = device()
N = 16


@wp.kernel
def axpy(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + y[i]


def ops() -> dict[str, object]:
    x = wp.ones(N, dtype=float, requires_grad=True, device=DEV)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEV)
    host = np.ones(N, dtype=np.float32)
    tape = wp.Tape()

    def launch() -> None:
        wp.launch(axpy, dim=N, inputs=[x, y], device=DEV)

    def launch_taped() -> None:
        with tape:
            wp.launch(axpy, dim=N, inputs=[x, y], device=DEV)

    def zeros() -> None:
        wp.zeros(N, dtype=float, requires_grad=True, device=DEV)

    def copy() -> None:
        wp.copy(y, x)

    def upload() -> None:
        wp.array(host, dtype=float, requires_grad=True, device=DEV)

    def numpy() -> None:
        x.numpy()

    return {
        "launch": launch,
        "launch in tape": launch_taped,
        "wp.zeros(requires_grad)": zeros,
        "wp.copy": copy,
        "wp.array(ndarray)": upload,
        "array.numpy()": numpy,
    }


def block(fn, count: int) -> float:
    wp.synchronize_device(DEV)
    t0 = time.perf_counter()
    for _ in range(count):
        fn()
    wp.synchronize_device(DEV)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    wp.config.quiet = True
    wp.init()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in ops().items():
            fn()  # compile / load
            plain, traced = [], []
            for rep in range(args.repeat):
                plain.append(block(fn, args.ops))
                warptrace.start(Path(tmp) / f"{len(rows)}_{rep}.wtrace")
                try:
                    fn()
                    rec = recorder.active()
                    if rec is not None:
                        rec.flush()
                    flush()
                    t0 = time.perf_counter()
                    block(fn, args.ops)
                    flush()  # writing the rows is part of their cost
                    traced.append(time.perf_counter() - t0)
                finally:
                    warptrace.stop()
            us_plain = min(plain) / args.ops * 1e6
            us_traced = min(traced) / args.ops * 1e6
            rows[name] = {"plain_us": us_plain, "traced_us": us_traced, "added_us": us_traced - us_plain}
    print(json.dumps({"device": DEV, "ops": args.ops, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
