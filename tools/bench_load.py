"""Trace load time with and without the integrity checks (issue 13, item 3).

    python tools/bench_load.py --launches 300000 [--repeat 3]

Writes one synthetic trace (``tools/synth_trace.py``), then times ``read_trace`` (parts,
part facts, page checksums and every check of ``warptrace.trace.integrity``) against
(a) the same load with ``integrity.validate`` replaced by a no-op and (b) a plain load as
the reader did before the checks (read, select, cast and concatenate every part), best
of ``--repeat`` runs each, CPU seconds (user + system) of this process.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from synth_trace import generate  # noqa: E402

from warptrace.trace import reader  # noqa: E402
from warptrace.trace.schema import SCHEMAS  # noqa: E402


def _plain_load(path: Path) -> None:
    for name, schema in SCHEMAS.items():
        parts = [
            pq.read_table(p).select(schema.names).cast(schema) for p in sorted((path / name).glob("part-*"))
        ]
        if parts:
            pa.concat_tables(parts)


def _best(path: Path, repeat: int, load: Callable[[Path], object] = reader.read_trace) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        load(path)
        best = min(best, time.process_time() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "synth.wtrace"
        info = generate(path, args.launches, part_rows=16384)
        plain = _best(path, args.repeat, _plain_load)
        checked = _best(path, args.repeat)
        validate = reader.validate
        reader.validate = lambda path, meta, tables, parts, torn: (tables, [])  # type: ignore[assignment]
        try:
            unchecked = _best(path, args.repeat)
        finally:
            reader.validate = validate
        trace = reader.read_trace(path)
        rows = {name: table.num_rows for name, table in trace.tables.items()}
    print(
        f"synthetic trace: {info.launches} launches, {rows['events']} events, {rows['accesses']} access rows"
    )
    print(f"load with checks {checked:.3f} s, without row checks {unchecked:.3f} s (CPU, best of {args.repeat}); "
          f"checks cost {checked - unchecked:.3f} s = {100 * (checked - unchecked) / unchecked:.1f}%")  # fmt: skip
    print(f"plain load (before the checks) {plain:.3f} s: validated load costs {checked - plain:.3f} s more "
          f"= {100 * (checked - plain) / plain:.1f}%")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
