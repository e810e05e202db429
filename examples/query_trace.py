"""Read a warptrace trace with pyarrow alone: launches per kernel, and the lines that write most.

    python examples/query_trace.py projectile.wtrace

A trace is a folder of Parquet parts, one folder per table (docs/reference/trace-format.md);
any Parquet reader can query it. No Warp and no warptrace needed.
"""

import sys

import pyarrow.compute as pc
import pyarrow.dataset as ds


def table(trace: str, name: str):
    return ds.dataset(f"{trace}/{name}", format="parquet").to_table()


def main(trace: str) -> None:
    events, kernels, sites = table(trace, "events"), table(trace, "kernels"), table(trace, "sites")
    launches = events.filter(pc.equal(events["kind"], "launch"))
    per_kernel = launches.group_by(["kernel", "adjoint"]).aggregate([("seq", "count")])
    per_kernel = per_kernel.join(kernels.select(["kernel_id", "key"]), "kernel", "kernel_id")
    print("launches per kernel (adjoint = launched by tape.backward):")
    for row in per_kernel.sort_by([("key", "ascending"), ("adjoint", "ascending")]).to_pylist():
        print(f"  {row['key']:<12} adjoint={row['adjoint']!s:<5}  {row['seq_count']:>5}")

    accesses = table(trace, "accesses")
    writes = accesses.filter(pc.greater_equal(accesses["role"], 2))  # 2 write, 3 read and write
    forward = events.filter(pc.equal(events["phase"], 0)).select(["seq", "site"])
    per_site = writes.join(forward, "seq", join_type="inner").group_by("site").aggregate([("seq", "count")])
    per_site = per_site.join(sites.select(["site_id", "line", "text"]), "site", "site_id")
    print("forward lines by arrays written:")
    for row in per_site.sort_by([("seq_count", "descending")]).to_pylist()[:3]:
        print(f"  line {row['line']:<4} {row['seq_count']:>5}  {row['text']}")


if __name__ == "__main__":
    main(sys.argv[1])
