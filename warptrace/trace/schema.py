"""Table schemas of a ``.wtrace`` directory: the on-disk contract.

A trace is a directory holding ``meta.json`` and one folder per table, each folder a
series of complete Parquet files (``part-00000.parquet``, ...). Any Parquet reader can
query it, e.g. ``pyarrow.dataset.dataset("run.wtrace/events")``.

Small integer codes (kinds, roles, flags) are documented here and nowhere else; the
analyzer and the recorder import these constants. Strings are dictionary-encoded by
Parquet, so repeated labels cost almost nothing on disk.

Design choice (docs/architecture.md): an access row names the *array object*
(``array_id``) and its allocation (``alloc_id``); the view geometry of that object
(byte offset in the allocation, shape, strides, itemsize) lives once in the ``arrays``
table, because a Warp array's pointer, shape and strides never change after
construction. That keeps access rows near 10 bytes on disk while every access still
resolves to ``(alloc_id, offset, shape, strides, itemsize)`` by a join on
``array_id``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# History of SCHEMA_VERSION (bump on any incompatible change, never reuse a number):
#   1  first layout: events, accesses, arrays, allocs, kernels, kernel_args, sites.
#   2  kernels.source_model: the kernel-source model (warptrace.kernel_source.KernelSource)
#      of each kernel as JSON, computed once at record time from the kernel and the
#      @wp.func callees and custom adjoints it reaches. Version-1 traces stay readable:
#      the column reads as "" and the analyzer rebuilds the model from kernels.source.
#   3  the optional ``numerics`` table (value summaries, written only by a run with
#      ``--check-numerics``) and meta.json ``numerics``. Older traces have no such table;
#      the reader opens them unchanged and the WT5xx rules stay silent.
#   4  host-transfer digests: events.detail of a value_read (numpy()) and of a copy from host
#      memory Warp did not allocate (wp.array(data=ndarray), assign(ndarray)) holds
#      {"host": "read"|"write", "nbytes": n, "digest": 16 hex digits or null above the
#      recorder's size cap} (HOST_DETAIL_KEYS); a copy's offsets stay in the same object.
#      Event kind "bridge": memory shared with another framework (torch, JAX, DLPack, the
#      array interface protocols) from that event on.
#      No new column: versions 1-3 read as traces without host digests or bridges.
#   5  kernels.source_model holds the sources the kernel-source model is built from
#      ({"inputs": 1, "kernel": ..., "functions": [...]}) instead of the built model: the
#      analyzer builds it (KernelSource.from_json), the recorded program no longer pays
#      for parsing. Versions 2-4 (a built model) read as before.
SCHEMA_VERSION = 5
SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3, 4, 5)

# ---------------------------------------------------------------- event kinds
# events.kind values (strings, dictionary-encoded on disk).
LAUNCH = "launch"  # kernel launch through wp.launch (forward, or adjoint=True in backward)
CMD_LAUNCH = "cmd_launch"  # Launch.launch() replay of a record_cmd=True launch (never taped)
COPY = "copy"  # wp.copy / clone / assign / array(data=...) copy; nested grad copy has parent
MEMSET = "memset"  # zero_ / fill_ (value column holds the fill value when scalar)
NATIVE = "native"  # opaque native utility (array_scan, array_sum, radix sort, ...)
VALUE_READ = "value_read"  # numpy() / list(): values read back to the host (detail: host digest, v4)
SET_REQUIRES_GRAD = "set_requires_grad"  # array_id, value = 0/1
SET_RETAIN_GRAD = "set_retain_grad"  # array_id, value = 0/1
SET_GRAD = "set_grad"  # array_id = owner, ref_id = new grad array (or -1 for None)
TAPE_CREATE = "tape_create"
TAPE_ENTER = "tape_enter"
TAPE_EXIT = "tape_exit"
BACKWARD_BEGIN = "backward_begin"  # array_id = loss array or -1; detail = JSON of grads= keys
BACKWARD_END = "backward_end"
TAPE_ZERO = "tape_zero"
TAPE_RESET = "tape_reset"
RECORD_FUNC = "record_func"  # a callable recorded on the tape (e.g. copy adjoint)
CAPTURE_BEGIN = "capture_begin"  # ref_id = graph id
CAPTURE_END = "capture_end"  # ref_id = graph id
CAPTURE_LAUNCH = "capture_launch"  # ref_id = graph id: replay of the captured events
BRIDGE = "bridge"  # memory shared with another framework from here on (v4); detail: BRIDGE_* facts

EVENT_KINDS = (
    LAUNCH, CMD_LAUNCH, COPY, MEMSET, NATIVE, VALUE_READ, SET_REQUIRES_GRAD, SET_RETAIN_GRAD,
    SET_GRAD, TAPE_CREATE, TAPE_ENTER, TAPE_EXIT, BACKWARD_BEGIN, BACKWARD_END, TAPE_ZERO,
    TAPE_RESET, RECORD_FUNC, CAPTURE_BEGIN, CAPTURE_END, CAPTURE_LAUNCH, BRIDGE,
)  # fmt: skip
# In-memory integer code of each kind (its position in EVENT_KINDS): the recorder buffers
# these and the analyzer compares against them; on disk the kind is the string.
EVENT_KIND_CODES: dict[str, int] = {kind: code for code, kind in enumerate(EVENT_KINDS)}

# events.phase
FORWARD = 0
BACKWARD = 1  # anything happening inside Tape.backward(): adjoint launches, loss seed, ...

# events.detail of host transfers (v4): "host" is HOST_READ or HOST_WRITE, "nbytes" the bytes
# transferred, "digest" a 64-bit BLAKE2b of them as 16 hex digits (null above the size cap);
# a read whose result is a zero-copy view of the array (numpy() on the CPU) adds "view": true:
# the host shares that memory from then on.
HOST_READ = "read"
HOST_WRITE = "write"
HOST_DETAIL_KEYS = ("host", "nbytes", "digest")

# events.detail of a BRIDGE event (v4): {"framework": one of BRIDGE_FRAMEWORKS, "direction":
# BRIDGE_EXPORT (a Warp array handed out: wp.to_torch, to_jax, to_dlpack / __dlpack__,
# __array_interface__, __cuda_array_interface__; its accesses are reads) or BRIDGE_IMPORT
# (a Warp array made over another framework's memory: from_torch, from_jax, from_dlpack;
# accesses ROLE_NONE)}. The other framework may read or write that memory at any later time.
BRIDGE_EXPORT = "export"
BRIDGE_IMPORT = "import"
BRIDGE_FRAMEWORKS = ("torch", "jax", "dlpack", "array_interface", "cuda_array_interface")

# ---------------------------------------------------------------- access roles
# accesses.role: what the event did to the memory of that array object.
ROLE_NONE = 0  # passed to the kernel but neither read nor written by it
ROLE_READ = 1
ROLE_WRITE = 2
ROLE_READWRITE = 3  # read and written by the same event

# accesses.flags (bit set)
FLAG_ACCUMULATE = 1  # every write is an accumulation (+=, -=, atomic_*): no overwrite hazard
FLAG_GRAD = 2  # the array is a gradient buffer (adjoint argument or .grad of something)
FLAG_FIELD = 4  # reached through a struct field (accesses.field holds the path)
FLAG_STORE = 8  # at least one plain store (y[i] = ...) writes it
FLAG_CONSUME = 16  # adjoint launch: output gradient read then consumed (zeroed) by stores
FLAG_UNCERTAIN = 32  # the recorder could not analyse the kernel; role is conservative

# arrays.kind
ARRAY_OWNED = "owned"  # fresh allocation (its own alloc_id)
ARRAY_VIEW = "view"  # slice/view/reshape/transpose of a Warp array (base_id is the parent)
ARRAY_PTR_ALIAS = "ptr_alias"  # wp.array(ptr=...) with no owner link: resolved by address
ARRAY_EXTERNAL = "external"  # numpy / torch / DLPack zero-copy memory
ARRAY_GRAD = "grad"  # a .grad buffer (grad_of names the owner)
ARRAY_PREEXISTING = "preexisting"  # created before tracing started; identity by address
ARRAY_OPAQUE = "opaque"  # indexedarray / fabricarray / unknown: geometry unknown

# allocs.kind
ALLOC_OWNED = "owned"
ALLOC_EXTERNAL = "external"  # memory warptrace did not see being allocated

TABLES = ("events", "accesses", "arrays", "allocs", "kernels", "kernel_args", "sites")
# Tables a trace holds only when the run asked for them (the folder exists only then).
OPTIONAL_TABLES = ("numerics",)
ALL_TABLES = TABLES + OPTIONAL_TABLES

# numerics.what: why the summary was taken (see the ``numerics`` schema below).
NUM_WRITE = "write"  # an array the event (launch, adjoint launch, copy, memset) wrote, after it
NUM_INPUT = "input"  # an array the launch only read (kept for launches that wrote non-finite
#                      values, and for kernels that reach a custom adjoint)
NUM_LEAF_GRAD = "leaf_grad"  # after a backward: the gradient buffer of a leaf of the tape
NUM_LOSS = "loss"  # after a backward: the loss array given to Tape.backward
NUM_STEP = "step"  # a forward launch continuing a chain of launches of its kernel (it reads,
#                    under some argument, the array the previous launch of that kernel wrote
#                    under argument `arg`): the summary of (its output under `arg`) - (that
#                    input); array_id = the output, owner = the input, hash "". WT504 reads it.
NUM_LEAF = "leaf"  # after a backward: the values of a leaf of the tape (array_id = the leaf); the
#                    parameter norms of the health timeline, and whether an update changed them
NUM_LEAF_CHANGE = "leaf_change"  # after a backward: (leaf values) - (its values at the previous
#                    backward that summarized it), array_id = the leaf, hash ""; kept only for
#                    leaves of at most LEAF_CHANGE_MAX elements (the recorder keeps one copy,
#                    LEAF_CHANGE_BUDGET elements in all)
NUM_GRAD_CHANGE = "grad_change"  # the same for the leaf's gradient buffer (array_id = the
#                    buffer, owner = the leaf): |g_k - g_k-1| / |p_k - p_k-1| is the curvature
#                    along the optimizer's path (analysis.divergence)
LEAF_CHANGE_MAX = 1 << 16  # elements
LEAF_CHANGE_BUDGET = 1 << 22  # elements of all the leaves the recorder keeps a copy of
# leaf, leaf_change and grad_change were added within version 5 (an older reader refuses them)
NUMERICS_WHAT = (
    NUM_WRITE, NUM_INPUT, NUM_LEAF_GRAD, NUM_LOSS, NUM_STEP, NUM_LEAF, NUM_LEAF_CHANGE, NUM_GRAD_CHANGE,
)  # fmt: skip


def _build_schemas() -> dict[str, pa.Schema]:
    """The Arrow schema of every table. Built on first use of :data:`SCHEMAS` (see
    ``__getattr__`` below): the recorder imports this module's codes without pyarrow,
    whose import (~0.1 s) a traced program pays only when its own process writes parts."""
    import pyarrow as pa

    _i8, _i16, _i32, _i64 = pa.int8(), pa.int16(), pa.int32(), pa.int64()
    _str, _bool, _f64 = pa.string(), pa.bool_(), pa.float64()

    # fmt: off
    schemas: dict[str, pa.Schema] = {
        # One row per event, in seq order within a part.
        "events": pa.schema([
            ("seq", _i64),  # global, monotonic, starts at 0
            ("kind", _str),  # one of EVENT_KINDS
            ("tape", _i32),  # active tape id (TAPE_* events: the tape itself); -1 = none
            ("recorded", _bool),  # the event was recorded on `tape` (so backward replays it)
            ("phase", _i8),  # FORWARD / BACKWARD
            ("adjoint", _bool),  # launch with adjoint=True
            ("executed", _bool),  # false for launches/copies inside graph capture
            ("site", _i32),  # sites.site_id of the user call site; -1 unknown
            ("kernel", _i32),  # kernels.kernel_id for launches; -1 otherwise
            ("thread", _i32),  # small per-run thread index (0 = first thread seen)
            ("t_ns", _i64),  # time.perf_counter_ns() at the event
            ("parent", _i64),  # seq of the enclosing event (nested grad copy); -1
            ("array_id", _i64),  # subject array (SET_*, VALUE_READ, BACKWARD_BEGIN loss); -1
            ("ref_id", _i64),  # second reference (SET_GRAD new grad, graph id); -1
            ("value", _f64),  # memset fill value, flag value; null otherwise
            ("dim", _str),  # launch dims "64" / "32x3"; null otherwise
            ("detail", _str),  # rare extra facts as JSON; null otherwise
        ]),
        # One row per (event, array object) touched by a launch, copy, memset, native or read.
        "accesses": pa.schema([
            ("seq", _i64),
            ("array_id", _i64),  # arrays.array_id
            ("alloc_id", _i64),  # denormalized from arrays for direct queries
            ("role", _i8),  # ROLE_*
            ("flags", _i8),  # FLAG_* bits
            ("arg", _str),  # kernel argument name ("src"/"dest" for copies, "" for memsets)
            ("field", _str),  # struct field path below the argument ("q", "inner.q"); "" if none
        ]),
        # One row per Warp array object seen (including grads, views and aliases).
        "arrays": pa.schema([
            ("array_id", _i64),
            ("alloc_id", _i64),  # containing allocation; -1 when unknown (opaque, size 0)
            ("offset", _i64),  # byte offset of element 0 from the allocation start
            ("shape", pa.list_(_i64)),
            ("strides", pa.list_(_i64)),  # bytes
            ("itemsize", _i32),
            ("dtype", _str),
            ("device", _str),
            ("kind", _str),  # ARRAY_*
            ("requires_grad", _bool),  # at registration; later changes are SET_* events
            ("retain_grad", _bool),
            ("grad_of", _i64),  # array_id whose .grad this is; -1
            ("base_id", _i64),  # array_id of the parent view/owner object; -1
            ("seq", _i64),  # seq of the last event before registration (creation order)
            ("site", _i32),  # allocation call site
            ("label", _str),  # user label from the call-site line ("stage1", "state.q") or ""
        ]),
        # One row per allocation (fresh memory or external memory first seen).
        "allocs": pa.schema([
            ("alloc_id", _i64),  # monotonic; pointer reuse after free gets a new id
            ("ptr", _i64),
            ("nbytes", _i64),
            ("device", _str),
            ("kind", _str),  # ALLOC_*
            ("seq", _i64),
            ("site", _i32),
        ]),
        # One row per analysed kernel (per key, module hash and overload).
        "kernels": pa.schema([
            ("kernel_id", _i32),
            ("key", _str),  # kernel key (function name)
            ("module", _str),
            ("file", _str),
            ("line", _i32),  # line of the `def`
            ("source", _str),  # kernel source text (for offline kernel-source rules)
            ("enable_backward", _bool),  # effective (kernel option, else module option)
            ("custom_grad", _str),  # JSON list of user functions with func_grad
            ("custom_replay", _str),  # JSON list of user functions with func_replay
            ("native_snippets", _bool),
            ("analysis", _str),  # "codegen+ast", "ast", "failed: <why>"
            ("source_model", _str),  # JSON of the kernel-source model; "" when unknown (v2)
        ]),
        # One row per (kernel, argument, field path): the kernel's read/write facts.
        "kernel_args": pa.schema([
            ("kernel_id", _i32),
            ("index", _i16),  # argument position
            ("name", _str),
            ("type", _str),
            ("field", _str),  # struct field path, "" for the argument itself
            ("is_array", _bool),
            ("read", _bool),
            ("write", _bool),  # any write (store or accumulation)
            ("store", _bool),  # a plain store (y[i] = ...) somewhere
            ("accumulate", _bool),  # += / -= / atomic_*
            ("write_line", _i32),  # first source line writing it (absolute file line); -1
            ("read_line", _i32),  # first source line reading it; -1
        ]),
        # Interned user call sites.
        "sites": pa.schema([
            ("site_id", _i32),
            ("file", _str),
            ("line", _i32),
            ("function", _str),
            ("text", _str),  # stripped source line
            ("label", _str),  # assignment target on that line ("x", "state.q") or ""
        ]),
        # Optional (``--check-numerics``, schema >= 3): one row per (event, array) summary of an
        # array's values, never the values themselves. Computed where the array lives, after
        # the event ran. ``diff`` compares runs on these columns.
        "numerics": pa.schema([
            ("seq", _i64),  # events.seq the summary follows (BACKWARD_END for leaf_grad / loss)
            ("array_id", _i64),  # arrays.array_id summarized (for leaf_grad: the gradient buffer)
            ("owner", _i64),  # leaf_grad/grad_change: the leaf whose .grad it is; step: the input; -1 otherwise
            ("what", _str),  # NUMERICS_WHAT
            ("arg", _str),  # kernel argument ("src"/"dest" for copies, "" for memsets / backward)
            ("field", _str),  # struct field path below the argument, "" if none
            ("count", _i64),  # scalar elements (a vec3 element counts 3)
            ("nonfinite", _i64),  # NaN and +-inf elements
            ("zeros", _i64),  # elements exactly 0.0 (or 0)
            ("first_bad", _i64),  # flat index (C order, scalar elements) of the first non-finite; -1
            ("min", _f64),  # over the finite elements; null when there is none
            ("max", _f64),
            ("l2", _f64),  # L2 norm over the finite elements (float64 accumulation)
            ("hash", _str),  # 16 hex digits of blake2b over the element bytes in C order
        ]),
    }
    # fmt: on
    return schemas


# Columns added after version 1: (table, column) -> (first version, value in older traces).
ADDED_COLUMNS: dict[tuple[str, str], tuple[int, object]] = {
    ("kernels", "source_model"): (2, ""),
}

META_FILE = "meta.json"
# meta.json keys: schema_version, trace_id (random hex; absent in older traces), warptrace_version, warp_version, python_version,
# numpy_version, argv, cwd, devices, start_time, end_time (ISO 8601 UTC), exit_status
# (int or null while running), complete (bool), error (str or null), counts (rows per
# table, at close), parts (part files per table, at close; absent in older traces),
# numerics (only with --check-numerics, schema >= 3): {"adjoint_checks": [...]}, one object
# per custom adjoint (@wp.func_grad) reached by a recorded kernel: "func", "file", "line" (of
# the forward function), "grad_func", "grad_file", "grad_line" (of the custom adjoint), "kernel_ids", "precision" ("float64"/"float32"), "samples",
# "skipped_kinks", "worst_rel_error", "worst_case" ("distinct", or "repeated": the same value
# passed to two arguments), "worst_input" (the arguments), "worst_arg", "custom" and
# "finite_difference" (the two derivatives there), "error" (why it could not run, else null).

# Parquet key-value metadata key of every part: JSON {"trace_id", "table", "part" (index),
# "rows", and for events/accesses "first_seq", "last_seq"}. Absent in older traces: the
# reader skips the checks that need it.
PART_KEY = "warptrace.part"


_schemas: dict[str, Any] | None = None


def __getattr__(name: str) -> Any:
    """``SCHEMAS`` (dict of table name -> ``pyarrow.Schema``), built on first access."""
    global _schemas
    if name == "SCHEMAS":
        if _schemas is None:
            _schemas = _build_schemas()
        return _schemas
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
