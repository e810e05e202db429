/* The compiled wp.launch wrapper: the same events as the pure-Python wrapper
 * (warptrace/record/wrap/launch.py, make_launch), without a Python frame.
 *
 * One object of type FastLaunch stands in for wp.launch. A call parses Warp's 13
 * parameters (positional or keyword, Warp's own defaults), forwards the caller's
 * arguments unchanged to the original, and appends the LAUNCH event row and its
 * access rows to the recorder's buffers exactly like the Python wrapper's inlined
 * common case. Everything uncommon is the Python code's: record_cmd launches,
 * launches while a graph is captured and kernels of another class
 * (_record_launch), a kernel without a plan (plan_for), a new dim (dim_code_of), a
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

/* The interface with warptrace/record/wrap/launch.py (FastLaunch's arguments, the
 * Recorder attributes read): raise it with every change, and launch.py's
 * COMPILED_ABI with it. A build left over from another version is not used. */
#define ABI_VERSION 2

#define NPARAMS 13
#define SITE_SLOTS 64
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
static PyObject *s_rec, *s_local, *s_state, *s_thread_state, *s_guard, *s_sites, *s_by_pos,
    *s_phase, *s_bw_site, *s_bw_tape, *s_caller, *s_runtime, *s_tape, *s_launches, *s_captures,
    *s_kernel_id, *s_simple, *s_fields, *s_adj, *s_tok, *s_caller_dicts, *s_lock, *s_acquire,
    *s_release, *s_seq, *s_ev, *s_acc, *s_thread, *s_parent, *s_flush_ev_len, *s_flush_acc_len,
    *s_flush_deadline, *s_flush, *s_ident, *s_register, *s_fail, *s_retain_grad,
    *s_backward_code, *s_backward_wrapper_code, *s_caller_key, *s_extend, *s_get;
static PyObject *i_minus1, *i_zero, *i_one;
static PyTypeObject *local_type; /* _thread._local */

/* Attributes a Recorder sets in __init__ and never rebinds (see session.py), read once
 * per session instead of once per launch. A launch holds a reference to the Session it
 * started with: another thread may start a new session meanwhile (the rec reference
 * also means a new Recorder can never have the address of the one cached). */
