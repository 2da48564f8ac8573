/*
 * kafkalog.storage.cleaner._map_pass: the cleaner's map pass over a segment file on two threads,
 * with no Python between its reads.
 *
 * Cleaner._put_windows cuts a segment into windows where the offset index says batches start.  The
 * table must see the windows' keys in offset order, from one thread; hashing them (most of the
 * work) needs no table.  So the two threads share the windows through a ring of buffers: this
 * thread takes the next window to put -- mapping it itself (put_batches) when nobody has claimed
 * it, or putting the hashes the helper left (put_hashes) -- and while the helper is still hashing
 * that one, it reads and hashes a later window itself; the helper claims the next window nobody
 * has.  Whichever thread runs faster does more (on a shared machine the other CPU is often slower),
 * and neither sleeps while there is a window to hash.  Done in Python, with the windows split
 * between the threads in fixed pairs, every pair cost some 75 us of thread hand-overs and GIL
 * waits and the slower thread set the pace.
 *
 * The walks are records/_compact.c's, borrowed through its capsule (records does no I/O; this
 * file reads).  Whatever stops a walk -- a batch for the Python path, the map full, a read that
 * comes back short or fails -- ends the call there: the caller goes on from `consumed` with its
 * Python path, which reads the same bytes again and raises the right error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "_compact_api.h"

static const CompactApi *api;

/* Bytes of the file at `at` into buf, fewer at its end or on an error (the caller's walk then
 * stops short, and its Python path reports the error). */
