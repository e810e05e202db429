/* The compiled wp.launch wrapper: the same events as the pure-Python wrapper
 * (warptrace/record/wrap/launch.py, make_launch), without a Python frame. (And, further
 * down, the compiled array.zero_, array.fill_, array.numpy()/list(), wp.copy and the Tape
 * events: FastZero, FastFill, FastRead, FastCopy, FastTapeInit, FastTapeEvent and
 * FastBackward;
 * Identity.register, Recorder.row, array._init_new, array._alloc_grad (FastAllocGrad) and
 * the loops of Tape.zero, the allocation index and the frame walk; the int64 packing of the
 * rows the writer thread sends to the trace-writer process.)
 *
 * One object of type FastLaunch stands in for wp.launch. A call parses Warp's 13
 * parameters (positional or keyword, Warp's own defaults), forwards the caller's
 * arguments unchanged to the original, and appends the LAUNCH event row and its
 * access rows to the recorder's buffers exactly like the Python wrapper's inlined
 * common case. Everything uncommon is the Python code's: record_cmd launches,
 * launches while a graph is captured and kernels of another class
 * (_record_launch), a kernel without a plan or a generic kernel's new overload
 * (plan_for; a known overload is found here: generic_plan), a new dim (dim_code_of), a
 * tape seen for the first time (tape_id_of), an array seen for the first time
 * (Identity.register), a call site not seen yet (Sites.caller) and the flush.
 *
 * Rules kept from the Python wrapper:
 * - an exception while recording goes to rec.fail(exc) (it raises only under
 *   WARPTRACE_STRICT), never into the user's program; the original call's own
 *   exception propagates unchanged;
 * - the rows of one launch are appended under rec.lock (the writer thread swaps the
 *   buffers under it; Python code called in between may release the GIL);
 * - rec is read once per call (state.rec), ts.guard turns the wrapper into the
 *   original call.
 *
 * CPython C API only; built for the Python versions listed in setup.py, imported
 * only where warptrace/record/wrap/launch.py (compiled_launch_type) allows it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>

/* The frame walks of the call sites read the interpreter's own frames (CPython 3.11's
 * _PyInterpreterFrame: code, last instruction, previous frame) where its internal header is
 * installed, as Cython does: walking with PyFrame_GetBack makes a frame object for every
 * frame passed (an allocation's walk passes array.__init__, empty and zeros: ~2,500
 * instructions to make and free them). Without the header (or built with -DWT_NO_IFRAME),
 * the public frame API. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && defined(__has_include) && !defined(WT_NO_IFRAME)
#if __has_include(<internal/pycore_frame.h>)
#define WT_IFRAME 1
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#define WT_UNDEF_BUILD_CORE 1
#endif
#include <internal/pycore_frame.h>
#ifdef WT_UNDEF_BUILD_CORE
#undef Py_BUILD_CORE
#endif
#endif
#endif

/* The interface with the Python side (the arguments of each compiled piece, the Recorder,
 * Identity and AllocIndex attributes read): raise it with every change, and COMPILED_ABI
 * in warptrace/record/compiled.py with it. A build left over from another version is not
 * used. */
#define ABI_VERSION 19

#define NPARAMS 13
#define SITE_SLOTS 64
#define CODE_SLOTS 256
enum {
    P_KERNEL, P_DIM, P_INPUTS, P_OUTPUTS, P_ADJ_INPUTS, P_ADJ_OUTPUTS, P_DEVICE, P_STREAM,
    P_ADJOINT, P_RECORD_TAPE, P_RECORD_CMD, P_MAX_BLOCKS, P_BLOCK_DIM
};
static const char *param_names[NPARAMS] = {
    "kernel", "dim", "inputs", "outputs", "adj_inputs", "adj_outputs", "device", "stream",
    "adjoint", "record_tape", "record_cmd", "max_blocks", "block_dim",
};
static PyObject *s_params[NPARAMS];

/* interned attribute names */
static PyObject *s_rec, *s_local, *s_state, *s_thread_state, *s_guard, *s_copy_ctx, *s_sites, *s_by_pos,
    *s_phase, *s_bw_site, *s_bw_tape, *s_caller, *s_runtime, *s_tape, *s_launches, *s_captures,
    *s_kernel_id, *s_simple, *s_fields, *s_adj, *s_handles, *s_tok, *s_caller_dicts, *s_lock, *s_acquire,
    *s_release, *s_counters, *s_seq, *s_ev, *s_acc, *s_thread, *s_parent, *s_flush_ev_len, *s_flush_acc_len,
    *s_flush_deadline, *s_flush, *s_ident, *s_register, *s_fail, *s_retain_grad,
    *s_backward_code, *s_caller_key, *s_extend, *s_get, *s_ev_extra,
    *s_zeroed, *s_scope_tape, *s_tape_zero_code, *s_size, *s_append, *s_grad_owner_slot, *s_open_seqs, *s_grad_attr;
static PyObject *i_minus1, *i_zero, *i_one, *s_skip_code, *s_external;
static PyObject *s_ndim, *s_cls_attr, *s_dtype_key, *s_next_tape, *s_bw_frame, *s_index, *s_device_cache;
static PyTypeObject *local_type; /* _thread._local */

/* ------------------------------------------------------------------ the session lock */

/* Lock(): a reentrant lock, threading.RLock's interface (acquire(blocking, timeout),
 * release(), the context manager, _is_owned()), for the session (session.py). The compiled
 * wrappers take and release it without a method call: an RLock's acquire() through
 * PyObject_CallNoArgs parses its (empty) keyword arguments each time, ~0.5k instructions of
 * every recorded event. A blocking wait releases the interpreter lock, as RLock's does. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    unsigned long owner, count;
} LockObject;

static PyTypeObject LockType;
static PyTypeObject IntervalsType; /* the allocation index (below) */

/* the lock taken by this thread (waiting without the interpreter lock if need be): 1, or 0
 * when `timeout_us` (-1: none; 0: do not wait) passed first; -1 (an error set) */
static int
lock_take(LockObject *l, PY_TIMEOUT_T timeout_us)
{
    unsigned long me = PyThread_get_thread_ident();
    if (l->count > 0 && l->owner == me) {
        if (l->count == ULONG_MAX) {
            PyErr_SetString(PyExc_OverflowError, "Internal lock count overflowed");
            return -1;
        }
        l->count++;
        return 1;
    }
    PyLockStatus got = PyThread_acquire_lock_timed(l->lock, 0, 0);
    if (got != PY_LOCK_ACQUIRED && timeout_us != 0) {
        Py_BEGIN_ALLOW_THREADS
        got = PyThread_acquire_lock_timed(l->lock, timeout_us, 0);
        Py_END_ALLOW_THREADS
    }
    if (got != PY_LOCK_ACQUIRED)
        return 0;
    l->owner = me;
    l->count = 1;
    return 1;
}

static int
lock_give(LockObject *l)
{
    if (l->count == 0 || l->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return -1;
    }
    if (--l->count == 0) {
        l->owner = 0;
        PyThread_release_lock(l->lock);
    }
    return 0;
}

static PyObject *
lock_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Lock() takes no arguments");
        return NULL;
    }
    LockObject *l = (LockObject *)type->tp_alloc(type, 0);
    if (l == NULL)
        return NULL;
    if ((l->lock = PyThread_allocate_lock()) == NULL) {
        Py_DECREF(l);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate lock");
        return NULL;
    }
    return (PyObject *)l;
}

static void
lock_dealloc(LockObject *l)
{
    if (l->lock != NULL) {
        if (l->count > 0)
            PyThread_release_lock(l->lock);
        PyThread_free_lock(l->lock);
    }
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static PyObject *
lock_acquire(LockObject *l, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pd:acquire", names, &blocking, &timeout))
        return NULL;
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    PY_TIMEOUT_T us = !blocking ? 0 : timeout < 0 ? -1 : (PY_TIMEOUT_T)(timeout * 1e6);
    if (blocking && timeout >= 0 && (double)PY_TIMEOUT_MAX < timeout * 1e6) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    int got = lock_take(l, us);
    if (got < 0)
        return NULL;
    return PyBool_FromLong(got);
}

static PyObject *
lock_enter(LockObject *l, PyObject *unused)
{
    if (lock_take(l, -1) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
lock_release(LockObject *l, PyObject *unused)
{
    if (lock_give(l) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
lock_exit(LockObject *l, PyObject *args)
{
    return lock_release(l, NULL);
}

static PyObject *
lock_is_owned(LockObject *l, PyObject *unused)
{
    return PyBool_FromLong(l->count > 0 && l->owner == PyThread_get_thread_ident());
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool (as threading.RLock's)"},
    {"release", (PyCFunction)lock_release, METH_NOARGS, "release once (as threading.RLock's)"},
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)lock_exit, METH_VARARGS, NULL},
    {"_is_owned", (PyCFunction)lock_is_owned, METH_NOARGS, "whether this thread holds it"},
    {NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.Lock",
    .tp_basicsize = sizeof(LockObject),
    .tp_dealloc = (destructor)lock_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Lock(): the session's reentrant lock (threading.RLock's interface; see session.py)",
    .tp_methods = lock_methods,
    .tp_new = lock_new,
};

/* The session's event counter, flush limits and row buffers (counters.py, CountedRecorder):
 * C fields the compiled wrappers read, advance and append to without a dictionary lookup or
 * an int object, and the Recorder's attributes of those names forward to. */
typedef struct {
    PyObject_HEAD
    long long seq, flush_ev_len, flush_acc_len, flush_deadline;
    PyObject *ev, *acc, *ev_extra; /* the row buffers (rebound at each flush) */
} CountersObject;

static PyMemberDef counters_members[] = {
    {"seq", T_LONGLONG, offsetof(CountersObject, seq), 0, "the next event sequence number"},
    {"flush_ev_len", T_LONGLONG, offsetof(CountersObject, flush_ev_len), 0, "values of event rows that flush"},
    {"flush_acc_len", T_LONGLONG, offsetof(CountersObject, flush_acc_len), 0, "values of access rows that flush"},
    {"flush_deadline", T_LONGLONG, offsetof(CountersObject, flush_deadline), 0, "perf_counter_ns() that flushes"},
    {"ev", T_OBJECT_EX, offsetof(CountersObject, ev), 0, "the event rows"},
    {"acc", T_OBJECT_EX, offsetof(CountersObject, acc), 0, "the access rows"},
    {"ev_extra", T_OBJECT_EX, offsetof(CountersObject, ev_extra), 0, "the events' (seq, value, detail)"},
    {NULL},
};

static int
counters_traverse(CountersObject *c, visitproc visit, void *arg)
{
    Py_VISIT(c->ev);
    Py_VISIT(c->acc);
    Py_VISIT(c->ev_extra);
    return 0;
}

static int
counters_clear(CountersObject *c)
{
    Py_CLEAR(c->ev);
    Py_CLEAR(c->acc);
    Py_CLEAR(c->ev_extra);
    return 0;
}

static void
counters_dealloc(CountersObject *c)
{
    PyObject_GC_UnTrack(c);
    counters_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* a row buffer the Counters hold (new reference), or an AttributeError naming it */
static PyObject *
counters_rows(PyObject *held, PyObject *name)
{
    if (held == NULL) {
        PyErr_Format(PyExc_AttributeError, "Recorder.%U", name);
        return NULL;
    }
    Py_INCREF(held);
    return held;
}

static PyObject *
counters_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (!_PyArg_NoPositional("Counters", args) || !_PyArg_NoKeywords("Counters", kwds))
        return NULL;
    return type->tp_alloc(type, 0); /* every field 0 (NULL) */
}

static PyTypeObject CountersType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.Counters",
    .tp_basicsize = sizeof(CountersObject),
    .tp_dealloc = (destructor)counters_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)counters_traverse,
    .tp_clear = (inquiry)counters_clear,
    .tp_doc = "Counters(): a session's seq, flush limits and row buffers as C fields (counters.py)",
    .tp_members = counters_members,
    .tp_new = counters_new,
};

/* Attributes a Recorder sets in __init__ and never rebinds (see session.py), read once
 * per session instead of once per launch. A launch holds a reference to the Session it
 * started with: another thread may start a new session meanwhile (the rec reference
 * also means a new Recorder can never have the address of the one cached). */
typedef struct {
    PyObject_HEAD
    PyObject *rec, *dict, *local, *sites, *by_pos, *caller_dicts, *acquire, *release, *tok,
        *register_, *captures;
    PyObject *skip; /* Sites.skip_code (callsite._skip_code) for the frame walk; NULL: none */
    PyObject *external; /* Identity.external: alloc ids of host memory Warp did not allocate */
    int ts_by_thread; /* rec.local is a _thread._local: its .state is per thread */
    LockObject *clock; /* rec.lock when it is a Lock (taken without a call), else NULL */
    /* rec.ident (Identity), its __dict__, its index when it is the compiled Intervals (else
     * NULL) and its _device_cache dict (else NULL): set in Identity.__init__, never rebound */
    PyObject *ident, *ident_dict, *index, *device_cache;
    /* rec.counters when it is the compiled Counters and the Recorder's seq and flush_*
     * forward to it (never rebound), else NULL: those are plain attributes in rec.dict */
    CountersObject *counters;
    /* by_pos's answers for the frame walk of allocations, by code object and offset (by_pos
     * keeps its codes alive, and a site once interned stays) */
    struct { void *code; int lasti; PyObject *site; } pos_cache[SITE_SLOTS];
} Session;

static int
session_traverse(Session *ss, visitproc visit, void *arg)
{
    Py_VISIT(ss->rec);
    Py_VISIT(ss->dict);
    Py_VISIT(ss->local);
    Py_VISIT(ss->sites);
    Py_VISIT(ss->by_pos);
    Py_VISIT(ss->caller_dicts);
    Py_VISIT(ss->clock);
    Py_VISIT(ss->acquire);
    Py_VISIT(ss->release);
    Py_VISIT(ss->tok);
    Py_VISIT(ss->register_);
    Py_VISIT(ss->captures);
    Py_VISIT(ss->skip);
    Py_VISIT(ss->external);
    Py_VISIT(ss->ident);
    Py_VISIT(ss->ident_dict);
    Py_VISIT(ss->index);
    Py_VISIT(ss->device_cache);
    Py_VISIT(ss->counters);
    return 0;
}

static int
session_clear(Session *ss)
{
    Py_CLEAR(ss->rec);
    Py_CLEAR(ss->dict);
    Py_CLEAR(ss->local);
    Py_CLEAR(ss->sites);
    Py_CLEAR(ss->by_pos);
    Py_CLEAR(ss->caller_dicts);
    Py_CLEAR(ss->clock);
    Py_CLEAR(ss->acquire);
    Py_CLEAR(ss->release);
    Py_CLEAR(ss->tok);
    Py_CLEAR(ss->register_);
    Py_CLEAR(ss->captures);
    Py_CLEAR(ss->skip);
    Py_CLEAR(ss->external);
    Py_CLEAR(ss->ident);
    Py_CLEAR(ss->ident_dict);
    Py_CLEAR(ss->index);
    Py_CLEAR(ss->device_cache);
    Py_CLEAR(ss->counters);
    for (int i = 0; i < SITE_SLOTS; i++) {
        ss->pos_cache[i].code = NULL;
        Py_CLEAR(ss->pos_cache[i].site);
    }
    return 0;
}

static void
session_dealloc(Session *ss)
{
    PyObject_GC_UnTrack(ss);
    session_clear(ss);
    Py_TYPE(ss)->tp_free((PyObject *)ss);
}

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.Session",
    .tp_basicsize = sizeof(Session),
    .tp_dealloc = (destructor)session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)session_traverse,
    .tp_clear = (inquiry)session_clear,
};

/* the __slots__ members read: ThreadState's, then LaunchPlan's, then ThreadState's again */
enum { O_GUARD, O_PHASE, O_BW_SITE, O_BW_TAPE, O_THREAD, O_PARENT, O_BW_FRAME, O_COPY_CTX, O_KERNEL_ID,
       O_SIMPLE, O_FIELDS, O_ADJ, O_ZEROED, O_SCOPE_TAPE, O_GRAD_OWNER, NSLOTS };

/* Offsets of a type's __slots__ members, valid while the type is unchanged: the
 * version tag CPython gives a type on lookup and resets when the type (or a base)
 * is modified. */
typedef struct {
    PyTypeObject *type;
    unsigned int tag;
    Py_ssize_t off[NSLOTS];
} SlotCache;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *original;
    PyObject *defaults;      /* tuple: Warp's defaults of the 11 optional parameters */
    PyObject *state_dict;    /* warptrace.record.state.__dict__ */
    PyObject *context_dict;  /* warp._src.context.__dict__ */
    PyObject *kernel_class;
    PyObject *plans;         /* state.plans (cleared, never replaced) */
    PyObject *dims;          /* state.dims */
    PyObject *tape_attr;     /* "_warptrace_tape" */
    PyObject *state_attr;    /* identity.STATE */
    PyObject *record_launch; /* launch._record_launch */
    PyObject *plan_for;
    PyObject *dim_code_of;
    PyObject *tape_id_of;
    PyObject *perf_ns;
    PyObject *launch_code;   /* EVENT_KIND_CODES[LAUNCH] */
    PyObject *generic_args;  /* state.generic_args: generic kernel -> positions (plans._type_key) */
    PyObject *generic_plans; /* state.generic_plans: (kernel, type key) -> plan */
    PyObject *array_class;   /* warp.array */
    unsigned long long calls; /* launches recorded by the C path (tests) */

    /* the recorder's attributes that hold for its whole session */
    Session *session;
    /* this thread's ThreadState (Python thread ids are never reused) */
    unsigned long long ts_thread;
    PyObject *c_ts;
    /* slot offsets of ThreadState and LaunchPlan (-1: use getattr) */
    SlotCache ts_slots, plan_slots;
    PyObject *weakrefs;
    /* user positions seen in Sites.by_pos: (code, f_lasti) -> site (a hit stays one) */
    struct { void *code; int lasti; PyObject *site; } site_cache[SITE_SLOTS];
} FastLaunch;

/* ------------------------------------------------------------------ helpers */

/* getattr(obj, name, None) as a new reference (NULL with an error set on other errors).
 * A missing attribute raises no AttributeError on the way (formatting its message costs
 * more than the rest of a memset's recording): most arrays made before start() have no
 * warptrace attribute. */
static PyObject *
getattr_or_none(PyObject *obj, PyObject *name)
{
    PyObject *value = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyObject_GetOptionalAttr(obj, name, &value) < 0)
        return NULL;
#else
    if (_PyObject_LookupAttr(obj, name, &value) < 0)
        return NULL;
#endif
    if (value == NULL)
        Py_RETURN_NONE;
    return value;
}

/* obj.name where the attribute lives in the instance's __dict__ (a new reference): read from
 * the dict in place when obj's type takes the generic getattr, keeps a dict and has no
 * attribute of that name (nothing on the class can take precedence over the dict or answer for
 * it), else getattr. Absent from the dict: Py_None when absent_none, else getattr's
 * AttributeError. The attribute reads of every array a launch or an allocation records
 * (~80 instructions fewer each than the generic lookup's path to the same dict entry). */
static PyObject *
dict_attr(PyObject *obj, PyObject *name, int absent_none)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp->tp_getattro == PyObject_GenericGetAttr && tp->tp_dictoffset != 0 && _PyType_Lookup(tp, name) == NULL) {
        PyObject **dictptr = _PyObject_GetDictPtr(obj);
        PyObject *dict = dictptr != NULL ? *dictptr : NULL;
        if (dict != NULL) {
            PyObject *v = PyDict_GetItemWithError(dict, name);
            if (v != NULL) {
                Py_INCREF(v);
                return v;
            }
            if (PyErr_Occurred())
                return NULL;
            if (absent_none)
                Py_RETURN_NONE;
        }
    }
    return absent_none ? getattr_or_none(obj, name) : PyObject_GetAttr(obj, name);
}

/* seq[i] as a new reference (tuples and lists without the generic protocol) */
static PyObject *
item(PyObject *seq, Py_ssize_t i)
{
    if (PyTuple_CheckExact(seq) && i >= 0 && i < PyTuple_GET_SIZE(seq)) {
        PyObject *v = PyTuple_GET_ITEM(seq, i);
        Py_INCREF(v);
        return v;
    }
    if (PyList_CheckExact(seq) && i >= 0 && i < PyList_GET_SIZE(seq)) {
        PyObject *v = PyList_GET_ITEM(seq, i);
        Py_INCREF(v);
        return v;
    }
    return PySequence_GetItem(seq, i);
}

/* x as a tuple (new reference): the plan's rows and paths are tuples, and a tuple
 * cannot change under the items borrowed from it while Python code runs */
static PyObject *
as_tuple(PyObject *x)
{
    if (PyTuple_CheckExact(x)) {
        Py_INCREF(x);
        return x;
    }
    return PySequence_Tuple(x);
}

/* unpack a plan row of exactly n items into out (borrowed from *holder, a new reference) */
static int
unpack(PyObject *row, Py_ssize_t n, PyObject **out, PyObject **holder)
{
    PyObject *fast = as_tuple(row);
    if (fast == NULL)
        return -1;
    if (PyTuple_GET_SIZE(fast) != n) {
        PyErr_Format(PyExc_ValueError, "plan row of %zd items, expected %zd", PyTuple_GET_SIZE(fast), n);
        Py_DECREF(fast);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = PyTuple_GET_ITEM(fast, i);
    *holder = fast;
    return 0;
}

#define PACK_MAX_COLUMNS 32
static int int64_of(PyObject *item, int64_t *out);

/* ------------------------------------------------------------------ row buffers */

/* Rows(spec): one of the session's row buffers (events, accesses, arrays, allocs: session.py),
 * a flat sequence of values that packs each value as it is appended, column by column as
 * spec says (pack_rows' letters: 'i' an int, 'b' a bool, 's' a str, 'T' a tuple or list of
 * ints). A flush hands the buffer to the writer thread, whose packed() is then a copy of
 * int64 buffers: no list of Python objects to pack, pickle or free under the interpreter
 * lock (loop (e) of tools/bench_record_steady.py: that was ~90% of the writer thread's work).
 * A value its column cannot hold (a recorder bug, or a test that plants one) turns the
 * buffer into the list it would have been, and from then on it is that list: the writer
 * notes the value as it does for a list. len, iteration, indexing and item assignment
 * behave as the list's. */
#define ROWS_MAX_T 4
#define ROWS_RECENT 4
typedef struct {
    PyObject_HEAD
    Py_ssize_t width, ntup, count, col; /* count: the values appended; col: the next one's column */
    int ints_only;                       /* every column 'i' */
    char spec[PACK_MAX_COLUMNS + 1];
    int slot[PACK_MAX_COLUMNS]; /* a 'T' column's index among the T columns */
    int64_t *ints, *lengths, *items[ROWS_MAX_T];
    Py_ssize_t n_ints, cap_ints, n_lengths, cap_lengths, n_items[ROWS_MAX_T], cap_items[ROWS_MAX_T];
    PyObject *texts, *codes;        /* the 's' columns' string table: list, and str -> code */
    /* a 's' column's last ROWS_RECENT values (strong) and their codes: most rows repeat the
     * objects of rows before them (a dtype's name, a device's, a site's label, by turns for
     * an array and its grad), found by identity without hashing */
    PyObject *last[PACK_MAX_COLUMNS][ROWS_RECENT];
    int64_t last_code[PACK_MAX_COLUMNS][ROWS_RECENT];
    unsigned char last_at[PACK_MAX_COLUMNS];
    PyObject *list; /* not NULL: the buffer is this list (a value did not fit) */
} Rows;

static PyTypeObject RowsType;

static int
grow64_to(int64_t **buf, Py_ssize_t *cap, Py_ssize_t need)
{
    Py_ssize_t cap2 = *cap * 2;
    if (cap2 < need)
        cap2 = need + 256;
    if (cap2 > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(int64_t)) {
        PyErr_NoMemory();
        return -1;
    }
    int64_t *p = PyMem_Realloc(*buf, (size_t)cap2 * sizeof(int64_t));
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = p;
    *cap = cap2;
    return 0;
}

static inline int
grow64(int64_t **buf, Py_ssize_t *cap, Py_ssize_t need)
{
    return need <= *cap ? 0 : grow64_to(buf, cap, need);
}

/* int64_of, with a row's most common values (one-digit ints, bools) inline */
static inline int
int64_quick(PyObject *v, int64_t *out)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyLong_CheckExact(v)) {
        Py_ssize_t size = Py_SIZE(v);
        const digit *d = ((PyLongObject *)v)->ob_digit;
        if (size == 1 || size == -1) {
            *out = size * (int64_t)d[0];
            return 1;
        }
        if (size == 0) {
            *out = 0;
            return 1;
        }
        if (size == 2 || size == -2) {
            *out = (size / 2) * ((int64_t)d[0] | ((int64_t)d[1] << PyLong_SHIFT));
            return 1;
        }
    }
#endif
    if (v == Py_True || v == Py_False) {
        *out = v == Py_True;
        return 1;
    }
    return int64_of(v, out);
}

static inline void
rows_next(Rows *r)
{
    r->count++;
    if (++r->col == r->width)
        r->col = 0;
}

/* v as column c's int64 (an 'i', 'b' or 's' column: a string's code, added to the table if
 * new): 1, or 0 when the column cannot hold it, -1 on an error */
static inline int
rows_value(Rows *r, Py_ssize_t c, PyObject *v, int64_t *x)
{
    switch (r->spec[c]) {
    case 'i':
        return int64_quick(v, x);
    case 'b':
        if (v != Py_True && v != Py_False)
            return 0;
        *x = v == Py_True;
        return 1;
    default: { /* 's' */
        PyObject **last = r->last[c];
        for (int k = 0; k < ROWS_RECENT; k++) {
            if (last[k] == v) {
                *x = r->last_code[c][k];
                return 1;
            }
        }
        if (!PyUnicode_CheckExact(v))
            return 0;
        PyObject *code = PyDict_GetItemWithError(r->codes, v);
        if (code == NULL) {
            if (PyErr_Occurred() || (code = PyLong_FromSsize_t(PyList_GET_SIZE(r->texts))) == NULL)
                return -1;
            int added = PyDict_SetItem(r->codes, v, code) == 0 && PyList_Append(r->texts, v) == 0;
            Py_DECREF(code); /* the dict holds it */
            if (!added)
                return -1;
        }
        *x = (int64_t)PyLong_AsSsize_t(code);
        int k = r->last_at[c];
        r->last_at[c] = (unsigned char)((k + 1) % ROWS_RECENT);
        Py_INCREF(v);
        Py_XSETREF(last[k], v);
        r->last_code[c][k] = *x;
        return 1;
    }
    }
}

/* the ints of v (a 'T' column's tuple or list) written at items[t][at...]: their number, or -1
 * when the column cannot hold v (-2 on an error); nothing is counted as appended */
static inline Py_ssize_t
rows_items(Rows *r, int t, PyObject *v, Py_ssize_t at)
{
    if (!PyTuple_CheckExact(v) && !PyList_CheckExact(v))
        return -1;
    Py_ssize_t size = Py_SIZE(v);
    PyObject **item = PyTuple_CheckExact(v) ? ((PyTupleObject *)v)->ob_item : ((PyListObject *)v)->ob_item;
    if (grow64(&r->items[t], &r->cap_items[t], at + size) < 0)
        return -2;
    int64_t *dst = r->items[t] + at;
    for (Py_ssize_t k = 0; k < size; k++)
        if (!int64_quick(item[k], &dst[k]))
            return -1;
    return size;
}

/* v packed as the next value: 1, or 0 when its column cannot hold it (nothing appended), -1 */
static int
rows_pack(Rows *r, PyObject *v)
{
    Py_ssize_t c = r->col;
    if (r->spec[c] == 'T') {
        int t = r->slot[c];
        if (grow64(&r->lengths, &r->cap_lengths, r->n_lengths + 1) < 0)
            return -1;
        Py_ssize_t size = rows_items(r, t, v, r->n_items[t]);
        if (size < 0)
            return size == -1 ? 0 : -1;
        r->n_items[t] += size;
        r->lengths[r->n_lengths++] = size;
    } else {
        int64_t x;
        int k = rows_value(r, c, v, &x);
        if (k <= 0)
            return k;
        if (grow64(&r->ints, &r->cap_ints, r->n_ints + 1) < 0)
            return -1;
        r->ints[r->n_ints++] = x;
    }
    rows_next(r);
    return 1;
}

/* a whole row (at a row's start, not a list): 1, or 0 when a value does not fit its column
 * (nothing appended), -1 */
static int
rows_pack_row(Rows *r, PyObject **row)
{
    Py_ssize_t width = r->width, n_ints = r->n_ints, n_lengths = r->n_lengths, at[ROWS_MAX_T];
    if (grow64(&r->ints, &r->cap_ints, n_ints + width) < 0
        || (r->ntup > 0 && grow64(&r->lengths, &r->cap_lengths, n_lengths + r->ntup) < 0))
        return -1;
    for (int t = 0; t < r->ntup; t++)
        at[t] = r->n_items[t];
    int64_t *dst = r->ints + n_ints, *lengths = r->lengths + n_lengths;
    for (Py_ssize_t c = 0; c < width; c++) {
        if (r->spec[c] == 'T') {
            int t = r->slot[c];
            Py_ssize_t size = rows_items(r, t, row[c], at[t]);
            if (size < 0)
                return size == -1 ? 0 : -1;
            at[t] += size;
            *lengths++ = size;
        } else {
            int k = rows_value(r, c, row[c], dst++);
            if (k <= 0)
                return k;
        }
    }
    for (int t = 0; t < r->ntup; t++)
        r->n_items[t] = at[t];
    r->n_ints = dst - r->ints;
    r->n_lengths = lengths - r->lengths;
    r->count += width;
    return 1;
}