typedef struct {
    PyObject_HEAD
    PyObject *rec, *dict, *local, *sites, *by_pos, *caller_dicts, *acquire, *release, *tok,
        *register_, *captures;
    int ts_by_thread; /* rec.local is a _thread._local: its .state is per thread */
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
    Py_VISIT(ss->acquire);
    Py_VISIT(ss->release);
    Py_VISIT(ss->tok);
    Py_VISIT(ss->register_);
    Py_VISIT(ss->captures);
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
    Py_CLEAR(ss->acquire);
    Py_CLEAR(ss->release);
    Py_CLEAR(ss->tok);
    Py_CLEAR(ss->register_);
    Py_CLEAR(ss->captures);
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

/* Offsets of a type's __slots__ members, valid while the type is unchanged: the
 * version tag CPython gives a type on lookup and resets when the type (or a base)
 * is modified. */
typedef struct {
    PyTypeObject *type;
    unsigned int tag;
    Py_ssize_t off[10];
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

enum { O_GUARD, O_PHASE, O_BW_SITE, O_BW_TAPE, O_THREAD, O_PARENT, O_KERNEL_ID, O_SIMPLE, O_FIELDS, O_ADJ };

/* ------------------------------------------------------------------ helpers */

/* getattr(obj, name, None) as a new reference (NULL with an error set on other errors) */
static PyObject *
getattr_or_none(PyObject *obj, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return value;
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

/* list.extend(values) through the method (a buffer that is not a list) */
static int
extend_call(PyObject *list, PyObject *values)
{
    PyObject *r = PyObject_CallMethodOneArg(list, s_extend, values);
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
    PyObject *st = getattr_or_none(value, self->state_attr);
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
    return PyObject_Size(x);
}

/* ------------------------------------------------------------------ session cache */

static PyObject *const *slot_names[10] = {
    &s_guard, &s_phase, &s_bw_site, &s_bw_tape, &s_thread, &s_parent,
    &s_kernel_id, &s_simple, &s_fields, &s_adj,
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
    Py_ssize_t off[10];
    for (int i = 0; i < 10; i++)
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

#define TS_SLOT(self, ts, i) read_slot(&(self)->ts_slots, (ts), (i), O_GUARD, O_PARENT)
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
    Py_ssize_t n = PyNumber_AsSsize_t(v, PyExc_OverflowError);
    Py_DECREF(v);
    return n;
}

/* the per-session attributes of rec (0, or -1 with an exception) */
static int
bind_session(FastLaunch *self, PyObject *rec)
{
    clear_session(self);
    Session *ss = PyObject_GC_New(Session, &SessionType);
    if (ss == NULL)
        return -1;
    ss->rec = ss->dict = ss->local = ss->sites = ss->by_pos = ss->caller_dicts = ss->acquire = NULL;
    ss->release = ss->tok = ss->register_ = ss->captures = NULL;
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
        || (ss->captures = PyObject_GetAttr(rec, s_captures)) == NULL)
        goto done;
    /* the ThreadState may be cached by thread id only when rec.local.state is per thread */
    ss->ts_by_thread = local_type != NULL && Py_IS_TYPE(ss->local, local_type);
    if (!PyDict_CheckExact(ss->by_pos) || !PyDict_CheckExact(ss->captures)) {
        PyErr_SetString(PyExc_TypeError, "Sites.by_pos and Recorder.captures must be dicts");
        goto done;
    }
    /* The counters and buffers the launch reads and writes every time, straight from
     * the session's __dict__: plain instance attributes (nothing on its class). */
    PyObject *const *names[] = {&s_seq, &s_ev, &s_acc, &s_flush_ev_len, &s_flush_acc_len,
                                &s_flush_deadline};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (_PyType_Lookup(Py_TYPE(rec), *names[i]) != NULL) {
            PyErr_Format(PyExc_TypeError, "Recorder.%U is not a plain attribute", *names[i]);
            goto done;
        }
    }
    if ((ss->dict = PyObject_GenericGetDict(rec, NULL)) == NULL)
        goto done;
    if (!PyDict_CheckExact(ss->dict)) {
        PyErr_SetString(PyExc_TypeError, "Recorder.__dict__ must be a dict");
        goto done;
    }
    self->session = ss;
    ss = NULL;
    rc = 0;
done:
    Py_XDECREF(lock);
    Py_XDECREF(ident);
    Py_XDECREF(ss);
    return rc;
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
        PyObject *st = getattr_or_none(value, self->state_attr);
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

/* The common case: a launch of a known kernel class, not captured, not record_cmd. */
static int
record_common(FastLaunch *self, Session *ss, PyObject *ts, PyObject *site, PyObject *tape,
              Py_ssize_t taped_before, PyObject **a)
{
    int rc = -1;
    PyObject *plan = NULL, *dim_code = NULL, *phase = NULL, *tape_id = NULL, *t_ns = NULL;
    PyObject *seq = NULL, *next_seq = NULL, *ev = NULL, *acc = NULL;
    PyObject *kernel_id = NULL, *thread = NULL, *parent = NULL, *recorded = Py_False;
    PyObject *kernel = a[P_KERNEL], *dim = a[P_DIM], *rec = ss->rec;
    int locked = 0;

    plan = PyDict_GetItemWithError(self->plans, kernel);
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
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    /* time.perf_counter_ns()'s own clock */
    if ((t_ns = PyLong_FromLongLong((long long)_PyTime_GetPerfCounter())) == NULL)
        goto done;
#else
    if ((t_ns = PyObject_CallNoArgs(self->perf_ns)) == NULL)
        goto done;
#endif
    PyObject *acquired = PyObject_CallNoArgs(ss->acquire);
    if (acquired == NULL)
        goto done;
    Py_DECREF(acquired);
    locked = 1;

    if ((seq = rec_attr(ss, s_seq)) == NULL)
        goto done;
    if ((next_seq = PyNumber_Add(seq, i_one)) == NULL)
        goto done;
    if (PyDict_SetItem(ss->dict, s_seq, next_seq) < 0)
        goto done;
    if ((ev = rec_attr(ss, s_ev)) == NULL || (acc = rec_attr(ss, s_acc)) == NULL)
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
    {
        /* len(ev) >= rec.flush_ev_len or len(acc) >= rec.flush_acc_len or t_ns >= rec.flush_deadline */
        Py_ssize_t n_ev = length(ev), n_acc;
        if (n_ev < 0)
            goto done;
        Py_ssize_t limit_ev = rec_ssize(ss, s_flush_ev_len);
        if (limit_ev == -1 && PyErr_Occurred())
            goto done;
        int full = n_ev >= limit_ev;
        if (!full) {
            Py_ssize_t limit_acc = rec_ssize(ss, s_flush_acc_len);
            if (limit_acc == -1 && PyErr_Occurred())
                goto done;
            if ((n_acc = length(acc)) < 0)
                goto done;
            full = n_acc >= limit_acc;
        }
        if (!full) {
            PyObject *deadline = rec_attr(ss, s_flush_deadline);
            if (deadline == NULL)
                goto done;
            full = PyObject_RichCompareBool(t_ns, deadline, Py_GE);
            Py_DECREF(deadline);
        }
        if (full < 0)
            goto done;
        if (full) {
            PyObject *r = PyObject_CallMethodNoArgs(rec, s_flush);
            if (r == NULL)
                goto done;
            Py_DECREF(r);
        }
    }
    self->calls++;
    rc = 0;
done:
    if (locked) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *r = PyObject_CallNoArgs(ss->release);
        if (r == NULL) {
            if (type != NULL) {
                PyErr_Clear();  /* the first exception wins... */
                PyErr_Restore(type, value, tb);
            } else {
                rc = -1;  /* ...or the release's own */
            }
        } else {
            Py_DECREF(r);
            if (type != NULL)
                PyErr_Restore(type, value, tb);
        }
    }
    Py_XDECREF(plan);
    Py_XDECREF(dim_code);
    Py_XDECREF(phase);
    Py_XDECREF(tape_id);
    Py_XDECREF(t_ns);
    Py_XDECREF(seq);
    Py_XDECREF(next_seq);
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
            PyObject *bw_wrapper = PyDict_GetItemWithError(self->state_dict, s_backward_wrapper_code);
            if (bw_wrapper == NULL && PyErr_Occurred())
                goto done;
            PyFrameObject *back = PyFrame_GetBack(frame);
            if (back != NULL) {
                PyCodeObject *back_code = PyFrame_GetCode(back);
                int hit = bw_wrapper != NULL && (PyObject *)back_code == bw_wrapper;
                Py_DECREF(back_code);
                Py_DECREF(back);
                if (hit) {
                    site = TS_SLOT(self, ts, O_BW_SITE);
                    goto done;
                }
            }
        }
    }
    /* Sites.caller(0): from C there is no wrapper frame between it and the caller */
    site = PyObject_CallMethodOneArg(ss->sites, s_caller, i_zero);
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
    if (uncommon) {
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
    } else if (record_common(self, ss, ts, site, tape, taped_before, a) < 0) {
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
        "perf_ns", "launch_code", NULL,
    };
    PyObject *o[15];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!OO!O!UUOOOOOO:FastLaunch", kwlist, &o[0],
                                     &PyTuple_Type, &o[1], &PyDict_Type, &o[2], &PyDict_Type, &o[3],
                                     &o[4], &PyDict_Type, &o[5], &PyDict_Type, &o[6], &o[7], &o[8],
                                     &o[9], &o[10], &o[11], &o[12], &o[13], &o[14]))
        return NULL;
    if (PyTuple_GET_SIZE(o[1]) != NPARAMS - 2) {
        PyErr_SetString(PyExc_ValueError, "defaults: 11 values expected");
        return NULL;
    }
    FastLaunch *self = (FastLaunch *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = fl_vectorcall;
    PyObject **fields[15] = {
        &self->original, &self->defaults, &self->state_dict, &self->context_dict,
        &self->kernel_class, &self->plans, &self->dims, &self->tape_attr, &self->state_attr,
        &self->record_launch, &self->plan_for, &self->dim_code_of, &self->tape_id_of,
        &self->perf_ns, &self->launch_code,
    };
    for (int i = 0; i < 15; i++) {
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

static struct PyModuleDef fastlaunch_module = {
    PyModuleDef_HEAD_INIT, "_fastlaunch",
    "The compiled wp.launch wrapper (optional; the pure-Python one is the fallback).", -1, NULL,
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
        || intern(&s_fields, "fields") < 0 || intern(&s_adj, "adj") < 0 || intern(&s_tok, "tok") < 0
        || intern(&s_caller_dicts, "caller_dicts") < 0 || intern(&s_lock, "lock") < 0
        || intern(&s_acquire, "acquire") < 0 || intern(&s_release, "release") < 0
        || intern(&s_seq, "seq") < 0 || intern(&s_ev, "ev") < 0 || intern(&s_acc, "acc") < 0
        || intern(&s_thread, "thread") < 0 || intern(&s_parent, "parent") < 0
        || intern(&s_flush_ev_len, "flush_ev_len") < 0 || intern(&s_flush_acc_len, "flush_acc_len") < 0
        || intern(&s_flush_deadline, "flush_deadline") < 0 || intern(&s_flush, "flush") < 0
        || intern(&s_ident, "ident") < 0 || intern(&s_register, "register") < 0
        || intern(&s_fail, "fail") < 0 || intern(&s_retain_grad, "_retain_grad") < 0
        || intern(&s_backward_code, "backward_code") < 0
        || intern(&s_backward_wrapper_code, "backward_wrapper_code") < 0
        || intern(&s_caller_key, "caller") < 0 || intern(&s_extend, "extend") < 0
        || intern(&s_get, "get") < 0)
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
    if (PyType_Ready(&SessionType) < 0 || PyType_Ready(&FastLaunchType) < 0)
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
    if (PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