static Py_ssize_t read_full(int fd, uint8_t *buf, Py_ssize_t n, int64_t at)
{
    Py_ssize_t done = 0;
    while (done < n) {
        ssize_t got = pread(fd, buf + done, (size_t)(n - done), (off_t)(at + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        done += got;
    }
    return done;
}

#define MAX_SLOTS 8

enum { SLOT_FREE, SLOT_HASHING, SLOT_HASHED };

/* One buffer of the ring, and what a hashing walk found in the window it holds. */
typedef struct {
    uint8_t *buf;
    int state;
    Py_ssize_t consumed;
    int stop;
    Hashed *hashed;
    Py_ssize_t n_hashed;
    BatchEntry *batches;
    Py_ssize_t n_batches;
} Slot;

typedef struct {
    int fd;
    int64_t base;        /* file offset of segment position 0 */
    const int64_t *cuts; /* window j is [cuts[j], cuts[j + 1]) */
    Py_ssize_t n;        /* windows */
    Py_ssize_t room;     /* bytes of each slot's buffer */
    int n_slots;
    uint64_t k0, k1;
    int64_t start_offset;
    Slot slots[MAX_SLOTS];
    /* under mu: */
    Py_ssize_t next_claim, next_put; /* windows below next_claim are claimed, below next_put put */
    int quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} Pipe;

/* Window j's bytes into its slot, read as far as they fit (an index entry that is not a batch's
 * start can make a window too big: its walk then ends short). */
static Py_ssize_t read_window(Pipe *p, Slot *s, Py_ssize_t j)
{
    int64_t size = p->cuts[j + 1] - p->cuts[j];
    return read_full(p->fd, s->buf, size < p->room ? (Py_ssize_t)size : p->room, p->base + p->cuts[j]);
}

static void hash_window(Pipe *p, Slot *s, Py_ssize_t j)
{
    Py_ssize_t got = read_window(p, s, j);
    s->n_hashed = s->n_batches = 0;
    s->consumed = api->hash_batches(s->buf, got, p->cuts[j], p->k0, p->k1, p->start_offset, s->hashed,
                                    &s->n_hashed, s->batches, &s->n_batches, &s->stop);
}

/* Claims the next window if the ring has room for it (under mu); -1 when not. */
static Py_ssize_t claim(Pipe *p)
{
    if (p->next_claim >= p->n || p->next_claim >= p->next_put + p->n_slots)
        return -1;
    Py_ssize_t j = p->next_claim++;
    Slot *s = &p->slots[j % p->n_slots];
    s->state = SLOT_HASHING;
    return j;
}

static void hashed(Pipe *p, Py_ssize_t j)
{
    pthread_mutex_lock(&p->mu);
    p->slots[j % p->n_slots].state = SLOT_HASHED;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void *helper_main(void *arg)
{
    Pipe *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        Py_ssize_t j = -1;
        while (!p->quit && (j = claim(p)) < 0 && p->next_claim < p->n)
            pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        if (j < 0)
            return NULL; /* told to stop, or every window claimed */
        hash_window(p, &p->slots[j % p->n_slots], j);
        hashed(p, j);
    }
}

/* Room for n more entries in the growing array *out (no GIL: raw allocator); -1 when out of memory. */
static int reserve_entries(BatchEntry **out, Py_ssize_t n_out, Py_ssize_t *cap, Py_ssize_t n)
{
    if (n_out + n <= *cap)
        return 0;
    Py_ssize_t want = *cap ? *cap : 1024;
    while (want < n_out + n)
        want *= 2;
    BatchEntry *grown = PyMem_RawRealloc(*out, (size_t)want * sizeof(BatchEntry));
    if (grown == NULL)
        return -1;
    *out = grown;
    *cap = want;
    return 0;
}

PyDoc_STRVAR(put_windows_doc,
"put_windows(fd, base, cuts, buffer, room, table, k0, k1, start_offset, max_entries, entries, latest,\n"
"            newest_bits)\n"
"    -> (consumed, stop, entries, latest, records_read, lookups, probes, batches)\n\n"
"The map pass over the windows [cuts[j], cuts[j+1]) (native int64 segment positions, ascending)\n"
"of the segment file open as `fd`, its position 0 at file offset `base`, on this thread and a\n"
"helper, through a ring of buffers of `room` bytes cut from `buffer`.  Goes on while every window\n"
"was mapped whole; returns what offset_map_put_batches would over the bytes done.  A non-empty\n"
"writable newest_bits maps as the newest-first round does (bit i: offset start_offset + i; see\n"
"probe_put_newest in records/_compact.c): every segment after this one is mapped already.");

/* This thread's part: put every window in order, hashing ahead while the helper has the next. */
static int put_all(Pipe *p, Table *t, MapState *st, BatchEntry **out, Py_ssize_t *n_out, Py_ssize_t *out_cap,
                   int64_t *at, int *stop)
{
    for (;;) {
        pthread_mutex_lock(&p->mu);
        Py_ssize_t k = p->next_put;
        if (k >= p->n) {
            pthread_mutex_unlock(&p->mu);
            return 0;
        }
        Slot *s = &p->slots[k % p->n_slots];
        Py_ssize_t put, want = (Py_ssize_t)(p->cuts[k + 1] - p->cuts[k]);
        if (p->next_claim == k) { /* nobody has it: map it here in one walk */
            p->next_claim++;
            pthread_mutex_unlock(&p->mu);
            Py_ssize_t got = read_window(p, s, k);
            if (reserve_entries(out, *n_out, out_cap, api->most_batches(got)) < 0)
                return -1;
            put = api->put_batches(t, s->buf, got, p->cuts[k], st, *out, n_out, stop);
        } else if (s->state == SLOT_HASHED) {
            pthread_mutex_unlock(&p->mu);
            int full;
            Py_ssize_t done;
            put = api->put_hashes(t, s->hashed, s->n_hashed, s->batches, s->n_batches, st, &full, &done);
            if (reserve_entries(out, *n_out, out_cap, done) < 0)
                return -1;
            memcpy(*out + *n_out, s->batches, (size_t)done * sizeof(BatchEntry));
            *n_out += done;
            *stop = full ? STOP_FULL : put == s->consumed ? s->stop : STOP_END;
        } else { /* the helper is hashing it: hash a later one meanwhile, or wait */
            Py_ssize_t j = claim(p);
            if (j < 0)
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
            if (j >= 0) {
                hash_window(p, &p->slots[j % p->n_slots], j);
                hashed(p, j);
            }
            continue;
        }
        *at += put;
        pthread_mutex_lock(&p->mu);
        s->state = SLOT_FREE;
        p->next_put++;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (*stop != STOP_END || put != want)
            return 0;
    }
}

static PyObject *put_windows(PyObject *self, PyObject *args)
{
    int fd;
    long long base, start_offset, latest;
    Py_buffer cuts_buf, buf, newest;
    Py_ssize_t room, max_entries, entries;
    PyObject *table;
    unsigned long long k0, k1;
    if (!PyArg_ParseTuple(args, "iLy*w*nOKKLnnLw*:put_windows", &fd, &base, &cuts_buf, &buf, &room, &table, &k0,
                          &k1, &start_offset, &max_entries, &entries, &latest, &newest))
        return NULL;
    PyObject *result = NULL;
    Table t;
    int table_held = 0;
    Pipe p;
    memset(&p, 0, sizeof p);
    BatchEntry *out = NULL;
    const int64_t *cuts = (const int64_t *)cuts_buf.buf;
    Py_ssize_t n_cuts = cuts_buf.len / (Py_ssize_t)sizeof(int64_t);
    if (cuts_buf.len % (Py_ssize_t)sizeof(int64_t) || room <= 0 || buf.len / room < 2) {
        PyErr_SetString(PyExc_ValueError, "put_windows: cuts must be int64 and buffer hold two windows of room");
        goto release;
    }
    for (Py_ssize_t j = 0; j < n_cuts; j++) {
        if (cuts[j] < 0 || (j > 0 && cuts[j] <= cuts[j - 1])) {
            PyErr_Format(PyExc_ValueError, "put_windows: cut %zd is not past the one before", j);
            goto release;
        }
    }
    if (api->table_open(table, k0, k1, &t) < 0)
        goto release;
    table_held = 1;
    p.fd = fd;
    p.base = base;
    p.cuts = cuts;
    p.n = n_cuts > 0 ? n_cuts - 1 : 0;
    p.room = room;
    p.n_slots = buf.len / room < MAX_SLOTS ? (int)(buf.len / room) : MAX_SLOTS;
    p.k0 = k0;
    p.k1 = k1;
    p.start_offset = start_offset;
    int nomem = 0;
    for (int i = 0; i < p.n_slots; i++) {
        p.slots[i].buf = (uint8_t *)buf.buf + i * room;
        p.slots[i].hashed = PyMem_RawMalloc((size_t)api->most_hashed(room) * sizeof(Hashed));
        p.slots[i].batches = PyMem_RawMalloc((size_t)api->most_batches(room) * sizeof(BatchEntry));
        nomem |= p.slots[i].hashed == NULL || p.slots[i].batches == NULL;
    }
    if (nomem) {
        PyErr_NoMemory();
        goto release;
    }
    MapState st = map_state(&t, start_offset, max_entries, entries, latest);
    if (newest.len > 0) {
        st.track_bits = (uint8_t *)newest.buf;
        st.track_lo = start_offset;
        st.track_count = (int64_t)newest.len * 8;
    }
    Py_ssize_t n_out = 0, out_cap = 0;
    int64_t at = n_cuts > 0 ? cuts[0] : 0;
    int stop = STOP_END, started = 0;
    pthread_t helper;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    /* Without a helper (none could start) this thread maps every window itself. */
    started = p.n > 1 && pthread_create(&helper, NULL, helper_main, &p) == 0;
    nomem = put_all(&p, &t, &st, &out, &n_out, &out_cap, &at, &stop) < 0;
    if (started) {
        pthread_mutex_lock(&p.mu);
        p.quit = 1;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
        pthread_join(helper, NULL);
    }
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
        goto release;
    }
    PyObject *bt = PyBytes_FromStringAndSize((const char *)out, n_out * (Py_ssize_t)sizeof(BatchEntry));
    if (bt != NULL)
        result = Py_BuildValue("(ninLLLLN)", (Py_ssize_t)(at - (n_cuts > 0 ? cuts[0] : 0)), stop, st.entries,
                               (long long)st.latest, st.records, st.lookups, st.probes, bt);
release:
    if (table_held)
        api->table_close(&t);
    PyMem_RawFree(out);
    for (int i = 0; i < MAX_SLOTS; i++) {
        PyMem_RawFree(p.slots[i].hashed);
        PyMem_RawFree(p.slots[i].batches);
    }
    PyBuffer_Release(&cuts_buf);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&newest);
    return result;
}

static PyMethodDef module_methods[] = {
    {"put_windows", put_windows, METH_VARARGS, put_windows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkalog.storage.cleaner._map_pass",
    .m_doc = "The log cleaner's map pass over a segment file on two threads (see cleaner.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__map_pass(void)
{
    PyObject *compact = PyImport_ImportModule("kafkalog.records._compact"); /* so that the capsule resolves */
    if (compact == NULL)
        return NULL;
    Py_DECREF(compact);
    api = PyCapsule_Import(COMPACT_API_CAPSULE, 0);
    if (api == NULL)
        return NULL;
    return PyModule_Create(&module);
}