/* the values appended, as the Python objects a list would hold (new list) */
static PyObject *
rows_tolist(Rows *r)
{
    if (r->list != NULL)
        return PyList_GetSlice(r->list, 0, PyList_GET_SIZE(r->list));
    PyObject *out = PyList_New(r->count);
    if (out == NULL)
        return NULL;
    Py_ssize_t ii = 0, li = 0, at[ROWS_MAX_T] = {0};
    for (Py_ssize_t i = 0; i < r->count; i++) {
        Py_ssize_t c = i % r->width;
        PyObject *v;
        switch (r->spec[c]) {
        case 'i':
            v = PyLong_FromLongLong(r->ints[ii++]);
            break;
        case 'b':
            v = PyBool_FromLong((long)r->ints[ii++]);
            break;
        case 's':
            v = PyList_GET_ITEM(r->texts, r->ints[ii++]);
            Py_INCREF(v);
            break;
        default: {
            int t = r->slot[c];
            Py_ssize_t size = r->lengths[li++];
            v = PyTuple_New(size);
            for (Py_ssize_t k = 0; v != NULL && k < size; k++) {
                PyObject *n = PyLong_FromLongLong(r->items[t][at[t] + k]);
                if (n == NULL)
                    Py_CLEAR(v);
                else
                    PyTuple_SET_ITEM(v, k, n);
            }
            at[t] += size;
        }
        }
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* from now on the buffer is the list of its values */
static int
rows_become_list(Rows *r)
{
    if (r->list != NULL)
        return 0;
    PyObject *list = rows_tolist(r);
    if (list == NULL)
        return -1;
    r->list = list;
    return 0;
}

static int
rows_push(Rows *r, PyObject *v)
{
    if (r->list == NULL) {
        int k = rows_pack(r, v);
        if (k != 0)
            return k < 0 ? -1 : 0;
        if (rows_become_list(r) < 0)
            return -1;
    }
    return PyList_Append(r->list, v);
}

/* a row of n borrowed values: a whole row of a spec of ints in one pass, else value by value */
static int
rows_push_row(Rows *r, PyObject **row, Py_ssize_t n)
{
    if (r->list == NULL && r->col == 0 && n == r->width) {
        if (r->ints_only) {
            if (grow64(&r->ints, &r->cap_ints, r->n_ints + n) < 0)
                return -1;
            int64_t *dst = r->ints + r->n_ints;
            Py_ssize_t i = 0;
            while (i < n && int64_quick(row[i], &dst[i]))
                i++;
            if (i == n) {
                r->n_ints += n;
                r->count += n;
                return 0;
            }
        } else {
            int k = rows_pack_row(r, row);
            if (k != 0)
                return k < 0 ? -1 : 0;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (rows_push(r, row[i]) < 0)
            return -1;
    return 0;
}

static int
rows_push_all(Rows *r, PyObject *values)
{
    if (PyTuple_CheckExact(values))
        return rows_push_row(r, ((PyTupleObject *)values)->ob_item, PyTuple_GET_SIZE(values));
    if (PyList_CheckExact(values)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++)
            if (rows_push(r, PyList_GET_ITEM(values, i)) < 0)
                return -1;
        return 0;
    }
    PyObject *it = PyObject_GetIter(values), *v;
    if (it == NULL)
        return -1;
    while ((v = PyIter_Next(it)) != NULL) {
        int rc = rows_push(r, v);
        Py_DECREF(v);
        if (rc < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
rows_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    const char *spec;
    Py_ssize_t size = 0; /* the values expected (the last buffer's: room for them now) */
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Rows(spec, size=0)");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "s|n:Rows", &spec, &size))
        return NULL;
    size_t width = strlen(spec);
    if (width == 0 || width > PACK_MAX_COLUMNS) {
        PyErr_SetString(PyExc_ValueError, "Rows: a spec of 1 to 32 columns");
        return NULL;
    }
    Rows *r = (Rows *)type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    r->width = (Py_ssize_t)width;
    memcpy(r->spec, spec, width + 1);
    r->ints_only = strspn(spec, "i") == width;
    for (size_t c = 0; c < width; c++) {
        if (spec[c] == 'T') {
            if (r->ntup == ROWS_MAX_T) {
                Py_DECREF(r);
                PyErr_SetString(PyExc_ValueError, "Rows: at most 4 'T' columns");
                return NULL;
            }
            r->slot[c] = (int)r->ntup++;
        } else if (spec[c] != 'i' && spec[c] != 'b' && spec[c] != 's') {
            Py_DECREF(r);
            PyErr_SetString(PyExc_ValueError, "Rows: spec letters are i, b, s and T");
            return NULL;
        }
    }
    if ((r->texts = PyList_New(0)) == NULL || (r->codes = PyDict_New()) == NULL
        || (size > 0 && grow64_to(&r->ints, &r->cap_ints, size) < 0)) {
        Py_DECREF(r);
        return NULL;
    }
    return (PyObject *)r;
}

static void
rows_dealloc(Rows *r)
{
    PyMem_Free(r->ints);
    PyMem_Free(r->lengths);
    for (int t = 0; t < ROWS_MAX_T; t++)
        PyMem_Free(r->items[t]);
    for (int c = 0; c < PACK_MAX_COLUMNS; c++)
        for (int k = 0; k < ROWS_RECENT; k++)
            Py_XDECREF(r->last[c][k]);
    Py_XDECREF(r->texts);
    Py_XDECREF(r->codes);
    Py_XDECREF(r->list);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *
rows_append(Rows *r, PyObject *v)
{
    if (rows_push(r, v) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
rows_extend(Rows *r, PyObject *values)
{
    if (rows_push_all(r, values) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
bytes_of(const int64_t *values, Py_ssize_t n)
{
    return PyBytes_FromStringAndSize((const char *)values, n * (Py_ssize_t)sizeof(int64_t));
}

/* packed() -> what pack_int64 (a spec of ints only) or pack_rows would make of the list, or None */
static PyObject *
rows_packed(Rows *r, PyObject *unused)
{
    if (r->list != NULL || r->col != 0)
        Py_RETURN_NONE;
    if (r->ntup == 0 && strchr(r->spec, 's') == NULL)
        return bytes_of(r->ints, r->n_ints);
    Py_ssize_t all = 0;
    for (int t = 0; t < r->ntup; t++)
        all += r->n_items[t];
    PyObject *ints = bytes_of(r->ints, r->n_ints), *lengths = bytes_of(r->lengths, r->n_lengths);
    PyObject *items = PyBytes_FromStringAndSize(NULL, all * (Py_ssize_t)sizeof(int64_t));
    PyObject *texts = PyList_GetSlice(r->texts, 0, PyList_GET_SIZE(r->texts)), *result = NULL;
    if (ints != NULL && lengths != NULL && items != NULL && texts != NULL) {
        char *dst = PyBytes_AS_STRING(items);
        for (int t = 0; t < r->ntup; t++) {
            if (r->n_items[t] > 0)
                memcpy(dst, r->items[t], (size_t)r->n_items[t] * sizeof(int64_t));
            dst += r->n_items[t] * (Py_ssize_t)sizeof(int64_t);
        }
        result = PyTuple_Pack(4, ints, texts, lengths, items);
    }
    Py_XDECREF(ints);
    Py_XDECREF(lengths);
    Py_XDECREF(items);
    Py_XDECREF(texts);
    return result;
}

static PyObject *
rows_tolist_method(Rows *r, PyObject *unused)
{
    return rows_tolist(r);
}

static Py_ssize_t
rows_len(Rows *r)
{
    return r->list != NULL ? PyList_GET_SIZE(r->list) : r->count;
}

static PyObject *
rows_subscript(Rows *r, PyObject *key)
{
    PyObject *list = rows_tolist(r);
    if (list == NULL)
        return NULL;
    PyObject *v = PyObject_GetItem(list, key);
    Py_DECREF(list);
    return v;
}

static int
rows_ass_subscript(Rows *r, PyObject *key, PyObject *v)
{
    if (rows_become_list(r) < 0)
        return -1;
    return v == NULL ? PyObject_DelItem(r->list, key) : PyObject_SetItem(r->list, key, v);
}

static PyObject *
rows_iter(Rows *r)
{
    PyObject *list = rows_tolist(r);
    if (list == NULL)
        return NULL;
    PyObject *it = PyObject_GetIter(list);
    Py_DECREF(list);
    return it;
}

static PyObject *
rows_reduce(Rows *r, PyObject *unused)
{
    PyObject *list = rows_tolist(r);
    if (list == NULL)
        return NULL;
    PyObject *result = Py_BuildValue("O(s)N", (PyObject *)Py_TYPE(r), r->spec, Py_BuildValue("(N)", list));
    return result;
}

static PyObject *
rows_setstate(Rows *r, PyObject *state)
{
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != 1) {
        PyErr_SetString(PyExc_TypeError, "Rows.__setstate__((values,))");
        return NULL;
    }
    return rows_extend(r, PyTuple_GET_ITEM(state, 0));
}

static PyMethodDef rows_methods[] = {
    {"append", (PyCFunction)rows_append, METH_O, "append one value"},
    {"extend", (PyCFunction)rows_extend, METH_O, "append the values"},
    {"packed", (PyCFunction)rows_packed, METH_NOARGS,
     "int64 bytes (a spec of ints), or (ints, texts, lengths, items) as pack_rows; None if not packed"},
    {"tolist", (PyCFunction)rows_tolist_method, METH_NOARGS, "the values as a list"},
    {"__reduce__", (PyCFunction)rows_reduce, METH_NOARGS, NULL},
    {"__setstate__", (PyCFunction)rows_setstate, METH_O, NULL},
    {NULL},
};

static PyMappingMethods rows_mapping = {
    .mp_length = (lenfunc)rows_len,
    .mp_subscript = (binaryfunc)rows_subscript,
    .mp_ass_subscript = (objobjargproc)rows_ass_subscript,
};

static PySequenceMethods rows_sequence = {
    .sq_length = (lenfunc)rows_len,
};

static PyTypeObject RowsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.Rows",
    .tp_basicsize = sizeof(Rows),
    .tp_dealloc = (destructor)rows_dealloc,
    .tp_as_sequence = &rows_sequence,
    .tp_as_mapping = &rows_mapping,
    .tp_iter = (getiterfunc)rows_iter,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Rows(spec): a row buffer that packs its values as they come (see session.py)",
    .tp_methods = rows_methods,
    .tp_new = rows_new,
};

/* list.extend(values) through the method (a buffer that is not a list) */
static int
extend_call(PyObject *list, PyObject *values)
{
    if (Py_IS_TYPE(list, &RowsType))
        return rows_push_all((Rows *)list, values);
    PyObject *r = PyObject_CallMethodOneArg(list, s_extend, values);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* `tuple` (a new reference, or NULL) taken out of the cyclic GC's lists when none of its items
 * is tracked (ints, strings, None, the session token: no cycle can pass through it), as the
 * GC itself does for such tuples at their first collection. The recorder keeps a few of these
 * per array (its state, its allocation's index entry, ...): a program that allocates every
 * iteration otherwise has the young generation walk each of them once more. */
static PyObject *
untracked(PyObject *tuple)
{
    if (tuple == NULL || !PyObject_GC_IsTracked(tuple))
        return tuple;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (PyObject_IS_GC(item) && PyObject_GC_IsTracked(item))
            return tuple;
    }
    PyObject_GC_UnTrack(tuple);
    return tuple;
}

/* list.append(item): PyList_Append for an exact list, else through the method */
static int
append_item(PyObject *list, PyObject *item)
{
    if (PyList_CheckExact(list))
        return PyList_Append(list, item);
    if (Py_IS_TYPE(list, &RowsType))
        return rows_push((Rows *)list, item);
    PyObject *r = PyObject_CallMethodOneArg(list, s_append, item);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Room for `need` items in an exact list. A row buffer (up to ~100k items before it is
 * flushed) doubles, instead of growing by 1/8 as list_resize does, each step copying the
 * whole buffer (~8 copies of every item instead of ~2). The same PyMem_Realloc of
 * ob_item that list_resize does; only the policy differs. Never more than twice the
 * size, so list_resize (a list.extend of the Python wrappers) keeps the allocation. */
static int
reserve(PyListObject *list, Py_ssize_t need)
{
    if (need <= list->allocated)
        return 0;
    Py_ssize_t cap = list->allocated * 2;
    if (cap < need)
        cap = need + 64;
    if (cap > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(PyObject *)) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PyMem_Realloc(list->ob_item, (size_t)cap * sizeof(PyObject *));
    if (items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    list->ob_item = items;
    list->allocated = cap;
    return 0;
}

/* list.extend(row) for a row of n borrowed objects */
static int
extend_row(PyObject *list, PyObject **row, Py_ssize_t n)
{
    if (PyList_CheckExact(list)) {
        PyListObject *l = (PyListObject *)list;
        Py_ssize_t size = Py_SIZE(l);
        if (reserve(l, size + n) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(row[i]);
            l->ob_item[size + i] = row[i];
        }
        Py_SET_SIZE(l, size + n);
        return 0;
    }
    if (Py_IS_TYPE(list, &RowsType))
        return rows_push_row((Rows *)list, row, n);
    PyObject *tuple = PyTuple_New(n);
    if (tuple == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(row[i]);
        PyTuple_SET_ITEM(tuple, i, row[i]);
    }
    int rc = extend_call(list, tuple);
    Py_DECREF(tuple);
    return rc;
}

/* the array's identity state tuple; registers it on first sight (new reference) */
static PyObject *
array_state(FastLaunch *self, Session *ss, PyObject *value)
{
    PyObject *st = dict_attr(value, self->state_attr, 1);
    if (st == NULL)
        return NULL;
    if (st != Py_None) {
        PyObject *first = item(st, 0);
        if (first == NULL) {
            Py_DECREF(st);
            return NULL;
        }
        Py_DECREF(first);
        if (first == ss->tok)
            return st;
    }
    Py_DECREF(st);
    return PyObject_CallOneArg(ss->register_, value); /* rec.ident.register(value) */
}

/* acc.extend((seq, st[1], st[2], role, flags | st[3], arg, field)); flags alone
 * without or_state (the gradient rows of an adjoint launch) */
static int
append_access(FastLaunch *self, PyObject *acc, PyObject *seq, PyObject *st, PyObject *role, PyObject *flags,
              int or_state, PyObject *arg, PyObject *field)
{
    PyObject *s1 = NULL, *s2 = NULL, *s3 = NULL, *f = NULL;
    int rc = -1;
    if ((s1 = item(st, 1)) == NULL || (s2 = item(st, 2)) == NULL)
        goto done;
    if (!or_state) {
        f = flags;
        Py_INCREF(f);
    } else if ((s3 = item(st, 3)) == NULL) {
        goto done;
    } else if (PyLong_CheckExact(flags) && PyLong_CheckExact(s3)) {
        int ox = 0, oy = 0;
        long x = PyLong_AsLongAndOverflow(flags, &ox), y = PyLong_AsLongAndOverflow(s3, &oy);
        f = ox || oy ? PyNumber_Or(flags, s3) : PyLong_FromLong(x | y);
    } else {
        f = PyNumber_Or(flags, s3);
    }
    if (f == NULL)
        goto done;
    PyObject *row[7] = {seq, s1, s2, role, f, arg, field};
    rc = extend_row(acc, row, 7);
done:
    Py_XDECREF(s1);
    Py_XDECREF(s2);
    Py_XDECREF(s3);
    Py_XDECREF(f);
    return rc;
}

/* exc -> rec.fail(exc): 0 when handled, -1 when fail raised (or exc is no Exception) */
static int
fail(PyObject *rec)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *r = value != NULL ? PyObject_CallMethodOneArg(rec, s_fail, value) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (r == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_SystemError, "warptrace: a recording error was lost");
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* Python's len(x) > n with n a C integer */
static Py_ssize_t
length(PyObject *x)
{
    if (PyList_CheckExact(x))
        return PyList_GET_SIZE(x);
    if (Py_IS_TYPE(x, &RowsType))
        return rows_len((Rows *)x);
    return PyObject_Size(x);
}

/* the value of an exact int that fits a long long: 1, else 0 */
static inline int
small_int(PyObject *x, long long *value)
{
    if (!PyLong_CheckExact(x))
        return 0;
    int overflow = 0;
    *value = PyLong_AsLongLongAndOverflow(x, &overflow);
    return !overflow;
}

/* ------------------------------------------------------------------ session cache */

static PyObject *const *slot_names[NSLOTS] = {
    &s_guard, &s_phase, &s_bw_site, &s_bw_tape, &s_thread, &s_parent, &s_bw_frame, &s_copy_ctx,
    &s_kernel_id, &s_simple, &s_fields, &s_adj, &s_zeroed, &s_scope_tape, &s_grad_owner_slot,
};

/* offset of a __slots__ member (an object slot) of type, or -1 */
static Py_ssize_t
slot_offset(PyTypeObject *type, PyObject *name)
{
    if (type->tp_getattro != PyObject_GenericGetAttr)
        return -1; /* a __getattribute__ of its own: getattr */
    PyObject *descr = _PyType_Lookup(type, name); /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type))
        return -1;
    /* a member of type's own layout (a descriptor copied from another class is not) */
    if (!PyType_IsSubtype(type, PyDescr_TYPE(descr)))
        return -1;
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY))
        return -1;
    return member->offset;
}

/* the cache describes type as it is now (unchanged since its offsets were resolved) */
static inline int
slots_current(SlotCache *cache, PyTypeObject *type)
{
    return cache->type == type && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)
        && type->tp_version_tag == cache->tag;
}

/* resolve the offsets of slots first..last of type, then swap type, tag and offsets
 * together (the old type is released last, when the cache is consistent again) */
static void
slots_resolve(SlotCache *cache, PyTypeObject *type, int first, int last)
{
    Py_ssize_t off[NSLOTS];
    for (int i = 0; i < NSLOTS; i++)
        off[i] = i >= first && i <= last ? slot_offset(type, *slot_names[i]) : -1;
    /* _PyType_Lookup gave the type a version tag if it can have one; without one the
     * cache is never current and every read resolves again */
    unsigned int tag = (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? type->tp_version_tag : 0;
    PyTypeObject *old = cache->type;
    Py_INCREF(type);
    cache->type = type;
    cache->tag = tag;
    memcpy(cache->off, off, sizeof(off));
    Py_XDECREF(old);
}

/* obj.<slot i> as a new reference; a slot read without getattr where the slot is known */
static PyObject *
read_slot(SlotCache *cache, PyObject *obj, int i, int first, int last)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (!slots_current(cache, type))
        slots_resolve(cache, type, first, last);
    if (cache->type == type && cache->off[i] >= 0) {
        PyObject *v = *(PyObject **)((char *)obj + cache->off[i]);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(obj, *slot_names[i]);
}

/* obj.<slot i> = v (0, or -1 with an error); a store without setattr where the slot is known
 * and the type has no __setattr__ of its own */
static int
write_slot(SlotCache *cache, PyObject *obj, int i, int first, int last, PyObject *v)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (!slots_current(cache, type))
        slots_resolve(cache, type, first, last);
    if (cache->type == type && cache->off[i] >= 0 && type->tp_setattro == PyObject_GenericSetAttr) {
        Py_INCREF(v);
        Py_XSETREF(*(PyObject **)((char *)obj + cache->off[i]), v);
        return 0;
    }
    return PyObject_SetAttr(obj, *slot_names[i], v);
}

#define TS_SLOT(self, ts, i) read_slot(&(self)->ts_slots, (ts), (i), O_GUARD, O_COPY_CTX)
#define TS_SET(self, ts, i, v) write_slot(&(self)->ts_slots, (ts), (i), O_GUARD, O_COPY_CTX, (v))
#define PLAN_SLOT(self, plan, i) read_slot(&(self)->plan_slots, (plan), (i), O_KERNEL_ID, O_ADJ)

static void
clear_session(FastLaunch *self)
{
    Py_CLEAR(self->session);
    Py_CLEAR(self->c_ts);
    self->ts_thread = 0;
    for (int i = 0; i < SITE_SLOTS; i++) {
        self->site_cache[i].code = NULL;
        Py_CLEAR(self->site_cache[i].site);
    }
}

/* rec.<name> (a plain instance attribute) as a new reference */
static PyObject *
rec_attr(Session *ss, PyObject *name)
{
    PyObject *v = PyDict_GetItemWithError(ss->dict, name);
    if (v != NULL) {
        Py_INCREF(v);
        return v;
    }
    if (PyErr_Occurred())
        return NULL;
    return PyObject_GetAttr(ss->rec, name); /* raises the AttributeError */
}

static Py_ssize_t
rec_ssize(Session *ss, PyObject *name)
{
    PyObject *v = rec_attr(ss, name);
    if (v == NULL)
        return -1;
    /* an exact int (the limits are): its value without the number protocol */
    Py_ssize_t n = PyLong_CheckExact(v) ? PyLong_AsSsize_t(v) : PyNumber_AsSsize_t(v, PyExc_OverflowError);
    Py_DECREF(v);
    return n;
}

/* rec.seq (new reference) */
static PyObject *
seq_now(Session *ss)
{
    return ss->counters != NULL ? PyLong_FromLongLong(ss->counters->seq) : rec_attr(ss, s_seq);
}

/* rec.seq, advanced by one: the number taken (new reference); under rec.lock */
static PyObject *
seq_take(Session *ss)
{
    if (ss->counters != NULL) {
        PyObject *seq = PyLong_FromLongLong(ss->counters->seq);
        if (seq != NULL)
            ss->counters->seq++;
        return seq;
    }
    PyObject *seq = rec_attr(ss, s_seq), *next_seq;
    if (seq == NULL)
        return NULL;
    if ((next_seq = PyNumber_Add(seq, i_one)) == NULL || PyDict_SetItem(ss->dict, s_seq, next_seq) < 0) {
        Py_XDECREF(next_seq);
        Py_DECREF(seq);
        return NULL;
    }
    Py_DECREF(next_seq);
    return seq;
}

/* rec.ev, rec.acc or rec.ev_extra (new reference) */
static PyObject *
rows_attr(Session *ss, PyObject *name)
{
    CountersObject *c = ss->counters;
    if (c == NULL)
        return rec_attr(ss, name);
    return counters_rows(name == s_ev ? c->ev : name == s_acc ? c->acc : c->ev_extra, name);
}

/* the per-session attributes of rec (a new Session, or NULL with an exception) */
static Session *
session_new(PyObject *rec)
{
    Session *ss = PyObject_GC_New(Session, &SessionType);
    if (ss == NULL)
        return NULL;
    ss->rec = ss->dict = ss->local = ss->sites = ss->by_pos = ss->caller_dicts = ss->acquire = NULL;
    ss->release = ss->tok = ss->register_ = ss->captures = ss->skip = ss->external = NULL;
    ss->ident = ss->ident_dict = ss->index = ss->device_cache = NULL;
    ss->counters = NULL;
    memset(ss->pos_cache, 0, sizeof(ss->pos_cache));
    ss->clock = NULL;
    PyObject_GC_Track(ss);
    PyObject *lock = NULL, *ident = NULL;
    int rc = -1;
    Py_INCREF(rec);
    ss->rec = rec;
    if ((ss->local = PyObject_GetAttr(rec, s_local)) == NULL
        || (ss->sites = PyObject_GetAttr(rec, s_sites)) == NULL
        || (ss->by_pos = PyObject_GetAttr(ss->sites, s_by_pos)) == NULL
        || (ss->caller_dicts = PyObject_GetAttr(ss->sites, s_caller_dicts)) == NULL
        || (lock = PyObject_GetAttr(rec, s_lock)) == NULL
        || (ss->acquire = PyObject_GetAttr(lock, s_acquire)) == NULL
        || (ss->release = PyObject_GetAttr(lock, s_release)) == NULL
        || (ss->tok = PyObject_GetAttr(rec, s_tok)) == NULL
        || (ident = PyObject_GetAttr(rec, s_ident)) == NULL
        || (ss->register_ = PyObject_GetAttr(ident, s_register)) == NULL
        || (ss->external = PyObject_GetAttr(ident, s_external)) == NULL
        || (ss->captures = PyObject_GetAttr(rec, s_captures)) == NULL)
        goto done;
    if (Py_IS_TYPE(lock, &LockType)) {
        Py_INCREF(lock);
        ss->clock = (LockObject *)lock;
    }
    Py_INCREF(ident);
    ss->ident = ident;
    if ((ss->ident_dict = PyObject_GenericGetDict(ident, NULL)) == NULL)
        goto done;
    if (!PyDict_CheckExact(ss->ident_dict)) {
        PyErr_SetString(PyExc_TypeError, "Identity.__dict__ must be a dict");
        goto done;
    }
    PyObject *index = PyDict_GetItemWithError(ss->ident_dict, s_index);
    PyObject *device_cache = index != NULL ? PyDict_GetItemWithError(ss->ident_dict, s_device_cache) : NULL;
    if (PyErr_Occurred())
        goto done;
    if (index != NULL && Py_IS_TYPE(index, &IntervalsType)) {
        Py_INCREF(index);
        ss->index = index;
    }
    if (device_cache != NULL && PyDict_CheckExact(device_cache)) {
        Py_INCREF(device_cache);
        ss->device_cache = device_cache;
    }
    /* the walk's table of internal code objects: optional (without it, Sites.caller) */
    if ((ss->skip = PyObject_GetAttr(ss->sites, s_skip_code)) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            goto done;
        PyErr_Clear();
    } else if (!PyDict_CheckExact(ss->skip)) {
        Py_CLEAR(ss->skip);
    }
    /* the ThreadState may be cached by thread id only when rec.local.state is per thread */
    ss->ts_by_thread = local_type != NULL && Py_IS_TYPE(ss->local, local_type);
    if (!PyDict_CheckExact(ss->by_pos) || !PyDict_CheckExact(ss->captures) || !PySet_Check(ss->external)) {
        PyErr_SetString(PyExc_TypeError,
                        "Sites.by_pos and Recorder.captures must be dicts, Identity.external a set");
        goto done;
    }
    if ((ss->dict = PyObject_GenericGetDict(rec, NULL)) == NULL)
        goto done;
    if (!PyDict_CheckExact(ss->dict)) {
        PyErr_SetString(PyExc_TypeError, "Recorder.__dict__ must be a dict");
        goto done;
    }
    /* seq, the flush limits and the row buffers: the compiled Counters' fields where the
     * Recorder's class forwards them there (counters.py, CountedRecorder), else plain
     * attributes */
    PyObject *counters = PyDict_GetItemWithError(ss->dict, s_counters);
    if (counters == NULL && PyErr_Occurred())
        goto done;
    PyObject *const *names[] = {&s_ev, &s_acc, &s_ev_extra, &s_seq, &s_flush_ev_len, &s_flush_acc_len,
                                &s_flush_deadline};
    size_t n_names = sizeof(names) / sizeof(names[0]), forwarded = 0;
    for (size_t i = 0; i < n_names; i++)
        forwarded += _PyType_Lookup(Py_TYPE(rec), *names[i]) != NULL;
    if (counters != NULL && Py_IS_TYPE(counters, &CountersType) && forwarded == n_names) {
        Py_INCREF(counters);
        ss->counters = (CountersObject *)counters;
    } else {
        /* else the buffers and counters the launch reads and writes every time, straight
         * from the session's __dict__: plain instance attributes (nothing on its class) */
        for (size_t i = 0; i < n_names; i++) {
            if (_PyType_Lookup(Py_TYPE(rec), *names[i]) != NULL) {
                PyErr_Format(PyExc_TypeError, "Recorder.%U is not a plain attribute", *names[i]);
                goto done;
            }
        }
    }
    rc = 0;
done:
    Py_XDECREF(lock);
    Py_XDECREF(ident);
    if (rc < 0)
        Py_CLEAR(ss);
    return ss;
}

/* A frame of the walks (borrowed: a walk runs no Python code, so every frame of the stack it
 * walks, and its code, stays alive): the interpreter's frame where WT_IFRAME, else the frame
 * object. */
#ifdef WT_IFRAME
typedef _PyInterpreterFrame WalkFrame;

/* f, or the first complete frame below it (PyFrame_GetBack's and PyEval_GetFrame's rule) */
static inline WalkFrame *
walk_complete(WalkFrame *f)
{
    while (f != NULL && _PyFrame_IsIncomplete(f))
        f = f->previous;
    return f;
}

/* the caller of the C function running (PyEval_GetFrame() without its frame object) */
static inline WalkFrame *
walk_current(void)
{
    return walk_complete(PyThreadState_GET()->cframe->current_frame);
}

static inline WalkFrame *
walk_of(PyFrameObject *frame)
{
    return frame->f_frame;
}

static inline PyCodeObject *
walk_code(WalkFrame *f)
{
    return f->f_code;
}

/* PyFrame_GetLasti */
static inline int
walk_lasti(WalkFrame *f)
{
    int lasti = _PyInterpreterFrame_LASTI(f);
    return lasti < 0 ? -1 : lasti * (int)sizeof(_Py_CODEUNIT);
}

static inline WalkFrame *
walk_back(WalkFrame *f)
{
    return walk_complete(f->previous);
}
#else
typedef PyFrameObject WalkFrame;

static inline WalkFrame *
walk_current(void)
{
    return PyEval_GetFrame();
}

static inline WalkFrame *
walk_of(PyFrameObject *frame)
{
    return frame;
}

static inline PyCodeObject *
walk_code(WalkFrame *f)
{
    PyCodeObject *code = PyFrame_GetCode(f);
    Py_DECREF(code); /* (the frame holds it) */
    return code;
}

static inline int
walk_lasti(WalkFrame *f)
{
    return PyFrame_GetLasti(f);
}

/* the frame object PyFrame_GetBack makes is held by its interpreter frame too */
static inline WalkFrame *
walk_back(WalkFrame *f)
{
    PyFrameObject *back = PyFrame_GetBack(f);
    Py_XDECREF(back);
    return back;
}
#endif

static PyObject *walk_frames(WalkFrame *frame, PyCodeObject *called, int called_direct, PyObject *skip,
                             PyObject *by_pos, PyObject *constructor, PyObject *makers, Session *ss);

/* Sites.caller(0) for the caller of a compiled wrapper (from C there is no wrapper frame in
 * between): the compiled walk called directly, without the method's Python frame; the
 * method where the walk leaves the decision to Python (a code or position not seen yet) */
static PyObject *
walk_caller(Session *ss)
{
    WalkFrame *frame = walk_current();
    if (ss->skip != NULL && frame != NULL) {
        PyObject *site = walk_frames(frame, NULL, 0, ss->skip, ss->by_pos, Py_None, Py_None, ss);
        if (site == NULL || site != Py_None)
            return site;
        Py_DECREF(site);
    }
    return PyObject_CallMethodOneArg(ss->sites, s_caller, i_zero);
}

static int
bind_session(FastLaunch *self, PyObject *rec)
{
    clear_session(self);
    self->session = session_new(rec);
    return self->session == NULL ? -1 : 0;
}

/* rec.flush() when a buffer is full or the deadline passed:
 * len(ev) >= rec.flush_ev_len or len(acc) >= rec.flush_acc_len or t_ns >= rec.flush_deadline
 * (the limits: the session's Counters' fields, else plain attributes of rec) */
static int
flush_if_due(Session *ss, PyObject *ev, PyObject *acc, PyObject *t_ns)
{
    CountersObject *c = ss->counters;
    Py_ssize_t n_ev = length(ev), n_acc;
    if (n_ev < 0)
        return -1;
    Py_ssize_t limit_ev = c != NULL ? (Py_ssize_t)c->flush_ev_len : rec_ssize(ss, s_flush_ev_len);
    if (limit_ev == -1 && PyErr_Occurred())
        return -1;
    int full = n_ev >= limit_ev;
    if (!full) {
        Py_ssize_t limit_acc = c != NULL ? (Py_ssize_t)c->flush_acc_len : rec_ssize(ss, s_flush_acc_len);
        if (limit_acc == -1 && PyErr_Occurred())
            return -1;
        if ((n_acc = length(acc)) < 0)
            return -1;
        full = n_acc >= limit_acc;
    }
    if (!full) {
        long long now_value, deadline_value = 0;
        PyObject *deadline = NULL;
        if (c != NULL)
            deadline_value = c->flush_deadline;
        else if ((deadline = rec_attr(ss, s_flush_deadline)) == NULL)
            return -1;
        if (small_int(t_ns, &now_value) && (deadline == NULL || small_int(deadline, &deadline_value)))
            full = now_value >= deadline_value;
        else if (deadline == NULL && (deadline = PyLong_FromLongLong(deadline_value)) == NULL)
            full = -1;
        else
            full = PyObject_RichCompareBool(t_ns, deadline, Py_GE);
        Py_XDECREF(deadline);
    }
    if (full < 0)
        return -1;
    if (full) {
        PyObject *r = PyObject_CallMethodNoArgs(ss->rec, s_flush);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* rec.lock.release(), keeping the exception in flight: the first exception wins, else
 * the release's own; returns rc, or -1 when the release failed */
static int
unlock(Session *ss, int rc)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = ss->clock == NULL ? PyObject_CallNoArgs(ss->release)
        : lock_give(ss->clock) < 0 ? NULL : (Py_INCREF(Py_None), Py_None);
    if (r == NULL) {
        if (type != NULL) {
            PyErr_Clear();
            PyErr_Restore(type, value, tb);
        } else {
            rc = -1;
        }
    } else {
        Py_DECREF(r);
        if (type != NULL)
            PyErr_Restore(type, value, tb);
    }
    return rc;
}

/* rec.lock taken (its acquire() called where it is not a Lock): 0, or -1 */
static int
session_acquire(Session *ss)
{
    if (ss->clock != NULL)
        return lock_take(ss->clock, -1) < 0 ? -1 : 0;
    PyObject *acquired = PyObject_CallNoArgs(ss->acquire);
    if (acquired == NULL)
        return -1;
    Py_DECREF(acquired);
    return 0;
}

/* a perf_counter_ns() timestamp (new reference) */
static PyObject *
perf_now(PyObject *perf_ns)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    /* time.perf_counter_ns()'s own clock */
    return PyLong_FromLongLong((long long)_PyTime_GetPerfCounter());
#else
    return PyObject_CallNoArgs(perf_ns);
#endif
}

/* ------------------------------------------------------------------ the rows */

/* accesses of a forward launch: plan.simple, then plan.fields (the Python fast path's order) */
static int
forward_accesses(FastLaunch *self, Session *ss, PyObject *acc, PyObject *seq, PyObject *plan,
                 PyObject *inputs, PyObject *outputs)
{
    int rc = -1;
    PyObject *in = NULL, *out = NULL, *args = NULL, *simple = NULL, *fields = NULL, *tok = ss->tok;
    PyObject *simple_fast = NULL, *fields_fast = NULL;
    /* args = (*inputs, *outputs): a snapshot, since register() may run any Python code */
    if ((in = PySequence_Fast(inputs, "inputs must be a sequence")) == NULL)
        goto done;
    if ((out = PySequence_Fast(outputs, "outputs must be a sequence")) == NULL)
        goto done;
    Py_ssize_t n_in = PySequence_Fast_GET_SIZE(in), n_out = PySequence_Fast_GET_SIZE(out);
    Py_ssize_t n_args = n_in + n_out;
    if ((args = PyTuple_New(n_args)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n_args; i++) {
        PyObject *v = i < n_in ? PySequence_Fast_GET_ITEM(in, i) : PySequence_Fast_GET_ITEM(out, i - n_in);
        Py_INCREF(v);
        PyTuple_SET_ITEM(args, i, v);
    }

    if ((simple = PLAN_SLOT(self, plan, O_SIMPLE)) == NULL)
        goto done;
    if ((simple_fast = as_tuple(simple)) == NULL)
        goto done;
    Py_ssize_t n_simple = PyTuple_GET_SIZE(simple_fast);
    for (Py_ssize_t r = 0; r < n_simple; r++) {
        PyObject *f[4], *holder;
        if (unpack(PyTuple_GET_ITEM(simple_fast, r), 4, f, &holder) < 0)
            goto done;
        Py_ssize_t index = PyNumber_AsSsize_t(f[0], PyExc_IndexError);
        if (index == -1 && PyErr_Occurred()) {
            Py_DECREF(holder);
            goto done;
        }
        if (index < 0)
            index += n_args;
        if (index < 0 || index >= n_args) {
            Py_DECREF(holder);
            PyErr_SetString(PyExc_IndexError, "tuple index out of range");
            goto done;
        }
        PyObject *value = PyTuple_GET_ITEM(args, index);
        PyObject *st = dict_attr(value, self->state_attr, 1);
        if (st == NULL) {
            Py_DECREF(holder);
            goto done;
        }
        int known = 0;
        if (st != Py_None) {
            PyObject *first = item(st, 0);
            if (first == NULL) {
                Py_DECREF(st);
                Py_DECREF(holder);
                goto done;
            }
            known = first == tok;
            Py_DECREF(first);
        }
        if (!known) {
            Py_DECREF(st);
            if (value == Py_None) {
                Py_DECREF(holder);
                continue;
            }
            /* rec.ident.register(value): the state was read once already, as in Python */
            if ((st = PyObject_CallOneArg(ss->register_, value)) == NULL) {
                Py_DECREF(holder);
                goto done;
            }
        }
        int a = append_access(self, acc, seq, st, f[2], f[3], 1, f[1], i_zero);
        Py_DECREF(st);
        Py_DECREF(holder);
        if (a < 0)
            goto done;
    }

    if ((fields = PLAN_SLOT(self, plan, O_FIELDS)) == NULL)
        goto done;
    if ((fields_fast = as_tuple(fields)) == NULL)
        goto done;
    Py_ssize_t n_fields = PyTuple_GET_SIZE(fields_fast);
    for (Py_ssize_t r = 0; r < n_fields; r++) {
        /* (index, arg, field_path, path, role, flags) */
        PyObject *f[6], *holder;
        if (unpack(PyTuple_GET_ITEM(fields_fast, r), 6, f, &holder) < 0)
            goto done;
        Py_ssize_t index = PyNumber_AsSsize_t(f[0], PyExc_IndexError);
        if (index == -1 && PyErr_Occurred()) {
            Py_DECREF(holder);
            goto done;
        }
        if (index < 0)
            index += n_args;
        if (index < 0 || index >= n_args) {
            Py_DECREF(holder);
            PyErr_SetString(PyExc_IndexError, "tuple index out of range");
            goto done;
        }
        PyObject *value = PyTuple_GET_ITEM(args, index);
        Py_INCREF(value);
        PyObject *path = as_tuple(f[3]);
        if (path == NULL) {
            Py_DECREF(value);
            Py_DECREF(holder);
            goto done;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(path); k++) {
            PyObject *next = getattr_or_none(value, PyTuple_GET_ITEM(path, k));
            Py_DECREF(value);
            value = next;
            if (value == NULL)
                break;
        }
        Py_DECREF(path);
        if (value == NULL) {
            Py_DECREF(holder);
            goto done;
        }
        if (value == Py_None) {
            Py_DECREF(value);
            Py_DECREF(holder);
            continue;
        }
        PyObject *st = array_state(self, ss, value);
        Py_DECREF(value);
        if (st == NULL) {
            Py_DECREF(holder);
            goto done;
        }
        int a = append_access(self, acc, seq, st, f[4], f[5], 1, f[1], f[2]);
        Py_DECREF(st);
        Py_DECREF(holder);
        if (a < 0)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(in);
    Py_XDECREF(out);
    Py_XDECREF(args);
    Py_XDECREF(simple);
    Py_XDECREF(simple_fast);
    Py_XDECREF(fields);
    Py_XDECREF(fields_fast);
    return rc;
}

/* value of a split argument list: a[index] if index < len(a) else b[index - len(a)] */
static PyObject *
split_item(PyObject *a, Py_ssize_t n_a, PyObject *b, Py_ssize_t index)
{
    return index < n_a ? item(a, index) : item(b, index - n_a);
}

/* accesses of an adjoint launch (_append_launch_accesses, adjoint branch) */
static int
adjoint_accesses(FastLaunch *self, Session *ss, PyObject *acc, PyObject *seq, PyObject *plan,
                 PyObject *fwd_a, PyObject *fwd_b, PyObject *adj_a, PyObject *adj_b)
{
    int rc = -1;
    PyObject *rows = NULL, *rows_fast = NULL;
    Py_ssize_t n_a = PyObject_Size(fwd_a);
    if (n_a < 0)
        goto done;
    Py_ssize_t n_adj_a = PyObject_Size(adj_a);
    if (n_adj_a < 0)
        goto done;
    Py_ssize_t n_adj_b = PyObject_Size(adj_b);
    if (n_adj_b < 0)
        goto done;
    Py_ssize_t n_adj = n_adj_a + n_adj_b;
    if ((rows = PLAN_SLOT(self, plan, O_ADJ)) == NULL)
        goto done;
    if ((rows_fast = as_tuple(rows)) == NULL)
        goto done;
    for (Py_ssize_t r = 0; r < PyTuple_GET_SIZE(rows_fast); r++) {
        /* (index, arg, field_path, path, frole, fflags, grole, gflags, rrole, rflags) */
        PyObject *f[10], *holder, *value = NULL, *grad = NULL, *st = NULL;
        int ok = 0;
        if (unpack(PyTuple_GET_ITEM(rows_fast, r), 10, f, &holder) < 0)
            goto done;
        Py_ssize_t index = PyNumber_AsSsize_t(f[0], PyExc_IndexError);
        if (index == -1 && PyErr_Occurred())
            goto row_done;
        if ((value = split_item(fwd_a, n_a, fwd_b, index)) == NULL)
            goto row_done;
        if (index < n_adj) {
            if ((grad = split_item(adj_a, n_adj_a, adj_b, index)) == NULL)
                goto row_done;
        } else {
            grad = Py_None;
            Py_INCREF(grad);
        }
        if (f[3] != Py_None) {
            PyObject *path = as_tuple(f[3]);
            if (path == NULL)
                goto row_done;
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(path); k++) {
                PyObject *name = PyTuple_GET_ITEM(path, k); /* held by the tuple path */
                if (value != Py_None) {
                    PyObject *next = getattr_or_none(value, name);
                    if (next == NULL) {
                        Py_DECREF(path);
                        goto row_done;
                    }
                    Py_SETREF(value, next);
                }
                if (grad != Py_None) {
                    PyObject *next = getattr_or_none(grad, name);
                    if (next == NULL) {
                        Py_DECREF(path);
                        goto row_done;
                    }
                    Py_SETREF(grad, next);
                }
            }
            Py_DECREF(path);
        }
        if (value != Py_None) {
            if ((st = array_state(self, ss, value)) == NULL)
                goto row_done;
            int a = append_access(self, acc, seq, st, f[4], f[5], 1, f[1], f[2]);
            Py_CLEAR(st);
            if (a < 0)
                goto row_done;
        }
        if (grad != Py_None) {
            if ((st = array_state(self, ss, grad)) == NULL)
                goto row_done;
            int retained = 0;
            if (value != Py_None) {
                PyObject *flag = getattr_or_none(value, s_retain_grad);
                if (flag == NULL)
                    goto row_done;
                retained = PyObject_IsTrue(flag);
                Py_DECREF(flag);
                if (retained < 0)
                    goto row_done;
            }
            int a = retained ? append_access(self, acc, seq, st, f[8], f[9], 0, f[1], f[2])
                             : append_access(self, acc, seq, st, f[6], f[7], 0, f[1], f[2]);
            if (a < 0)
                goto row_done;
        }
        ok = 1;
    row_done:
        Py_XDECREF(st);
        Py_XDECREF(value);
        Py_XDECREF(grad);
        Py_DECREF(holder);
        if (!ok)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(rows);
    Py_XDECREF(rows_fast);
    return rc;
}

/* state.generic_plans[(kernel, plans._type_key(kernel, [*inputs, *outputs]))] as a borrowed
 * reference, for a generic kernel whose generic argument positions Python has looked up
 * (state.generic_args); NULL without an error set where Python decides: a key not planned
 * yet, positions not known (None: all arguments), other sequences, any error on the way.
 * The key is _type_key's: (dtype, ndim) of a warp.array, else the value's _cls, else its type. */
static PyObject *
generic_plan(FastLaunch *self, PyObject *kernel, PyObject *inputs, PyObject *outputs)
{
    PyObject *positions = PyDict_GetItemWithError(self->generic_args, kernel);
    if (positions == NULL || !PyTuple_CheckExact(positions)) {
        PyErr_Clear();
        return NULL;
    }
    if (!(PyList_CheckExact(inputs) || PyTuple_CheckExact(inputs))
        || !(PyList_CheckExact(outputs) || PyTuple_CheckExact(outputs)))
        return NULL;
    Py_ssize_t n_in = PySequence_Fast_GET_SIZE(inputs), n_out = PySequence_Fast_GET_SIZE(outputs);
    Py_ssize_t count = PyTuple_GET_SIZE(positions);
    PyObject *plan = NULL, *key = NULL, *types = PyTuple_New(count);
    if (types == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(positions, i));
        PyObject *value, *item;
        if (at >= 0 && at < n_in)
            value = PySequence_Fast_GET_ITEM(inputs, at);
        else if (at >= n_in && at < n_in + n_out)
            value = PySequence_Fast_GET_ITEM(outputs, at - n_in);
        else
            goto done;
        if (Py_TYPE(value) == (PyTypeObject *)self->array_class) {
            PyObject *dtype = PyObject_GetAttr(value, s_dtype_key);
            if (dtype == NULL)
                goto done;
            PyObject *ndim = PyObject_GetAttr(value, s_ndim);
            if (ndim == NULL) {
                Py_DECREF(dtype);
                goto done;
            }
            item = PyTuple_Pack(2, dtype, ndim);
            Py_DECREF(dtype);
            Py_DECREF(ndim);
            if (item == NULL)
                goto done;
        } else {
            if ((item = getattr_or_none(value, s_cls_attr)) == NULL)
                goto done;
            if (item == Py_None) {
                Py_DECREF(item);
                item = (PyObject *)Py_TYPE(value);
                Py_INCREF(item);
            }
        }
        PyTuple_SET_ITEM(types, i, item);
    }
    if ((key = PyTuple_Pack(2, kernel, types)) != NULL)
        plan = PyDict_GetItemWithError(self->generic_plans, key);
done:
    if (plan == NULL)
        PyErr_Clear();
    Py_XDECREF(key);
    Py_XDECREF(types);
    return plan;
}

/* The common case: a launch of a known kernel class, not captured, not record_cmd. 0 recorded, -1
 * an error, 1 the plan needs the Python path (arrays behind handle ids). */
static int
record_common(FastLaunch *self, Session *ss, PyObject *ts, PyObject *site, PyObject *tape,
              Py_ssize_t taped_before, PyObject **a)
{
    int rc = -1;
    PyObject *plan = NULL, *dim_code = NULL, *phase = NULL, *tape_id = NULL, *t_ns = NULL;
    PyObject *seq = NULL, *ev = NULL, *acc = NULL;
    PyObject *kernel_id = NULL, *thread = NULL, *parent = NULL, *recorded = Py_False;
    PyObject *kernel = a[P_KERNEL], *dim = a[P_DIM], *rec = ss->rec;
    int locked = 0;

    plan = PyDict_GetItemWithError(self->plans, kernel);
    if (plan == NULL && !PyErr_Occurred())
        plan = generic_plan(self, kernel, a[P_INPUTS], a[P_OUTPUTS]);
    if (plan != NULL) {
        Py_INCREF(plan);
    } else {
        if (PyErr_Occurred())
            goto done;
        PyObject *args = PySequence_List(a[P_INPUTS]);
        if (args == NULL)
            goto done;
        PyObject *joined = PyNumber_InPlaceAdd(args, a[P_OUTPUTS]);
        Py_DECREF(args);
        if (joined == NULL)
            goto done;
        plan = PyObject_CallFunctionObjArgs(self->plan_for, rec, kernel, joined, NULL);
        Py_DECREF(joined);
        if (plan == NULL)
            goto done;
    }
    /* arrays behind mesh/BVH/volume id arguments (LaunchPlan.handles): Python resolves them */
    PyObject *handles = PyObject_GetAttr(plan, s_handles);
    if (handles == NULL)
        goto done;
    int by_python = PyObject_IsTrue(handles);
    Py_DECREF(handles);
    if (by_python != 0) {
        rc = by_python < 0 ? -1 : 1;
        goto done;
    }
    if (PyLong_CheckExact(dim) || PyTuple_CheckExact(dim)) {
        dim_code = PyDict_GetItemWithError(self->dims, dim);
        if (dim_code == NULL && PyErr_Occurred())
            goto done;
        Py_XINCREF(dim_code);
    }
    if (dim_code == NULL) {
        dim_code = PyObject_CallFunctionObjArgs(self->dim_code_of, rec, dim, NULL);
        if (dim_code == NULL)
            goto done;
    }
    if ((phase = TS_SLOT(self, ts, O_PHASE)) == NULL)
        goto done;
    int in_phase = PyObject_IsTrue(phase);
    if (in_phase < 0)
        goto done;
    if (tape != Py_None) {
        if (in_phase) {
            if ((tape_id = TS_SLOT(self, ts, O_BW_TAPE)) == NULL)
                goto done;
        } else {
            PyObject *tagged = getattr_or_none(tape, self->tape_attr);
            if (tagged == NULL)
                goto done;
            if (tagged != Py_None) {
                PyObject *first = item(tagged, 0);
                if (first == NULL) {
                    Py_DECREF(tagged);
                    goto done;
                }
                if (first == ss->tok)
                    tape_id = item(tagged, 1);
                Py_DECREF(first);
                if (tape_id == NULL && PyErr_Occurred()) {
                    Py_DECREF(tagged);
                    goto done;
                }
            }
            Py_DECREF(tagged);
            if (tape_id == NULL) {
                tape_id = PyObject_CallFunctionObjArgs(self->tape_id_of, rec, tape, NULL);
                if (tape_id == NULL)
                    goto done;
            }
        }
        PyObject *launches = PyObject_GetAttr(tape, s_launches);
        if (launches == NULL)
            goto done;
        Py_ssize_t n = length(launches);
        if (n < 0) {
            Py_DECREF(launches);
            goto done;
        }
        if (n > taped_before) {
            recorded = Py_True;
            PyObject *last = PySequence_GetItem(launches, -1);
            PyObject *metadata = last != NULL ? PySequence_GetItem(last, -1) : NULL;
            Py_XDECREF(last);
            Py_DECREF(launches);
            if (metadata == NULL)
                goto done;
            if (PyDict_CheckExact(metadata)) {
                Py_ssize_t site_value = PyLong_AsSsize_t(site);
                if (site_value == -1 && PyErr_Occurred()) {
                    Py_DECREF(metadata);
                    goto done;
                }
                if (site_value >= 0) {
                    PyObject *caller = PyObject_GetItem(ss->caller_dicts, site);
                    int set = caller != NULL ? PyDict_SetItem(metadata, s_caller_key, caller) : -1;
                    Py_XDECREF(caller);
                    if (set < 0) {
                        Py_DECREF(metadata);
                        goto done;
                    }
                }
            }
            Py_DECREF(metadata);
        } else {
            Py_DECREF(launches);
        }
    } else if (in_phase) {
        if ((tape_id = TS_SLOT(self, ts, O_BW_TAPE)) == NULL)
            goto done;
    } else {
        tape_id = i_minus1;
        Py_INCREF(tape_id);
    }
    if ((t_ns = perf_now(self->perf_ns)) == NULL)
        goto done;
    if (session_acquire(ss) < 0)
        goto done;
    locked = 1;

    if ((seq = seq_take(ss)) == NULL)
        goto done;
    if ((ev = rows_attr(ss, s_ev)) == NULL || (acc = rows_attr(ss, s_acc)) == NULL)
        goto done;
    /* The row buffers hold ints only (session.py): they can be in no reference cycle,
     * so the cyclic GC need not walk their (up to 100k) items on every collection.
     * Untracking is safe whatever they hold: an untracked container only counts as
     * an outside reference to what it holds. A list never tracks itself again. */
    if (PyList_CheckExact(ev) && PyObject_GC_IsTracked(ev))
        PyObject_GC_UnTrack(ev);
    if (PyList_CheckExact(acc) && PyObject_GC_IsTracked(acc))
        PyObject_GC_UnTrack(acc);
    int adjoint = PyObject_IsTrue(a[P_ADJOINT]);
    if (adjoint < 0)
        goto done;
    if ((kernel_id = PLAN_SLOT(self, plan, O_KERNEL_ID)) == NULL)
        goto done;
    if ((thread = TS_SLOT(self, ts, O_THREAD)) == NULL)
        goto done;
    if ((parent = TS_SLOT(self, ts, O_PARENT)) == NULL)
        goto done;
    {
        PyObject *row[15] = {
            seq, self->launch_code, tape_id, recorded, phase, adjoint ? Py_True : Py_False, Py_True, site,
            kernel_id, thread, t_ns, parent, i_minus1, i_minus1, dim_code,
        };
        if (extend_row(ev, row, 15) < 0)
            goto done;
    }
    if (adjoint) {
        if (adjoint_accesses(self, ss, acc, seq, plan, a[P_INPUTS], a[P_OUTPUTS], a[P_ADJ_INPUTS],
                             a[P_ADJ_OUTPUTS]) < 0)
            goto done;
    } else if (forward_accesses(self, ss, acc, seq, plan, a[P_INPUTS], a[P_OUTPUTS]) < 0) {
        goto done;
    }
    if (flush_if_due(ss, ev, acc, t_ns) < 0)
        goto done;
    self->calls++;
    rc = 0;
done:
    if (locked)
        rc = unlock(ss, rc);
    Py_XDECREF(plan);
    Py_XDECREF(dim_code);
    Py_XDECREF(phase);
    Py_XDECREF(tape_id);
    Py_XDECREF(t_ns);
    Py_XDECREF(seq);
    Py_XDECREF(ev);
    Py_XDECREF(acc);
    Py_XDECREF(kernel_id);
    Py_XDECREF(thread);
    Py_XDECREF(parent);
    return rc;
}

/* ------------------------------------------------------------------ the call */

/* the call site: the caller's position if known, the backward's site, else the frame walk */
static PyObject *
call_site(FastLaunch *self, Session *ss, PyObject *ts)
{
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed: the caller of wp.launch */
    if (frame == NULL) {
        PyErr_SetString(PyExc_ValueError, "call stack is not deep enough");
        return NULL;
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    int lasti = PyFrame_GetLasti(frame);
    size_t slot = (((uintptr_t)code >> 4) ^ ((uintptr_t)lasti * 40503u)) % SITE_SLOTS;
    PyObject *site = NULL, *key = NULL, *id = NULL, *pos = NULL;
    if (self->site_cache[slot].code == (void *)code && self->site_cache[slot].lasti == lasti) {
        site = self->site_cache[slot].site;
        Py_INCREF(site);
        goto done;
    }
    /* Sites.by_pos holds user positions only (and keeps their code objects alive) */
    if ((id = PyLong_FromVoidPtr(code)) == NULL || (pos = PyLong_FromLong(lasti)) == NULL)
        goto done;
    if ((key = PyTuple_Pack(2, id, pos)) == NULL)
        goto done;
    site = PyDict_GetItemWithError(ss->by_pos, key);
    if (site != NULL) {
        Py_INCREF(site);
        Py_INCREF(site);
        Py_XSETREF(self->site_cache[slot].site, site);
        self->site_cache[slot].code = (void *)code;
        self->site_cache[slot].lasti = lasti;
        goto done;
    }
    if (PyErr_Occurred())
        goto done;
    PyObject *phase = TS_SLOT(self, ts, O_PHASE);
    if (phase == NULL)
        goto done;
    int in_phase = PyObject_IsTrue(phase);
    Py_DECREF(phase);
    if (in_phase < 0)
        goto done;
    if (in_phase) {
        /* an adjoint launch of Tape.backward: its caller's line, no walk */
        PyObject *bw = PyDict_GetItemWithError(self->state_dict, s_backward_code);
        if (bw == NULL && PyErr_Occurred())
            goto done;
        if (bw != NULL && (PyObject *)code == bw) {
            /* called by the wrapper: from the frame it noted (ThreadState.bw_frame) */
            PyObject *bw_frame = TS_SLOT(self, ts, O_BW_FRAME);
            if (bw_frame == NULL)
                goto done;
            PyFrameObject *back = PyFrame_GetBack(frame);
            int hit = back != NULL && (PyObject *)back == bw_frame;
            Py_XDECREF(back);
            Py_DECREF(bw_frame);
            if (hit) {
                site = TS_SLOT(self, ts, O_BW_SITE);
                goto done;
            }
        }
    }
    /* Sites.caller(0): from C there is no wrapper frame between it and the caller */
    site = walk_caller(ss);
done:
    Py_DECREF(code);
    Py_XDECREF(id);
    Py_XDECREF(pos);
    Py_XDECREF(key);
    return site;
}

static PyObject *
fl_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastLaunch *self = (FastLaunch *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *a[NPARAMS] = {NULL};
    PyObject *rec = NULL, *ts = NULL, *site = NULL, *tape = NULL, *result = NULL;
    Session *ss = NULL;
    Py_ssize_t taped_before = -1;

    if (self->original == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this wp.launch wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (self->defaults == NULL || self->state_dict == NULL || self->context_dict == NULL)
        goto passthrough; /* cleared: the original call alone */

    /* bind Warp's parameters; anything odd is the original's to report */
    if (nargs > NPARAMS)
        goto passthrough;
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nkw; k++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, k);
            int j = 0;
            for (; j < NPARAMS; j++)
                if (name == s_params[j])
                    break;
            if (j == NPARAMS) {
                for (j = 0; j < NPARAMS; j++) {
                    int eq = PyUnicode_Compare(name, s_params[j]);
                    if (eq == -1 && PyErr_Occurred())
                        return NULL;
                    if (eq == 0)
                        break;
                }
            }
            if (j == NPARAMS || a[j] != NULL)
                goto passthrough;
            a[j] = args[nargs + k];
        }
    }
    if (a[P_KERNEL] == NULL || a[P_DIM] == NULL)
        goto passthrough;
    for (int j = 2; j < NPARAMS; j++)
        if (a[j] == NULL)
            a[j] = PyTuple_GET_ITEM(self->defaults, j - 2);

    rec = PyDict_GetItemWithError(self->state_dict, s_rec);
    if (rec == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto passthrough;
    }
    if (rec == Py_None) {
        if (self->session != NULL)
            clear_session(self); /* let the stopped session go (a wrapper kept by the program) */
        goto passthrough;
    }
    Py_INCREF(rec);
    if (self->session == NULL || self->session->rec != rec) {
        if (bind_session(self, rec) < 0) {
            /* a recorder this wrapper does not understand: recorded by nobody, never fatal */
            if (fail(rec) < 0)
                goto error;
            Py_CLEAR(rec);
            goto passthrough;
        }
    }
    ss = self->session;
    Py_INCREF(ss);

    /* ts = rec.local.state, else rec.thread_state(); kept for the thread that asked last */
    unsigned long long thread = PyThreadState_GetID(PyThreadState_Get());
    if (ss->ts_by_thread && self->c_ts != NULL && self->ts_thread == thread) {
        ts = self->c_ts;
        Py_INCREF(ts);
    } else {
        ts = PyObject_GetAttr(ss->local, s_state);
        if (ts == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                goto error;
            PyErr_Clear();
            if ((ts = PyObject_CallMethodNoArgs(rec, s_thread_state)) == NULL)
                goto error;
        }
        Py_INCREF(ts);
        Py_XSETREF(self->c_ts, ts);
        self->ts_thread = thread;
    }
    PyObject *guard_value = TS_SLOT(self, ts, O_GUARD);
    if (guard_value == NULL)
        goto error;
    int guard = PyObject_IsTrue(guard_value);
    Py_DECREF(guard_value);
    if (guard < 0)
        goto error;
    if (guard) {
        Py_CLEAR(ts);
        Py_CLEAR(ss);
        Py_CLEAR(rec);
        goto passthrough;
    }

    /* before the call: the call site and the tape's length */
    site = call_site(self, ss, ts);
    if (site != NULL) {
        PyObject *runtime = PyDict_GetItemWithError(self->context_dict, s_runtime);
        if (runtime == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_NameError, s_runtime);
        } else if (runtime == Py_None) {
            tape = Py_None;
            Py_INCREF(tape);
        } else {
            Py_INCREF(runtime); /* held: runtime.tape may run any code */
            tape = PyObject_GetAttr(runtime, s_tape);
            Py_DECREF(runtime);
            if (tape != NULL && tape != Py_None) {
                PyObject *launches = PyObject_GetAttr(tape, s_launches);
                if (launches != NULL) {
                    taped_before = length(launches);
                    Py_DECREF(launches);
                }
                if (launches == NULL || taped_before < 0)
                    Py_CLEAR(tape);
            }
        }
    }
    if (site == NULL || tape == NULL) {
        if (fail(rec) < 0)
            goto error;
        Py_XSETREF(site, i_minus1);
        Py_INCREF(site);
        Py_XSETREF(tape, Py_None);
        Py_INCREF(tape);
        taped_before = -1;
    }

    result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    if (result == NULL)
        goto error;

    int uncommon = PyObject_IsTrue(a[P_RECORD_CMD]);
    if (uncommon == 0) {
        uncommon = PyDict_GET_SIZE(ss->captures) > 0;
        if (uncommon == 0)
            uncommon = (PyObject *)Py_TYPE(a[P_KERNEL]) != self->kernel_class;
    }
    if (uncommon < 0)
        goto error;
    int common = uncommon ? 1 : record_common(self, ss, ts, site, tape, taped_before, a);
    if (common == 1) { /* the uncommon cases, and plans that need Python: launch._record_launch */
        PyObject *before = PyLong_FromSsize_t(taped_before);
        PyObject *r = NULL;
        if (before != NULL) {
            r = PyObject_CallFunctionObjArgs(
                self->record_launch, rec, ts, site, tape, before, a[P_KERNEL], a[P_DIM], a[P_INPUTS],
                a[P_OUTPUTS], a[P_ADJ_INPUTS], a[P_ADJ_OUTPUTS], a[P_DEVICE], a[P_STREAM],
                a[P_ADJOINT], a[P_RECORD_CMD], result, NULL);
            Py_DECREF(before);
        }
        if (r != NULL)
            Py_DECREF(r);
        else if (fail(rec) < 0)
            goto error;
    } else if (common < 0) {
        if (fail(rec) < 0)
            goto error;
    }
    Py_DECREF(rec);
    Py_DECREF(ss);
    Py_DECREF(ts);
    Py_DECREF(site);
    Py_DECREF(tape);
    return result;

error:
    Py_XDECREF(result);
    Py_XDECREF(rec);
    Py_XDECREF(ss);
    Py_XDECREF(ts);
    Py_XDECREF(site);
    Py_XDECREF(tape);
    return NULL;

passthrough:
    return PyObject_Vectorcall(self->original, args, nargsf, kwnames);
}

/* ------------------------------------------------------------------ the type */

static int
fl_traverse(FastLaunch *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dict);
    Py_VISIT(self->original);
    Py_VISIT(self->defaults);
    Py_VISIT(self->state_dict);
    Py_VISIT(self->context_dict);
    Py_VISIT(self->kernel_class);
    Py_VISIT(self->plans);
    Py_VISIT(self->dims);
    Py_VISIT(self->tape_attr);
    Py_VISIT(self->state_attr);
    Py_VISIT(self->record_launch);
    Py_VISIT(self->plan_for);
    Py_VISIT(self->generic_args);
    Py_VISIT(self->generic_plans);
    Py_VISIT(self->array_class);
    Py_VISIT(self->dim_code_of);
    Py_VISIT(self->tape_id_of);
    Py_VISIT(self->perf_ns);
    Py_VISIT(self->launch_code);
    Py_VISIT(self->session);
    Py_VISIT(self->c_ts);
    Py_VISIT(self->ts_slots.type);
    Py_VISIT(self->plan_slots.type);
    return 0;
}

static int
fl_clear(FastLaunch *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->original);
    Py_CLEAR(self->defaults);
    Py_CLEAR(self->state_dict);
    Py_CLEAR(self->context_dict);
    Py_CLEAR(self->kernel_class);
    Py_CLEAR(self->plans);
    Py_CLEAR(self->dims);
    Py_CLEAR(self->tape_attr);
    Py_CLEAR(self->state_attr);
    Py_CLEAR(self->record_launch);
    Py_CLEAR(self->plan_for);
    Py_CLEAR(self->generic_args);
    Py_CLEAR(self->generic_plans);
    Py_CLEAR(self->array_class);
    Py_CLEAR(self->dim_code_of);
    Py_CLEAR(self->tape_id_of);
    Py_CLEAR(self->perf_ns);
    Py_CLEAR(self->launch_code);
    clear_session(self);
    Py_CLEAR(self->ts_slots.type);
    Py_CLEAR(self->plan_slots.type);
    return 0;
}

static void
fl_dealloc(FastLaunch *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    fl_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
fl_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "defaults", "state_dict", "context_dict", "kernel_class", "plans", "dims",
        "tape_attr", "state_attr", "record_launch", "plan_for", "dim_code_of", "tape_id_of",
        "perf_ns", "launch_code", "generic_args", "generic_plans", "array_class", NULL,
    };
    PyObject *o[18];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!OO!O!UUOOOOOOO!O!O:FastLaunch", kwlist, &o[0],
                                     &PyTuple_Type, &o[1], &PyDict_Type, &o[2], &PyDict_Type, &o[3],
                                     &o[4], &PyDict_Type, &o[5], &PyDict_Type, &o[6], &o[7], &o[8],
                                     &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &PyDict_Type,
                                     &o[15], &PyDict_Type, &o[16], &o[17]))
        return NULL;
    if (PyTuple_GET_SIZE(o[1]) != NPARAMS - 2) {
        PyErr_SetString(PyExc_ValueError, "defaults: 11 values expected");
        return NULL;
    }
    FastLaunch *self = (FastLaunch *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = fl_vectorcall;
    PyObject **fields[18] = {
        &self->original, &self->defaults, &self->state_dict, &self->context_dict,
        &self->kernel_class, &self->plans, &self->dims, &self->tape_attr, &self->state_attr,
        &self->record_launch, &self->plan_for, &self->dim_code_of, &self->tape_id_of,
        &self->perf_ns, &self->launch_code, &self->generic_args, &self->generic_plans,
        &self->array_class,
    };
    for (int i = 0; i < 18; i++) {
        Py_INCREF(o[i]);
        *fields[i] = o[i];
    }
    return (PyObject *)self;
}

static PyObject *
fl_get_calls(FastLaunch *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->calls);
}

