"""Per-call cost of a wrapt FunctionWrapper vs the plain closure the recorder uses.

    pip install wrapt && python tools/bench_wrapt.py

Both forward ``(*args, **kwargs)`` to the original, as the recorder's wrappers of
``wp.launch`` (a function) and ``Tape.backward`` (a method) do. Prints the best of 7
runs of 10^6 calls, in ns per call. This is why wrapt is not a dependency.
"""

from __future__ import annotations

import functools
import timeit
from typing import Any

import wrapt


def launch(kernel: int, dim: int = 0) -> int:
    return kernel + dim


class Tape:
    def backward(self, loss: int = 0) -> int:
        return loss


def closure(original: Any) -> Any:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    return wrapper


@wrapt.decorator
def passthrough(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return wrapped(*args, **kwargs)


class ClosureTape(Tape):
    backward = closure(Tape.backward)


class WraptTape(Tape):
    backward = passthrough(Tape.backward)


def best_ns(call: Any) -> float:
    return min(timeit.repeat(call, number=1_000_000, repeat=7)) * 1e3  # s per 1e6 calls -> ns


if __name__ == "__main__":
    plain_fn, wrapt_fn = closure(launch), passthrough(launch)
    closure_tape, wrapt_tape = ClosureTape(), WraptTape()
    rows = [
        ("function", best_ns(lambda: plain_fn(1, dim=2)), best_ns(lambda: wrapt_fn(1, dim=2))),
        (
            "method",
            best_ns(lambda: closure_tape.backward(loss=1)),
            best_ns(lambda: wrapt_tape.backward(loss=1)),
        ),
    ]
    print(f"wrapt {wrapt.__version__}   closure ns   wrapt ns   wrapt extra ns")
    for name, plain, wrapped in rows:
        print(f"{name:10s} {plain:14.0f} {wrapped:10.0f} {wrapped - plain:16.0f}")
