/*
 * What kafkalog.records._compact lends to the log cleaner's C reader (storage/cleaner/_map_pass.c)
 * through the capsule COMPACT_API_CAPSULE: the map pass's three walks over bytes already read.
 * They touch no file and no Python object, so the reader calls them without the GIL, on two
 * threads (the hashing walk never touches the table; the two others are called from one thread).
 * records/ does no I/O: reading is the storage layer's.
 */
#ifndef KAFKALOG_COMPACT_API_H
#define KAFKALOG_COMPACT_API_H

#include <Python.h>
#include <stdint.h>

/* The offset map's table: a caller-owned array of `slots` entries of three 64-bit words. */
typedef struct {
    Py_buffer view;
    uint64_t *e; /* three words per slot: the hash's two halves, the offset */
    Py_ssize_t slots;
    uint64_t k0, k1;
} Table;

/* One plain batch a map-pass walk went through, as native 64-bit words: where it starts and ends
 * in its file, its offsets, its record count, and how many of its records were keyed with offset
 * >= the walk's start offset (those it hashed and put).  The walks return one per batch done; the
 * cleaner keeps them as the batch directory the cleaning pass skips superseded batches with
 * (offset_map_skip_superseded). */
typedef struct {
    int64_t start, end, base_offset, last_offset, count, keyed;
} BatchEntry;

/* One keyed record hashed: its hash, offset, and index among its batch's records. */
typedef struct {
    uint64_t h, l;
    int64_t offset, index;
} Hashed;

/* Why a buffer walk stopped. */
enum {
    STOP_END = 0,    /* no whole batch left in the buffer */
    STOP_BUDGET = 1, /* the next batch would overflow the caller's chunk */
    STOP_PYTHON = 2, /* the batch at `consumed` needs the Python path */
    STOP_FULL = 3,   /* the offset map filled within the batch at `consumed` */
};

/* What the putting walks carry from one call to the next. */
typedef struct {
    int64_t start_offset;    /* records below it are not mapped */
    Py_ssize_t max_entries;  /* at most this many keys (below the table's slots) */
    Py_ssize_t entries;      /* keys held */
    int64_t latest;          /* the offset map's latest offset */
    long long records, lookups, probes;  /* counted up */
    /* Newest segment first (see probe_put_newest in _compact.c): bit i of track_bits is offset
     * track_lo + i, set while an entry holds that offset.  NULL: the map is built in offset order. */
    uint8_t *track_bits;
    int64_t track_lo, track_count;
} MapState;

/* The state a putting walk starts from: at most `max_entries` keys, and never more than the table's
 * slots - 1 (one slot stays empty, so that a probe always ends). */
static inline MapState map_state(const Table *t, int64_t start_offset, Py_ssize_t max_entries, Py_ssize_t entries,
                                 int64_t latest)
{
    MapState s = {start_offset, max_entries > t->slots - 1 ? t->slots - 1 : max_entries, entries, latest, 0, 0, 0,
                  NULL, 0, 0};
    return s;
}

typedef struct {
    /* With the GIL: a table over the writable buffer `entries`, and its release. */
    int (*table_open)(PyObject *entries, unsigned long long k0, unsigned long long k1, Table *t);
    void (*table_close)(Table *t);
    /* The most BatchEntry (Hashed) records a walk over `len` bytes can give. */
    Py_ssize_t (*most_batches)(Py_ssize_t len);
    Py_ssize_t (*most_hashed)(Py_ssize_t len);
    /* offset_map_put_batches over d[0, len) (d[0] at file position `position`): returns the bytes
     * of the batches done, appends their entries to out[*n_out ...], sets *stop. */
    Py_ssize_t (*put_batches)(Table *t, const uint8_t *d, Py_ssize_t len, int64_t position, MapState *s,
                              BatchEntry *out, Py_ssize_t *n_out, int *stop);
    /* offset_map_hash_batches: the same walk, hashing only (hashed and out start empty). */
    Py_ssize_t (*hash_batches)(const uint8_t *d, Py_ssize_t len, int64_t position, uint64_t k0, uint64_t k1,
                               int64_t start_offset, Hashed *hashed, Py_ssize_t *n_hashed, BatchEntry *out,
                               Py_ssize_t *n_out, int *stop);
    /* offset_map_put_hashes: puts what hash_batches gave; *done batches were put whole, *full says
     * whether the map filled within the next one. Returns the bytes of the batches done. */
    Py_ssize_t (*put_hashes)(Table *t, const Hashed *hashed, Py_ssize_t n_hashed, const BatchEntry *batches,
                             Py_ssize_t n_batches, MapState *s, int *full, Py_ssize_t *done);
} CompactApi;

#define COMPACT_API_CAPSULE "kafkalog.records._compact._API"

#endif