/* pickled by reference, like the Python function it replaces: its qualified name, which
 * pickle looks up in its __module__ (copy and deepcopy return the object itself) */
static PyObject *
fl_reduce(FastLaunch *self, PyObject *unused)
{
    PyObject *name = PyObject_GetAttrString((PyObject *)self, "__qualname__");
    if (name == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        name = PyObject_GetAttrString((PyObject *)self, "__name__");
    }
    return name;
}

/* let the session go now (uninstall): the Recorder, its Session and ThreadState */
static PyObject *
fl_forget(FastLaunch *self, PyObject *unused)
{
    clear_session(self);
    Py_RETURN_NONE;
}

static PyMethodDef fl_methods[] = {
    {"__reduce__", (PyCFunction)fl_reduce, METH_NOARGS, "pickled by its qualified name"},
    {"forget", (PyCFunction)fl_forget, METH_NOARGS,
     "drop the references to the session that recorded last (called by uninstall())"},
    {NULL},
};

/* a class attribute binds like a Python function (wp.launch is one) */
static PyObject *
fl_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyGetSetDef fl_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fl_get_calls, NULL, "launches recorded by the compiled path", NULL},
    {NULL},
};

static PyTypeObject FastLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.FastLaunch",
    .tp_basicsize = sizeof(FastLaunch),
    .tp_dealloc = (destructor)fl_dealloc,
    .tp_vectorcall_offset = offsetof(FastLaunch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "wp.launch, recorded without a Python frame (see warptrace/record/wrap/launch.py)",
    .tp_traverse = (traverseproc)fl_traverse,
    .tp_clear = (inquiry)fl_clear,
    .tp_getset = fl_getset,
    .tp_methods = fl_methods,
    .tp_descr_get = fl_descr_get,
    .tp_dictoffset = offsetof(FastLaunch, dict),
    .tp_weaklistoffset = offsetof(FastLaunch, weakrefs),
    .tp_new = fl_new,
};

/* The session and thread state a compiled method recorded with last (FastZero,
 * FastInitNew): read once per session and per thread, as FastLaunch does. */
typedef struct {
    Session *session;
    unsigned long long thread; /* Python thread ids are never reused */
    PyObject *ts;
} Bound;

static void
bound_clear(Bound *b)
{
    Py_CLEAR(b->session);
    Py_CLEAR(b->ts);
    b->thread = 0;
}

/* *ss and *ts (new references) for rec on this thread: 1; 0 where the Python code must
 * run instead (a recorder not understood, the thread's first event: it makes the
 * thread's state); -1 with an error */
