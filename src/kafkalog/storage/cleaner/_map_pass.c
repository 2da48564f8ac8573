/*
 * kafkalog.storage.cleaner._map_pass: the cleaner's map pass over a segment file on two threads,
 * with no Python between its reads.
 *
 * Cleaner._put_windows cuts a segment into pairs of windows where the offset index says batches
 * start; for each pair this thread reads and maps the first window (put_batches) while a helper
 * reads and hashes the second (hash_batches, up to two pairs ahead), then this thread puts the
 * helper's hashes (put_hashes), so the table sees one thread, in offset order.  Done in Python,
 * every pair cost some 75 us of thread hand-overs and GIL waits (about 200 pairs in a 60 MiB
 * log); here the two threads meet on one mutex and never take the GIL.
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

typedef struct {
    int64_t start, middle, last; /* this thread's window [start, middle), the helper's [middle, last) */
} Pair;

/* The bytes of window [from, to) read into a buffer of `room`: a window bigger than its buffer (an
 * index entry that is not a batch's start) is read as far as it fits, and its walk ends short. */
static inline Py_ssize_t window(int64_t from, int64_t to, Py_ssize_t room)
{
    return to - from < room ? (Py_ssize_t)(to - from) : room;
}

/* One of the helper's two buffers, and what it found there. */
typedef struct {
    uint8_t *buf;
    int ready;      /* holds pair `pair`'s hashes, not yet put */
    Py_ssize_t pair;
    Py_ssize_t consumed;
    int stop;
    Hashed *hashed;
    Py_ssize_t n_hashed;
    BatchEntry *batches;
    Py_ssize_t n_batches;
} Slot;

typedef struct {
    int fd;
    int64_t base; /* file offset of segment position 0 */
    const Pair *pairs;
    Py_ssize_t n_pairs;
    uint64_t k0, k1;
    int64_t start_offset;
    Py_ssize_t theirs; /* room in each slot's buffer */
    Slot slots[2];
    int quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} Pipe;

