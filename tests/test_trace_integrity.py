"""Damaged traces are refused: a corpus made from a real recorded trace.

One zoo program is recorded once per session (with small flushes, so every table has
several parts); each test damages a copy. A damaged complete trace is one line on stderr
naming the part, exit 2, no traceback, no finding; an incomplete trace with a torn last
part is a warning and an analysis of its consistent prefix.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import warptrace
from tests.zoo import discover, load
from warptrace.cli import main
from warptrace.errors import TraceError, TraceWarning
from warptrace.trace.reader import read_trace
from warptrace.trace.schema import PART_KEY

PROGRAM = "wt101_assign_fixed"  # a fixed twin: a clean analysis, many launches and copies


def _record(path: Path) -> Path:
    from warptrace.record import session

    program = next(p for p in discover() if p.name == PROGRAM)
    module = load(program, module_name="integrity_" + path.stem)
    saved = session.FLUSH_EVENTS, os.environ.get("WARPTRACE_WRITER")
    session.FLUSH_EVENTS = 8  # several parts per table...
    os.environ["WARPTRACE_WRITER"] = "thread"  # ...cut where the recorder flushes
    try:
        warptrace.start(path)
        try:
            module.run()
        finally:
            warptrace.stop()
    finally:
        session.FLUSH_EVENTS = saved[0]
        if saved[1] is None:
            os.environ.pop("WARPTRACE_WRITER", None)
        else:
            os.environ["WARPTRACE_WRITER"] = saved[1]
    return path


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("integrity")
    return _record(folder / "real.wtrace"), _record(folder / "other.wtrace")


@pytest.fixture
def trace(recorded: tuple[Path, Path], tmp_path: Path) -> Path:
    copy = tmp_path / "run.wtrace"
    shutil.copytree(recorded[0], copy)
    return copy


def _meta(trace: Path) -> dict:
    return json.loads((trace / "meta.json").read_text())


def _write_meta(trace: Path, meta: dict) -> None:
    (trace / "meta.json").write_text(json.dumps(meta))


def _parts(trace: Path, table: str) -> list[Path]:
    return sorted((trace / table).glob("part-*.parquet"))


def _rewrite(part: Path, edit: Callable[[pa.Table], pa.Table]) -> None:
    pq.write_table(edit(pq.read_table(part)), part)


# ------------------------------------------------------------------ damages


def truncated_part(trace: Path, other: Path) -> str:
    part = _parts(trace, "events")[1]
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    return f"{part}: corrupt trace part (not a complete Parquet file"


def missing_table(trace: Path, other: Path) -> str:
    shutil.rmtree(trace / "arrays")
    return f"{trace}: table 'arrays' is missing"


def garbage_bytes(trace: Path, other: Path) -> str:
    part = _parts(trace, "accesses")[1]
    data = bytearray(part.read_bytes())
    data[4:36] = bytes(range(101, 133))  # inside the first data page
    part.write_bytes(bytes(data))
    return f"{part}: corrupt trace part (damaged data:"


def zeroed_footer(trace: Path, other: Path) -> str:
    part = _parts(trace, "arrays")[0]
    data = part.read_bytes()
    part.write_bytes(data[:-64] + bytes(64))
    return f"{part}: corrupt trace part (not a complete Parquet file"


def swapped_tables(trace: Path, other: Path) -> str:
    (trace / "events").rename(trace / "swap")
    (trace / "accesses").rename(trace / "events")
    (trace / "swap").rename(trace / "accesses")
    return f"{trace / 'events' / 'part-00000.parquet'}: holds a part of table 'accesses', not of 'events'"


def duplicated_part(trace: Path, other: Path) -> str:
    parts = _parts(trace, "events")
    copy = trace / "events" / f"part-{len(parts):05d}.parquet"
    shutil.copy(parts[1], copy)
    return f"{copy}: is a copy of part 1 of 'events'"


def missing_part(trace: Path, other: Path) -> str:
    part = _parts(trace, "accesses")[1]
    part.unlink()
    return f"{part}: missing (the parts of 'accesses' have a gap)"


def missing_last_part(trace: Path, other: Path) -> str:
    parts = _parts(trace, "events")
    parts[-1].unlink()
    return f"{trace / 'events'}: {len(parts) - 1} parts, but meta.json records {len(parts)}"


def meta_wrong_types(trace: Path, other: Path) -> str:
    meta = _meta(trace)
    meta["counts"] = "lots"
    _write_meta(trace, meta)
    return (
        f"{trace / 'meta.json'}: malformed ('counts' should be an object of row counts per table, not 'lots')"
    )


def meta_complete_not_bool(trace: Path, other: Path) -> str:
    meta = _meta(trace)
    meta["complete"] = "yes"
    _write_meta(trace, meta)
    return f"{trace / 'meta.json'}: malformed ('complete' should be true or false"


def foreign_part(trace: Path, other: Path) -> str:
    part = _parts(trace, "events")[1]
    shutil.copy(_parts(other, "events")[1], part)
    return f"{part}: a part of another trace (trace id {_meta(other)['trace_id']}, this trace is {_meta(trace)['trace_id']})"


def unknown_kind(trace: Path, other: Path) -> str:
    part = _parts(trace, "events")[1]

    def edit(table: pa.Table) -> pa.Table:
        kinds = table.column("kind").to_pylist()
        kinds[2] = "explode"
        return table.set_column(table.schema.get_field_index("kind"), "kind", pa.array(kinds, pa.string()))

    _rewrite(part, edit)
    return f"{part}: unknown events.kind value 'explode'"


def dangling_array(trace: Path, other: Path) -> str:
    """An access names an array no part holds (counts and part facts kept consistent)."""
    accesses = pq.read_table(_parts(trace, "accesses")[0])
    array_id = accesses.column("array_id")[0].as_py()
    for part in _parts(trace, "arrays"):
        table = pq.read_table(part)
        if array_id in table.column("array_id").to_pylist():
            kept = table.filter(pa.compute.not_equal(table.column("array_id"), array_id))
            facts = json.loads(table.schema.metadata[PART_KEY.encode()])
            facts["rows"] = kept.num_rows
            pq.write_table(kept.replace_schema_metadata({PART_KEY: json.dumps(facts)}), part)
    meta = _meta(trace)
    meta["counts"]["arrays"] -= 1
    _write_meta(trace, meta)
    return f"{_parts(trace, 'accesses')[0]}: accesses.array_id {array_id} names no arrays row"


def malformed_host_detail(trace: Path, other: Path) -> str:
    """A value read whose host-transfer facts are not what the recorder writes."""
    for part in _parts(trace, "events"):
        table = pq.read_table(part)
        kinds = table.column("kind").to_pylist()
        if "value_read" not in kinds:
            continue
        row = kinds.index("value_read")
        details = table.column("detail").to_pylist()
        details[row] = '{"host": "read", "nbytes": 12, "digest": "not-hex"}'

        def edit(table: pa.Table, details: list = details) -> pa.Table:
            index = table.schema.get_field_index("detail")
            return table.set_column(index, "detail", pa.array(details, pa.string()))

        _rewrite(part, edit)
        return f"{part}: malformed host-transfer detail"
    raise AssertionError("the recorded program reads no values")


DAMAGES = {
    f.__name__: f
    for f in (
        truncated_part, missing_table, garbage_bytes, zeroed_footer, swapped_tables, duplicated_part,
        missing_part, missing_last_part, meta_wrong_types, meta_complete_not_bool, foreign_part,
        unknown_kind, dangling_array, malformed_host_detail,
    )
}  # fmt: skip


def test_the_undamaged_trace_is_clean(recorded, capsys):
    trace = read_trace(recorded[0])
    assert trace.complete and not trace.warnings
    assert all(len(_parts(recorded[0], t)) >= 2 for t in ("events", "accesses", "arrays"))
    assert main(["analyze", str(recorded[0])]) == 0
    assert not warptrace.analyze(recorded[0]).findings


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_trace_is_one_line_and_exit_2(damage, trace, recorded, capsys):
    expected = DAMAGES[damage](trace, recorded[1])
    assert main(["analyze", str(trace)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no finding
    assert err.count("\n") == 1 and err.startswith("warptrace: error: "), err
    assert expected in err and "Traceback" not in err
    with pytest.raises(TraceError) as caught:
        warptrace.analyze(trace)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def _old_style(trace: Path) -> None:
    """As an older warptrace wrote it: no trace id, no part counts, no part metadata."""
    for part in trace.glob("*/part-*.parquet"):
        _rewrite(part, lambda table: table.replace_schema_metadata(None))
    meta = _meta(trace)
    del meta["trace_id"], meta["parts"]
    _write_meta(trace, meta)


def test_old_traces_stay_readable(trace):
    _old_style(trace)
    assert not warptrace.analyze(trace).findings


def test_duplicated_part_of_an_old_trace_breaks_the_sequence(trace, capsys):
    _old_style(trace)
    parts = _parts(trace, "events")
    shutil.copy(parts[1], trace / "events" / f"part-{len(parts):05d}.parquet")
    assert main(["analyze", str(trace)]) == 2
    err = capsys.readouterr().err
    assert f"part-{len(parts):05d}.parquet: event seq" in err and "sequence numbers must increase" in err


def test_duplicated_accesses_of_an_old_trace_break_the_counts(trace, capsys):
    _old_style(trace)
    parts = _parts(trace, "accesses")
    shutil.copy(parts[0], trace / "accesses" / f"part-{len(parts):05d}.parquet")
    with pytest.raises(TraceError, match=r"rows, but meta\.json counts"):
        read_trace(trace)


def _incomplete(trace: Path) -> None:
    meta = _meta(trace)
    meta.update(complete=False, exit_status=None, counts={})
    del meta["parts"]
    _write_meta(trace, meta)


@pytest.mark.parametrize("table", ["events", "accesses", "arrays"])
def test_incomplete_trace_with_a_torn_part_is_analyzed_up_to_it(table, trace, capsys):
    _incomplete(trace)
    full = read_trace(trace)
    last = _parts(trace, table)[-1]
    last.write_bytes(last.read_bytes()[:100])
    with pytest.warns(TraceWarning) as caught:
        cut = read_trace(trace)
    assert len(caught) == 1 and f"{last} is torn" in str(caught[0].message)
    assert cut.warnings == [str(caught[0].message)]
    events = cut.tables["events"].column("seq").to_pylist()
    assert events == full.tables["events"].column("seq").to_pylist()[: len(events)]
    assert set(cut.tables["accesses"].column("seq").to_pylist()) <= set(events)
    assert set(cut.tables["accesses"].column("array_id").to_pylist()) <= set(
        cut.tables["arrays"].column("array_id").to_pylist()
    )
    for command in ("analyze", "show"):
        assert main([command, str(trace)]) == 0
        err = capsys.readouterr().err
        assert err.count(f"{last} is torn") == 1 and "Traceback" not in err
        assert err.startswith("warptrace: warning: ")


def test_killed_between_the_accesses_and_the_events_of_a_flush(trace, recwarn):
    """The writer puts a flush's accesses part before its events part: accesses of events
    that never reached the disk are dropped silently (the trace is incomplete, not damaged)."""
    _incomplete(trace)
    _parts(trace, "events")[-1].unlink()
    loaded = read_trace(trace)
    assert not loaded.warnings and not recwarn.list
    events = set(loaded.tables["events"].column("seq").to_pylist())
    assert set(loaded.tables["accesses"].column("seq").to_pylist()) <= events
    assert not warptrace.analyze(trace).findings


def test_incomplete_trace_with_a_duplicated_part_is_refused(trace, capsys):
    _incomplete(trace)
    parts = _parts(trace, "events")
    copy = trace / "events" / f"part-{len(parts):05d}.parquet"
    shutil.copy(parts[0], copy)
    assert main(["analyze", str(trace)]) == 2
    assert f"{copy}: is a copy of part 0" in capsys.readouterr().err


def test_version_2_traces_stay_readable(trace):
    """Schema 3 added host-transfer facts in events.detail and the bridge kind, no column."""
    meta = _meta(trace)
    meta["schema_version"] = 2
    _write_meta(trace, meta)
    assert read_trace(trace).meta["schema_version"] == 2
    assert not warptrace.analyze(trace).findings