static int
bound_state(Bound *b, PyObject *rec, Session **ss, PyObject **ts)
{
    if (b->session == NULL || b->session->rec != rec) {
        bound_clear(b);
        if ((b->session = session_new(rec)) == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    Session *session = b->session;
    unsigned long long thread = PyThreadState_GetID(PyThreadState_Get());
    PyObject *state;
    if (session->ts_by_thread && b->ts != NULL && b->thread == thread) {
        state = b->ts;
        Py_INCREF(state);
    } else {
        if ((state = PyObject_GetAttr(session->local, s_state)) == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
            return 0;
        }
        Py_INCREF(state);
        Py_XSETREF(b->ts, state);
        b->thread = thread;
    }
    Py_INCREF(session);
    *ss = session;
    *ts = state;
    return 1;
}

/* ================================================================== array.zero_ */

/* The compiled array.zero_ wrapper (warptrace/record/wrap/memory.py, make_memset): the
 * same events as the Python one in its three common cases, without a Python frame:
 * the initialisation of a fresh allocation (no event), a gradient zeroed by
 * Tape.zero() (appended to ThreadState.zeroed; Tape.zero's wrapper writes the rows)
 * and a memset whose call site, tape and array are known (its MEMSET row). Everything
 * else (a call site or tape seen for the first time, an array not registered yet, a
 * graph capture, another signature) is the Python wrapper's, called as it is.
 *
 * FastMethod is the object of FastZero, FastRead (array.numpy()/list()) and FastCopy
 * (wp.copy): one layout, each type its own call and constructor. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *original;     /* Warp's array.zero_ (array.numpy, wp.copy) */
    PyObject *python;       /* the pure-Python wrapper: every uncommon case */
    PyObject *state_dict;   /* warptrace.record.state.__dict__ */
    PyObject *context_dict; /* warp._src.context.__dict__ */
    PyObject *state_attr;   /* identity.STATE */
    PyObject *new_attr;     /* identity.NEW */
    PyObject *tape_attr;    /* "_warptrace_tape" */
    PyObject *kind_code;    /* EVENT_KIND_CODES[MEMSET] (FastRead: [VALUE_READ], FastCopy: [COPY]) */
    PyObject *role;         /* ROLE_WRITE (FastRead: ROLE_READ) */
    PyObject *role_read;    /* FastCopy: ROLE_READ, the source's role */
    PyObject *flag_store;   /* FLAG_STORE */
    PyObject *zero_value;   /* 0.0, the value column of a zero_ (FastAllocGrad: 1.0, of its
                             * SET_REQUIRES_GRAD row) */
    PyObject *perf_ns;
    /* FastRead and FastCopy only (NULL in a FastZero): */
    PyObject *digest;       /* hashlib.blake2b */
    PyObject *detail_py;    /* memory.read_detail: every result but a C-contiguous ndarray
                             * (FastCopy: memory._host_write) */
    PyObject *ndarray;      /* numpy.ndarray */
    /* FastTapeEvent and FastTapeInit only (NULL elsewhere): */
    PyObject *after;        /* the Python wrapper's event half (tape.py), called after the
                             * Warp call where the compiled path leaves the event to Python */
    PyObject *kind_end;     /* FastBackward: EVENT_KIND_CODES[BACKWARD_END] (kind_code: BEGIN) */
    PyObject *array_type;   /* FastRecordFunc: warp.array */
    Py_ssize_t digest_max;  /* hostdata.DIGEST_MAX_BYTES */
    unsigned long long calls; /* memsets (reads) decided by the compiled path (tests) */
    Bound bound;
    SlotCache ts_slots, ts2_slots;
    PyObject *weakrefs;
    struct { void *code; int lasti; PyObject *site; } site_cache[SITE_SLOTS];
} FastMethod;

#define TS2_SLOT(self, ts, i) read_slot(&(self)->ts2_slots, (ts), (i), O_ZEROED, O_SCOPE_TAPE)

static void
fz_clear_session(FastMethod *self)
{
    bound_clear(&self->bound);
    for (int i = 0; i < SITE_SLOTS; i++) {
        self->site_cache[i].code = NULL;
        Py_CLEAR(self->site_cache[i].site);
    }
}

/* ts.guard += delta (1 or -1) */
static int
add_guard(FastMethod *self, PyObject *ts, long delta)
{
    PyObject *guard = TS_SLOT(self, ts, O_GUARD);
    if (guard == NULL)
        return -1;
    PyObject *next = PyNumber_Add(guard, delta > 0 ? i_one : i_minus1);
    Py_DECREF(guard);
    if (next == NULL)
        return -1;
    int rc = TS_SET(self, ts, O_GUARD, next);
    Py_DECREF(next);
    return rc;
}

/* original(arr) with ts.guard raised: what Warp does inside is not recorded */
static PyObject *
guarded_original(FastMethod *self, PyObject *ts, PyObject *const *args, size_t nargsf)
{
    if (add_guard(self, ts, 1) < 0)
        return NULL;
    PyObject *result = PyObject_Vectorcall(self->original, args, nargsf, NULL);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int lowered = add_guard(self, ts, -1);
    if (type != NULL) {
        if (lowered < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
    } else if (lowered < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    return result;
}

/* the user's call site when the caller's position is a known one (borrowed from the
 * cache; NULL without an error when it is not: the Python wrapper resolves it) */
static PyObject *
known_site(FastMethod *self, Session *ss, PyFrameObject *frame)
{
    PyCodeObject *code = PyFrame_GetCode(frame);
    int lasti = PyFrame_GetLasti(frame);
    size_t slot = (((uintptr_t)code >> 4) ^ ((uintptr_t)lasti * 40503u)) % SITE_SLOTS;
    PyObject *site = NULL;
    if (self->site_cache[slot].code == (void *)code && self->site_cache[slot].lasti == lasti) {
        site = self->site_cache[slot].site;
        Py_DECREF(code);
        return site;
    }
    PyObject *id = PyLong_FromVoidPtr(code), *pos = PyLong_FromLong(lasti), *key = NULL;
    if (id != NULL && pos != NULL)
        key = PyTuple_Pack(2, id, pos);
    if (key != NULL) {
        site = PyDict_GetItemWithError(ss->by_pos, key); /* borrowed */
        if (site != NULL) {
            Py_INCREF(site);
            Py_XSETREF(self->site_cache[slot].site, site);
            self->site_cache[slot].code = (void *)code;
            self->site_cache[slot].lasti = lasti;
        }
    }
    Py_XDECREF(id);
    Py_XDECREF(pos);
    Py_XDECREF(key);
    Py_DECREF(code);
    return site;
}

/* the id of a tape this session tagged (new reference), NULL without an error otherwise */
static PyObject *
tagged_tape(FastMethod *self, Session *ss, PyObject *tape)
{
    PyObject *tagged = getattr_or_none(tape, self->tape_attr), *tape_id = NULL;
    if (tagged == NULL)
        return NULL;
    if (PyTuple_CheckExact(tagged) && PyTuple_GET_SIZE(tagged) >= 2 && PyTuple_GET_ITEM(tagged, 0) == ss->tok) {
        tape_id = PyTuple_GET_ITEM(tagged, 1);
        Py_INCREF(tape_id);
    }
    Py_DECREF(tagged);
    return tape_id;
}

/* the caller's call site (new reference; frame: the caller's, may be NULL): its known
 * position, else the compiled frame walk (Sites.caller(0) where the walk leaves it to Python) */
static PyObject *
caller_site(FastMethod *self, Session *ss, PyFrameObject *frame)
{
    PyObject *site = frame != NULL ? known_site(self, ss, frame) : NULL; /* borrowed */
    if (site != NULL) {
        Py_INCREF(site);
        return site;
    }
    return PyErr_Occurred() ? NULL : walk_caller(ss);
}

/* new reference to the tape id of a memset now (current_tape), or NULL: an error when
 * one is set, else a tape not tagged yet (the Python wrapper tags it) */
static PyObject *
known_tape(FastMethod *self, Session *ss, PyObject *ts, int in_phase)
{
    if (in_phase)
        return TS_SLOT(self, ts, O_BW_TAPE);
    PyObject *scope = TS2_SLOT(self, ts, O_SCOPE_TAPE);
    if (scope == NULL)
        return NULL;
    int ge = PyObject_RichCompareBool(scope, i_zero, Py_GE);
    if (ge != 0) {
        if (ge < 0)
            Py_CLEAR(scope);
        return scope;
    }
    Py_DECREF(scope);
    PyObject *runtime = PyDict_GetItemWithError(self->context_dict, s_runtime);
    if (runtime == NULL || runtime == Py_None) {
        if (PyErr_Occurred())
            return NULL;
        Py_INCREF(i_minus1);
        return i_minus1;
    }
    Py_INCREF(runtime);
    PyObject *tape = PyObject_GetAttr(runtime, s_tape);
    Py_DECREF(runtime);
    if (tape == NULL)
        return NULL;
    if (tape == Py_None) {
        Py_DECREF(tape);
        Py_INCREF(i_minus1);
        return i_minus1;
    }
    PyObject *tape_id = tagged_tape(self, ss, tape);
    Py_DECREF(tape);
    return tape_id;
}

/* How a FastMethod call ends where it does not record: the original, the Python wrapper,
 * or the original after an error of the recorder's own before the call (recorded by nobody,
 * never fatal; rec.fail raises only under WARPTRACE_STRICT). */
enum { M_ORIGINAL, M_PYTHON, M_ERROR };

static PyObject *
method_fallback(FastMethod *self, int how, PyObject *rec, PyObject *const *args, size_t nargsf,
                PyObject *kwnames)
{
    if (how == M_ERROR && fail(rec) < 0)
        return NULL;
    return PyObject_Vectorcall(how == M_PYTHON ? self->python : self->original, args, nargsf, kwnames);
}

/* The start every FastMethod call shares: 1 with *rec, *ss and *ts (new references) when
 * the caller goes on to record; 0 with *result (the call's result, or NULL with an error)
 * when it does not: no recorder (the original), a recorder or thread not understood (the
 * Python wrapper), the guard up (the original: what Warp does inside is not recorded;
 * with_guard leaves the guard to the caller, FastCopy's nested copies). */
static int
method_enter(FastMethod *self, int with_guard, PyObject *const *args, size_t nargsf, PyObject *kwnames,
             PyObject **rec_out, Session **ss, PyObject **ts, PyObject **result)
{
    *rec_out = NULL;
    *ss = NULL;
    *ts = NULL;
    *result = NULL;
    PyObject *rec = PyDict_GetItemWithError(self->state_dict, s_rec);
    if (rec == NULL) {
        if (!PyErr_Occurred())
            *result = PyObject_Vectorcall(self->python, args, nargsf, kwnames);
        return 0;
    }
    if (rec == Py_None) {
        if (self->bound.session != NULL)
            fz_clear_session(self);
        *result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
        return 0;
    }
    Py_INCREF(rec);
    int how;
    int bound = bound_state(&self->bound, rec, ss, ts);
    if (bound <= 0) {
        how = bound < 0 ? M_ERROR : M_PYTHON;
        goto fallback;
    }
    if (!with_guard) {
        PyObject *guard_value = TS_SLOT(self, *ts, O_GUARD);
        int guard = guard_value == NULL ? -1 : PyObject_IsTrue(guard_value);
        Py_XDECREF(guard_value);
        if (guard != 0) {
            how = guard < 0 ? M_ERROR : M_ORIGINAL;
            goto fallback;
        }
    }
    *rec_out = rec;
    return 1;
fallback:
    *result = method_fallback(self, how, rec, args, nargsf, kwnames);
    Py_DECREF(rec);
    Py_CLEAR(*ss);
    Py_CLEAR(*ts);
    return 0;
}

/* The call site of a memset or read called from frame (new reference; NULL without an error
 * where the Python wrapper must find it): the caller's position if known, else the frame
 * walk (Sites.caller(0): from C there is no wrapper frame in between), as the wrappers do
 * for a call Warp makes (the backward's fill_, the zero_ of a copy's adjoint); a memset
 * by Tape.zero()'s own frame (its scope's site) is the Python wrapper's. */
static PyObject *
method_site(FastMethod *self, Session *ss, PyObject *ts, PyFrameObject *frame)
{
    PyObject *site = known_site(self, ss, frame); /* borrowed */
    if (site != NULL) {
        Py_INCREF(site);
        return site;
    }
    if (PyErr_Occurred())
        return NULL;
    PyObject *scope = TS2_SLOT(self, ts, O_SCOPE_TAPE);
    if (scope == NULL)
        return NULL;
    int scoped = PyObject_RichCompareBool(scope, i_zero, Py_GE);
    Py_DECREF(scope);
    if (scoped < 0)
        return NULL;
    if (scoped) {
        PyObject *tape_zero = PyDict_GetItemWithError(self->state_dict, s_tape_zero_code);
        if (tape_zero == NULL && PyErr_Occurred())
            return NULL;
        PyCodeObject *code = PyFrame_GetCode(frame);
        int in_zero = tape_zero != NULL && (PyObject *)code == tape_zero;
        Py_DECREF(code);
        if (in_zero)
            return NULL;
    }
    return walk_caller(ss);
}

/* The thread's phase and the tape of an event now (known_tape; new references): 1 when both
 * are known, 0 where the Python wrapper must tag the tape, -1 on error (both NULL unless 1) */
static int
phase_and_tape(FastMethod *self, Session *ss, PyObject *ts, PyObject **phase, PyObject **tape_id)
{
    *tape_id = NULL;
    if ((*phase = TS_SLOT(self, ts, O_PHASE)) == NULL)
        return -1;
    int in_phase = PyObject_IsTrue(*phase);
    if (in_phase < 0 || (*tape_id = known_tape(self, ss, ts, in_phase)) == NULL) {
        Py_CLEAR(*phase);
        return PyErr_Occurred() ? -1 : 0;
    }
    return 1;
}

/* The call site, phase and tape of a memset or read from frame (new references): 1 when all
 * are known without Python code, 0 where the Python wrapper must find them, -1 on error */
static int
method_context(FastMethod *self, Session *ss, PyObject *ts, PyFrameObject *frame, PyObject **site,
               PyObject **phase, PyObject **tape_id)
{
    *site = NULL;
    int known = phase_and_tape(self, ss, ts, phase, tape_id);
    if (known <= 0)
        return known;
    /* held: the original may run any code */
    if ((*site = method_site(self, ss, ts, frame)) == NULL) {
        Py_CLEAR(*phase);
        Py_CLEAR(*tape_id);
        return PyErr_Occurred() ? -1 : 0;
    }
    return 1;
}

/* the state tuple of a registered array of this session (new reference), NULL without
 * an error where there is none (the Python wrapper registers it) */
static PyObject *
known_state(FastMethod *self, Session *ss, PyObject *arr)
{
    PyObject *st = dict_attr(arr, self->state_attr, 1);
    if (st == NULL)
        return NULL;
    if (!PyTuple_CheckExact(st) || PyTuple_GET_SIZE(st) < 4 || PyTuple_GET_ITEM(st, 0) != ss->tok)
        Py_CLEAR(st);
    return st;
}

/* the array's state tuple (new reference): identity.STATE when this session's, else
 * rec.ident.register(arr) under rec.lock (common.array_state) */
static PyObject *
array_state_locked(FastMethod *self, Session *ss, PyObject *arr)
{
    PyObject *st = known_state(self, ss, arr);
    if (st != NULL || PyErr_Occurred())
        return st;
    if (session_acquire(ss) < 0)
        return NULL;
    st = PyObject_CallOneArg(ss->register_, arr);
    if (unlock(ss, st == NULL ? -1 : 0) < 0)
        Py_CLEAR(st);
    return st;
}

/* method_context of a memset of arr, with arr's state (new references): 0 also for an
 * empty array (no event: the Python wrapper decides) or one not registered yet */
static int
memset_context(FastMethod *self, Session *ss, PyObject *ts, PyFrameObject *frame, PyObject *arr, PyObject **st,
               PyObject **site, PyObject **phase, PyObject **tape_id)
{
    *st = NULL;
    PyObject *size = getattr_or_none(arr, s_size);
    if (size == NULL)
        return -1;
    int empty = PyLong_CheckExact(size) && PyLong_AsLong(size) == 0;
    Py_DECREF(size);
    if (empty)
        return 0;
    if ((*st = known_state(self, ss, arr)) == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int known = method_context(self, ss, ts, frame, site, phase, tape_id);
    if (known <= 0)
        Py_CLEAR(*st);
    return known;
}

/* 1 when arr is a fresh allocation with no event since (memory.py _is_fresh), 0 when
 * not, -1 on error */
static int
is_fresh(FastMethod *self, Session *ss, PyObject *arr)
{
    PyObject *new = getattr_or_none(arr, self->new_attr);
    if (new == NULL)
        return -1;
    int fresh = 0;
    if (PyTuple_CheckExact(new) && PyTuple_GET_SIZE(new) >= 4 && PyTuple_GET_ITEM(new, 0) == ss->tok) {
        PyObject *seq = seq_now(ss);
        if (seq == NULL) {
            Py_DECREF(new);
            return -1;
        }
        long long last = PyLong_AsLongLong(seq) - 1, at = PyLong_AsLongLong(PyTuple_GET_ITEM(new, 2));
        long long alloc = PyLong_AsLongLong(PyTuple_GET_ITEM(new, 3));
        Py_DECREF(seq);
        if (PyErr_Occurred()) {
            Py_DECREF(new);
            return -1;
        }
        fresh = at == last && alloc >= 0;
    }
    Py_DECREF(new);
    return fresh;
}

/* A memset's first checks: the caller's frame (borrowed) where the compiled path may go on;
 * NULL with *how where it does not: a fresh allocation's initialisation (no event: the
 * original), a graph capture or no frame (the Python wrapper), an error */
static PyFrameObject *
memset_frame(FastMethod *self, Session *ss, PyObject *arr, int *how)
{
    int fresh = is_fresh(self, ss, arr);
    if (fresh != 0) {
        if (fresh > 0)
            self->calls++;
        *how = fresh < 0 ? M_ERROR : M_ORIGINAL;
        return NULL;
    }
    *how = M_PYTHON;
    if (PyDict_GET_SIZE(ss->captures) > 0)
        return NULL;
    return PyEval_GetFrame();
}

/* an event row and its one access row unless st is NULL (rec.row with its columns; under
 * rec.lock): role self->role with flags, array_id the event's array_id column, parent
 * ts.parent where parent_value is NULL; the extra row (seq, value, detail) unless both are
 * None */
static int
event_row(FastMethod *self, Session *ss, PyObject *ts, PyObject *kind, PyObject *phase, PyObject *tape_id,
          PyObject *site, PyObject *parent_value, PyObject *st, PyObject *array_id, PyObject *flags,
          PyObject *value, PyObject *detail)
{
    int rc = -1, locked = 0;
    PyObject *t_ns = NULL, *seq = NULL, *ev = NULL, *acc = NULL, *extra = NULL;
    PyObject *thread = NULL, *parent = NULL, *extra_row = NULL;
    if ((thread = TS_SLOT(self, ts, O_THREAD)) == NULL)
        goto done;
    if (parent_value != NULL) {
        parent = parent_value;
        Py_INCREF(parent);
    } else if ((parent = TS_SLOT(self, ts, O_PARENT)) == NULL) {
        goto done;
    }
    if ((t_ns = perf_now(self->perf_ns)) == NULL)
        goto done;
    if (session_acquire(ss) < 0)
        goto done;
    locked = 1;
    if ((seq = seq_take(ss)) == NULL)
        goto done;
    if ((ev = rows_attr(ss, s_ev)) == NULL || (acc = rows_attr(ss, s_acc)) == NULL)
        goto done;
    {
        PyObject *row[15] = {
            seq, kind, tape_id, Py_False, phase, Py_False, Py_True, site,
            i_minus1, thread, t_ns, parent, array_id, i_minus1, i_minus1,
        };
        if (extend_row(ev, row, 15) < 0)
            goto done;
    }
    if (value != Py_None || detail != Py_None) {
        if ((extra = rows_attr(ss, s_ev_extra)) == NULL || (extra_row = untracked(PyTuple_Pack(3, seq, value, detail))) == NULL
            || append_item(extra, extra_row) < 0)
            goto done;
    }
    if (st != NULL) {
        PyObject *row[7] = {seq, PyTuple_GET_ITEM(st, 1), PyTuple_GET_ITEM(st, 2), self->role, flags,
                            i_zero, i_zero};
        if (extend_row(acc, row, 7) < 0)
            goto done;
    }
    if (flush_if_due(ss, ev, acc, t_ns) < 0)
        goto done;
    rc = 0;
done:
    if (locked)
        rc = unlock(ss, rc);
    Py_XDECREF(t_ns);
    Py_XDECREF(seq);
    Py_XDECREF(ev);
    Py_XDECREF(acc);
    Py_XDECREF(extra);
    Py_XDECREF(thread);
    Py_XDECREF(parent);
    Py_XDECREF(extra_row);
    return rc;
}

/* the event row of a zero_, a fill_ or a value read and its one access row: kind
 * self->kind_code, parent ts.parent; st NULL: a tape event, no access row and parent -1 */
static int
method_row(FastMethod *self, Session *ss, PyObject *ts, PyObject *phase, PyObject *tape_id, PyObject *site,
           PyObject *st, PyObject *array_id, PyObject *flags, PyObject *value, PyObject *detail)
{
    return event_row(self, ss, ts, self->kind_code, phase, tape_id, site, st == NULL ? i_minus1 : NULL, st,
                     array_id, flags, value, detail);
}

/* the MEMSET row of a zero_ */
static int
zero_row(FastMethod *self, Session *ss, PyObject *ts, PyObject *phase, PyObject *tape_id, PyObject *site,
         PyObject *st)
{
    PyObject *flags = PyNumber_Or(self->flag_store, PyTuple_GET_ITEM(st, 3));
    if (flags == NULL)
        return -1;
    int rc = method_row(self, ss, ts, phase, tape_id, site, st, i_minus1, flags, self->zero_value, Py_None);
    Py_DECREF(flags);
    return rc;
}

static PyObject *
fz_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastMethod *self = (FastMethod *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *rec, *ts, *result, *site = NULL, *phase = NULL, *tape_id = NULL, *st = NULL, *zeroed = NULL;
    Session *ss;
    int how = M_PYTHON;

    if (self->original == NULL || self->python == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this array.zero_ wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (nargs != 1 || kwnames != NULL || self->state_dict == NULL || self->context_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *arr = args[0];
    if (!method_enter(self, 0, args, nargsf, kwnames, &rec, &ss, &ts, &result))
        return result;

    PyFrameObject *frame = memset_frame(self, ss, arr, &how); /* borrowed: the caller of zero_ */
    if (frame == NULL)
        goto fallback;
    if ((zeroed = TS2_SLOT(self, ts, O_ZEROED)) == NULL)
        goto error;
    if (zeroed != Py_None) {
        PyObject *tape_zero = PyDict_GetItemWithError(self->state_dict, s_tape_zero_code);
        if (tape_zero == NULL && PyErr_Occurred())
            goto error;
        PyCodeObject *code = PyFrame_GetCode(frame);
        int batched = tape_zero != NULL && (PyObject *)code == tape_zero;
        Py_DECREF(code);
        if (batched) {
            /* a gradient zeroed by Tape.zero(): its row is written when zero() returns */
            /* Warp's own exception goes to the program unchanged */
            if ((result = guarded_original(self, ts, args, nargsf)) == NULL)
                goto done;
            if (append_item(zeroed, arr) < 0 && fail(rec) < 0)
                Py_CLEAR(result);
            else
                self->calls++;
            goto done;
        }
    }
    /* the MEMSET row: every column known without Python code, else the Python wrapper */
    int known = memset_context(self, ss, ts, frame, arr, &st, &site, &phase, &tape_id);
    if (known <= 0) {
        if (known < 0)
            goto error;
        goto fallback;
    }
    result = guarded_original(self, ts, args, nargsf);
    if (result != NULL) {
        if (zero_row(self, ss, ts, phase, tape_id, site, st) < 0 && fail(rec) < 0)
            Py_CLEAR(result);
        else
            self->calls++;
    }
    goto done;

error:
    how = M_ERROR;
fallback:
    result = method_fallback(self, how, rec, args, nargsf, kwnames);
done:
    Py_DECREF(rec);
    Py_DECREF(ss);
    Py_DECREF(ts);
    Py_XDECREF(site);
    Py_XDECREF(phase);
    Py_XDECREF(tape_id);
    Py_XDECREF(st);
    Py_XDECREF(zeroed);
    return result;
}

static int
fz_traverse(FastMethod *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dict);
    Py_VISIT(self->original);
    Py_VISIT(self->python);
    Py_VISIT(self->state_dict);
    Py_VISIT(self->context_dict);
    Py_VISIT(self->state_attr);
    Py_VISIT(self->new_attr);
    Py_VISIT(self->tape_attr);
    Py_VISIT(self->kind_code);
    Py_VISIT(self->role);
    Py_VISIT(self->flag_store);
    Py_VISIT(self->zero_value);
    Py_VISIT(self->perf_ns);
    Py_VISIT(self->digest);
    Py_VISIT(self->detail_py);
    Py_VISIT(self->role_read);
    Py_VISIT(self->ndarray);
    Py_VISIT(self->after);
    Py_VISIT(self->array_type);
    Py_VISIT(self->kind_end);
    Py_VISIT(self->bound.session);
    Py_VISIT(self->bound.ts);
    Py_VISIT(self->ts_slots.type);
    Py_VISIT(self->ts2_slots.type);
    return 0;
}

static int
fz_clear(FastMethod *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->original);
    Py_CLEAR(self->python);
    Py_CLEAR(self->state_dict);
    Py_CLEAR(self->context_dict);
    Py_CLEAR(self->state_attr);
    Py_CLEAR(self->new_attr);
    Py_CLEAR(self->tape_attr);
    Py_CLEAR(self->kind_code);
    Py_CLEAR(self->role);
    Py_CLEAR(self->flag_store);
    Py_CLEAR(self->zero_value);
    Py_CLEAR(self->perf_ns);
    Py_CLEAR(self->digest);
    Py_CLEAR(self->detail_py);
    Py_CLEAR(self->role_read);
    Py_CLEAR(self->ndarray);
    Py_CLEAR(self->after);
    Py_CLEAR(self->array_type);
    Py_CLEAR(self->kind_end);
    fz_clear_session(self);
    Py_CLEAR(self->ts_slots.type);
    Py_CLEAR(self->ts2_slots.type);
    return 0;
}

static void
fz_dealloc(FastMethod *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    fz_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The type object of a FastMethod type (FastZero, FastFill, FastRead, FastCopy): one
 * layout, its own name, doc, attributes and constructor; flags adds
 * Py_TPFLAGS_METHOD_DESCRIPTOR to the array methods (a method of warp.array binds like a
 * Python function: `arr.zero_()` calls it with arr first, without a bound method). */
#define FAST_METHOD_TYPE(cname, qualname, doc_text, getset, new_func, flags)                      \
    static PyTypeObject cname = {                                                                 \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "warptrace.record._fastlaunch." qualname,        \
        .tp_basicsize = sizeof(FastMethod),                                                       \
        .tp_dealloc = (destructor)fz_dealloc,                                                     \
        .tp_vectorcall_offset = offsetof(FastMethod, vectorcall),                                 \
        .tp_call = PyVectorcall_Call,                                                             \
        .tp_getattro = PyObject_GenericGetAttr,                                                   \
        .tp_setattro = PyObject_GenericSetAttr,                                                   \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | (flags), \
        .tp_doc = doc_text,                                                                       \
        .tp_traverse = (traverseproc)fz_traverse,                                                 \
        .tp_clear = (inquiry)fz_clear,                                                            \
        .tp_getset = getset,                                                                      \
        .tp_methods = fz_methods,                                                                 \
        .tp_descr_get = fl_descr_get,                                                             \
        .tp_dictoffset = offsetof(FastMethod, dict),                                              \
        .tp_weaklistoffset = offsetof(FastMethod, weakrefs),                                      \
        .tp_new = new_func,                                                                       \
    }

/* a new FastMethod of type with its call and n fields (at their offsets; references taken) */
static PyObject *
method_new(PyTypeObject *type, vectorcallfunc call, const size_t *offsets, PyObject *const *values, int n)
{
    FastMethod *self = (FastMethod *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = call;
    for (int i = 0; i < n; i++) {
        Py_INCREF(values[i]);
        *(PyObject **)((char *)self + offsets[i]) = values[i];
    }
    return (PyObject *)self;
}

#define F(field) offsetof(FastMethod, field)

static PyTypeObject FastFillType;
static PyObject *ff_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);

/* FastZero and FastFill: the same fields, their own call */
static PyObject *
fz_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "python", "state_dict", "context_dict", "state_attr", "new_attr", "tape_attr",
        "memset_code", "role_write", "flag_store", "perf_ns", NULL,
    };
    static const size_t offsets[12] = {
        F(original), F(python), F(state_dict), F(context_dict), F(state_attr), F(new_attr), F(tape_attr),
        F(kind_code), F(role), F(flag_store), F(perf_ns), F(zero_value),
    };
    PyObject *o[12];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!O!UUUOOOO:FastZero", kwlist, &o[0], &o[1],
                                     &PyDict_Type, &o[2], &PyDict_Type, &o[3], &o[4], &o[5], &o[6],
                                     &o[7], &o[8], &o[9], &o[10]))
        return NULL;
    if ((o[11] = PyFloat_FromDouble(0.0)) == NULL)
        return NULL;
    PyObject *self = method_new(type, type == &FastFillType ? ff_vectorcall : fz_vectorcall, offsets, o, 12);
    Py_DECREF(o[11]);
    return self;
}

static PyObject *
fz_get_calls(FastMethod *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->calls);
}

static PyObject *
fz_forget(FastMethod *self, PyObject *unused)
{
    fz_clear_session(self);
    Py_RETURN_NONE;
}

static PyMethodDef fz_methods[] = {
    {"__reduce__", (PyCFunction)fl_reduce, METH_NOARGS, "pickled by its qualified name"},
    {"forget", (PyCFunction)fz_forget, METH_NOARGS,
     "drop the references to the session that recorded last (called by uninstall())"},
    {NULL},
};

static PyGetSetDef fz_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fz_get_calls, NULL, "zero_ calls decided by the compiled path", NULL},
    {NULL},
};

/* a method of warp.array: binds like a Python function; Py_TPFLAGS_METHOD_DESCRIPTOR lets
 * `arr.zero_()` call it with arr as its first argument, without a bound method */
FAST_METHOD_TYPE(FastZeroType, "FastZero",
                 "array.zero_, recorded without a Python frame (see warptrace/record/wrap/memory.py)",
                 fz_getset, fz_new, Py_TPFLAGS_METHOD_DESCRIPTOR);

/* ================================================================== array.fill_ */

/* The compiled array.fill_(value) (memory.py, make_memset), a FastZero with another call:
 * the initialisation of a fresh allocation (no event) and a memset whose call site, tape
 * and array are known, with a float or int value (its MEMSET row, value float(value)).
 * Everything else (another value type: its float() may run any code or fail and give a
 * detail instead; the uncommon cases of zero_) is the Python wrapper's. */
static PyObject *
ff_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastMethod *self = (FastMethod *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *rec, *ts, *result, *site = NULL, *phase = NULL, *tape_id = NULL, *st = NULL, *value = NULL;
    PyObject *flags = NULL;
    Session *ss;
    int how = M_PYTHON;

    if (self->original == NULL || self->python == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this array.fill_ wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (nargs != 2 || kwnames != NULL || self->state_dict == NULL || self->context_dict == NULL
        || !(PyFloat_CheckExact(args[1]) || PyLong_CheckExact(args[1])))
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *arr = args[0];
    if (!method_enter(self, 0, args, nargsf, kwnames, &rec, &ss, &ts, &result))
        return result;

    PyFrameObject *frame = memset_frame(self, ss, arr, &how); /* borrowed: the caller of fill_ */
    if (frame == NULL)
        goto fallback;
    int known = memset_context(self, ss, ts, frame, arr, &st, &site, &phase, &tape_id);
    if (known <= 0) {
        if (known < 0)
            goto error;
        goto fallback;
    }
    if ((value = PyNumber_Float(args[1])) == NULL) {
        PyErr_Clear(); /* an int too large: the Python wrapper's row (a detail, no value) */
        goto fallback;
    }
    result = guarded_original(self, ts, args, nargsf);
    if (result != NULL) {
        int rc = (flags = PyNumber_Or(self->flag_store, PyTuple_GET_ITEM(st, 3))) == NULL
                     ? -1
                     : method_row(self, ss, ts, phase, tape_id, site, st, i_minus1, flags, value, Py_None);
        if (rc < 0 && fail(rec) < 0)
            Py_CLEAR(result);
        else if (rc == 0)
            self->calls++;
    }
    goto done;

error:
    how = M_ERROR;
fallback:
    result = method_fallback(self, how, rec, args, nargsf, kwnames);
done:
    Py_DECREF(rec);
    Py_DECREF(ss);
    Py_DECREF(ts);
    Py_XDECREF(site);
    Py_XDECREF(phase);
    Py_XDECREF(tape_id);
    Py_XDECREF(st);
    Py_XDECREF(value);
    Py_XDECREF(flags);
    return result;
}

static PyGetSetDef ff_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fz_get_calls, NULL, "fill_ calls decided by the compiled path", NULL},
    {NULL},
};

FAST_METHOD_TYPE(FastFillType, "FastFill",
                 "array.fill_, recorded without a Python frame (see warptrace/record/wrap/memory.py)",
                 ff_getset, fz_new, Py_TPFLAGS_METHOD_DESCRIPTOR);

/* ================================================================== Tape events */

/* The compiled Tape.__enter__/__exit__ (FastTapeEvent) and Tape.__init__ (FastTapeInit)
 * of warptrace/record/wrap/tape.py: Warp's call, then the TAPE_ENTER/TAPE_EXIT/TAPE_CREATE
 * row (no access rows, parent -1) with the caller's known position or the compiled frame
 * walk as its call site, as the Python wrappers do. __init__ numbers the tape (rec.next_tape,
 * under rec.lock) and tags it, under the guard too; __enter__/__exit__ record nothing under
 * the guard. Where the compiled path cannot decide (the thread's first event: Python makes
 * its state; a tape this session has not tagged: tape_id_of writes its TAPE_CREATE first),
 * the Python wrapper's event half (after) records it, with the call already made. */

/* a new tape's id: rec.next_tape, counted up under rec.lock, and its tag (rec.tok, id) */
static PyObject *
number_tape(FastMethod *self, Session *ss, PyObject *tape)
{
    if (session_acquire(ss) < 0)
        return NULL;
    PyObject *tape_id = rec_attr(ss, s_next_tape), *next = NULL;
    int rc = -1;
    if (tape_id != NULL && (next = PyNumber_Add(tape_id, i_one)) != NULL)
        rc = PyDict_SetItem(ss->dict, s_next_tape, next);
    Py_XDECREF(next);
    if (unlock(ss, rc) < 0) {
        Py_XDECREF(tape_id);
        return NULL;
    }
    PyObject *tag = PyTuple_Pack(2, ss->tok, tape_id);
    if (tag == NULL || PyObject_SetAttr(tape, self->tape_attr, tag) < 0) {
        Py_XDECREF(tag);
        Py_DECREF(tape_id);
        return NULL;
    }
    Py_DECREF(tag);
    return tape_id;
}

static PyObject *
tape_call(FastMethod *self, int create, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (self->original == NULL || self->python == NULL || self->after == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this Tape wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (PyVectorcall_NARGS(nargsf) < 1 || self->state_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    if (result == NULL)
        return NULL;
    PyObject *rec = PyDict_GetItemWithError(self->state_dict, s_rec);
    if (rec == NULL || rec == Py_None) {
        if (rec == NULL && PyErr_Occurred())
            Py_CLEAR(result);
        else if (self->bound.session != NULL)
            fz_clear_session(self);
        return result;
    }
    Py_INCREF(rec);
    Session *ss = NULL;
    PyObject *ts = NULL, *tape_id = NULL, *phase = NULL, *site = NULL, *tape = args[0];
    int bound = bound_state(&self->bound, rec, &ss, &ts);
    if (bound <= 0) {
        if (bound < 0)
            goto error;
        goto python;
    }
    if (create) {
        if ((tape_id = number_tape(self, ss, tape)) == NULL)
            goto error;
    } else {
        PyObject *guard_value = TS_SLOT(self, ts, O_GUARD);
        int guard = guard_value == NULL ? -1 : PyObject_IsTrue(guard_value);
        Py_XDECREF(guard_value);
        if (guard != 0) {
            if (guard < 0)
                goto error;
            goto done;
        }
        if ((tape_id = tagged_tape(self, ss, tape)) == NULL) {
            if (PyErr_Occurred())
                goto error;
            goto python;
        }
    }
    if ((phase = TS_SLOT(self, ts, O_PHASE)) == NULL)
        goto error;
    if ((site = caller_site(self, ss, PyEval_GetFrame())) == NULL)
        goto error;
    if (method_row(self, ss, ts, phase, tape_id, site, NULL, i_minus1, i_zero, Py_None, Py_None) < 0)
        goto error;
    self->calls++;
    goto done;

python: {
    PyObject *r = PyObject_CallOneArg(self->after, tape);
    if (r == NULL)
        Py_CLEAR(result); /* rec.fail raised (WARPTRACE_STRICT) */
    Py_XDECREF(r);
    goto done;
}
error:
    if (fail(rec) < 0)
        Py_CLEAR(result);
done:
    Py_DECREF(rec);
    Py_XDECREF(ss);
    Py_XDECREF(ts);
    Py_XDECREF(tape_id);
    Py_XDECREF(phase);
    Py_XDECREF(site);
    return result;
}

static PyObject *
ft_event_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return tape_call((FastMethod *)callable, 0, args, nargsf, kwnames);
}

static PyObject *
ft_init_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return tape_call((FastMethod *)callable, 1, args, nargsf, kwnames);
}

static PyTypeObject FastTapeInitType;

/* FastTapeEvent and FastTapeInit: the same fields, their own call */
static PyObject *
ft_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"original", "python", "after", "state_dict", "tape_attr", "kind_code", "perf_ns", NULL};
    static const size_t offsets[7] = {
        F(original), F(python), F(after), F(state_dict), F(tape_attr), F(kind_code), F(perf_ns),
    };
    PyObject *o[7];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!UOO:FastTapeEvent", kwlist, &o[0], &o[1], &o[2],
                                     &PyDict_Type, &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    return method_new(type, type == &FastTapeInitType ? ft_init_vectorcall : ft_event_vectorcall, offsets, o, 7);
}

static PyGetSetDef ft_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fz_get_calls, NULL, "tape events recorded by the compiled path", NULL},
    {NULL},
};

FAST_METHOD_TYPE(FastTapeEventType, "FastTapeEvent",
                 "Tape.__enter__/__exit__, recorded without a Python frame (see warptrace/record/wrap/tape.py)",
                 ft_getset, ft_new, Py_TPFLAGS_METHOD_DESCRIPTOR);
FAST_METHOD_TYPE(FastTapeInitType, "FastTapeInit",
                 "Tape.__init__, recorded without a Python frame (see warptrace/record/wrap/tape.py)",
                 ft_getset, ft_new, Py_TPFLAGS_METHOD_DESCRIPTOR);

/* ================================================================== array._alloc_grad */

/* The compiled array._alloc_grad (warptrace/record/wrap/allocation.py, make_alloc_grad), a
 * FastMethod with its own call: the thread's grad_owner is the array during Warp's call (the
 * allocation Warp makes there is that array's grad: FastInitNew and the Python record read
 * it), and is restored after, also when Warp's call raises. An array this session registered
 * before its grad existed then gets the Python wrapper's second half (after: its
 * SET_REQUIRES_GRAD row), as from the Python wrapper. A thread's first event and another
 * signature are the Python wrapper's. */
#define TSG_SLOT(self, ts) read_slot(&(self)->ts2_slots, (ts), O_GRAD_OWNER, O_GRAD_OWNER, O_GRAD_OWNER)
#define TSG_SET(self, ts, v) write_slot(&(self)->ts2_slots, (ts), O_GRAD_OWNER, O_GRAD_OWNER, O_GRAD_OWNER, (v))

/* The SET_REQUIRES_GRAD row of an array this session registered before its grad existed
 * (allocation.py make_alloc_grad's after: wp.array(data, requires_grad=True) copies its data,
 * and so registers the array, before it sets _requires_grad): 0, recorded, or nothing to
 * record (under the guard; called by the requires_grad setter, which reports itself); 1 where
 * the Python after decides (no Python caller, a tape not tagged yet); -1 on error */
static int
requires_grad_row(FastMethod *self, Session *ss, PyObject *ts, PyObject *array_id)
{
    PyObject *guard = TS_SLOT(self, ts, O_GUARD);
    if (guard == NULL)
        return -1;
    int guarded = PyObject_IsTrue(guard);
    Py_DECREF(guard);
    if (guarded != 0)
        return guarded < 0 ? -1 : 0;
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed: _alloc_grad's caller */
    if (frame == NULL)
        return 1;
    PyCodeObject *code = PyFrame_GetCode(frame);
    int setter = PyUnicode_CompareWithASCIIString(code->co_name, "requires_grad") == 0;
    Py_DECREF(code);
    if (setter)
        return 0;
    int rc = -1;
    PyObject *phase = NULL, *tape_id = NULL, *site = NULL;
    int known = phase_and_tape(self, ss, ts, &phase, &tape_id);
    if (known <= 0)
        return known < 0 ? -1 : 1;
    /* the caller is Warp's (array.__init__, ...): the walk to the user's frame, Sites.caller */
    if ((site = walk_caller(ss)) == NULL)
        goto done;
    rc = event_row(self, ss, ts, self->kind_code, phase, tape_id, site, NULL, NULL, array_id, NULL,
                   self->zero_value, Py_None);
done:
    Py_XDECREF(phase);
    Py_XDECREF(tape_id);
    Py_XDECREF(site);
    return rc;
}

static PyObject *
fag_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastMethod *self = (FastMethod *)callable;
    if (self->original == NULL || self->python == NULL || self->after == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this array._alloc_grad wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL || self->state_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *rec = PyDict_GetItemWithError(self->state_dict, s_rec);
    if (rec == NULL || rec == Py_None) {
        if (rec == NULL && PyErr_Occurred())
            return NULL;
        if (self->bound.session != NULL)
            fz_clear_session(self);
        return PyObject_Vectorcall(self->original, args, nargsf, NULL);
    }
    Py_INCREF(rec);
    Session *ss = NULL;
    PyObject *ts = NULL, *saved = NULL, *result = NULL, *arr = args[0];
    int bound = bound_state(&self->bound, rec, &ss, &ts);
    if (bound > 0 && (saved = TSG_SLOT(self, ts)) != NULL && TSG_SET(self, ts, arr) < 0)
        Py_CLEAR(saved);
    if (saved == NULL) { /* the Python wrapper's: the thread's first event, or an error reading its state */
        if (bound != 0 && fail(rec) < 0)
            goto done;
        PyErr_Clear();
        result = PyObject_Vectorcall(self->python, args, nargsf, kwnames);
        goto done;
    }
    result = PyObject_Vectorcall(self->original, args, nargsf, NULL);
    {
        /* the thread's grad_owner back, whatever Warp's call did (its exception kept) */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        int restored = TSG_SET(self, ts, saved);
        if (restored < 0) {
            Py_CLEAR(result);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            goto done;
        }
        PyErr_Restore(type, value, traceback);
    }
    if (result == NULL)
        goto done;
    PyObject *st = dict_attr(arr, self->state_attr, 1);
    if (st == NULL) {
        if (fail(rec) < 0)
            Py_CLEAR(result);
        PyErr_Clear();
        goto done;
    }
    int how = 0;
    if (PyTuple_CheckExact(st) && PyTuple_GET_SIZE(st) >= 2 && PyTuple_GET_ITEM(st, 0) == ss->tok)
        how = requires_grad_row(self, ss, ts, PyTuple_GET_ITEM(st, 1));
    if (how == 0) {
        self->calls++;
    } else if (how < 0) {
        if (fail(rec) < 0)
            Py_CLEAR(result); /* rec.fail raised (WARPTRACE_STRICT) */
    } else {
        /* the Python wrapper's second half, depth 1 (no wrapper frame between it and the caller) */
        PyObject *r = PyObject_CallFunctionObjArgs(self->after, rec, ts, arr, i_one, NULL);
        if (r == NULL)
            Py_CLEAR(result); /* rec.fail raised (WARPTRACE_STRICT) */
        Py_XDECREF(r);
    }
    Py_DECREF(st);
done:
    Py_DECREF(rec);
    Py_XDECREF(ss);
    Py_XDECREF(ts);
    Py_XDECREF(saved);
    return result;
}