static void *helper_main(void *arg)
{
    Pipe *p = arg;
    for (Py_ssize_t j = 0; j < p->n_pairs; j++) {
        const Pair *w = &p->pairs[j];
        if (w->last <= w->middle)
            continue; /* the segment ended in this thread's window */
        Slot *s = &p->slots[j & 1];
        pthread_mutex_lock(&p->mu);
        while (s->ready && !p->quit)
            pthread_cond_wait(&p->cv, &p->mu);
        int quit = p->quit;
        pthread_mutex_unlock(&p->mu);
        if (quit)
            break;
        Py_ssize_t got = read_full(p->fd, s->buf, window(w->middle, w->last, p->theirs), p->base + w->middle);
        s->n_hashed = s->n_batches = 0;
        s->consumed = api->hash_batches(s->buf, got, w->middle, p->k0, p->k1, p->start_offset, s->hashed,
                                        &s->n_hashed, s->batches, &s->n_batches, &s->stop);
        pthread_mutex_lock(&p->mu);
        s->pair = j;
        s->ready = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

/* Appends n entries to the growing array *out (no GIL: raw allocator); -1 when out of memory. */
static int append_entries(BatchEntry **out, Py_ssize_t *n_out, Py_ssize_t *cap, const BatchEntry *e, Py_ssize_t n)
{
    if (*n_out + n > *cap) {
        Py_ssize_t want = *cap ? *cap : 1024;
        while (want < *n_out + n)
            want *= 2;
        BatchEntry *grown = PyMem_RawRealloc(*out, (size_t)want * sizeof(BatchEntry));
        if (grown == NULL)
            return -1;
        *out = grown;
        *cap = want;
    }
    memcpy(*out + *n_out, e, (size_t)n * sizeof(BatchEntry));
    *n_out += n;
    return 0;
}

PyDoc_STRVAR(put_windows_doc,
"put_windows(fd, base, pairs, buffer, mine, theirs, table, k0, k1, start_offset, max_entries, entries,\n"
"            latest) -> (consumed, stop, entries, latest, records_read, lookups, probes, batches)\n\n"
"The map pass over the pairs of windows `pairs` (native int64 triples start, middle, last: segment\n"
"positions, each pair starting where the last one ended) of the segment file open as `fd`, its\n"
"position 0 at file offset `base`: the first window of each pair is read into buffer[0:mine] and\n"
"mapped on this thread, the second read into one of buffer[mine:mine+theirs] and\n"
"buffer[mine+theirs:mine+2*theirs] and hashed on a helper thread, then put here.  Goes on while\n"
"every window was mapped whole; returns what offset_map_put_batches would over the bytes done.");

static PyObject *put_windows(PyObject *self, PyObject *args)
{
    int fd;
    long long base, start_offset, latest;
    Py_buffer pairs_buf, buf;
    Py_ssize_t mine, theirs, max_entries, entries;
    PyObject *table;
    unsigned long long k0, k1;
    if (!PyArg_ParseTuple(args, "iLy*w*nnOKKLnnL:put_windows", &fd, &base, &pairs_buf, &buf, &mine, &theirs,
                          &table, &k0, &k1, &start_offset, &max_entries, &entries, &latest))
        return NULL;
    PyObject *result = NULL;
    Table t;
    int table_held = 0;
    Pipe p;
    memset(&p, 0, sizeof p);
    BatchEntry *own = NULL, *out = NULL;
    Py_ssize_t n_pairs = pairs_buf.len / (Py_ssize_t)sizeof(Pair);
    const Pair *pairs = (const Pair *)pairs_buf.buf;
    if (pairs_buf.len % (Py_ssize_t)sizeof(Pair) || mine <= 0 || theirs <= 0 || mine > buf.len ||
        theirs > (buf.len - mine) / 2) {
        PyErr_SetString(PyExc_ValueError, "put_windows: pairs must be int64 triples and the windows fit buffer");
        goto release;
    }
    for (Py_ssize_t j = 0; j < n_pairs; j++) {
        const Pair *w = &pairs[j];
        if (w->start < 0 || w->middle <= w->start || w->last < w->middle || (j > 0 && w->start != pairs[j - 1].last)) {
            PyErr_Format(PyExc_ValueError, "put_windows: pair %zd does not follow the one before", j);
            goto release;
        }
    }
    if (api->table_open(table, k0, k1, &t) < 0)
        goto release;
    table_held = 1;
    p.fd = fd;
    p.base = base;
    p.pairs = pairs;
    p.n_pairs = n_pairs;
    p.k0 = k0;
    p.k1 = k1;
    p.start_offset = start_offset;
    p.theirs = theirs;
    uint8_t *bytes = (uint8_t *)buf.buf;
    own = PyMem_RawMalloc((size_t)api->most_batches(mine) * sizeof(BatchEntry));
    for (int i = 0; i < 2; i++) {
        p.slots[i].buf = bytes + mine + i * theirs;
        p.slots[i].hashed = PyMem_RawMalloc((size_t)api->most_hashed(theirs) * sizeof(Hashed));
        p.slots[i].batches = PyMem_RawMalloc((size_t)api->most_batches(theirs) * sizeof(BatchEntry));
    }
    if (own == NULL || !p.slots[0].hashed || !p.slots[1].hashed || !p.slots[0].batches || !p.slots[1].batches) {
        PyErr_NoMemory();
        goto release;
    }
    MapState st = {start_offset, max_entries > t.slots - 1 ? t.slots - 1 : max_entries, entries, latest, 0, 0, 0};
    Py_ssize_t n_out = 0, out_cap = 0, consumed = 0;
    int stop = STOP_END, nomem = 0, started;
    pthread_t helper;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    started = n_pairs > 0 && pthread_create(&helper, NULL, helper_main, &p) == 0;
    int64_t at = n_pairs > 0 ? pairs[0].start : 0;
    for (Py_ssize_t j = 0; started && j < n_pairs; j++) {
        const Pair *w = &pairs[j];
        Py_ssize_t got = read_full(fd, bytes, window(w->start, w->middle, mine), base + w->start);
        Py_ssize_t n_own = 0;
        at += api->put_batches(&t, bytes, got, w->start, &st, own, &n_own, &stop);
        if (append_entries(&out, &n_out, &out_cap, own, n_own) < 0) {
            nomem = 1;
            break;
        }
        if (stop != STOP_END || at != w->middle || w->last <= w->middle)
            break;
        Slot *s = &p.slots[j & 1];
        pthread_mutex_lock(&p.mu);
        while (!(s->ready && s->pair == j))
            pthread_cond_wait(&p.cv, &p.mu);
        pthread_mutex_unlock(&p.mu);
        int full;
        Py_ssize_t done;
        Py_ssize_t put = api->put_hashes(&t, s->hashed, s->n_hashed, s->batches, s->n_batches, &st, &full, &done);
        nomem = append_entries(&out, &n_out, &out_cap, s->batches, done) < 0;
        stop = full ? STOP_FULL : put == s->consumed ? s->stop : STOP_END;
        at += put;
        pthread_mutex_lock(&p.mu);
        s->ready = 0;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
        if (nomem || stop != STOP_END || at != w->last)
            break;
    }
    if (started) {
        pthread_mutex_lock(&p.mu);
        p.quit = 1;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
        pthread_join(helper, NULL);
    }
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    consumed = (Py_ssize_t)(at - (n_pairs > 0 ? pairs[0].start : 0));
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
        goto release;
    }
    if (!started && n_pairs > 0) {
        PyErr_SetString(PyExc_OSError, "put_windows: could not start the helper thread");
        goto release;
    }
    PyObject *bt = PyBytes_FromStringAndSize((const char *)out, n_out * (Py_ssize_t)sizeof(BatchEntry));
    if (bt != NULL)
        result = Py_BuildValue("(ninLLLLN)", consumed, stop, st.entries, (long long)st.latest, st.records,
                               st.lookups, st.probes, bt);
release:
    if (table_held)
        api->table_close(&t);
    PyMem_RawFree(own);
    PyMem_RawFree(out);
    for (int i = 0; i < 2; i++) {
        PyMem_RawFree(p.slots[i].hashed);
        PyMem_RawFree(p.slots[i].batches);
    }
    PyBuffer_Release(&pairs_buf);
    PyBuffer_Release(&buf);
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