static PyObject *
fag_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "python", "after", "state_dict", "state_attr", "context_dict", "tape_attr",
        "set_requires_grad_code", "value", "perf_ns", NULL,
    };
    static const size_t offsets[10] = {
        F(original), F(python), F(after), F(state_dict), F(state_attr), F(context_dict), F(tape_attr),
        F(kind_code), F(zero_value), F(perf_ns),
    };
    PyObject *o[10];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!UO!UOOO:FastAllocGrad", kwlist, &o[0], &o[1], &o[2],
                                     &PyDict_Type, &o[3], &o[4], &PyDict_Type, &o[5], &o[6], &o[7], &o[8],
                                     &o[9]))
        return NULL;
    return method_new(type, fag_vectorcall, offsets, o, 10);
}

static PyGetSetDef fag_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fz_get_calls, NULL, "_alloc_grad calls decided by the compiled path", NULL},
    {NULL},
};

FAST_METHOD_TYPE(FastAllocGradType, "FastAllocGrad",
                 "array._alloc_grad, without a Python frame (see warptrace/record/wrap/allocation.py)",
                 fag_getset, fag_new, Py_TPFLAGS_METHOD_DESCRIPTOR);

/* The compiled Tape.backward (warptrace/record/wrap/tape.py, make_tape_backward), a
 * FastMethod with its own call: backward() and backward(loss) of a tape this session tagged,
 * with a loss array it registered: the BACKWARD_BEGIN row, the thread in the backward phase
 * (ThreadState phase, bw_tape, bw_site, and bw_frame: the caller's frame, from which Warp's
 * backward runs, so that its adjoint launches take bw_site), Warp's call, the thread's state
 * back and the BACKWARD_END row, also when Warp's call raises. Everything else (grads, keyword
 * arguments, a tape or loss seen for the first time) is the Python wrapper's. */
static PyObject *const *backward_state[4] = {&s_phase, &s_bw_tape, &s_bw_site, &s_bw_frame};

static int
set_backward_state(PyObject *ts, PyObject *const *values)
{
    for (int i = 0; i < 4; i++)
        if (PyObject_SetAttr(ts, *backward_state[i], values[i]) < 0)
            return -1;
    return 0;
}

static PyObject *
fb_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastMethod *self = (FastMethod *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *rec, *ts, *result, *site = NULL, *tape_id = NULL, *st = NULL, *loss_id = i_minus1;
    PyObject *saved[4] = {NULL, NULL, NULL, NULL};
    Session *ss;
    int how = M_PYTHON;

    if (self->original == NULL || self->python == NULL || self->kind_end == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this Tape.backward wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (nargs < 1 || nargs > 2 || kwnames != NULL || self->state_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    if (!method_enter(self, 0, args, nargsf, kwnames, &rec, &ss, &ts, &result))
        return result;
    if ((tape_id = tagged_tape(self, ss, args[0])) == NULL)
        goto unknown;
    if (nargs == 2 && args[1] != Py_None) {
        if ((st = known_state(self, ss, args[1])) == NULL)
            goto unknown;
        loss_id = PyTuple_GET_ITEM(st, 1);
    }
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed: the caller */
    if ((site = caller_site(self, ss, frame)) == NULL)
        goto error;
    for (int i = 0; i < 4; i++)
        if ((saved[i] = PyObject_GetAttr(ts, *backward_state[i])) == NULL)
            goto error;
    if (event_row(self, ss, ts, self->kind_code, i_one, tape_id, site, NULL, NULL, loss_id, i_zero, Py_None,
                  Py_None) < 0)
        goto error;
    {
        PyObject *inside[4] = {i_one, tape_id, site, frame != NULL ? (PyObject *)frame : Py_None};
        if (set_backward_state(ts, inside) < 0) {
            /* the BEGIN row is written: Warp's call and the END row still follow */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            (void)set_backward_state(ts, saved);
            PyErr_Restore(type, value, tb);
            if (fail(rec) < 0)
                goto done;
        }
    }
    result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb); /* Warp's own exception goes to the program unchanged */
        int ok = set_backward_state(ts, saved) == 0
                 && event_row(self, ss, ts, self->kind_end, i_one, tape_id, site, NULL, NULL, loss_id, i_zero,
                              Py_None, Py_None) == 0;
        if (!ok && fail(rec) < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            Py_CLEAR(result);
            goto done;
        }
        if (type != NULL)
            PyErr_Restore(type, value, tb);
    }
    self->calls++;
    goto done;

unknown:
    if (PyErr_Occurred())
        goto error;
    goto fallback;
error:
    how = M_ERROR;
fallback:
    result = method_fallback(self, how, rec, args, nargsf, kwnames);
done:
    Py_DECREF(rec);
    Py_DECREF(ss);
    Py_DECREF(ts);
    Py_XDECREF(site);
    Py_XDECREF(tape_id);
    Py_XDECREF(st);
    for (int i = 0; i < 4; i++)
        Py_XDECREF(saved[i]);
    return result;
}

static PyObject *
fb_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "python", "state_dict", "tape_attr", "state_attr", "begin_code", "end_code", "perf_ns", NULL,
    };
    static const size_t offsets[8] = {
        F(original), F(python), F(state_dict), F(tape_attr), F(state_attr), F(kind_code), F(kind_end), F(perf_ns),
    };
    PyObject *o[8];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!UUOOO:FastBackward", kwlist, &o[0], &o[1], &PyDict_Type,
                                     &o[2], &o[3], &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    return method_new(type, fb_vectorcall, offsets, o, 8);
}

static PyGetSetDef fb_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fz_get_calls, NULL, "backward calls recorded by the compiled path", NULL},
    {NULL},
};

FAST_METHOD_TYPE(FastBackwardType, "FastBackward",
                 "Tape.backward, recorded without a Python frame (see warptrace/record/wrap/tape.py)",
                 fb_getset, fb_new, Py_TPFLAGS_METHOD_DESCRIPTOR);

/* ================================================================== array.numpy */

/* The compiled value read (array.numpy()/list(); warptrace/record/wrap/memory.py,
 * make_value_read), a FastMethod with another call: the VALUE_READ row of a read whose call
 * site, tape and array are known, with the host-transfer detail of an ndarray result
 * (hostdata.transfer_detail: its digest by hashlib's BLAKE2b, the same bytes and text; a
 * result that is not C-contiguous goes to transfer_detail itself; a small one's detail is
 * left as (bytes, view) for the trace writer to hash, READ_DEFER_MAX). Everything else is
 * the Python wrapper's, called as it is. */

static PyObject *s_base, *s_hexdigest, *s_ptr, *k_digest_size, *i_eight;

/* A read of up to this many bytes leaves its detail as (bytes, view) for the trace writer to
 * hash and format (warptrace/trace/rows.py, host_transfer_text): a copy of the bytes costs this
 * thread ~200 instructions, their digest here ~3,500 (hashlib's object, BLAKE2b, hex text).
 * The bound keeps a part's buffered bytes small (4,096 reads of 4 KiB at most). */
#define READ_DEFER_MAX 4096
#define HOST_WRITE 2 /* rows.HOST_WRITE: the "how" of a deferred host write's detail */

/* buf + the text of text (no terminator) */
static char *
put(char *buf, const char *text, size_t n)
{
    memcpy(buf, text, n);
    return buf + n;
}

/* hostdata.transfer_detail's text for a read of nbytes (digest: its hex, or NULL for
 * "null"), written directly: PyUnicode_FromFormat cost more than the rest of the row */
static PyObject *
read_text(int is_view, Py_ssize_t nbytes, const char *digest, Py_ssize_t digest_len)
{
#define TEXT(s) s, sizeof(s) - 1
    char buf[256], digits[24];
    if (digest_len < 0 || digest_len > 64 || nbytes < 0) {
        PyErr_SetString(PyExc_ValueError, "warptrace: unexpected digest or size");
        return NULL;
    }
    char *at = put(buf, TEXT("{"));
    if (is_view)
        at = put(at, TEXT("\"view\": true, "));
    at = put(at, TEXT("\"host\": \"read\", \"nbytes\": "));
    int n = 0;
    do {
        digits[n++] = (char)('0' + nbytes % 10);
        nbytes /= 10;
    } while (nbytes > 0);
    while (n > 0)
        *at++ = digits[--n];
    at = put(at, TEXT(", \"digest\": "));
    if (digest == NULL) {
        at = put(at, TEXT("null"));
    } else {
        *at++ = '"';
        at = put(at, digest, (size_t)digest_len);
        *at++ = '"';
    }
    at = put(at, TEXT("}"));
    return PyUnicode_DecodeASCII(buf, at - buf, NULL);
#undef TEXT
}

/* the detail of a read that returned result (a new reference; None where the Python
 * wrapper's is None: not an ndarray, or an error computing it). An exact, C-contiguous
 * ndarray here; any other result by memory.py's read_detail (self->detail_py). */
static PyObject *
read_detail(FastMethod *self, PyObject *arr, PyObject *result)
{
    Py_buffer view;
    PyObject *detail = NULL, *base = NULL, *ptr = NULL, *hash = NULL, *hex = NULL;
    if ((PyObject *)Py_TYPE(result) != self->ndarray || PyObject_GetBuffer(result, &view, PyBUF_STRIDES) < 0) {
        PyErr_Clear();
        goto python;
    }
    if (!PyBuffer_IsContiguous(&view, 'C')) {
        PyBuffer_Release(&view);
        goto python;
    }
    /* on the CPU numpy() is a zero-copy view: the host may write the array through it
     * (result.base is arr, or the data starts at arr.ptr) */
    int is_view = 0;
    if (view.len > 0) {
        if ((base = PyObject_GetAttr(result, s_base)) == NULL)
            goto done;
        is_view = base == arr;
        if (!is_view) {
            if ((ptr = getattr_or_none(arr, s_ptr)) == NULL)
                goto done;
            if (PyLong_CheckExact(ptr)) {
                void *at = PyLong_AsVoidPtr(ptr);
                if (at == NULL && PyErr_Occurred())
                    goto done;
                is_view = at == view.buf;
            }
        }
    }
    if (view.len > self->digest_max) {
        detail = read_text(is_view, view.len, NULL, 0);
        goto done;
    }
    if (view.len <= READ_DEFER_MAX) {
        /* (bytes, view): the trace writer hashes them (rows.host_transfer_text), off this thread */
        PyObject *data = PyBytes_FromStringAndSize(view.buf, view.len);
        if (data != NULL) {
            detail = untracked(PyTuple_Pack(2, data, is_view ? Py_True : Py_False));
            Py_DECREF(data);
        }
        goto done;
    }
    {
        PyObject *call[2] = {result, i_eight};
        if ((hash = PyObject_Vectorcall(self->digest, call, 1, k_digest_size)) == NULL
            || (hex = PyObject_CallMethodNoArgs(hash, s_hexdigest)) == NULL)
            goto done;
    }
    {
        Py_ssize_t hex_len;
        const char *hex_text = PyUnicode_AsUTF8AndSize(hex, &hex_len);
        if (hex_text != NULL)
            detail = read_text(is_view, view.len, hex_text, hex_len);
    }
done:
    PyBuffer_Release(&view);
    Py_XDECREF(base);
    Py_XDECREF(ptr);
    Py_XDECREF(hash);
    Py_XDECREF(hex);
    if (detail == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return detail;
python:
    {
        PyObject *call[2] = {arr, result};
        detail = PyObject_Vectorcall(self->detail_py, call, 2, NULL);
    }
    if (detail == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return detail;
}

static PyObject *
fv_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastMethod *self = (FastMethod *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *rec, *ts, *result, *site = NULL, *phase = NULL, *tape_id = NULL, *st = NULL;
    Session *ss;
    int how = M_PYTHON;

    if (self->original == NULL || self->python == NULL || self->digest == NULL || self->detail_py == NULL
        || self->ndarray == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this value-read wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (nargs != 1 || kwnames != NULL || self->state_dict == NULL || self->context_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *arr = args[0];
    if (!method_enter(self, 0, args, nargsf, kwnames, &rec, &ss, &ts, &result))
        return result;

    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed: the caller of numpy() */
    if (frame == NULL)
        goto fallback;
    int known = method_context(self, ss, ts, frame, &site, &phase, &tape_id);
    if (known <= 0) {
        if (known < 0)
            how = M_ERROR;
        goto fallback;
    }
    result = guarded_original(self, ts, args, nargsf);
    if (result != NULL) {
        /* the array's state after the call, registered on first sight (as the Python wrapper) */
        st = array_state_locked(self, ss, arr);
        PyObject *detail = st == NULL ? NULL : read_detail(self, arr, result);
        int rc = detail == NULL ? -1
                                : method_row(self, ss, ts, phase, tape_id, site, st, PyTuple_GET_ITEM(st, 1),
                                             PyTuple_GET_ITEM(st, 3), Py_None, detail);
        Py_XDECREF(detail);
        if (rc < 0 && fail(rec) < 0)
            Py_CLEAR(result);
        else if (rc == 0)
            self->calls++;
    }
    goto done;

fallback:
    result = method_fallback(self, how, rec, args, nargsf, kwnames);
done:
    Py_DECREF(rec);
    Py_DECREF(ss);
    Py_DECREF(ts);
    Py_XDECREF(site);
    Py_XDECREF(phase);
    Py_XDECREF(tape_id);
    Py_XDECREF(st);
    return result;
}

static PyObject *
fv_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "python", "state_dict", "context_dict", "state_attr", "tape_attr", "read_code",
        "role_read", "perf_ns", "digest", "detail", "ndarray", "digest_max", NULL,
    };
    static const size_t offsets[12] = {
        F(original), F(python), F(state_dict), F(context_dict), F(state_attr), F(tape_attr), F(kind_code),
        F(role), F(perf_ns), F(digest), F(detail_py), F(ndarray),
    };
    PyObject *o[12];
    Py_ssize_t digest_max;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!O!UUOOOOOOn:FastRead", kwlist, &o[0], &o[1], &PyDict_Type,
                                     &o[2], &PyDict_Type, &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9],
                                     &o[10], &o[11], &digest_max))
        return NULL;
    PyObject *self = method_new(type, fv_vectorcall, offsets, o, 12);
    if (self != NULL)
        ((FastMethod *)self)->digest_max = digest_max;
    return self;
}

static PyGetSetDef fv_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fz_get_calls, NULL, "value reads recorded by the compiled path", NULL},
    {NULL},
};

FAST_METHOD_TYPE(FastReadType, "FastRead",
                 "array.numpy()/list(), recorded without a Python frame (see warptrace/record/wrap/memory.py)",
                 fv_getset, fv_new, Py_TPFLAGS_METHOD_DESCRIPTOR);

/* ================================================================== wp.copy */

/* The compiled wp.copy (warptrace/record/wrap/memory.py, make_copy), a FastMethod with
 * another call: the COPY row of a copy whose call site, tape and arrays are known, with
 * no offsets and no graph capture, for the copy the program calls and for the copy of
 * the gradients Warp's copy makes inside it (ThreadState.copy_ctx). The seq is taken
 * before the original runs (the nested copy and a tape's record_func name it as their
 * parent), the row appended by rec.row after. A copy from host memory Warp did not
 * allocate gets its detail from memory._host_write. Everything else is the Python
 * wrapper's, called as it is. */

static PyObject *s_dest, *s_src, *s_dest_offset, *s_src_offset, *s_count, *s_stream,
    *s_deleter, *s_row, *s_copy_code, *s_src_dest, *s_strides, *s_device, *s_is_cpu, *s_is_contiguous;
static PyObject *s_qualname, *s_json_names, *s_func_head, *s_arrays_head, *s_comma, *s_arrays_tail, *s_empty, *s_no_accesses;

/* wp.copy's six arguments from a vectorcall (out: borrowed; the defaults where not
 * given): 1, or 0 for a call in another form (the Python wrapper's) */
static int
copy_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    PyObject *const *names[6] = {&s_dest, &s_src, &s_dest_offset, &s_src_offset, &s_count, &s_stream};
    if (nargs > 6)
        return 0;
    for (int i = 0; i < 6; i++)
        out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        for (int j = 0; j < 6 && found < 0; j++) /* interned names: found by identity */
            if (name == *names[j])
                found = j;
        for (int j = 0; j < 6 && found < 0; j++)
            if (PyUnicode_Check(name) && PyUnicode_Compare(name, *names[j]) == 0)
                found = j;
        if (found < 0 || out[found] != NULL)
            return 0;
        out[found] = args[nargs + k];
    }
    if (out[0] == NULL || out[1] == NULL)
        return 0;
    for (int i = 2; i < 5; i++)
        if (out[i] == NULL)
            out[i] = i_zero;
    if (out[5] == NULL)
        out[5] = Py_None;
    return 1;
}

/* an exact int 0 */
static int
is_zero_int(PyObject *x)
{
    return PyLong_CheckExact(x) && Py_SIZE(x) == 0;
}

/* 1 when the copy needs no detail (no offsets; count 0 or src.size), 0 when it does
 * (the Python wrapper's), -1 on error */
static int
whole_copy(PyObject *src, PyObject **a)
{
    if (!is_zero_int(a[2]) || !is_zero_int(a[3]))
        return 0;
    if (is_zero_int(a[4]))
        return 1;
    if (!PyLong_CheckExact(a[4]))
        return 0;
    PyObject *size = getattr_or_none(src, s_size);
    if (size == NULL)
        return -1;
    int same = size != Py_None && PyObject_RichCompareBool(size, a[4], Py_EQ);
    Py_DECREF(size);
    return same;
}

/* rec.reserve(): a new reference to the seq taken, or NULL */
static PyObject *
reserve_seq(Session *ss)
{
    PyObject *seq = NULL, *open = NULL;
    if (session_acquire(ss) < 0)
        return NULL;
    int rc = -1;
    if ((seq = seq_take(ss)) != NULL && (open = rec_attr(ss, s_open_seqs)) != NULL)
        rc = PySet_CheckExact(open) ? PySet_Add(open, seq) : -1;
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "warptrace: Recorder.open_seqs is not a set");
    rc = unlock(ss, rc);
    Py_XDECREF(open);
    if (rc < 0)
        Py_CLEAR(seq);
    return seq;
}

/* rec.release(seq), keeping the exception being raised, if any */
static void
release_seq(Session *ss, PyObject *seq)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = PyObject_CallMethodOneArg(ss->rec, s_release, seq);
    Py_XDECREF(r);
    if (r == NULL)
        PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

static PyObject *s_disordered, *s_discard;

/* rec.row's bookkeeping for a reserved seq, under rec.lock: rec.open_seqs.discard(seq);
 * rec.disordered = True where seq is not the last one taken (a row appended after later
 * ones): 0, or -1 */
static int
settle_reserved(Session *ss, PyObject *seq)
{
    PyObject *open = rec_attr(ss, s_open_seqs);
    if (open == NULL)
        return -1;
    int rc = 0;
    if (PySet_CheckExact(open)) {
        rc = PySet_Discard(open, seq) < 0 ? -1 : 0;
    } else {
        PyObject *r = PyObject_CallMethodOneArg(open, s_discard, seq);
        rc = r == NULL ? -1 : 0;
        Py_XDECREF(r);
    }
    Py_DECREF(open);
    if (rc < 0)
        return -1;
    long long value;
    int same;
    if (ss->counters != NULL && small_int(seq, &value)) {
        same = value == ss->counters->seq - 1;
    } else {
        PyObject *current = seq_now(ss), *last = NULL;
        if (current == NULL)
            return -1;
        last = PyNumber_Subtract(current, i_one);
        Py_DECREF(current);
        if (last == NULL)
            return -1;
        same = PyObject_RichCompareBool(seq, last, Py_EQ);
        Py_DECREF(last);
    }
    if (same < 0 || (!same && PyObject_SetAttr(ss->rec, s_disordered, Py_True) < 0))
        return -1;
    return 0;
}

/* 1 when src is host memory Warp did not allocate (alloc id in rec.ident.external, no
 * deleter): the copy's detail is memory._host_write's; 0 when not; -1 on error */
static int
host_source(Session *ss, PyObject *src, PyObject *src_st)
{
    int in = PySet_Contains(ss->external, PyTuple_GET_ITEM(src_st, 2));
    if (in <= 0)
        return in;
    PyObject *deleter = getattr_or_none(src, s_deleter);
    if (deleter == NULL)
        return -1;
    int none = deleter == Py_None;
    Py_DECREF(deleter);
    return none;
}

/* the deferred detail of a small host write (rows.host_transfer_text: the trace writer hashes
 * the bytes, as for a small read, read_detail) from src, a C-contiguous array on the CPU of at
 * most READ_DEFER_MAX bytes (and digest_max, hostdata.DIGEST_MAX_BYTES): (its bytes,
 * HOST_WRITE), a new reference; NULL with no exception set where src is not such an array
 * (memory._host_write's, detail_py) */
static PyObject *
host_write_detail(PyObject *src, Py_ssize_t digest_max)
{
    PyObject *contiguous = NULL, *device = NULL, *cpu = NULL, *size = NULL, *strides = NULL, *ptr = NULL;
    PyObject *detail = NULL;
    long long n, item_size, at;
    if ((contiguous = dict_attr(src, s_is_contiguous, 1)) == NULL || contiguous != Py_True)
        goto done;
    if ((device = dict_attr(src, s_device, 1)) == NULL || device == Py_None
        || (cpu = PyObject_GetAttr(device, s_is_cpu)) == NULL || cpu != Py_True)
        goto done;
    if ((size = dict_attr(src, s_size, 1)) == NULL || !small_int(size, &n) || n < 0)
        goto done;
    /* contiguous: the innermost stride is the element's size (Warp's contiguous strides) */
    if ((strides = dict_attr(src, s_strides, 1)) == NULL || !PyTuple_CheckExact(strides)
        || PyTuple_GET_SIZE(strides) == 0
        || !small_int(PyTuple_GET_ITEM(strides, PyTuple_GET_SIZE(strides) - 1), &item_size) || item_size <= 0
        || n > READ_DEFER_MAX / item_size || n * item_size > digest_max)
        goto done;
    PyObject *data;
    if (n == 0) {
        data = PyBytes_FromStringAndSize(NULL, 0);
    } else {
        if ((ptr = dict_attr(src, s_ptr, 1)) == NULL || !small_int(ptr, &at) || at == 0)
            goto done;
        data = PyBytes_FromStringAndSize((const char *)(intptr_t)at, (Py_ssize_t)(n * item_size));
    }
    if (data != NULL) {
        PyObject *how = PyLong_FromLong(HOST_WRITE);
        if (how != NULL)
            detail = untracked(PyTuple_Pack(2, data, how));
        Py_XDECREF(how);
        Py_DECREF(data);
    }
done:
    if (detail == NULL)
        PyErr_Clear();
    Py_XDECREF(contiguous);
    Py_XDECREF(device);
    Py_XDECREF(cpu);
    Py_XDECREF(size);
    Py_XDECREF(strides);
    Py_XDECREF(ptr);
    return detail;
}

/* the COPY row and its two access rows (rec.row's, appended here; seq reserved) */
static int
copy_row(FastMethod *self, Session *ss, PyObject *ts, PyObject *seq, PyObject *tape_id, PyObject *recorded,
         PyObject *phase, PyObject *site, PyObject *parent, PyObject *detail, PyObject *src_st, PyObject *dest_st)
{
    int rc = -1, locked = 0;
    PyObject *thread = NULL, *ts_parent = NULL, *dest_flags = NULL, *t_ns = NULL;
    PyObject *ev = NULL, *acc = NULL, *extra = NULL, *extra_row = NULL;
    PyObject *codes = PyDict_GetItemWithError(self->state_dict, s_src_dest); /* borrowed */
    if (codes == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_KeyError, "warptrace: state.src_dest");
        return -1;
    }
    if (!PyTuple_CheckExact(codes) || PyTuple_GET_SIZE(codes) != 2) {
        PyErr_SetString(PyExc_TypeError, "warptrace: state.src_dest is not a pair");
        return -1;
    }
    Py_INCREF(codes);
    if ((thread = TS_SLOT(self, ts, O_THREAD)) == NULL)
        goto done;
    if (parent == NULL && (parent = ts_parent = TS_SLOT(self, ts, O_PARENT)) == NULL)
        goto done;
    if ((dest_flags = PyNumber_Or(self->flag_store, PyTuple_GET_ITEM(dest_st, 3))) == NULL)
        goto done;
    if ((t_ns = perf_now(self->perf_ns)) == NULL)
        goto done;
    if (session_acquire(ss) < 0)
        goto done;
    locked = 1;
    if (settle_reserved(ss, seq) < 0)
        goto done;
    if ((ev = rows_attr(ss, s_ev)) == NULL || (acc = rows_attr(ss, s_acc)) == NULL)
        goto done;
    {
        PyObject *row[15] = {
            seq, self->kind_code, tape_id, recorded, phase, Py_False, Py_True, site,
            i_minus1, thread, t_ns, parent, i_minus1, i_minus1, i_minus1,
        };
        if (extend_row(ev, row, 15) < 0)
            goto done;
    }
    if (detail != Py_None) {
        if ((extra = rows_attr(ss, s_ev_extra)) == NULL
            || (extra_row = untracked(PyTuple_Pack(3, seq, Py_None, detail))) == NULL || append_item(extra, extra_row) < 0)
            goto done;
    }
    {
        /* (seq, array_id, alloc_id, role, flags, arg, field): the source read, the destination stored */
        PyObject *rows[14] = {
            seq, PyTuple_GET_ITEM(src_st, 1), PyTuple_GET_ITEM(src_st, 2), self->role_read,
            PyTuple_GET_ITEM(src_st, 3), PyTuple_GET_ITEM(codes, 0), i_zero,
            seq, PyTuple_GET_ITEM(dest_st, 1), PyTuple_GET_ITEM(dest_st, 2), self->role, dest_flags,
            PyTuple_GET_ITEM(codes, 1), i_zero,
        };
        if (extend_row(acc, rows, 14) < 0)
            goto done;
    }
    if (flush_if_due(ss, ev, acc, t_ns) < 0)
        goto done;
    rc = 0;
done:
    if (locked)
        rc = unlock(ss, rc);
    Py_DECREF(codes);
    Py_XDECREF(thread);
    Py_XDECREF(ts_parent);
    Py_XDECREF(dest_flags);
    Py_XDECREF(t_ns);
    Py_XDECREF(ev);
    Py_XDECREF(acc);
    Py_XDECREF(extra);
    Py_XDECREF(extra_row);
    return rc;
}

/* Where a FastCopy or FastRecordFunc call stands (ts.guard in *guard_value, a new reference;
 * the caller's frame in *frame, borrowed): CC_FREE, the guard down; CC_COPY, made by the
 * wp.copy in progress (FastCopy's ts.copy_ctx, the list [guard, seq, dest, src, recorded,
 * site], in *ctx, whose ctx[0] is the guard now), with that copy's COPY event in *parent and
 * its call site in *site where frame is that copy's own (else left NULL), new references;
 * CC_OTHER, under the guard of something else; CC_PYTHON where the Python wrapper decides (a
 * guard not an int, no Python caller, a copy_ctx not such a list); CC_ERROR */
enum { CC_ERROR = -1, CC_PYTHON, CC_FREE, CC_OTHER, CC_COPY };

static int
copy_context(FastMethod *self, PyObject *ts, PyObject **guard_value, PyFrameObject **frame, PyObject **ctx,
             PyObject **parent, PyObject **site)
{
    if ((*guard_value = TS_SLOT(self, ts, O_GUARD)) == NULL)
        return CC_ERROR;
    if (!PyLong_CheckExact(*guard_value) || (*frame = PyEval_GetFrame()) == NULL)
        return CC_PYTHON;
    int guard = PyObject_IsTrue(*guard_value);
    if (guard <= 0)
        return guard < 0 ? CC_ERROR : CC_FREE;
    if ((*ctx = TS_SLOT(self, ts, O_COPY_CTX)) == NULL)
        return CC_ERROR;
    if (*ctx == Py_None)
        return CC_OTHER;
    if (!PyList_CheckExact(*ctx) || PyList_GET_SIZE(*ctx) != 6)
        return CC_PYTHON;
    int same = PyObject_RichCompareBool(PyList_GET_ITEM(*ctx, 0), *guard_value, Py_EQ);
    if (same <= 0)
        return same < 0 ? CC_ERROR : CC_OTHER;
    PyObject *copy_code = PyDict_GetItemWithError(self->state_dict, s_copy_code);
    if (copy_code == NULL && PyErr_Occurred())
        return CC_ERROR;
    *parent = Py_NewRef(PyList_GET_ITEM(*ctx, 1));
    PyCodeObject *code = PyFrame_GetCode(*frame);
    if (copy_code != NULL && (PyObject *)code == copy_code)
        *site = Py_NewRef(PyList_GET_ITEM(*ctx, 5)); /* called by the copy in progress: same user frame */
    Py_DECREF(code);
    return CC_COPY;
}

static PyObject *
fc_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastMethod *self = (FastMethod *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *rec, *ts, *result, *guard_value = NULL, *ctx = NULL, *parent = NULL, *site = NULL;
    PyObject *phase = NULL, *tape_id = NULL, *src_st = NULL, *dest_st = NULL, *seq = NULL, *saved = NULL;
    PyObject *new_guard = NULL, *my_ctx = NULL, *detail = NULL;
    Session *ss;
    int how = M_PYTHON;
    PyObject *a[6];

    if (self->original == NULL || self->python == NULL || self->detail_py == NULL || self->role_read == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this wp.copy wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (!copy_args(args, nargs, kwnames, a) || self->state_dict == NULL || self->context_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *dest = a[0], *src = a[1];
    if (!method_enter(self, 1, args, nargsf, kwnames, &rec, &ss, &ts, &result))
        return result;
    PyFrameObject *frame = NULL; /* borrowed: the caller of copy */
    int where = copy_context(self, ts, &guard_value, &frame, &ctx, &parent, &site);
    if (where == CC_ERROR)
        goto error;
    if (where == CC_PYTHON)
        goto python;
    if (where != CC_FREE) {
        /* only the copy of the gradients by the copy in progress is an event of its own */
        if (where == CC_OTHER || dest == Py_None)
            goto original;
        PyObject *dgrad = getattr_or_none(PyList_GET_ITEM(ctx, 2), s_grad_attr);
        if (dgrad == NULL)
            goto error;
        Py_DECREF(dgrad); /* compared by identity only */
        if (dest != dgrad)
            goto original;
        PyObject *sgrad = getattr_or_none(PyList_GET_ITEM(ctx, 3), s_grad_attr);
        if (sgrad == NULL)
            goto error;
        Py_DECREF(sgrad);
        if (src != sgrad)
            goto original;
    }
    if (PyDict_GET_SIZE(ss->captures) > 0)
        goto python;
    int whole = whole_copy(src, a);
    if (whole < 0)
        goto error;
    if (!whole)
        goto python;
    int known = phase_and_tape(self, ss, ts, &phase, &tape_id);
    if (known < 0)
        goto error;
    if (known == 0)
        goto python;
    if (site == NULL) { /* the checks above first: a walk for a copy left to Python is wasted */
        if ((site = known_site(self, ss, frame)) != NULL) {
            Py_INCREF(site);
        } else {
            if (PyErr_Occurred())
                goto error;
            /* a copy Warp makes for the program (wp.array(data), assign, clone): the frame
             * walk, Sites.caller(0) (from C there is no wrapper frame in between) */
            if ((site = walk_caller(ss)) == NULL)
                goto error;
        }
    }
    if ((seq = reserve_seq(ss)) == NULL)
        goto error;
    /* the original with the guard up and this copy in progress (copy_ctx) */
    if ((saved = TS_SLOT(self, ts, O_COPY_CTX)) == NULL || (new_guard = PyNumber_Add(guard_value, i_one)) == NULL
        || (my_ctx = PyList_New(6)) == NULL) {
        release_seq(ss, seq);
        goto error;
    }
    {
        PyObject *items[6] = {new_guard, seq, dest, src, Py_False, site};
        for (int i = 0; i < 6; i++) {
            Py_INCREF(items[i]);
            PyList_SET_ITEM(my_ctx, i, items[i]);
        }
    }
    if (TS_SET(self, ts, O_GUARD, new_guard) < 0) {
        release_seq(ss, seq);
        goto error;
    }
    if (TS_SET(self, ts, O_COPY_CTX, my_ctx) < 0) {
        release_seq(ss, seq);
        if (TS_SET(self, ts, O_GUARD, guard_value) < 0)
            PyErr_Clear();
        goto error;
    }
    result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    {
        /* ts.guard -= 1; ts.copy_ctx = saved (whatever the original did) */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        int restored = TS_SET(self, ts, O_GUARD, guard_value) == 0 && TS_SET(self, ts, O_COPY_CTX, saved) == 0;
        if (!restored) {
            if (type != NULL)
                PyErr_Clear();
            else
                Py_CLEAR(result);
        }
        if (type != NULL)
            PyErr_Restore(type, value, tb);
    }
    if (result == NULL) {
        release_seq(ss, seq); /* the original's own exception goes to the program unchanged */
        goto done;
    }
    /* the arrays' states after the call, registering them on first sight (memory.py
     * record: the arrays rows come where the Python wrapper writes them) */
    if ((src_st = array_state_locked(self, ss, src)) == NULL || (dest_st = array_state_locked(self, ss, dest)) == NULL)
        goto recording_failed;
    int host = 0;
    if (parent == NULL && (host = host_source(ss, src, src_st)) < 0)
        goto recording_failed;
    if (host && (detail = host_write_detail(src, self->digest_max)) != NULL) {
        /* a small one: its bytes, hashed by the trace writer */
    } else if (host) {
        /* reading the source's array interface is the recorder's, not the program's */
        if (TS_SET(self, ts, O_GUARD, new_guard) == 0) {
            detail = PyObject_CallOneArg(self->detail_py, src);
            if (TS_SET(self, ts, O_GUARD, guard_value) < 0)
                Py_CLEAR(detail);
        }
        if (detail == NULL)
            goto recording_failed;
    } else {
        detail = Py_None;
        Py_INCREF(detail);
    }
    if (copy_row(self, ss, ts, seq, tape_id, PyList_GET_ITEM(my_ctx, 4), phase, site, parent, detail, src_st,
                 dest_st) < 0)
        goto recording_failed;
    self->calls++;
    goto done;

recording_failed:
    /* its row will never come: the seq must not hold back the flushes */
    release_seq(ss, seq);
    if (fail(rec) < 0)
        Py_CLEAR(result);
    goto done;
original:
    how = M_ORIGINAL;
    goto fallback;
error:
    how = M_ERROR;
python:
fallback:
    result = method_fallback(self, how, rec, args, nargsf, kwnames);
done:
    Py_DECREF(rec);
    Py_DECREF(ss);
    Py_DECREF(ts);
    Py_XDECREF(guard_value);
    Py_XDECREF(ctx);
    Py_XDECREF(parent);
    Py_XDECREF(site);
    Py_XDECREF(phase);
    Py_XDECREF(tape_id);
    Py_XDECREF(src_st);
    Py_XDECREF(dest_st);
    Py_XDECREF(seq);
    Py_XDECREF(saved);
    Py_XDECREF(new_guard);
    Py_XDECREF(my_ctx);
    Py_XDECREF(detail);
    return result;
}

static PyObject *
fc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "python", "state_dict", "context_dict", "state_attr", "tape_attr", "copy_code",
        "role_read", "role_write", "flag_store", "perf_ns", "host_write", "digest_max", NULL,
    };
    static const size_t offsets[12] = {
        F(original), F(python), F(state_dict), F(context_dict), F(state_attr), F(tape_attr), F(kind_code),
        F(role_read), F(role), F(flag_store), F(perf_ns), F(detail_py),
    };
    PyObject *o[12];
    Py_ssize_t digest_max;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!O!UUOOOOOOn:FastCopy", kwlist, &o[0], &o[1], &PyDict_Type,
                                     &o[2], &PyDict_Type, &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9],
                                     &o[10], &o[11], &digest_max))
        return NULL;
    PyObject *self = method_new(type, fc_vectorcall, offsets, o, 12);
    if (self != NULL)
        ((FastMethod *)self)->digest_max = digest_max;
    return self;
}

static PyGetSetDef fc_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fz_get_calls, NULL, "copies recorded by the compiled path", NULL},
    {NULL},
};

FAST_METHOD_TYPE(FastCopyType, "FastCopy",
                 "wp.copy, recorded without a Python frame (see warptrace/record/wrap/memory.py)",
                 fc_getset, fc_new, 0);

/* ================================================================== Tape.record_func */

/* The compiled Tape.record_func (warptrace/record/wrap/tape.py, make_record_func), a
 * FastMethod with its own call: Warp's call, then the RECORD_FUNC row (recorded on the tape,
 * no access rows, the detail naming the function and its arrays). Called by Warp's wp.copy
 * (in FastCopy's guarded call: the copy in progress is marked recorded, and names the event's
 * parent and site) or by the program. Where the compiled path cannot decide (the thread's
 * first event, a tape not tagged, a function name not quoted yet, an array not registered,
 * another signature) the Python wrapper's event half (after) records it, with the call made. */
static int
record_func_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **backward,
                 PyObject **arrays)
{
    *backward = nargs > 1 ? args[1] : NULL;
    *arrays = nargs > 2 ? args[2] : NULL;
    if (nargs < 1 || nargs > 3)
        return 0;
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (*backward == NULL && PyUnicode_CompareWithASCIIString(name, "backward") == 0)
            *backward = args[nargs + i];
        else if (*arrays == NULL && PyUnicode_CompareWithASCIIString(name, "arrays") == 0)
            *arrays = args[nargs + i];
        else
            return 0;
    }
    return *backward != NULL && *arrays != NULL && PyList_CheckExact(*arrays);
}

/* '{"func": <quoted>, "arrays": [<ids>]}' (tape.py's detail) with the arrays' ids (their
 * states: registered here if new); NULL without an error where Python decides */
static PyObject *
record_func_detail(FastMethod *self, Session *ss, PyObject *backward, PyObject *arrays)
{
    PyObject *name = PyObject_GetAttr(backward, s_qualname);
    if (name == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        return NULL; /* the type's name: Python */
    }
    PyObject *names = PyDict_GetItemWithError(self->state_dict, s_json_names);
    PyObject *quoted = PyUnicode_CheckExact(name) && names != NULL && PyDict_CheckExact(names)
        ? PyDict_GetItemWithError(names, name) : NULL;
    Py_DECREF(name);
    if (quoted == NULL || !PyUnicode_CheckExact(quoted))
        return NULL; /* (an error stays set) */
    Py_INCREF(quoted);
    PyObject *parts = PyList_New(0), *result = NULL;
    int ok = parts != NULL && PyList_Append(parts, s_func_head) == 0 && PyList_Append(parts, quoted) == 0
        && PyList_Append(parts, s_arrays_head) == 0;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(arrays); i++) {
        PyObject *a = PyList_GET_ITEM(arrays, i);
        if (!PyObject_TypeCheck(a, (PyTypeObject *)self->array_type))
            continue;
        Py_INCREF(a);
        PyObject *st = array_state_locked(self, ss, a), *text = NULL;
        Py_DECREF(a);
        ok = st != NULL && PyTuple_CheckExact(st) && PyTuple_GET_SIZE(st) >= 2
            && (n == 0 || PyList_Append(parts, s_comma) == 0)
            && (text = PyObject_Str(PyTuple_GET_ITEM(st, 1))) != NULL && PyList_Append(parts, text) == 0;
        Py_XDECREF(st);
        Py_XDECREF(text);
        n++;
    }
    if (ok && PyList_Append(parts, s_arrays_tail) == 0)
        result = PyUnicode_Join(s_empty, parts);
    Py_DECREF(quoted);
    Py_XDECREF(parts);
    return result;
}

static PyObject *
frf_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastMethod *self = (FastMethod *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *backward, *arrays;
    if (self->original == NULL || self->python == NULL || self->after == NULL || self->array_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this Tape.record_func wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (!record_func_args(args, nargs, kwnames, &backward, &arrays) || self->state_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    Py_INCREF(backward); /* held: the original may run any code */
    Py_INCREF(arrays);
    PyObject *result = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    PyObject *rec = result != NULL ? PyDict_GetItemWithError(self->state_dict, s_rec) : NULL;
    if (rec == NULL || rec == Py_None) {
        if (rec == NULL && PyErr_Occurred())
            Py_CLEAR(result);
        else if (rec == Py_None && self->bound.session != NULL)
            fz_clear_session(self);
        Py_DECREF(backward);
        Py_DECREF(arrays);
        return result;
    }
    Py_INCREF(rec);
    Session *ss = NULL;
    PyObject *ts = NULL, *guard_value = NULL, *ctx = NULL, *parent = NULL, *site = NULL, *tape_id = NULL;
    PyObject *phase = NULL, *thread = NULL, *detail = NULL, *row = NULL, *got = NULL;
    int bound = bound_state(&self->bound, rec, &ss, &ts);
    if (bound <= 0) {
        if (bound < 0)
            goto error;
        goto python;
    }
    PyFrameObject *frame = NULL; /* borrowed: the caller of record_func */
    int where = copy_context(self, ts, &guard_value, &frame, &ctx, &parent, &site);
    if (where == CC_ERROR)
        goto error;
    if (where == CC_PYTHON)
        goto python;
    if (where == CC_OTHER) /* only the entry a wp.copy in progress adds is recorded */
        goto done;
    if (where == CC_COPY) {
        if (PyList_SetItem(ctx, 4, Py_NewRef(Py_True)) < 0) /* the copy is recorded on the tape */
            goto error;
    } else if ((parent = TS_SLOT(self, ts, O_PARENT)) == NULL) {
        goto error;
    }
    if ((detail = record_func_detail(self, ss, backward, arrays)) == NULL) {
        if (PyErr_Occurred())
            goto error;
        goto python;
    }
    if ((tape_id = tagged_tape(self, ss, args[0])) == NULL) {
        if (PyErr_Occurred())
            goto error;
        goto python;
    }
    if (site == NULL && (site = caller_site(self, ss, frame)) == NULL)
        goto error;
    if ((phase = TS_SLOT(self, ts, O_PHASE)) == NULL || (thread = TS_SLOT(self, ts, O_THREAD)) == NULL
        || (row = rec_attr(ss, s_row)) == NULL)
        goto error;
    {
        PyObject *call[15] = {
            thread, self->kind_code, tape_id, Py_True, phase, Py_False, Py_True, site, parent, i_minus1,
            i_minus1, Py_None, detail, s_no_accesses, i_minus1,
        };
        if ((got = PyObject_Vectorcall(row, call, 15, NULL)) == NULL)
            goto error;
    }
    self->calls++;
    goto done;

python: {
    /* after(tape, args, kwargs, 1): the Python wrapper's event half, from this call's caller */
    PyObject *pos = PyTuple_New(nargs > 1 ? nargs - 1 : 0), *kw = PyDict_New(), *depth = PyLong_FromLong(1);
    int ok = pos != NULL && kw != NULL && depth != NULL;
    for (Py_ssize_t i = 1; ok && i < nargs; i++)
        PyTuple_SET_ITEM(pos, i - 1, Py_NewRef(args[i]));
    for (Py_ssize_t i = 0; ok && kwnames != NULL && i < PyTuple_GET_SIZE(kwnames); i++)
        ok = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) == 0;
    PyObject *r = ok ? PyObject_CallFunctionObjArgs(self->after, args[0], pos, kw, depth, NULL) : NULL;
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    Py_XDECREF(depth);
    if (r == NULL && !ok)
        goto error; /* the recorder's own error, not reported yet */
    if (r == NULL)
        Py_CLEAR(result); /* rec.fail raised in after (WARPTRACE_STRICT) */
    Py_XDECREF(r);
    goto done;
}
error:
    if (fail(rec) < 0)
        Py_CLEAR(result);
    else
        PyErr_Clear();
done:
    Py_DECREF(rec);
    Py_DECREF(backward);
    Py_DECREF(arrays);
    Py_XDECREF(ss);
    Py_XDECREF(ts);
    Py_XDECREF(guard_value);
    Py_XDECREF(ctx);
    Py_XDECREF(parent);
    Py_XDECREF(site);
    Py_XDECREF(tape_id);
    Py_XDECREF(phase);
    Py_XDECREF(thread);
    Py_XDECREF(detail);
    Py_XDECREF(row);
    Py_XDECREF(got);
    return result;
}

static PyObject *
frf_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "python", "after", "state_dict", "state_attr", "tape_attr", "kind_code", "array_type", NULL,
    };
    static const size_t offsets[8] = {
        F(original), F(python), F(after), F(state_dict), F(state_attr), F(tape_attr), F(kind_code), F(array_type),
    };
    PyObject *o[8];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!UUOO!:FastRecordFunc", kwlist, &o[0], &o[1], &o[2],
                                     &PyDict_Type, &o[3], &o[4], &o[5], &o[6], &PyType_Type, &o[7]))
        return NULL;
    return method_new(type, frf_vectorcall, offsets, o, 8);
}

FAST_METHOD_TYPE(FastRecordFuncType, "FastRecordFunc",
                 "Tape.record_func, recorded without a Python frame (see warptrace/record/wrap/tape.py)",
                 ft_getset, frf_new, Py_TPFLAGS_METHOD_DESCRIPTOR);

/* ================================================================== array interfaces */

/* The compiled __array_interface__ / __cuda_array_interface__ getter (warptrace/record/wrap/
 * bridge.py, wrap_interface): Warp's getter where the Python wrapper records nothing (no
 * recorder; the guard up: numpy(), a copy, warptrace's own reads), without its frame; the
 * Python wrapper where the program itself hands the memory out (a BRIDGE_EXPORT event) or
 * the thread has no state yet. */
static PyObject *
fif_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastMethod *self = (FastMethod *)callable;
    PyObject *rec, *ts, *result;
    Session *ss;
    if (self->original == NULL || self->python == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this array interface wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (self->state_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    if (!method_enter(self, 0, args, nargsf, kwnames, &rec, &ss, &ts, &result))
        return result;
    Py_DECREF(rec);
    Py_DECREF(ss);
    Py_DECREF(ts);
    return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
}

static PyObject *
fif_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"original", "python", "state_dict", NULL};
    static const size_t offsets[3] = {F(original), F(python), F(state_dict)};
    PyObject *o[3];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!:FastInterface", kwlist, &o[0], &o[1], &PyDict_Type, &o[2]))
        return NULL;
    return method_new(type, fif_vectorcall, offsets, o, 3);
}

FAST_METHOD_TYPE(FastInterfaceType, "FastInterface",
                 "array.__array_interface__'s getter, unrecorded without a Python frame (see "
                 "warptrace/record/wrap/bridge.py)",
                 ft_getset, fif_new, 0);

/* ================================================================== Identity.register */

/* The compiled Identity.register (warptrace/record/identity.py), for the arrays most
 * programs make: a fresh allocation of this session (its own alloc_id) or a view of a
 * registered array inside a live allocation, no grad seen before its owner, dtype and
 * device seen before. It writes the same
 * `arrays` row (and its grad's) and state tuple as the Python method; every other
 * array, and every call with more arguments, is the Python method's. Set as the
 * instance attribute `register` of an Identity, so the compiled launch wrapper and
 * the Python code call it alike. Called with the recorder lock held. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *ident;        /* the Identity */
    PyObject *python;       /* Identity.register bound to it */
    PyObject *array_type;   /* warp.array */
    PyObject *tok;
    PyObject *state_attr, *new_attr, *owner_attr;
    PyObject *dtype_cache, *device_cache, *info; /* ident._dtype_cache, ._device_cache, sites.info */
    PyObject *kind_owned, *kind_grad, *kind_view, *flag_grad, *grad_suffix, *empty;
    PyObject *kind_external, *kind_alias, *alloc_external; /* ARRAY_EXTERNAL, ARRAY_PTR_ALIAS, ALLOC_EXTERNAL */
    PyObject *external;     /* ident.external, the alloc ids of external memory (a set) */
    PyObject *owner_seen, *grad_label; /* the last owner label and its grad's label (one object
                                        * per site label: the row buffer finds it by identity) */
    unsigned long long calls; /* arrays registered by the compiled path (tests) */
} FastRegister;

static PyObject *s_ref, *s_requires_grad, *s_dtype, *s_shape, *s_next_array, *s_rec_attr, *s_array_rows;

/* the instance dict's value for name (borrowed; NULL: none, or an error) */
static PyObject *
dict_get(PyObject *dict, PyObject *name)
{
    return PyDict_GetItemWithError(dict, name);
}

/* 1: registered in this session (st borrowed into *out), 0: not, -1: error */
static int
registered(FastRegister *self, PyObject *dict, PyObject **out)
{
    PyObject *st = dict_get(dict, self->state_attr);
    if (st == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (PyTuple_CheckExact(st) && PyTuple_GET_SIZE(st) >= 5 && PyTuple_GET_ITEM(st, 0) == self->tok) {
        *out = st;
        return 1;
    }
    return 0;
}

static int view_alloc(PyObject *ident_dict, PyObject *ptr, PyObject *shape, PyObject *strides, PyObject *itemsize,
                      PyObject **alloc_id, PyObject **start);
static int ptr_alloc(FastRegister *self, PyObject *ident_dict, PyObject *arr, PyObject *dict, PyObject *ptr,
                     PyObject *shape, PyObject *strides, PyObject *itemsize, PyObject *device_name, PyObject *site,
                     PyObject **alloc_id, PyObject **offset, int *is_external);

/* The row and state of a fresh owned array (grad_of < 0) or of its grad (grad_of >= 0), or
 * of a view of a registered array (and of the view's grad), or of an array over memory it
 * does not own with no base (ptr=: an alias of a live allocation, or external memory such as
 * the staging array of wp.array(ndarray); ptr_alloc).
 * New reference to the state tuple; NULL without an error: not the common case (the
 * caller asks the Python method); NULL with an error: an error. */
static PyObject *
register_owned(FastRegister *self, PyObject *arr, PyObject *dict, PyObject *grad_of, PyObject *owner_label)
{
    PyObject *result = NULL, *dtype = NULL, *shape = NULL, *strides = NULL, *device = NULL, *ptr = NULL;
    PyObject *size = NULL, *device_id = NULL, *array_id = NULL, *next_id = NULL, *label = NULL;
    PyObject *rec = NULL, *rows = NULL, *st = NULL, *ident_dict = NULL;
    PyObject *base_id = NULL, *offset = NULL, *start = NULL, *found_id = NULL;
    int is_grad = grad_of != NULL;

    if (!is_grad) {
        PyObject *link = dict_get(dict, self->owner_attr);
        if (link == NULL && PyErr_Occurred())
            return NULL;
        if (link != NULL && PyTuple_CheckExact(link) && PyTuple_GET_SIZE(link) >= 1
            && PyTuple_GET_ITEM(link, 0) == self->tok)
            return NULL; /* a grad seen before its owner */
    }
    PyObject *new = dict_get(dict, self->new_attr);
    if (new == NULL || !PyTuple_CheckExact(new) || PyTuple_GET_SIZE(new) < 5 || PyTuple_GET_ITEM(new, 0) != self->tok)
        return NULL;
    Py_INCREF(new); /* its items are used throughout: held while any code may run */
    PyObject *site = PyTuple_GET_ITEM(new, 1), *seq = PyTuple_GET_ITEM(new, 2);
    PyObject *alloc_id = PyTuple_GET_ITEM(new, 3), *labelled = PyTuple_GET_ITEM(new, 4);
    if (!PyLong_CheckExact(alloc_id) || !PyLong_CheckExact(site))
        goto done;
    long alloc = PyLong_AsLong(alloc_id), site_value = PyLong_AsLong(site);
    if ((alloc == -1 || site_value == -1) && PyErr_Occurred())
        goto done;
    PyObject *base = dict_get(dict, s_ref);
    if (base == NULL && PyErr_Occurred())
        goto done;
    int view = alloc < 0; /* memory of another array: a view of a registered array here (an
                           * unregistered base or an ndarray one: the Python method) */
    int on_ptr = view && !is_grad && (base == NULL || base == Py_None), is_external = 0; /* no base */
    if (on_ptr) {
        view = 0;
    } else if (view) {
        PyObject *base_dict, *base_st;
        if (base == NULL || !Py_IS_TYPE(base, (PyTypeObject *)self->array_type)
            || (base_dict = PyObject_GenericGetDict(base, NULL)) == NULL)
            goto done;
        int known = registered(self, base_dict, &base_st);
        if (known > 0) {
            base_id = PyTuple_GET_ITEM(base_st, 1);
            Py_INCREF(base_id);
        }
        Py_DECREF(base_dict);
        if (known <= 0)
            goto done;
    } else if (base != NULL && base != Py_None) {
        goto done;
    }

    /* plain instance attributes of warp.array (arr is exactly one): read from its dict; one
     * missing (a Warp that made it a property) leaves the array to the Python method */
    if ((dtype = dict_get(dict, s_dtype)) == NULL)
        goto done;
    Py_INCREF(dtype);
    PyObject *dtype_hit = PyDict_GetItemWithError(self->dtype_cache, dtype);
    if (dtype_hit == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError))
                goto done;
            PyErr_Clear(); /* unhashable: the Python method */
        }
        goto done;
    }
    if (!PyTuple_CheckExact(dtype_hit) || PyTuple_GET_SIZE(dtype_hit) != 2)
        goto done;
    if ((shape = dict_get(dict, s_shape)) == NULL)
        goto done;
    Py_INCREF(shape);
    if ((strides = dict_get(dict, s_strides)) == NULL)
        goto done;
    Py_INCREF(strides);
    if (!PyTuple_CheckExact(shape) || !PyTuple_CheckExact(strides))
        goto done;
    if ((device = dict_get(dict, s_device)) == NULL)
        goto done;
    Py_INCREF(device);
    if ((device_id = PyLong_FromVoidPtr(device)) == NULL)
        goto done;
    PyObject *device_hit = PyDict_GetItemWithError(self->device_cache, device_id);
    if (device_hit == NULL || !PyTuple_CheckExact(device_hit) || PyTuple_GET_SIZE(device_hit) != 2
        || PyTuple_GET_ITEM(device_hit, 0) != device)
        goto done;
    if ((ptr = dict_get(dict, s_ptr)) == NULL)
        goto done;
    Py_INCREF(ptr);
    if (ptr == Py_None)
        goto done;
    if ((size = dict_get(dict, s_size)) == NULL)
        goto done;
    Py_INCREF(size);
    if (!PyLong_CheckExact(size))
        goto done;
    long n = PyLong_AsLong(size);
    if (n <= 0) /* also an error: the Python method */
        goto done;
    if (view) {
        /* the live allocation holding the view's bytes (not found: external memory, the
         * Python method) */
        if ((ident_dict = PyObject_GenericGetDict(self->ident, NULL)) == NULL)
            goto done;
        int found = view_alloc(ident_dict, ptr, shape, strides, PyTuple_GET_ITEM(dtype_hit, 1), &found_id, &start);
        if (found <= 0)
            goto done;
        alloc_id = found_id;
        if ((offset = PyNumber_Subtract(ptr, start)) == NULL)
            goto done;
    } else if (on_ptr) {
        if ((ident_dict = PyObject_GenericGetDict(self->ident, NULL)) == NULL)
            goto done;
        int found = ptr_alloc(self, ident_dict, arr, dict, ptr, shape, strides, PyTuple_GET_ITEM(dtype_hit, 1),
                              PyTuple_GET_ITEM(device_hit, 1), site, &found_id, &offset, &is_external);
        if (found <= 0)
            goto done;
        alloc_id = found_id;
    }

    /* the label: the site's, or "<owner>.grad" for a grad */
    if (is_grad) {
        int has_owner = PyObject_IsTrue(owner_label);
        if (has_owner < 0)
            goto done;
        if (!has_owner) {
            label = self->empty;
        } else if (owner_label != self->owner_seen || self->grad_label == NULL) {
            if ((label = PyUnicode_Concat(owner_label, self->grad_suffix)) == NULL)
                goto done;
            Py_INCREF(owner_label);
            Py_XSETREF(self->owner_seen, owner_label);
            Py_XSETREF(self->grad_label, label);
        } else {
            label = self->grad_label;
        }
        Py_INCREF(label);
    } else {
        int named = PyObject_IsTrue(labelled);
        if (named < 0)
            goto done;
        if (named && site_value >= 0) {
            PyObject *entry = PySequence_GetItem(self->info, site_value);
            if (entry == NULL)
                goto done;
            label = PySequence_GetItem(entry, 3);
            Py_DECREF(entry);
        } else {
            label = self->empty;
            Py_INCREF(label);
        }
    }
    if (label == NULL)
        goto done;

    if (ident_dict == NULL && (ident_dict = PyObject_GenericGetDict(self->ident, NULL)) == NULL)
        goto done;
    array_id = PyDict_GetItemWithError(ident_dict, s_next_array);
    if (array_id == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "Identity.next_array");
        goto done;
    }
    Py_INCREF(array_id);
    if ((next_id = PyNumber_Add(array_id, i_one)) == NULL || PyDict_SetItem(ident_dict, s_next_array, next_id) < 0)
        goto done;
    if ((rec = PyDict_GetItemWithError(ident_dict, s_rec_attr)) == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "Identity.rec");
        goto done;
    }
    Py_INCREF(rec);
    if ((rows = PyObject_GetAttr(rec, s_array_rows)) == NULL)
        goto done;
    PyObject *requires = dict_get(dict, s_requires_grad), *retain = dict_get(dict, s_retain_grad);
    if (PyErr_Occurred())
        goto done;
    int req = requires != NULL ? PyObject_IsTrue(requires) : 0;
    int ret = retain != NULL ? PyObject_IsTrue(retain) : 0;
    if (req < 0 || ret < 0)
        goto done;
    {
        PyObject *row[16] = {
            array_id, alloc_id, view || on_ptr ? offset : i_zero, shape, strides, PyTuple_GET_ITEM(dtype_hit, 1),
            PyTuple_GET_ITEM(dtype_hit, 0), PyTuple_GET_ITEM(device_hit, 1),
            on_ptr ? (is_external ? self->kind_external : self->kind_alias)
                : view ? self->kind_view : is_grad ? self->kind_grad : self->kind_owned,
            req ? Py_True : Py_False,
            ret ? Py_True : Py_False, is_grad ? grad_of : i_minus1, view ? base_id : i_minus1, seq, site, label,
        };
        if (extend_row(rows, row, 16) < 0)
            goto done;
    }
    if ((st = untracked(PyTuple_Pack(5, self->tok, array_id, alloc_id, is_grad ? self->flag_grad : i_zero, label))) == NULL)
        goto done;
    if (PyDict_SetItem(dict, self->state_attr, st) < 0)
        goto done;
    self->calls++;
    result = st;
    st = NULL;
done:
    Py_DECREF(new);
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(device);
    Py_XDECREF(ptr);
    Py_XDECREF(size);
    Py_XDECREF(device_id);
    Py_XDECREF(array_id);
    Py_XDECREF(next_id);
    Py_XDECREF(label);
    Py_XDECREF(rec);
    Py_XDECREF(rows);
    Py_XDECREF(st);
    Py_XDECREF(ident_dict);
    Py_XDECREF(base_id);
    Py_XDECREF(offset);
    Py_XDECREF(start);
    Py_XDECREF(found_id);
    return result;
}

static PyObject *
fr_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastRegister *self = (FastRegister *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->python == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this register was cleared (garbage collected)");
        return NULL;
    }
    if (nargs != 1 || kwnames != NULL || !Py_IS_TYPE(args[0], (PyTypeObject *)self->array_type))
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *arr = args[0], *st = NULL, *gst = NULL;
    PyObject *dict = PyObject_GenericGetDict(arr, NULL);
    if (dict == NULL)
        return NULL;
    int known = registered(self, dict, &st);
    if (known != 0) {
        Py_DECREF(dict);
        if (known < 0)
            return NULL;
        Py_INCREF(st);
        return st;
    }
    st = register_owned(self, arr, dict, NULL, NULL);
    if (st == NULL) {
        Py_DECREF(dict);
        if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    }
    /* its grad, registered with it (Identity.register's last step) */
    PyObject *grad = dict_get(dict, s_grad_attr);
    Py_XINCREF(grad);
    Py_DECREF(dict);
    if (grad == NULL) {
        if (PyErr_Occurred())
            goto error;
        return st;
    }
    if (grad == arr || grad == Py_None || !PyObject_TypeCheck(grad, (PyTypeObject *)self->array_type)) {
        Py_DECREF(grad);
        return st;
    }
    PyObject *grad_dict = PyObject_GenericGetDict(grad, NULL);
    if (grad_dict == NULL)
        goto error;
    known = registered(self, grad_dict, &gst);
    if (known == 0) {
        PyObject *own_grad = dict_get(grad_dict, s_grad_attr);
        if (own_grad == NULL && PyErr_Occurred()) {
            known = -1;
        } else if (Py_IS_TYPE(grad, (PyTypeObject *)self->array_type) && (own_grad == NULL || own_grad == Py_None)) {
            gst = register_owned(self, grad, grad_dict, PyTuple_GET_ITEM(st, 1), PyTuple_GET_ITEM(st, 4));
            if (gst != NULL)
                Py_DECREF(gst);
            else if (PyErr_Occurred())
                known = -1;
        }
        if (known == 0 && gst == NULL) {
            /* self.register(grad, grad_of=array_id, owner_label=label) */
            PyObject *kw = Py_BuildValue("{sOsO}", "grad_of", PyTuple_GET_ITEM(st, 1), "owner_label",
                                         PyTuple_GET_ITEM(st, 4));
            PyObject *pos = kw != NULL ? PyTuple_Pack(1, grad) : NULL;
            PyObject *r = pos != NULL ? PyObject_Call(self->python, pos, kw) : NULL;
            Py_XDECREF(kw);
            Py_XDECREF(pos);
            if (r == NULL)
                known = -1;
            Py_XDECREF(r);
        }
    }
    Py_DECREF(grad_dict);
    Py_DECREF(grad);
    if (known < 0) {
        Py_DECREF(st);
        return NULL;
    }
    return st;
error:
    Py_XDECREF(grad);
    Py_DECREF(st);
    return NULL;
}

static int
fr_traverse(FastRegister *self, visitproc visit, void *arg)
{
    Py_VISIT(self->ident);
    Py_VISIT(self->python);
    Py_VISIT(self->array_type);
    Py_VISIT(self->tok);
    Py_VISIT(self->dtype_cache);
    Py_VISIT(self->device_cache);
    Py_VISIT(self->info);
    Py_VISIT(self->external);
    return 0;
}

static int
fr_clear(FastRegister *self)
{
    Py_CLEAR(self->ident);
    Py_CLEAR(self->python);
    Py_CLEAR(self->array_type);
    Py_CLEAR(self->tok);
    Py_CLEAR(self->state_attr);
    Py_CLEAR(self->new_attr);
    Py_CLEAR(self->owner_attr);
    Py_CLEAR(self->dtype_cache);
    Py_CLEAR(self->device_cache);
    Py_CLEAR(self->info);
    Py_CLEAR(self->kind_owned);
    Py_CLEAR(self->kind_grad);
    Py_CLEAR(self->kind_view);
    Py_CLEAR(self->flag_grad);
    Py_CLEAR(self->kind_external);
    Py_CLEAR(self->kind_alias);
    Py_CLEAR(self->alloc_external);
    Py_CLEAR(self->external);
    Py_CLEAR(self->grad_suffix);
    Py_CLEAR(self->empty);
    Py_CLEAR(self->owner_seen);
    Py_CLEAR(self->grad_label);
    return 0;
}

static void
fr_dealloc(FastRegister *self)
{
    PyObject_GC_UnTrack(self);
    fr_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
fr_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "ident", "python", "array_type", "tok", "state_attr", "new_attr", "owner_attr", "dtype_cache",
        "device_cache", "info", "kind_owned", "kind_grad", "kind_view", "flag_grad", "kind_external",
        "kind_alias", "alloc_external", "external", NULL,
    };
    PyObject *o[18];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!OUUUO!O!O!UUUOUUUO!:FastRegister", kwlist, &o[0], &o[1],
                                     &PyType_Type, &o[2], &o[3], &o[4], &o[5], &o[6], &PyDict_Type, &o[7],
                                     &PyDict_Type, &o[8], &PyList_Type, &o[9], &o[10], &o[11], &o[12], &o[13],
                                     &o[14], &o[15], &o[16], &PySet_Type, &o[17]))
        return NULL;
    PyObject *suffix = PyUnicode_FromString(".grad"), *empty = PyUnicode_FromString("");
    FastRegister *self = suffix != NULL && empty != NULL ? (FastRegister *)type->tp_alloc(type, 0) : NULL;
    if (self == NULL) {
        Py_XDECREF(suffix);
        Py_XDECREF(empty);
        return NULL;
    }
    self->vectorcall = fr_vectorcall;
    self->grad_suffix = suffix;
    self->empty = empty;
    PyObject **fields[18] = {
        &self->ident, &self->python, &self->array_type, &self->tok, &self->state_attr, &self->new_attr,
        &self->owner_attr, &self->dtype_cache, &self->device_cache, &self->info, &self->kind_owned,
        &self->kind_grad, &self->kind_view, &self->flag_grad, &self->kind_external, &self->kind_alias,
        &self->alloc_external, &self->external,
    };
    for (int i = 0; i < 18; i++) {
        Py_INCREF(o[i]);
        *fields[i] = o[i];
    }
    return (PyObject *)self;
}

static PyObject *
fr_get_calls(FastRegister *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->calls);
}

static PyGetSetDef fr_getset[] = {
    {"registered", (getter)fr_get_calls, NULL, "arrays registered by the compiled path", NULL},
    {NULL},
};

static PyTypeObject FastRegisterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.FastRegister",
    .tp_basicsize = sizeof(FastRegister),
    .tp_dealloc = (destructor)fr_dealloc,
    .tp_vectorcall_offset = offsetof(FastRegister, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Identity.register for fresh arrays (see warptrace/record/identity.py)",
    .tp_traverse = (traverseproc)fr_traverse,
    .tp_clear = (inquiry)fr_clear,
    .tp_getset = fr_getset,
    .tp_new = fr_new,
};

/* ================================================================== Recorder.row */

/* The compiled Recorder.row (warptrace/record/session.py): one event row and its access
 * rows, appended under rec.lock, for the Python wrappers (copies, value reads, memsets,
 * tape events, Recorder.emit). Set as the instance attribute `row` of a Recorder, as
 * FastRegister is Identity.register; a call with another number of arguments, or with
 * keywords, is the method's. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Session *session;
    PyObject *python;  /* Recorder.row bound to the recorder */
    PyObject *perf_ns;
    unsigned long long calls; /* rows written by the compiled path (tests) */
} FastRow;

#define ACCESS_ITEMS 6 /* (array_id, alloc_id, role, flags, arg, field): an access row less its seq */

/* the access rows of one event: acc.append(seq); acc.extend(access) for each access */
static int
row_accesses(PyObject *acc, PyObject *seq, PyObject *accesses)
{
    if (PyTuple_CheckExact(accesses) && PyTuple_GET_SIZE(accesses) == 0)
        return 0;
    PyObject *it = PyObject_GetIter(accesses), *access;
    if (it == NULL)
        return -1;
    while ((access = PyIter_Next(it)) != NULL) {
        int rc;
        if (PyTuple_CheckExact(access) && PyTuple_GET_SIZE(access) == ACCESS_ITEMS) {
            PyObject *row[ACCESS_ITEMS + 1];
            row[0] = seq;
            for (Py_ssize_t i = 0; i < ACCESS_ITEMS; i++)
                row[i + 1] = PyTuple_GET_ITEM(access, i);
            rc = extend_row(acc, row, ACCESS_ITEMS + 1);
        } else {
            rc = append_item(acc, seq) < 0 ? -1 : extend_call(acc, access);
        }
        Py_DECREF(access);
        if (rc < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
frow_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastRow *self = (FastRow *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->session == NULL || self->python == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this row writer was cleared (garbage collected)");
        return NULL;
    }
    if (kwnames != NULL || nargs < 15 || nargs > 17)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    /* thread, kind, tape, recorded, phase, adjoint, executed, site, parent, array_id, ref_id,
     * value, detail, accesses, seq[, kernel[, dim_code]] */
    PyObject *value = args[11], *detail = args[12], *accesses = args[13], *given = args[14];
    PyObject *kernel = nargs > 15 ? args[15] : i_minus1, *dim_code = nargs > 16 ? args[16] : i_minus1;
    Session *ss = self->session;
    Py_INCREF(ss);
    int locked = 0, rc = -1;
    PyObject *t_ns = NULL, *seq = NULL, *ev = NULL, *acc = NULL, *extra = NULL, *extra_row = NULL;
    if ((t_ns = perf_now(self->perf_ns)) == NULL)
        goto done;
    if (session_acquire(ss) < 0)
        goto done;
    locked = 1;
    long long given_value;
    int fresh = small_int(given, &given_value) ? given_value < 0 : PyObject_RichCompareBool(given, i_zero, Py_LT);
    if (fresh < 0)
        goto done;
    if (fresh) {
        if ((seq = seq_take(ss)) == NULL)
            goto done;
    } else {
        seq = given;
        Py_INCREF(seq);
        if (settle_reserved(ss, seq) < 0)
            goto done;
    }
    if ((ev = rows_attr(ss, s_ev)) == NULL)
        goto done;
    {
        PyObject *row[15] = {
            seq, args[1], args[2], args[3], args[4], args[5], args[6], args[7],
            kernel, args[0], t_ns, args[8], args[9], args[10], dim_code,
        };
        if (extend_row(ev, row, 15) < 0)
            goto done;
    }
    if (value != Py_None || detail != Py_None) {
        if ((extra = rows_attr(ss, s_ev_extra)) == NULL || (extra_row = untracked(PyTuple_Pack(3, seq, value, detail))) == NULL
            || append_item(extra, extra_row) < 0)
            goto done;
    }
    if ((acc = rows_attr(ss, s_acc)) == NULL || row_accesses(acc, seq, accesses) < 0)
        goto done;
    if (flush_if_due(ss, ev, acc, t_ns) < 0)
        goto done;
    self->calls++;
    rc = 0;
done:
    if (locked)
        rc = unlock(ss, rc);
    Py_DECREF(ss);
    Py_XDECREF(t_ns);
    Py_XDECREF(ev);
    Py_XDECREF(acc);
    Py_XDECREF(extra);
    Py_XDECREF(extra_row);
    if (rc < 0) {
        Py_XDECREF(seq);
        return NULL;
    }
    return seq;
}

static int
frow_traverse(FastRow *self, visitproc visit, void *arg)
{
    Py_VISIT(self->session);
    Py_VISIT(self->python);
    Py_VISIT(self->perf_ns);
    return 0;
}

static int
frow_clear(FastRow *self)
{
    Py_CLEAR(self->session);
    Py_CLEAR(self->python);
    Py_CLEAR(self->perf_ns);
    return 0;
}

static void
frow_dealloc(FastRow *self)
{
    PyObject_GC_UnTrack(self);
    frow_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
frow_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"rec", "python", "perf_ns", NULL};
    PyObject *rec, *python, *perf_ns;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO:FastRow", kwlist, &rec, &python, &perf_ns))
        return NULL;
    PyObject *const *names[] = {&s_open_seqs, &s_disordered};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (_PyType_Lookup(Py_TYPE(rec), *names[i]) != NULL) {
            PyErr_Format(PyExc_TypeError, "Recorder.%U is not a plain attribute", *names[i]);
            return NULL;
        }
    }
    Session *session = session_new(rec);
    if (session == NULL)
        return NULL;
    FastRow *self = (FastRow *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(session);
        return NULL;
    }
    self->vectorcall = frow_vectorcall;
    self->session = session;
    Py_INCREF(python);
    self->python = python;
    Py_INCREF(perf_ns);
    self->perf_ns = perf_ns;
    return (PyObject *)self;
}

static PyObject *
frow_get_calls(FastRow *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->calls);
}

static PyGetSetDef frow_getset[] = {
    {"written", (getter)frow_get_calls, NULL, "rows written by the compiled path", NULL},
    {NULL},
};

static PyTypeObject FastRowType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.FastRow",
    .tp_basicsize = sizeof(FastRow),
    .tp_dealloc = (destructor)frow_dealloc,
    .tp_vectorcall_offset = offsetof(FastRow, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Recorder.row without a Python frame (see warptrace/record/session.py)",
    .tp_traverse = (traverseproc)frow_traverse,
    .tp_clear = (inquiry)frow_clear,
    .tp_getset = frow_getset,
    .tp_new = frow_new,
};

/* ================================================================== Tape.zero()'s rows */

/* zeroed_rows(rec, arrays, head, seq, tok, state_attr, new_attr, register, ev, acc, extra,
 *             role_write, flag_store, zero_value) -> the next seq
 *
 * The loop of memory.py record_zeroed: the MEMSET rows of the gradients one Tape.zero()
 * zeroed, an event each (seq, *head) with its value 0.0 and its write access, skipping
 * empty arrays and fresh allocations (allocated right after event seq - 1). An array not
 * registered yet is registered with rec.seq = its event's seq. Called under rec.lock. */
static PyObject *
zeroed_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "zeroed_rows() takes 14 arguments");
        return NULL;
    }
    PyObject *rec = args[0], *arrays = args[1], *head = args[2], *tok = args[4], *state_attr = args[5];
    PyObject *new_attr = args[6], *register_ = args[7], *ev = args[8], *acc = args[9], *extra = args[10];
    PyObject *role_write = args[11], *flag_store = args[12], *zero_value = args[13];
    long long seq = PyLong_AsLongLong(args[3]);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    if (!PyTuple_CheckExact(head) || PyTuple_GET_SIZE(head) != 14) {
        PyErr_SetString(PyExc_TypeError, "zeroed_rows(): head must be a tuple of 14");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(arrays, "zeroed_rows(): arrays must be a sequence");
    if (fast == NULL)
        return NULL;
    long long last_seq = seq - 1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *arr = PySequence_Fast_GET_ITEM(fast, i);
        /* getattr(arr, "size", 1) == 0: nothing written */
        PyObject *size = getattr_or_none(arr, s_size);
        if (size == NULL)
            goto done;
        if (size == Py_None) {
            Py_DECREF(size);
        } else {
            int empty = PyObject_RichCompareBool(size, i_zero, Py_EQ);
            Py_DECREF(size);
            if (empty < 0)
                goto done;
            if (empty)
                continue;
        }
        /* a fresh allocation's initialisation (memory.py _is_fresh) */
        PyObject *new = getattr_or_none(arr, new_attr);
        if (new == NULL)
            goto done;
        int fresh = 0;
        if (PyTuple_CheckExact(new) && PyTuple_GET_SIZE(new) >= 4 && PyTuple_GET_ITEM(new, 0) == tok) {
            long long alloc = PyLong_AsLongLong(PyTuple_GET_ITEM(new, 3));
            long long at = PyLong_AsLongLong(PyTuple_GET_ITEM(new, 2));
            if (PyErr_Occurred()) {
                Py_DECREF(new);
                goto done;
            }
            fresh = alloc >= 0 && at == last_seq;
        }
        Py_DECREF(new);
        if (fresh)
            continue;
        PyObject *seq_obj = PyLong_FromLongLong(seq);
        if (seq_obj == NULL)
            goto done;
        PyObject *st = getattr_or_none(arr, state_attr);
        if (st != NULL && !(PyTuple_CheckExact(st) && PyTuple_GET_SIZE(st) >= 4 && PyTuple_GET_ITEM(st, 0) == tok)) {
            Py_CLEAR(st);
            /* register writes rows that name the latest event */
            if (PyObject_SetAttr(rec, s_seq, seq_obj) == 0)
                st = PyObject_CallOneArg(register_, arr);
            if (st != NULL && (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) < 4)) {
                Py_CLEAR(st);
                PyErr_SetString(PyExc_TypeError, "zeroed_rows(): register() returned no state tuple");
            }
        }
        if (st == NULL) {
            Py_DECREF(seq_obj);
            goto done;
        }
        PyObject *row[15];
        row[0] = seq_obj;
        for (int k = 0; k < 14; k++)
            row[k + 1] = PyTuple_GET_ITEM(head, k);
        int rc = extend_row(ev, row, 15);
        PyObject *extra_row = rc == 0 ? untracked(PyTuple_Pack(3, seq_obj, zero_value, Py_None)) : NULL;
        if (extra_row != NULL) {
            rc = append_item(extra, extra_row);
            Py_DECREF(extra_row);
        } else {
            rc = -1;
        }
        PyObject *flags = rc == 0 ? PyNumber_Or(flag_store, PyTuple_GET_ITEM(st, 3)) : NULL;
        if (flags != NULL) {
            PyObject *arow[7] = {seq_obj, PyTuple_GET_ITEM(st, 1), PyTuple_GET_ITEM(st, 2), role_write, flags,
                                 i_zero, i_zero};
            rc = extend_row(acc, arow, 7);
            Py_DECREF(flags);
        } else {
            rc = -1;
        }
        Py_DECREF(st);
        Py_DECREF(seq_obj);
        if (rc < 0)
            goto done;
        seq++;
    }
    result = PyLong_FromLongLong(seq);
done:
    if (result == NULL) {
        /* the rows appended so far keep their numbers: rec.seq = seq, the exception kept */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *seq_obj = PyLong_FromLongLong(seq);
        if (seq_obj == NULL || PyObject_SetAttr(rec, s_seq, seq_obj) < 0)
            PyErr_Clear();
        Py_XDECREF(seq_obj);
        PyErr_Restore(type, value, tb);
    }
    Py_DECREF(fast);
    return result;
}

/* ================================================================== call-site walks */

/* The frame `depth` frames above the caller of the C function (new reference), or NULL
 * without an error when the stack is not that deep. */
static PyFrameObject *
frame_at(Py_ssize_t depth)
{
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed */
    Py_XINCREF(frame);
    for (Py_ssize_t i = 0; i < depth && frame != NULL; i++) {
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    return frame;
}

/* callsite.py's kinds of code (the values of _skip_code) */
#define KIND_USER 0
#define KIND_INTERNAL 1
#define KIND_LIBRARY 2

/* KIND_*, -1 error, -2 a code object not classified yet */
static int
is_internal(PyObject *skip, PyCodeObject *code)
{
    /* the answers of callsite._skip_code (which keeps its codes alive and never changes one),
     * by code object: a frame walk asks about the same few codes again and again */
    static PyObject *cached_skip;
    static struct { void *code; int internal; } known[CODE_SLOTS];
    size_t slot = ((uintptr_t)code >> 4) % CODE_SLOTS;
    if (skip == cached_skip && known[slot].code == (void *)code)
        return known[slot].internal;
    PyObject *id = PyLong_FromVoidPtr(code);
    if (id == NULL)
        return -1;
    PyObject *internal = PyDict_GetItemWithError(skip, id); /* borrowed */
    Py_DECREF(id);
    if (internal == NULL)
        return PyErr_Occurred() ? -1 : -2;
    long kind = PyLong_AsLong(internal);
    if (kind == -1 && PyErr_Occurred())
        return -1;
    int answer = kind == KIND_LIBRARY ? KIND_LIBRARY : kind != 0; /* (a test's dict may hold bools) */
    if (skip != cached_skip) { /* (another dict: a test's; the module's own from then on) */
        memset(known, 0, sizeof(known));
        cached_skip = skip;
    }
    known[slot].code = (void *)code;
    known[slot].internal = answer;
    return answer;
}

/* by_pos[(id(code), lasti)] (new reference), or NULL: an error, or none (no error set) */
static PyObject *
position_site(PyObject *by_pos, PyCodeObject *code, int lasti)
{
    PyObject *id = PyLong_FromVoidPtr(code), *pos = PyLong_FromLong(lasti), *key = NULL, *site = NULL;
    if (id != NULL && pos != NULL)
        key = PyTuple_Pack(2, id, pos);
    if (key != NULL) {
        site = PyDict_GetItemWithError(by_pos, key);
        Py_XINCREF(site);
    }
    Py_XDECREF(id);
    Py_XDECREF(pos);
    Py_XDECREF(key);
    return site;
}

/* by_pos[(id(code), lasti, id(library), library_lasti)] (new reference), or NULL: an error, or
 * none (no error set); code NULL: (0, -1, ...), a library frame with no user frame above it */
static PyObject *
pair_site(PyObject *by_pos, PyCodeObject *code, int lasti, PyCodeObject *library, int library_lasti)
{
    PyObject *key = Py_BuildValue("(NiNi)", code != NULL ? PyLong_FromVoidPtr(code) : PyLong_FromLong(0),
                                  code != NULL ? lasti : -1, PyLong_FromVoidPtr(library), library_lasti);
    if (key == NULL)
        return NULL;
    PyObject *site = PyDict_GetItemWithError(by_pos, key);
    Py_XINCREF(site);
    Py_DECREF(key);
    return site;
}

/* caller_walk(start, skip_code, by_pos, constructor, makers) -> site, (site, labelled) or None
 *
 * callsite.py Sites.caller / Sites.alloc_caller without the Python loop: from the frame
 * `start` frames above the caller (0: the caller), the first frame whose code is the user's;
 * its interned site, paired with the innermost library frame below it when there is one
 * (a library frame alone when no user frame follows).
 * With a constructor code (alloc_caller), also whether the line naming the array (the
 * library frame, else the user frame) made this array directly: (site, labelled). None
 * whenever Python must decide: a code object not classified yet, a position not interned yet. */
/* The walk of caller_walk from `frame` (a reference it takes over). `called`: the code of
 * the frame below it (a reference it takes over, or NULL), or with called NULL and
 * called_direct 1, a callee that counts as an array maker (the compiled _init_new). */
static PyObject *
walk_frames(WalkFrame *frame, PyCodeObject *called, int called_direct, PyObject *skip, PyObject *by_pos,
            PyObject *constructor, PyObject *makers, Session *ss)
{
    int alloc = constructor != Py_None;
    Py_ssize_t constructors = 0;
    PyCodeObject *library = NULL; /* the innermost library frame's code and position */
    int library_lasti = -1, library_direct = 0;
    while (frame != NULL) {
        PyCodeObject *code = walk_code(frame);
        if ((PyObject *)code == constructor)
            constructors++;
        int internal = is_internal(skip, code);
        if (internal == -1)
            return NULL;
        if (internal == -2)
            Py_RETURN_NONE;
        if (internal != KIND_INTERNAL) {
            int direct = 0;
            if (alloc) {
                direct = called == NULL && called_direct;
                if (called != NULL) {
                    direct = (PyObject *)called == constructor;
                    if (!direct && (direct = PySet_Contains(makers, called->co_name)) < 0)
                        return NULL;
                }
                direct = direct && constructors <= 1;
            }
            if (internal == KIND_LIBRARY) {
                if (library == NULL) {
                    library = code;
                    library_lasti = walk_lasti(frame);
                    library_direct = direct;
                }
                called = code;
                called_direct = 0;
                frame = walk_back(frame);
                continue;
            }
            int lasti = walk_lasti(frame);
            size_t slot = (((uintptr_t)code >> 4) ^ ((uintptr_t)lasti * 40503u)) % SITE_SLOTS;
            PyObject *site;
            if (library != NULL) {
                site = pair_site(by_pos, code, lasti, library, library_lasti);
                direct = library_direct;
            } else if (ss != NULL && ss->pos_cache[slot].code == (void *)code && ss->pos_cache[slot].lasti == lasti) {
                site = ss->pos_cache[slot].site;
                Py_INCREF(site);
            } else if ((site = position_site(by_pos, code, lasti)) != NULL && ss != NULL) {
                Py_INCREF(site);
                Py_XSETREF(ss->pos_cache[slot].site, site);
                ss->pos_cache[slot].code = (void *)code;
                ss->pos_cache[slot].lasti = lasti;
            }
            if (site == NULL) {
                if (PyErr_Occurred())
                    return NULL;
                Py_RETURN_NONE;
            }
            if (!alloc)
                return site;
            PyObject *result = PyTuple_Pack(2, site, direct ? Py_True : Py_False);
            Py_DECREF(site);
            return result;
        }
        called = code;
        called_direct = 0;
        frame = walk_back(frame);
    }
    if (library != NULL) { /* library frames only */
        PyObject *site = pair_site(by_pos, NULL, -1, library, library_lasti);
        if (site == NULL) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        if (!alloc)
            return site;
        PyObject *result = PyTuple_Pack(2, site, library_direct ? Py_True : Py_False);
        Py_DECREF(site);
        return result;
    }
    /* no user frame */
    return alloc ? Py_BuildValue("(iO)", -1, Py_False) : PyLong_FromLong(-1);
}

static PyObject *
caller_walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "caller_walk() takes 5 arguments");
        return NULL;
    }
    Py_ssize_t start = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    if (start < 1) {
        PyErr_SetString(PyExc_ValueError, "caller_walk(): start must be 1 or more");
        return NULL;
    }
    PyObject *skip = args[1], *by_pos = args[2], *constructor = args[3], *makers = args[4];
    if (!PyDict_CheckExact(skip) || !PyDict_CheckExact(by_pos)) {
        PyErr_SetString(PyExc_TypeError, "caller_walk(): skip_code and by_pos must be dicts");
        return NULL;
    }
    PyCodeObject *called = NULL;
    WalkFrame *frame = NULL;
    PyFrameObject *from = frame_at(constructor != Py_None ? start - 1 : start);
    if (from != NULL) {
        frame = walk_of(from);
        if (constructor != Py_None) {
            /* the frame below the start counts as the callee of the first frame examined */
            called = walk_code(frame);
            frame = walk_back(frame);
        }
    }
    /* (from, a live frame of the stack, is held by its interpreter frame too) */
    Py_XDECREF(from);
    if (frame == NULL) /* a stack that shallow: sys._getframe's error is Python's to raise */
        Py_RETURN_NONE;
    return walk_frames(frame, called, 0, skip, by_pos, constructor, makers, NULL);
}

/* ================================================================== the allocation index */

/* Intervals(reap_pending): identity.AllocIndex in C arrays: the sorted, non-overlapping byte
 * intervals of the live allocations, with add(start, end, alloc_id, keeper), find(lo, hi)
 * and len(). The same answers as AllocIndex (tests/test_record_compiled.py drives both with
 * the same operations); the ways differ:
 * - an entry holds a weakref without a callback to what keeps its memory alive, and is dead
 *   once that has gone (AllocIndex: a _Keeper whose callback appends it to `dead`, a dict of
 *   keepers, a set of the gone ids at every reap: ~4k instructions per allocation with the
 *   callback's call, where this takes a few hundred);
 * - inserts are deferred as in AllocIndex (`pending`, brought in at the next lookup or at
 *   `reap_pending` entries; one freed before that only evicts what it overlapped);
 * - dead entries of the sorted array are dropped when a lookup lands on one, and all of them
 *   when the array has doubled since the last sweep: a lookup's answer is AllocIndex's,
 *   whose reap drops every dead entry first (entries never overlap, so a dead one a lookup
 *   does not land on cannot change its answer, and an insert evicts what overlaps it, dead
 *   or not, as AllocIndex evicts the live ones).
 * Addresses and ids are C long longs (an int beyond raises OverflowError, a recording error).
 * No Python code runs while the arrays are changed: a weakref without a callback is released
 * without any, and the weakref of an add is made before anything is changed. */
typedef struct {
    long long start, end, id;
    PyObject *ref; /* weakref to the keeper; NULL: not weak-referenceable, lives until evicted */
} Span;

typedef struct {
    PyObject_HEAD
    Span *live, *pending;
    Py_ssize_t n_live, cap_live, n_pending, cap_pending, sweep_at, reap_pending;
} IntervalsObject;

static PyTypeObject IntervalsType;

static inline int
span_dead(const Span *s)
{
    return s->ref != NULL && PyWeakref_GET_OBJECT(s->ref) == Py_None;
}

/* weakref.ref(obj) (a new reference), untracked by the garbage collector: a weakref without a
 * callback holds no strong reference (its traverse visits only the callback), so it can be
 * in no cycle. Each allocation's keeper ref and each grad's owner ref would otherwise count
 * in the young generation and, living until the index sweeps them, be carried into the old
 * one: in loop (e), a full collection every ~500 iterations instead of every ~1,000. */
static PyObject *
weak_ref(PyObject *obj)
{
    PyObject *ref = PyWeakref_NewRef(obj, NULL);
    if (ref != NULL && PyObject_GC_IsTracked(ref))
        PyObject_GC_UnTrack(ref);
    return ref;
}

/* room for `need` spans in *spans (0, or -1 with MemoryError) */
static int
spans_reserve(Span **spans, Py_ssize_t *cap, Py_ssize_t need)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t grown = *cap < 16 ? 16 : *cap * 2;
    if (grown < need)
        grown = need;
    Span *more = PyMem_Realloc(*spans, (size_t)grown * sizeof(Span));
    if (more == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *spans = more;
    *cap = grown;
    return 0;
}

/* the first live entry whose start is >= x (right: > x) */
static Py_ssize_t
spans_bisect(const IntervalsObject *ix, long long x, int right)
{
    Py_ssize_t lo = 0, hi = ix->n_live;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (ix->live[mid].start < x || (right && ix->live[mid].start == x))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* drop live entries [from, to) */
static void
spans_drop(IntervalsObject *ix, Py_ssize_t from, Py_ssize_t to)
{
    if (from >= to)
        return;
    for (Py_ssize_t k = from; k < to; k++)
        Py_XDECREF(ix->live[k].ref);
    memmove(&ix->live[from], &ix->live[to], (size_t)(ix->n_live - to) * sizeof(Span));
    ix->n_live -= to - from;
}

/* AllocIndex._evict: the entries overlapping [start, end) go (their memory was freed); their
 * position */
static Py_ssize_t
spans_evict(IntervalsObject *ix, long long start, long long end)
{
    Py_ssize_t to = spans_bisect(ix, end, 0), from = to;
    while (from > 0 && ix->live[from - 1].end > start)
        from--;
    spans_drop(ix, from, to);
    return from;
}

/* every dead entry of the sorted array goes */
static void
spans_sweep(IntervalsObject *ix)
{
    Py_ssize_t kept = 0;
    for (Py_ssize_t k = 0; k < ix->n_live; k++) {
        if (span_dead(&ix->live[k]))
            Py_DECREF(ix->live[k].ref);
        else
            ix->live[kept++] = ix->live[k];
    }
    ix->n_live = kept;
    ix->sweep_at = kept < 32 ? 64 : 2 * kept;
}

/* AllocIndex._reap: the pending entries go in, in their order (0, or -1 with MemoryError: the
 * pending entries not brought in stay pending) */
static int
intervals_reap(IntervalsObject *ix)
{
    if (ix->n_live >= ix->sweep_at)
        spans_sweep(ix);
    Py_ssize_t done = 0, n = ix->n_pending;
    int rc = 0;
    for (; done < n; done++) {
        Span p = ix->pending[done];
        if (span_dead(&p)) {
            /* freed before anyone looked: evict what it overlapped, insert nothing */
            spans_evict(ix, p.start, p.end);
            Py_DECREF(p.ref);
            continue;
        }
        if (spans_reserve(&ix->live, &ix->cap_live, ix->n_live + 1) < 0) {
            rc = -1;
            break;
        }
        Py_ssize_t at = spans_evict(ix, p.start, p.end);
        memmove(&ix->live[at + 1], &ix->live[at], (size_t)(ix->n_live - at) * sizeof(Span));
        ix->live[at] = p; /* the reference of p.ref moves with it */
        ix->n_live++;
    }
    memmove(ix->pending, &ix->pending[done], (size_t)(n - done) * sizeof(Span));
    ix->n_pending = n - done;
    return rc;
}

/* AllocIndex.add (0, or -1 with an error) */
static int
intervals_add(IntervalsObject *ix, long long start, long long end, long long id, PyObject *keeper)
{
    PyObject *ref = weak_ref(keeper);
    if (ref == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return -1;
        PyErr_Clear(); /* not weak-referenceable: the entry lives until an allocation replaces it */
    }
    if (spans_reserve(&ix->pending, &ix->cap_pending, ix->n_pending + 1) < 0) {
        Py_XDECREF(ref);
        return -1;
    }
    ix->pending[ix->n_pending++] = (Span){start, end, id, ref};
    if (ix->n_pending >= ix->reap_pending)
        return intervals_reap(ix);
    return 0;
}

/* AllocIndex.find: 1 with *id, *start of the live allocation containing [lo, hi); 0: none;
 * -1: an error */
static int
intervals_find(IntervalsObject *ix, long long lo, long long hi, long long *id, long long *start)
{
    if (ix->n_pending > 0 && intervals_reap(ix) < 0)
        return -1;
    Py_ssize_t i = spans_bisect(ix, lo, 1) - 1;
    while (i >= 0 && span_dead(&ix->live[i])) { /* AllocIndex's reap would have dropped it */
        spans_drop(ix, i, i + 1);
        i--;
    }
    if (i < 0 || ix->live[i].end < hi)
        return 0;
    *id = ix->live[i].id;
    *start = ix->live[i].start;
    return 1;
}

static PyObject *
intervals_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"reap_pending", NULL};
    Py_ssize_t reap_pending = 512;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|n:Intervals", names, &reap_pending))
        return NULL;
    IntervalsObject *ix = (IntervalsObject *)type->tp_alloc(type, 0);
    if (ix == NULL)
        return NULL;
    ix->reap_pending = reap_pending < 1 ? 1 : reap_pending;
    ix->sweep_at = 64;
    return (PyObject *)ix;
}

static void
intervals_dealloc(IntervalsObject *ix)
{
    for (Py_ssize_t k = 0; k < ix->n_live; k++)
        Py_XDECREF(ix->live[k].ref);
    for (Py_ssize_t k = 0; k < ix->n_pending; k++)
        Py_XDECREF(ix->pending[k].ref);
    PyMem_Free(ix->live);
    PyMem_Free(ix->pending);
    Py_TYPE(ix)->tp_free((PyObject *)ix);
}

static PyObject *
intervals_add_method(IntervalsObject *ix, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "add(start, end, alloc_id, keeper) takes 4 arguments");
        return NULL;
    }
    long long v[3];
    for (int k = 0; k < 3; k++)
        if ((v[k] = PyLong_AsLongLong(args[k])) == -1 && PyErr_Occurred())
            return NULL;
    if (intervals_add(ix, v[0], v[1], v[2], args[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
intervals_find_method(IntervalsObject *ix, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "find(lo, hi) takes 2 arguments");
        return NULL;
    }
    long long lo = PyLong_AsLongLong(args[0]), hi, id, start;
    if ((lo == -1 && PyErr_Occurred()) || ((hi = PyLong_AsLongLong(args[1])) == -1 && PyErr_Occurred()))
        return NULL;
    int found = intervals_find(ix, lo, hi, &id, &start);
    if (found < 0)
        return NULL;
    if (!found)
        Py_RETURN_NONE;
    return Py_BuildValue("(LL)", id, start);
}

/* the spans as a list of (start, end, alloc_id) */
static PyObject *
spans_list(const Span *spans, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        PyObject *t = Py_BuildValue("(LLL)", spans[k].start, spans[k].end, spans[k].id);
        if (t == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, k, t);
    }
    return out;
}

static PyObject *
intervals_entries(IntervalsObject *ix, PyObject *unused)
{
    if (intervals_reap(ix) < 0)
        return NULL;
    spans_sweep(ix);
    return spans_list(ix->live, ix->n_live);
}

static PyObject *
intervals_pending(IntervalsObject *ix, void *closure)
{
    return spans_list(ix->pending, ix->n_pending);
}

static Py_ssize_t
intervals_len(IntervalsObject *ix)
{
    if (intervals_reap(ix) < 0)
        return -1;
    spans_sweep(ix);
    return ix->n_live;
}

static PyMethodDef intervals_methods[] = {
    {"add", (PyCFunction)(void (*)(void))intervals_add_method, METH_FASTCALL,
     "add(start, end, alloc_id, keeper): an allocation (inserted at the next lookup); keeper gone frees it"},
    {"find", (PyCFunction)(void (*)(void))intervals_find_method, METH_FASTCALL,
     "find(lo, hi) -> (alloc_id, start) of the live allocation containing [lo, hi), else None"},
    {"entries", (PyCFunction)intervals_entries, METH_NOARGS,
     "the live allocations as a sorted list of (start, end, alloc_id) (pending ones brought in)"},
    {NULL},
};

static PyGetSetDef intervals_getset[] = {
    {"pending", (getter)intervals_pending, NULL, "the allocations not inserted yet: (start, end, alloc_id)", NULL},
    {NULL},
};

static PySequenceMethods intervals_as_sequence = {.sq_length = (lenfunc)intervals_len};

static PyTypeObject IntervalsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.Intervals",
    .tp_basicsize = sizeof(IntervalsObject),
    .tp_dealloc = (destructor)intervals_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Intervals(reap_pending=512): identity.AllocIndex in C (see identity.py)",
    .tp_methods = intervals_methods,
    .tp_getset = intervals_getset,
    .tp_as_sequence = &intervals_as_sequence,
    .tp_new = intervals_new,
};

static PyObject *s_next_alloc, *s_capacity, *s_alloc_rows, *s_device_name, *s_add;

/* identity.hull in C: the byte interval [*lo, *hi) of ptr, shape, strides, itemsize (*p: ptr).
 * 1; 0: an empty extent, a value out of the C range or beyond what int64 sums safely (the
 * Python method decides); -1: error */
static int
hull_of(PyObject *ptr, PyObject *shape, PyObject *strides, PyObject *itemsize, long long *p, long long *lo,
        long long *hi)
{
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (PyTuple_GET_SIZE(strides) != ndim)
        return 0;
    int overflow = 0;
    *p = PyLong_AsLongLongAndOverflow(ptr, &overflow);
    if (overflow || (*p == -1 && PyErr_Occurred()))
        goto out_of_range;
    *lo = *hi = *p;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        long long extent = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(shape, d), &overflow);
        if (overflow || (extent == -1 && PyErr_Occurred()))
            goto out_of_range;
        long long stride = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(strides, d), &overflow);
        if (overflow || (stride == -1 && PyErr_Occurred()))
            goto out_of_range;
        if (extent <= 0 || extent > (1LL << 40) || stride > (1LL << 40) || stride < -(1LL << 40))
            return 0; /* empty (not a view with memory), or beyond what int64 sums safely */
        long long step = (extent - 1) * stride;
        if (step < 0)
            *lo += step;
        else
            *hi += step;
    }
    long long size = PyLong_AsLongLongAndOverflow(itemsize, &overflow);
    if (overflow || (size == -1 && PyErr_Occurred()))
        goto out_of_range;
    *hi += size;
    if (*p < 0 || *p > (1LL << 60) || *lo < 0 || *hi > (1LL << 61))
        return 0;
    return 1;
out_of_range:
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
    }
    return 0;
}

/* The hull of an array's bytes (hull_of) and the live allocation holding it (the compiled
 * index's AllocIndex.find, after its reap): 2, found (*id, *at: its id and first byte); 1, in
 * none; 0, a value out of the C range or an index of another type (the Python method
 * decides); -1, error. *p, *lo, *hi and *ix are set from 1 up. */
static int
hull_find(PyObject *ident_dict, PyObject *ptr, PyObject *shape, PyObject *strides, PyObject *itemsize,
          long long *p, long long *lo, long long *hi, IntervalsObject **ix, long long *id, long long *at)
{
    int h = hull_of(ptr, shape, strides, itemsize, p, lo, hi);
    if (h <= 0)
        return h;
    PyObject *index = PyDict_GetItemWithError(ident_dict, s_index);
    if (index == NULL || !Py_IS_TYPE(index, &IntervalsType))
        return PyErr_Occurred() ? -1 : 0;
    *ix = (IntervalsObject *)index;
    int found = intervals_find(*ix, *lo, *hi, id, at);
    return found < 0 ? -1 : found ? 2 : 1;
}

/* Identity.register's view case: the live allocation holding the bytes of a view (hull_find).
 * 1: *alloc_id, *start (new references); 0: none, or a value out of the C range, or an index
 * of another type (the Python method decides); -1: error */
static int
view_alloc(PyObject *ident_dict, PyObject *ptr, PyObject *shape, PyObject *strides, PyObject *itemsize,
           PyObject **alloc_id, PyObject **start)
{
    long long p, lo, hi, id, at;
    IntervalsObject *ix;
    int found = hull_find(ident_dict, ptr, shape, strides, itemsize, &p, &lo, &hi, &ix, &id, &at);
    if (found < 2)
        return found < 0 ? -1 : 0;
    if ((*alloc_id = PyLong_FromLongLong(id)) == NULL || (*start = PyLong_FromLongLong(at)) == NULL) {
        Py_CLEAR(*alloc_id);
        return -1;
    }
    return 1;
}

/* Identity.register's memory of an array with no base (_ref) and no allocation of its own
 * (ptr=: wp.array(ptr=...), the staging array of wp.array(ndarray)): the live allocation
 * holding its bytes (*is_external: one of external memory, else the array is an alias), else
 * a new external allocation of the hull (with [ptr, ptr + capacity) where the array has a
 * deleter), as Identity._new_alloc makes it (its allocs row, the index entry kept by arr, its
 * id in ident.external). 1: *alloc_id, *offset (new references); 0: the Python method
 * decides; -1: error */
static int
ptr_alloc(FastRegister *self, PyObject *ident_dict, PyObject *arr, PyObject *dict, PyObject *ptr, PyObject *shape,
          PyObject *strides, PyObject *itemsize, PyObject *device_name, PyObject *site, PyObject **alloc_id,
          PyObject **offset, int *is_external)
{
    long long p, lo, hi, id, at;
    IntervalsObject *ix;
    int found = hull_find(ident_dict, ptr, shape, strides, itemsize, &p, &lo, &hi, &ix, &id, &at);
    if (found <= 0)
        return found;
    if (found == 2) {
        if ((*alloc_id = PyLong_FromLongLong(id)) == NULL || (*offset = PyLong_FromLongLong(p - at)) == NULL) {
            Py_CLEAR(*alloc_id);
            return -1;
        }
        int in = PySet_Contains(self->external, *alloc_id);
        if (in < 0) {
            Py_CLEAR(*alloc_id);
            Py_CLEAR(*offset);
            return -1;
        }
        *is_external = in;
        return 1;
    }
    PyObject *deleter = dict_get(dict, s_deleter); /* borrowed */
    if (deleter == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (deleter != Py_None) {
        PyObject *capacity = dict_get(dict, s_capacity);
        long long c;
        if (capacity == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (!small_int(capacity, &c) || c < 0 || c > (1LL << 40))
            return 0;
        if (p < lo)
            lo = p;
        if (p + c > hi)
            hi = p + c;
    }
    PyObject *rec = PyDict_GetItemWithError(ident_dict, s_rec_attr), *next = NULL; /* borrowed */
    long long next_value;
    if (rec == NULL || (next = PyDict_GetItemWithError(ident_dict, s_next_alloc)) == NULL
        || !small_int(next, &next_value))
        return PyErr_Occurred() ? -1 : 0;
    int rc = -1;
    long long nbytes = hi - lo;
    PyObject *new_id = NULL, *next_id = NULL, *seq = NULL, *last = NULL, *rows = NULL, *start = NULL;
    PyObject *size = NULL;
    if ((new_id = PyLong_FromLongLong(next_value)) == NULL || (next_id = PyLong_FromLongLong(next_value + 1)) == NULL
        || PyDict_SetItem(ident_dict, s_next_alloc, next_id) < 0)
        goto done;
    if (intervals_add(ix, lo, lo + (nbytes > 0 ? nbytes : 1), next_value, arr) < 0 || PySet_Add(self->external, new_id) < 0)
        goto done;
    if ((seq = PyObject_GetAttr(rec, s_seq)) == NULL || (last = PyNumber_Subtract(seq, i_one)) == NULL
        || (rows = PyObject_GetAttr(rec, s_alloc_rows)) == NULL || (start = PyLong_FromLongLong(lo)) == NULL
        || (size = PyLong_FromLongLong(nbytes)) == NULL)
        goto done;
    {
        PyObject *row[7] = {new_id, start, size, device_name, self->alloc_external, last, site};
        if (extend_row(rows, row, 7) < 0)
            goto done;
    }
    if ((*offset = PyLong_FromLongLong(p - lo)) == NULL)
        goto done;
    *alloc_id = new_id;
    new_id = NULL;
    *is_external = 1;
    rc = 1;
done:
    Py_XDECREF(new_id);
    Py_XDECREF(next_id);
    Py_XDECREF(seq);
    Py_XDECREF(last);
    Py_XDECREF(rows);
    Py_XDECREF(start);
    Py_XDECREF(size);
    return rc;
}

/* ================================================================== array._init_new */

/* The compiled array._init_new wrapper (warptrace/record/wrap/allocation.py,
 * make_init_new): Warp's call, then the allocation's site (the frame walk above) and
 * Identity.on_new's rows, without a Python frame. A site not interned yet, a thread
 * without its state, a device seen for the first time and every call of another
 * signature are the Python code's (`record`, with this wrapper's frame missing, and
 * the Python wrapper). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *original;    /* Warp's array._init_new */
    PyObject *python;      /* the Python wrapper (another signature) */
    PyObject *record;      /* allocation.py record(arr, depth) */
    PyObject *state_dict;  /* warptrace.record.state.__dict__ */
    PyObject *skip_code, *init_code, *makers; /* callsite._skip_code, array.__init__'s code, _ARRAY_MAKERS */
    PyObject *new_attr, *owner_attr, *alloc_owned;
    unsigned long long calls; /* allocations recorded by the compiled path (tests) */
    Bound bound;
    SlotCache ts_slots, ts3_slots;
    PyObject *weakrefs;
} FastInitNew;

#define TS3_SLOT(self, ts, i) read_slot(&(self)->ts3_slots, (ts), (i), O_GRAD_OWNER, O_GRAD_OWNER)
#define TS3_SET(self, ts, i, v) write_slot(&(self)->ts3_slots, (ts), (i), O_GRAD_OWNER, O_GRAD_OWNER, (v))



/* Identity.on_new(arr, site, owner, labelled), under rec.lock (0, or -1 with an error) */
static int
on_new(FastInitNew *self, Session *ss, PyObject *arr, PyObject *site, PyObject *owner, int labelled)
{
    int rc = -1;
    PyObject *ident = NULL, *ident_dict = NULL, *index = NULL, *ptr = NULL, *seq = NULL;
    PyObject *last = NULL, *alloc_id = NULL, *next_id = NULL, *nbytes = NULL, *end = NULL;
    PyObject *device = NULL, *device_id = NULL, *name = NULL, *rows = NULL, *new = NULL;
    PyObject *ref = NULL, *link = NULL, *arr_dict = NULL;

    ident = ss->ident;
    ident_dict = ss->ident_dict;
    Py_INCREF(ident);
    Py_INCREF(ident_dict);
    if ((seq = seq_now(ss)) == NULL || (last = PyNumber_Subtract(seq, i_one)) == NULL)
        goto done;
    if ((ptr = dict_attr(arr, s_ptr, 0)) == NULL)
        goto done;
    if (ptr == Py_None) {
        alloc_id = i_minus1;
        Py_INCREF(alloc_id);
    } else {
        if ((alloc_id = PyDict_GetItemWithError(ident_dict, s_next_alloc)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_AttributeError, "Identity.next_alloc");
            goto done;
        }
        Py_INCREF(alloc_id);
        if ((next_id = PyNumber_Add(alloc_id, i_one)) == NULL
            || PyDict_SetItem(ident_dict, s_next_alloc, next_id) < 0)
            goto done;
        if ((nbytes = dict_attr(arr, s_capacity, 0)) == NULL)
            goto done;
        /* AllocIndex.add: the compiled index's in place, another index's method */
        if ((index = ss->index) == NULL && (index = PyDict_GetItemWithError(ident_dict, s_index)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_AttributeError, "Identity.index");
            goto done;
        }
        Py_INCREF(index);
        long long c_ptr = 0, c_bytes = 0, c_id = 0;
        if (Py_IS_TYPE(index, &IntervalsType) && small_int(ptr, &c_ptr) && small_int(nbytes, &c_bytes)
            && small_int(alloc_id, &c_id) && c_ptr < (1LL << 62) && c_bytes < (1LL << 62)) {
            if (intervals_add((IntervalsObject *)index, c_ptr, c_ptr + (c_bytes > 0 ? c_bytes : 1), c_id, arr) < 0)
                goto done;
        } else {
            int positive = PyObject_RichCompareBool(nbytes, i_zero, Py_GT);
            if (positive < 0 || (end = PyNumber_Add(ptr, positive ? nbytes : i_one)) == NULL)
                goto done;
            PyObject *r = PyObject_CallMethodObjArgs(index, s_add, ptr, end, alloc_id, arr, NULL);
            if (r == NULL)
                goto done;
            Py_DECREF(r);
        }
        if ((device = dict_attr(arr, s_device, 0)) == NULL || (device_id = PyLong_FromVoidPtr(device)) == NULL)
            goto done;
        PyObject *cache = ss->device_cache != NULL ? ss->device_cache : PyDict_GetItemWithError(ident_dict, s_device_cache);
        PyObject *hit = cache != NULL && PyDict_CheckExact(cache) ? PyDict_GetItemWithError(cache, device_id) : NULL;
        if (PyErr_Occurred())
            goto done;
        if (hit != NULL && PyTuple_CheckExact(hit) && PyTuple_GET_SIZE(hit) == 2 && PyTuple_GET_ITEM(hit, 0) == device) {
            name = PyTuple_GET_ITEM(hit, 1);
            Py_INCREF(name);
        } else if ((name = PyObject_CallMethodOneArg(ident, s_device_name, device)) == NULL) {
            goto done;
        }
        if ((rows = rec_attr(ss, s_alloc_rows)) == NULL)
            goto done;
        PyObject *row[7] = {alloc_id, ptr, nbytes, name, self->alloc_owned, last, site};
        if (extend_row(rows, row, 7) < 0)
            goto done;
    }
    if ((arr_dict = PyObject_GenericGetDict(arr, NULL)) == NULL)
        goto done;
    if ((new = untracked(PyTuple_Pack(5, ss->tok, site, last, alloc_id, labelled ? Py_True : Py_False))) == NULL
        || PyDict_SetItem(arr_dict, self->new_attr, new) < 0)
        goto done;
    if (owner != Py_None) {
        if ((ref = weak_ref(owner)) == NULL /* weakref.ref(owner) */
            || (link = untracked(PyTuple_Pack(2, ss->tok, ref))) == NULL
            || PyDict_SetItem(arr_dict, self->owner_attr, link) < 0)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(ident);
    Py_XDECREF(ident_dict);
    Py_XDECREF(index);
    Py_XDECREF(ptr);
    Py_XDECREF(seq);
    Py_XDECREF(last);
    Py_XDECREF(alloc_id);
    Py_XDECREF(next_id);
    Py_XDECREF(nbytes);
    Py_XDECREF(end);
    Py_XDECREF(device);
    Py_XDECREF(device_id);
    Py_XDECREF(name);
    Py_XDECREF(rows);
    Py_XDECREF(new);
    Py_XDECREF(ref);
    Py_XDECREF(link);
    Py_XDECREF(arr_dict);
    return rc;
}

/* record(arr, 1): the Python code, from this wrapper's caller (no wrapper frame between) */
static int
python_record(FastInitNew *self, PyObject *arr)
{
    PyObject *depth = PyLong_FromLong(1);
    if (depth == NULL)
        return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(self->record, arr, depth, NULL);
    Py_DECREF(depth);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The site of an array being made (new reference in *site, *labelled): -1 under the guard
 * (a nested array), else the frame walk from array.__init__. 1: found; 0: the Python code's
 * (a code or position seen for the first time); -1: error. */
static int
init_site(FastInitNew *self, Session *ss, PyObject *ts, PyObject **site, int *labelled)
{
    PyObject *guard_value = TS_SLOT(self, ts, O_GUARD);
    if (guard_value == NULL)
        return -1;
    int guard = PyObject_IsTrue(guard_value);
    Py_DECREF(guard_value);
    if (guard < 0)
        return -1;
    if (guard) {
        *site = i_minus1;
        Py_INCREF(*site);
        return 1;
    }
    WalkFrame *frame = walk_current(); /* the caller: array.__init__ */
    if (frame == NULL)
        return 0;
    PyObject *found = walk_frames(frame, NULL, 1, self->skip_code, ss->by_pos, self->init_code, self->makers, ss);
    if (found == NULL)
        return -1;
    if (found == Py_None) {
        Py_DECREF(found);
        return 0;
    }
    *site = PyTuple_GET_ITEM(found, 0);
    Py_INCREF(*site);
    *labelled = PyTuple_GET_ITEM(found, 1) == Py_True;
    Py_DECREF(found);
    return 1;
}

static PyObject *
fi_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastInitNew *self = (FastInitNew *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->original == NULL || self->python == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this array._init_new wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (nargs != 6 || kwnames != NULL || self->state_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *result = PyObject_Vectorcall(self->original, args, nargsf, NULL);
    if (result == NULL)
        return NULL;
    PyObject *arr = args[0], *rec = NULL, *ts = NULL, *owner = NULL, *site = NULL;
    Session *ss = NULL;
    int labelled = 0, locked = 0;

    rec = PyDict_GetItemWithError(self->state_dict, s_rec);
    if (rec == NULL || rec == Py_None) {
        if (rec == NULL && PyErr_Occurred())
            goto error;
        if (self->bound.session != NULL)
            bound_clear(&self->bound);
        return result;
    }
    Py_INCREF(rec);
    int bound = bound_state(&self->bound, rec, &ss, &ts);
    if (bound < 0)
        goto fail;
    if (bound == 0)
        goto python;
    /* under the guard too: every allocation is registered (a nested one has no site) */
    if ((owner = TS3_SLOT(self, ts, O_GRAD_OWNER)) == NULL)
        goto fail;
    if (owner != Py_None) {
        /* this array is owner's grad: the owner's site */
        if (TS3_SET(self, ts, O_GRAD_OWNER, Py_None) < 0)
            goto fail;
        PyObject *owner_new = getattr_or_none(owner, self->new_attr);
        if (owner_new == NULL)
            goto fail;
        if (PyTuple_CheckExact(owner_new) && PyTuple_GET_SIZE(owner_new) >= 2 && PyTuple_GET_ITEM(owner_new, 0) == ss->tok) {
            site = PyTuple_GET_ITEM(owner_new, 1);
            Py_INCREF(site);
        } else {
            site = i_minus1;
            Py_INCREF(site);
        }
        Py_DECREF(owner_new);
    } else {
        int how = init_site(self, ss, ts, &site, &labelled);
        if (how < 0)
            goto fail;
        if (how == 0)
            goto python;
    }
    if (session_acquire(ss) < 0)
        goto fail;
    locked = 1;
    int rc = on_new(self, ss, arr, site, owner, labelled);
    if (unlock(ss, rc) < 0)
        goto fail;
    self->calls++;
    goto done;

python:
    if (owner != NULL && owner != Py_None) {
        /* ts.grad_owner was cleared above: the Python code must see it (a grad's site) */
        if (TS3_SET(self, ts, O_GRAD_OWNER, owner) < 0)
            goto fail;
    }
    if (python_record(self, arr) < 0)
        goto fail;
    goto done;
fail:
    /* a recording error: rec.fail (raises only under WARPTRACE_STRICT), the program goes on */
    (void)locked;
    if (rec != NULL && rec != Py_None && fail(rec) < 0)
        goto error;
    PyErr_Clear();
done:
    Py_XDECREF(rec);
    Py_XDECREF(ss);
    Py_XDECREF(ts);
    Py_XDECREF(owner);
    Py_XDECREF(site);
    return result;
error:
    Py_XDECREF(rec);
    Py_XDECREF(ss);
    Py_XDECREF(ts);
    Py_XDECREF(owner);
    Py_XDECREF(site);
    Py_DECREF(result);
    return NULL;
}

/* array._init_from_ptr (views, aliases, zero-copy memory; allocation.py make_init_from_ptr):
 * Warp's call, then the site (the same walk as an allocation's) and Identity.on_ptr's
 * mark, resolved at the array's first use. The same cases go to the Python code. */
static PyObject *
fp_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastInitNew *self = (FastInitNew *)callable;
    if (self->original == NULL || self->python == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "warptrace: this array._init_from_ptr wrapper was cleared (garbage collected)");
        return NULL;
    }
    if (PyVectorcall_NARGS(nargsf) != 9 || kwnames != NULL || self->state_dict == NULL)
        return PyObject_Vectorcall(self->python, args, nargsf, kwnames);
    PyObject *result = PyObject_Vectorcall(self->original, args, nargsf, NULL);
    if (result == NULL)
        return NULL;
    PyObject *arr = args[0], *ts = NULL, *site = NULL, *seq = NULL, *last = NULL, *new = NULL, *arr_dict = NULL;
    Session *ss = NULL;
    int labelled = 0;

    PyObject *rec = PyDict_GetItemWithError(self->state_dict, s_rec);
    if (rec == NULL || rec == Py_None) {
        if (rec == NULL && PyErr_Occurred()) {
            Py_DECREF(result);
            return NULL;
        }
        if (self->bound.session != NULL)
            bound_clear(&self->bound);
        return result;
    }
    Py_INCREF(rec);
    int how = bound_state(&self->bound, rec, &ss, &ts);
    if (how > 0)
        how = init_site(self, ss, ts, &site, &labelled); /* under the guard too: nested views, no site */
    if (how == 0) {
        if (python_record(self, arr) < 0)
            how = -1;
    } else if (how > 0) {
        /* Identity.on_ptr */
        if ((seq = seq_now(ss)) == NULL || (last = PyNumber_Subtract(seq, i_one)) == NULL
            || (new = untracked(PyTuple_Pack(5, ss->tok, site, last, i_minus1, labelled ? Py_True : Py_False)))
                   == NULL
            || (arr_dict = PyObject_GenericGetDict(arr, NULL)) == NULL
            || PyDict_SetItem(arr_dict, self->new_attr, new) < 0)
            how = -1;
        else
            self->calls++;
    }
    if (how < 0) {
        /* a recording error: rec.fail (raises only under WARPTRACE_STRICT), the program goes on */
        if (fail(rec) < 0)
            Py_CLEAR(result);
        else
            PyErr_Clear();
    }
    Py_DECREF(rec);
    Py_XDECREF(ss);
    Py_XDECREF(ts);
    Py_XDECREF(site);
    Py_XDECREF(seq);
    Py_XDECREF(last);
    Py_XDECREF(new);
    Py_XDECREF(arr_dict);
    return result;
}

static int
fi_traverse(FastInitNew *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dict);
    Py_VISIT(self->original);
    Py_VISIT(self->python);
    Py_VISIT(self->record);
    Py_VISIT(self->state_dict);
    Py_VISIT(self->skip_code);
    Py_VISIT(self->init_code);
    Py_VISIT(self->makers);
    Py_VISIT(self->bound.session);
    Py_VISIT(self->bound.ts);
    Py_VISIT(self->ts_slots.type);
    Py_VISIT(self->ts3_slots.type);
    return 0;
}

static int
fi_clear(FastInitNew *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->original);
    Py_CLEAR(self->python);
    Py_CLEAR(self->record);
    Py_CLEAR(self->state_dict);
    Py_CLEAR(self->skip_code);
    Py_CLEAR(self->init_code);
    Py_CLEAR(self->makers);
    Py_CLEAR(self->new_attr);
    Py_CLEAR(self->owner_attr);
    Py_CLEAR(self->alloc_owned);
    bound_clear(&self->bound);
    Py_CLEAR(self->ts_slots.type);
    Py_CLEAR(self->ts3_slots.type);
    return 0;
}

static void
fi_dealloc(FastInitNew *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    fi_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
fi_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "python", "record", "state_dict", "skip_code", "init_code", "makers",
        "new_attr", "owner_attr", "alloc_owned", NULL,
    };
    PyObject *o[10];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!O!OOUUU:FastInitNew", kwlist, &o[0], &o[1], &o[2],
                                     &PyDict_Type, &o[3], &PyDict_Type, &o[4], &o[5], &o[6], &o[7], &o[8],
                                     &o[9]))
        return NULL;
    FastInitNew *self = (FastInitNew *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = fi_vectorcall;
    PyObject **fields[10] = {
        &self->original, &self->python, &self->record, &self->state_dict, &self->skip_code, &self->init_code,
        &self->makers, &self->new_attr, &self->owner_attr, &self->alloc_owned,
    };
    for (int i = 0; i < 10; i++) {
        Py_INCREF(o[i]);
        *fields[i] = o[i];
    }
    return (PyObject *)self;
}

/* FastInitFromPtr(original, python, record, state_dict, skip_code, init_code, makers, new_attr):
 * the _init_from_ptr wrapper (the FastInitNew struct and type, another call) */
static PyObject *
fp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {
        "original", "python", "record", "state_dict", "skip_code", "init_code", "makers", "new_attr", NULL,
    };
    PyObject *o[8];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!O!OOU:FastInitFromPtr", kwlist, &o[0], &o[1], &o[2],
                                     &PyDict_Type, &o[3], &PyDict_Type, &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    FastInitNew *self = (FastInitNew *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = fp_vectorcall;
    PyObject **fields[8] = {
        &self->original, &self->python, &self->record, &self->state_dict, &self->skip_code, &self->init_code,
        &self->makers, &self->new_attr,
    };
    for (int i = 0; i < 8; i++) {
        Py_INCREF(o[i]);
        *fields[i] = o[i];
    }
    return (PyObject *)self;
}

static PyObject *
fi_get_calls(FastInitNew *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->calls);
}

static PyObject *
fi_forget(FastInitNew *self, PyObject *unused)
{
    bound_clear(&self->bound);
    Py_RETURN_NONE;
}

static PyMethodDef fi_methods[] = {
    {"__reduce__", (PyCFunction)fl_reduce, METH_NOARGS, "pickled by its qualified name"},
    {"forget", (PyCFunction)fi_forget, METH_NOARGS,
     "drop the references to the session that recorded last (called by uninstall())"},
    {NULL},
};

static PyGetSetDef fi_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"recorded_calls", (getter)fi_get_calls, NULL, "allocations recorded by the compiled path", NULL},
    {NULL},
};

static PyTypeObject FastInitNewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "warptrace.record._fastlaunch.FastInitNew",
    .tp_basicsize = sizeof(FastInitNew),
    .tp_dealloc = (destructor)fi_dealloc,
    .tp_vectorcall_offset = offsetof(FastInitNew, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
        | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "array._init_new, recorded without a Python frame (see warptrace/record/wrap/allocation.py)",
    .tp_traverse = (traverseproc)fi_traverse,
    .tp_clear = (inquiry)fi_clear,
    .tp_getset = fi_getset,
    .tp_methods = fi_methods,
    .tp_descr_get = fl_descr_get,
    .tp_dictoffset = offsetof(FastInitNew, dict),
    .tp_weaklistoffset = offsetof(FastInitNew, weakrefs),
    .tp_new = fi_new,
};

static PyTypeObject FastInitFromPtrType; /* FastInitNewType with fp_new (module init) */

/* pack_int64(list) -> bytes: the list's ints as native int64s, one C pass (the trace-writer
 * process's pipe gets a byte string to copy instead of a pickle of every int: ~1 ns per int
 * against ~9 under the interpreter lock). None when an item is not an int or does not fit
 * (a recorder bug: the list is sent as it is, and the writer process notes the value). */
/* item as an int64 in *out: 1, or 0 when it is not an int or does not fit (no error set) */
static int
int64_of(PyObject *item, int64_t *out)
{
#if PY_VERSION_HEX < 0x030C0000
    /* CPython 3.11's int layout (the only one this module is built for, compiled.py): a
     * value of up to two 30-bit digits, most of a row's, is read in place */
    if (PyLong_CheckExact(item)) {
        Py_ssize_t size = Py_SIZE(item);
        const digit *d = ((PyLongObject *)item)->ob_digit;
        if (size >= -2 && size <= 2) {
            int64_t magnitude = size == 0 ? 0
                : (size == 1 || size == -1) ? (int64_t)d[0]
                : (int64_t)d[0] | ((int64_t)d[1] << PyLong_SHIFT);
            *out = size < 0 ? -magnitude : magnitude;
            return 1;
        }
    }
#endif
    int overflow = 0;
    long long value;
    if (!PyLong_Check(item) || ((value = PyLong_AsLongLongAndOverflow(item, &overflow)) == -1
                                && (overflow || PyErr_Occurred()))) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)value;
    return 1;
}

static PyObject *
pack_int64(PyObject *module, PyObject *list)
{
    if (!PyList_CheckExact(list)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        return NULL;
    }
    int64_t *dst = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!int64_of(PyList_GET_ITEM(list, i), &dst[i])) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
    }
    return out;
}

/* pack_rows(list, spec) -> (ints, texts, lengths, items) or None: a flat list of rows of
 * mixed values (the arrays and allocs tables) as int64 bytes for the trace-writer process,
 * column by column as spec says: 'i' an int, 'b' a bool (0/1), 's' a str (its code into
 * texts, this call's string table), 'T' a tuple or list of ints (its length into lengths,
 * its items into items, all of the first such column's rows first). ints holds the i/b/s
 * columns row by row. None when a value is not what spec says (the list is sent as it is). */
static PyObject *
pack_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "pack_rows(list, spec)");
        return NULL;
    }
    PyObject *list = args[0];
    Py_ssize_t width = PyUnicode_GET_LENGTH(args[1]), n = PyList_GET_SIZE(list);
    const char *spec = PyUnicode_AsUTF8(args[1]);
    if (spec == NULL)
        return NULL;
    if (width == 0 || width > PACK_MAX_COLUMNS || (Py_ssize_t)strlen(spec) != width || n % width != 0)
        Py_RETURN_NONE;
    Py_ssize_t rows = n / width, nint = 0, ntup = 0, total[PACK_MAX_COLUMNS] = {0};
    for (Py_ssize_t c = 0; c < width; c++) {
        if (spec[c] == 'T')
            ntup++;
        else if (spec[c] == 'i' || spec[c] == 'b' || spec[c] == 's')
            nint++;
        else
            Py_RETURN_NONE;
    }
    /* the tuples' sizes first: the items of each 'T' column go together */
    Py_ssize_t all_items = 0;
    for (Py_ssize_t r = 0; r < rows; r++) {
        for (Py_ssize_t c = 0, t = 0; c < width; c++) {
            if (spec[c] != 'T')
                continue;
            PyObject *v = PyList_GET_ITEM(list, r * width + c);
            if (!PyTuple_CheckExact(v) && !PyList_CheckExact(v))
                Py_RETURN_NONE;
            total[t++] += Py_SIZE(v);
            all_items += Py_SIZE(v);
        }
    }
    PyObject *ints = PyBytes_FromStringAndSize(NULL, rows * nint * (Py_ssize_t)sizeof(int64_t));
    PyObject *lengths = PyBytes_FromStringAndSize(NULL, rows * ntup * (Py_ssize_t)sizeof(int64_t));
    PyObject *items = PyBytes_FromStringAndSize(NULL, all_items * (Py_ssize_t)sizeof(int64_t));
    PyObject *texts = PyList_New(0), *codes = PyDict_New(), *result = NULL;
    if (ints == NULL || lengths == NULL || items == NULL || texts == NULL || codes == NULL)
        goto done;
    int64_t *iv = (int64_t *)PyBytes_AS_STRING(ints), *lv = (int64_t *)PyBytes_AS_STRING(lengths);
    int64_t *tv = (int64_t *)PyBytes_AS_STRING(items);
    Py_ssize_t start[PACK_MAX_COLUMNS];
    for (Py_ssize_t t = 0, at = 0; t < ntup; t++) {
        start[t] = at;
        at += total[t];
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        for (Py_ssize_t c = 0, t = 0; c < width; c++) {
            PyObject *v = PyList_GET_ITEM(list, r * width + c);
            switch (spec[c]) {
            case 'i':
                if (!int64_of(v, iv++))
                    goto none;
                break;
            case 'b':
                if (v != Py_True && v != Py_False)
                    goto none;
                *iv++ = v == Py_True;
                break;
            case 's': {
                if (!PyUnicode_CheckExact(v))
                    goto none;
                PyObject *code = PyDict_GetItemWithError(codes, v);
                if (code == NULL) {
                    if (PyErr_Occurred() || (code = PyLong_FromSsize_t(PyList_GET_SIZE(texts))) == NULL)
                        goto done;
                    int added = PyDict_SetItem(codes, v, code) == 0 && PyList_Append(texts, v) == 0;
                    Py_DECREF(code); /* the dict holds it */
                    if (!added)
                        goto done;
                }
                *iv++ = (int64_t)PyLong_AsSsize_t(code);
                break;
            }
            default: { /* 'T' */
                Py_ssize_t size = Py_SIZE(v);
                PyObject **item = PyTuple_CheckExact(v) ? ((PyTupleObject *)v)->ob_item : ((PyListObject *)v)->ob_item;
                *lv++ = size;
                for (Py_ssize_t k = 0; k < size; k++)
                    if (!int64_of(item[k], &tv[start[t]++]))
                        goto none;
                t++;
            }
            }
        }
    }
    result = PyTuple_Pack(4, ints, texts, lengths, items);
    goto done;
none:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(ints);
    Py_XDECREF(lengths);
    Py_XDECREF(items);
    Py_XDECREF(texts);
    Py_XDECREF(codes);
    return result;
}

static PyMethodDef module_functions[] = {
    {"zeroed_rows", (PyCFunction)(void (*)(void))zeroed_rows, METH_FASTCALL,
     "the MEMSET rows of the gradients one Tape.zero() zeroed (memory.py record_zeroed)"},
    {"caller_walk", (PyCFunction)(void (*)(void))caller_walk, METH_FASTCALL,
     "callsite.py Sites.caller / alloc_caller's frame walk; None where Python must decide"},
    {"pack_int64", (PyCFunction)pack_int64, METH_O,
     "a list of ints as native int64 bytes (the trace-writer process's rows); None if one does not fit"},
    {"pack_rows", (PyCFunction)(void (*)(void))pack_rows, METH_FASTCALL,
     "rows of ints, bools, strs and int tuples as int64 bytes and a string table; None if one does not fit"},
    {NULL},
};

static struct PyModuleDef fastlaunch_module = {
    PyModuleDef_HEAD_INIT, "_fastlaunch",
    "The compiled wp.launch wrapper (optional; the pure-Python one is the fallback).", -1, module_functions,
};

static int
intern(PyObject **slot, const char *text)
{
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__fastlaunch(void)
{
    for (int i = 0; i < NPARAMS; i++)
        if (intern(&s_params[i], param_names[i]) < 0)
            return NULL;
    if (intern(&s_rec, "rec") < 0 || intern(&s_local, "local") < 0 || intern(&s_state, "state") < 0
        || intern(&s_thread_state, "thread_state") < 0 || intern(&s_guard, "guard") < 0
        || intern(&s_sites, "sites") < 0 || intern(&s_by_pos, "by_pos") < 0
        || intern(&s_phase, "phase") < 0 || intern(&s_bw_site, "bw_site") < 0
        || intern(&s_bw_tape, "bw_tape") < 0 || intern(&s_caller, "caller") < 0
        || intern(&s_runtime, "runtime") < 0 || intern(&s_tape, "tape") < 0
        || intern(&s_launches, "launches") < 0 || intern(&s_captures, "captures") < 0
        || intern(&s_kernel_id, "kernel_id") < 0 || intern(&s_simple, "simple") < 0
        || intern(&s_fields, "fields") < 0 || intern(&s_adj, "adj") < 0 || intern(&s_handles, "handles") < 0 || intern(&s_tok, "tok") < 0
        || intern(&s_caller_dicts, "caller_dicts") < 0 || intern(&s_lock, "lock") < 0
        || intern(&s_acquire, "acquire") < 0 || intern(&s_release, "release") < 0
        || intern(&s_counters, "counters") < 0 || intern(&s_seq, "seq") < 0 || intern(&s_ev, "ev") < 0 || intern(&s_acc, "acc") < 0
        || intern(&s_thread, "thread") < 0 || intern(&s_parent, "parent") < 0
        || intern(&s_flush_ev_len, "flush_ev_len") < 0 || intern(&s_flush_acc_len, "flush_acc_len") < 0
        || intern(&s_flush_deadline, "flush_deadline") < 0 || intern(&s_flush, "flush") < 0
        || intern(&s_ident, "ident") < 0 || intern(&s_register, "register") < 0
        || intern(&s_fail, "fail") < 0 || intern(&s_retain_grad, "_retain_grad") < 0
        || intern(&s_backward_code, "backward_code") < 0
        || intern(&s_caller_key, "caller") < 0 || intern(&s_extend, "extend") < 0
        || intern(&s_get, "get") < 0 || intern(&s_ev_extra, "ev_extra") < 0
        || intern(&s_zeroed, "zeroed") < 0 || intern(&s_scope_tape, "scope_tape") < 0
        || intern(&s_tape_zero_code, "tape_zero_code") < 0 || intern(&s_size, "size") < 0
        || intern(&s_append, "append") < 0 || intern(&s_ref, "_ref") < 0
        || intern(&s_grad_attr, "_grad") < 0 || intern(&s_requires_grad, "_requires_grad") < 0
        || intern(&s_dtype, "dtype") < 0 || intern(&s_dtype_key, "dtype") < 0
        || intern(&s_ndim, "ndim") < 0 || intern(&s_cls_attr, "_cls") < 0
        || intern(&s_next_tape, "next_tape") < 0 || intern(&s_bw_frame, "bw_frame") < 0 || intern(&s_shape, "shape") < 0 || intern(&s_strides, "strides") < 0
        || intern(&s_device, "device") < 0 || intern(&s_is_cpu, "is_cpu") < 0 || intern(&s_is_contiguous, "is_contiguous") < 0 || intern(&s_ptr, "ptr") < 0 || intern(&s_next_array, "next_array") < 0
        || intern(&s_rec_attr, "rec") < 0 || intern(&s_array_rows, "array_rows") < 0
        || intern(&s_grad_owner_slot, "grad_owner") < 0 || intern(&s_index, "index") < 0
        || intern(&s_add, "add") < 0
        || intern(&s_next_alloc, "next_alloc") < 0 || intern(&s_capacity, "capacity") < 0
        || intern(&s_alloc_rows, "alloc_rows") < 0 || intern(&s_device_cache, "_device_cache") < 0
        || intern(&s_device_name, "device_name") < 0
        || intern(&s_open_seqs, "open_seqs") < 0 || intern(&s_disordered, "disordered") < 0
        || intern(&s_discard, "discard") < 0 || intern(&s_base, "base") < 0
        || intern(&s_hexdigest, "hexdigest") < 0 || intern(&s_copy_ctx, "copy_ctx") < 0
        || intern(&s_dest, "dest") < 0 || intern(&s_src, "src") < 0 || intern(&s_dest_offset, "dest_offset") < 0
        || intern(&s_src_offset, "src_offset") < 0 || intern(&s_count, "count") < 0
        || intern(&s_stream, "stream") < 0 || intern(&s_deleter, "deleter") < 0 || intern(&s_row, "row") < 0
        || intern(&s_external, "external") < 0 || intern(&s_copy_code, "copy_code") < 0
        || intern(&s_src_dest, "src_dest") < 0 || intern(&s_skip_code, "skip_code") < 0
        || intern(&s_qualname, "__qualname__") < 0 || intern(&s_json_names, "json_names") < 0 || intern(&s_func_head, "{\"func\": ") < 0
        || intern(&s_arrays_head, ", \"arrays\": [") < 0 || intern(&s_comma, ", ") < 0
        || intern(&s_arrays_tail, "]}") < 0 || intern(&s_empty, "") < 0 || (s_no_accesses = PyTuple_New(0)) == NULL)
        return NULL;
    if ((k_digest_size = Py_BuildValue("(s)", "digest_size")) == NULL || (i_eight = PyLong_FromLong(8)) == NULL)
        return NULL;
    if ((i_minus1 = PyLong_FromLong(-1)) == NULL || (i_zero = PyLong_FromLong(0)) == NULL
        || (i_one = PyLong_FromLong(1)) == NULL)
        return NULL;
    PyObject *thread_module = PyImport_ImportModule("_thread");
    if (thread_module == NULL)
        return NULL;
    PyObject *local = PyObject_GetAttrString(thread_module, "_local");
    Py_DECREF(thread_module);
    if (local == NULL)
        return NULL;
    if (!PyType_Check(local)) {
        Py_DECREF(local);
        PyErr_SetString(PyExc_TypeError, "_thread._local is not a type");
        return NULL;
    }
    local_type = (PyTypeObject *)local; /* kept for the module's life */
    FastInitFromPtrType = FastInitNewType; /* before either is readied */
    FastInitFromPtrType.tp_name = "warptrace.record._fastlaunch.FastInitFromPtr";
    FastInitFromPtrType.tp_doc = "array._init_from_ptr, recorded without a Python frame (see warptrace/record/wrap/allocation.py)";
    FastInitFromPtrType.tp_new = fp_new;
    if (PyType_Ready(&SessionType) < 0 || PyType_Ready(&FastLaunchType) < 0 || PyType_Ready(&FastZeroType) < 0
        || PyType_Ready(&FastRegisterType) < 0 || PyType_Ready(&FastRowType) < 0
        || PyType_Ready(&FastInitNewType) < 0 || PyType_Ready(&FastReadType) < 0
        || PyType_Ready(&FastCopyType) < 0 || PyType_Ready(&FastFillType) < 0
        || PyType_Ready(&FastTapeEventType) < 0 || PyType_Ready(&FastTapeInitType) < 0
        || PyType_Ready(&FastAllocGradType) < 0 || PyType_Ready(&FastInitFromPtrType) < 0
        || PyType_Ready(&FastRecordFuncType) < 0 || PyType_Ready(&FastInterfaceType) < 0
        || PyType_Ready(&FastBackwardType) < 0 || PyType_Ready(&RowsType) < 0 || PyType_Ready(&LockType) < 0
        || PyType_Ready(&IntervalsType) < 0 || PyType_Ready(&CountersType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&fastlaunch_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&FastLaunchType);
    if (PyModule_AddObject(m, "FastLaunch", (PyObject *)&FastLaunchType) < 0) {
        Py_DECREF(&FastLaunchType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastZeroType);
    if (PyModule_AddObject(m, "FastZero", (PyObject *)&FastZeroType) < 0) {
        Py_DECREF(&FastZeroType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastRegisterType);
    if (PyModule_AddObject(m, "FastRegister", (PyObject *)&FastRegisterType) < 0) {
        Py_DECREF(&FastRegisterType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastRowType);
    if (PyModule_AddObject(m, "FastRow", (PyObject *)&FastRowType) < 0) {
        Py_DECREF(&FastRowType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastInitNewType);
    if (PyModule_AddObject(m, "FastInitNew", (PyObject *)&FastInitNewType) < 0) {
        Py_DECREF(&FastInitNewType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastInitFromPtrType);
    if (PyModule_AddObject(m, "FastInitFromPtr", (PyObject *)&FastInitFromPtrType) < 0) {
        Py_DECREF(&FastInitFromPtrType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastRecordFuncType);
    if (PyModule_AddObject(m, "FastRecordFunc", (PyObject *)&FastRecordFuncType) < 0) {
        Py_DECREF(&FastRecordFuncType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastInterfaceType);
    if (PyModule_AddObject(m, "FastInterface", (PyObject *)&FastInterfaceType) < 0) {
        Py_DECREF(&FastInterfaceType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastReadType);
    if (PyModule_AddObject(m, "FastRead", (PyObject *)&FastReadType) < 0) {
        Py_DECREF(&FastReadType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastFillType);
    if (PyModule_AddObject(m, "FastFill", (PyObject *)&FastFillType) < 0) {
        Py_DECREF(&FastFillType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastCopyType);
    if (PyModule_AddObject(m, "FastCopy", (PyObject *)&FastCopyType) < 0) {
        Py_DECREF(&FastCopyType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastTapeEventType);
    if (PyModule_AddObject(m, "FastTapeEvent", (PyObject *)&FastTapeEventType) < 0) {
        Py_DECREF(&FastTapeEventType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastAllocGradType);
    if (PyModule_AddObject(m, "FastAllocGrad", (PyObject *)&FastAllocGradType) < 0) {
        Py_DECREF(&FastAllocGradType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastTapeInitType);
    if (PyModule_AddObject(m, "FastTapeInit", (PyObject *)&FastTapeInitType) < 0) {
        Py_DECREF(&FastTapeInitType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FastBackwardType);
    if (PyModule_AddObject(m, "FastBackward", (PyObject *)&FastBackwardType) < 0) {
        Py_DECREF(&FastBackwardType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&LockType);
    if (PyModule_AddObject(m, "Lock", (PyObject *)&LockType) < 0) {
        Py_DECREF(&LockType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&RowsType);
    if (PyModule_AddObject(m, "Rows", (PyObject *)&RowsType) < 0) {
        Py_DECREF(&RowsType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&IntervalsType);
    if (PyModule_AddObject(m, "Intervals", (PyObject *)&IntervalsType) < 0) {
        Py_DECREF(&IntervalsType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&CountersType);
    if (PyModule_AddObject(m, "Counters", (PyObject *)&CountersType) < 0) {
        Py_DECREF(&CountersType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
