/*
 * kafkalog.records._native: the magic-v2 record walk in C.
 *
 * A v2 batch's records area is a run of variable-length records (spec §3.6):
 *
 *     length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
 *     | keyLength varint | key | valueLength varint | value | headerCount varint | headers
 *
 * Walking it record by record is the one per-record cost of appending (the leader validates every
 * record) and of reading (Spark wants every key and value).  In Python that walk runs at ~1 M
 * records/s; here it runs at memory speed.  Writing the records is the same kind of cost for
 * bulk producers (the Spark sink), so the records area of a whole batch can be encoded here
 * too.  This file does nothing else: no I/O, no compression, no batch headers -- those stay in
 * Python (records/default_batch.py, records/memory.py), which also keeps a pure-Python walk and
 * encoder with exactly the same rules, used when this module is not built and as the oracle of
 * the parity tests.
 *
 * Rules are those of Kafka's DefaultRecord.readFrom as the Python walk applies them: every record
 * must end exactly where its length says, the area must hold exactly `count` records, running out
 * of bytes is "premature EOF", varints longer than 5 (varlongs 10) bytes are refused, header
 * counts must be non-negative and fit in the remaining bytes, header keys must have a
 * non-negative length.  Nothing is ever allocated from a length read out of the data: the number
 * of records is bounded by the area size (a record takes at least 7 bytes) and every key, value
 * or header is bounds-checked before it is copied.
 *
 * Errors are raised as ValueError(message, record_index) (record_index -1 when the error concerns
 * the whole area, and the message has a "{where}" for the caller to fill in); the Python wrapper
 * turns them into InvalidRecordError with the batch named.
 *
 * Four entry points:
 *   decode_v2        -> Python lists (offsets, timestamps, keys, values, headers, offset deltas)
 *   summarize_v2     -> what LogValidator needs about a batch, without creating any object per record
 *   ColumnAccumulator.add_v2 -> Arrow-layout column buffers (bytearrays) for bulk readers
 *   encode_v2        <- Python lists: many records appended at once (MemoryRecordsBuilder.append_many;
 *                       its rules are described at the function)
 * and murmur2, the Java producer's key hash, which a bulk write computes for every keyed record.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "_walk.h"

PyDoc_STRVAR(decode_v2_doc,
"decode_v2(data, pos, count, base_offset, base_timestamp, log_append_time) -> tuple\n\n"
"Decode `count` records from data[pos:], which must end exactly after the last one.\n"
"Returns (offsets, timestamps, keys, values, headers, offset_deltas) where headers is a list of\n"
"(record_index, ((key_str, value_bytes_or_None), ...)) for the records that have any.\n"
"log_append_time (or None) replaces every record timestamp.");

static PyObject *decode_v2(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos, count;
    long long base_offset, base_ts;
    PyObject *lat_obj;
    if (!PyArg_ParseTuple(args, "y*nnLLO:decode_v2", &buf, &pos, &count, &base_offset, &base_ts, &lat_obj))
        return NULL;
    PyObject *offsets = NULL, *timestamps = NULL, *keys = NULL, *values = NULL, *headers = NULL;
    PyObject *deltas = NULL, *result = NULL, *lat_value = NULL;
    Py_ssize_t cap;
    if (area_bounds(&buf, pos, count, &cap) < 0)
        goto done;
    int have_lat = lat_obj != Py_None;
    if (have_lat) {
        long long lat = PyLong_AsLongLong(lat_obj);
        if (lat == -1 && PyErr_Occurred())
            goto done;
        lat_value = PyLong_FromLongLong(lat);
        if (lat_value == NULL)
            goto done;
    }
    offsets = PyList_New(cap);
    timestamps = PyList_New(cap);
    keys = PyList_New(cap);
    values = PyList_New(cap);
    deltas = PyList_New(cap);
    headers = PyList_New(0);
    if (!offsets || !timestamps || !keys || !values || !deltas || !headers)
        goto done;

    const uint8_t *d = (const uint8_t *)buf.buf;
    Py_ssize_t end = buf.len;
    Err e = {0, 0, 0};
    Rec r;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* parse first: a record past the room ``cap`` allows cannot parse, and the walk's own
         * error (a varint too long, say) is the one the Python walk and Kafka report */
        if (parse_record(d, end, &pos, &r, &e) < 0 || i >= cap) {
            if (i >= cap && e.code == 0)
                e.code = E_EOF;
            raise_err(&e, i);
            goto done;
        }
        PyObject *o = PyLong_FromLongLong(add64(base_offset, r.offset_delta));
        if (o == NULL)
            goto done;
        PyList_SET_ITEM(offsets, i, o);
        PyObject *t;
        if (have_lat) {
            Py_INCREF(lat_value);
            t = lat_value;
        } else if ((t = PyLong_FromLongLong(add64(base_ts, r.ts_delta))) == NULL) {
            goto done;
        }
        PyList_SET_ITEM(timestamps, i, t);
        PyObject *dl = PyLong_FromLong(r.offset_delta);
        if (dl == NULL)
            goto done;
        PyList_SET_ITEM(deltas, i, dl);
        PyObject *k = bytes_or_none(d, r.key_pos, r.key_len);
        if (k == NULL)
            goto done;
        PyList_SET_ITEM(keys, i, k);
        PyObject *v = bytes_or_none(d, r.value_pos, r.value_len);
        if (v == NULL)
            goto done;
        PyList_SET_ITEM(values, i, v);
        if (r.header_count > 0) {
            PyObject *hs = headers_tuple(d, end, &r);
            if (hs == NULL)
                goto done;
            PyObject *item = Py_BuildValue("(nN)", i, hs);
            if (item == NULL || PyList_Append(headers, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
    }
    if (check_area_end(pos, end, count, &e) < 0) {
        raise_err(&e, -1);
        goto done;
    }
    result = PyTuple_Pack(6, offsets, timestamps, keys, values, headers, deltas);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(timestamps);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(headers);
    Py_XDECREF(deltas);
    Py_XDECREF(lat_value);
    PyBuffer_Release(&buf);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * summarize_v2: LogValidator's view of a batch, with no object per record
 * ------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(summarize_v2_doc,
"summarize_v2(data, pos, count, base_timestamp) -> tuple\n\n"
"Walk and check `count` records of data[pos:] like decode_v2, creating no object per record.\n"
"Returns (min_timestamp, max_timestamp, has_no_timestamp, has_null_key, sequential_offsets)\n"
"where the min/max ignore records whose timestamp is -1 (NO_TIMESTAMP); with no such record\n"
"they are -1. sequential_offsets: the offset deltas are exactly 0, 1, ..., count - 1.");

static PyObject *summarize_v2(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos, count;
    long long base_ts;
    if (!PyArg_ParseTuple(args, "y*nnL:summarize_v2", &buf, &pos, &count, &base_ts))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t cap;
    if (area_bounds(&buf, pos, count, &cap) < 0)
        goto done;
    const uint8_t *d = (const uint8_t *)buf.buf;
    Py_ssize_t end = buf.len;
    Err e = {0, 0, 0};
    Rec r;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int no_ts = 0, null_key = 0, sequential = 1, any_ts = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* parse first: a record past the room ``cap`` allows cannot parse, and the walk's own
         * error (a varint too long, say) is the one the Python walk and Kafka report */
        if (parse_record(d, end, &pos, &r, &e) < 0 || i >= cap) {
            if (i >= cap && e.code == 0)
                e.code = E_EOF;
            raise_err(&e, i);
            goto done;
        }
        int64_t ts = add64(base_ts, r.ts_delta);
        if (ts == -1) {
            no_ts = 1;
        } else {
            any_ts = 1;
            if (ts < lo)
                lo = ts;
            if (ts > hi)
                hi = ts;
        }
        null_key |= r.key_len < 0;
        sequential &= r.offset_delta == i;
    }
    if (check_area_end(pos, end, count, &e) < 0) {
        raise_err(&e, -1);
        goto done;
    }
    if (!any_ts)
        lo = hi = -1;
    result = Py_BuildValue("(LLOOO)", (long long)lo, (long long)hi, no_ts ? Py_True : Py_False,
                           null_key ? Py_True : Py_False, sequential ? Py_True : Py_False);
done:
    PyBuffer_Release(&buf);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * ColumnAccumulator: Arrow-layout buffers
 * ------------------------------------------------------------------------------------------- */

/* A growable buffer backed by a bytearray, so that take() hands it out without a copy. */
typedef struct {
    PyObject *ba;
    Py_ssize_t len;
    Py_ssize_t cap;
    Py_ssize_t peak; /* the most room asked of this buffer since it was last taken */
    Py_ssize_t hint; /* the peak when last taken: the next buffer starts about that big */
} Buf;

static int buf_grow(Buf *b, Py_ssize_t need)
{
    if (need > PY_SSIZE_T_MAX / 2) {
        PyErr_NoMemory();
        return -1;
    }
    /* A buffer refilled after take() starts at about the most room it was asked for then (its
     * length plus the last records area reserved): growing it from 1 KiB again, or by one doubling
     * at its last reservation, would copy its contents (realloc cannot always grow in place). */
    Py_ssize_t cap = b->cap ? b->cap : b->hint > 1024 ? b->hint + b->hint / 8 : 1024;
    while (cap < need)
        cap *= 2;
    if (b->ba == NULL) {
        b->ba = PyByteArray_FromStringAndSize(NULL, cap);
        if (b->ba == NULL)
            return -1;
    } else if (PyByteArray_Resize(b->ba, cap) < 0) {
        return -1;
    }
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(Buf *b, Py_ssize_t extra)
{
    Py_ssize_t need = b->len + extra;
    if (need > b->peak)
        b->peak = need;
    if (need <= b->cap)
        return 0;
    return buf_grow(b, need);
}

#define BUF_AT(b) ((uint8_t *)PyByteArray_AS_STRING((b)->ba) + (b)->len)

static inline void put_i64(Buf *b, int64_t v)
{
    memcpy(BUF_AT(b), &v, 8);
    b->len += 8;
}

static inline void put_i32(Buf *b, int32_t v)
{
    memcpy(BUF_AT(b), &v, 4);
    b->len += 4;
}

/* Hands out the buffer (trimmed to its length) and leaves `b` empty. */
static PyObject *buf_take(Buf *b)
{
    PyObject *out = b->ba;
    if (out == NULL) {
        out = PyByteArray_FromStringAndSize(NULL, 0);
    } else if (PyByteArray_Resize(out, b->len) < 0) {
        return NULL;
    }
    b->ba = NULL;
    b->hint = b->peak > b->len ? b->peak : b->len;
    b->len = b->cap = b->peak = 0;
    return out;
}

static void buf_clear(Buf *b)
{
    Py_CLEAR(b->ba);
    b->len = b->cap = b->peak = 0;
}

/* A nullable binary (or string) column: validity bitmap, int32 end offsets, data. */
typedef struct {
    Buf validity; /* bit i set: row i is not null */
    Buf offsets;  /* n + 1 int32, the first one 0 */
    Buf data;
    Py_ssize_t rows;
    Py_ssize_t nulls;
} BinCol;

static int bincol_start(BinCol *c)
{
    if (c->offsets.len == 0) {
        if (buf_reserve(&c->offsets, 4) < 0)
            return -1;
        put_i32(&c->offsets, 0);
    }
    return 0;
}

static int bincol_append(BinCol *c, const uint8_t *p, int32_t len)
{
    Py_ssize_t byte = c->rows >> 3;
    if (byte >= c->validity.len) {
        if (buf_reserve(&c->validity, 1) < 0)
            return -1;
        *BUF_AT(&c->validity) = 0;
        c->validity.len++;
    }
    if (len >= 0) {
        if ((Py_ssize_t)len > (Py_ssize_t)INT32_MAX - c->data.len) {
            PyErr_SetString(PyExc_OverflowError,
                            "more than 2 GiB of keys or values in one column chunk: take() more often");
            return -1;
        }
        if (len > 0) { /* an empty value may have no data buffer to point into yet */
            if (buf_reserve(&c->data, len) < 0)
                return -1;
            memcpy(BUF_AT(&c->data), p, len);
            c->data.len += len;
        }
        ((uint8_t *)PyByteArray_AS_STRING(c->validity.ba))[byte] |= (uint8_t)(1u << (c->rows & 7));
    } else {
        c->nulls++;
    }
    if (buf_reserve(&c->offsets, 4) < 0)
        return -1;
    put_i32(&c->offsets, (int32_t)c->data.len);
    c->rows++;
    return 0;
}

static void bincol_clear(BinCol *c)
{
    buf_clear(&c->validity);
    buf_clear(&c->offsets);
    buf_clear(&c->data);
    c->rows = c->nulls = 0;
}

/* (validity, null_count, offsets, data); leaves the column empty. */
static PyObject *bincol_take(BinCol *c)
{
    if (bincol_start(c) < 0)
        return NULL;
    PyObject *v = buf_take(&c->validity);
    PyObject *o = v ? buf_take(&c->offsets) : NULL;
    PyObject *d = o ? buf_take(&c->data) : NULL;
    PyObject *out = NULL;
    if (d != NULL)
        out = Py_BuildValue("(OnOO)", v, c->nulls, o, d);
    Py_XDECREF(v);
    Py_XDECREF(o);
    Py_XDECREF(d);
    c->rows = c->nulls = 0;
    return out;
}

typedef struct {
    PyObject_HEAD
    int include_headers;
    Py_ssize_t rows;
    Buf offsets;    /* int64 */
    Buf timestamps; /* int64, milliseconds */
    Buf ts_types;   /* int32 */
    BinCol keys;
    BinCol values;
    /* headers: list<struct<key: string, value: binary>>, a null list for a record without any */
    Buf list_validity;
    Buf list_offsets; /* n + 1 int32 into the header items */
    Py_ssize_t list_nulls;
    Py_ssize_t items;
    BinCol hkeys;   /* never null */
    BinCol hvalues;
} Acc;

static void acc_clear(Acc *a)
{
    buf_clear(&a->offsets);
    buf_clear(&a->timestamps);
    buf_clear(&a->ts_types);
    bincol_clear(&a->keys);
    bincol_clear(&a->values);
    buf_clear(&a->list_validity);
    buf_clear(&a->list_offsets);
    bincol_clear(&a->hkeys);
    bincol_clear(&a->hvalues);
    a->rows = a->list_nulls = a->items = 0;
}

static int acc_init(Acc *a, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"include_headers", NULL};
    int include_headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:ColumnAccumulator", kwlist, &include_headers))
        return -1;
    acc_clear(a);
    a->include_headers = include_headers;
    return 0;
}

static void acc_dealloc(Acc *a)
{
    acc_clear(a);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static Py_ssize_t acc_len(Acc *a)
{
    return a->rows;
}

/* Standard UTF-8 validation (no overlongs, no surrogates, nothing above U+10FFFF), the rule
 * Python's strict decoder applies. */
static int utf8_valid(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t k;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
            k = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + k >= n)
            return 0; /* truncated sequence */
        for (Py_ssize_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* Appends a header key, replacing malformed UTF-8 with U+FFFD as Python's "replace" does. */
static int append_header_key(BinCol *c, const uint8_t *p, int32_t len)
{
    if (utf8_valid(p, len))
        return bincol_append(c, p, len);
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p, len, "replace");
    if (s == NULL)
        return -1;
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    int rc = u == NULL ? -1 : bincol_append(c, (const uint8_t *)u, (int32_t)n);
    Py_DECREF(s);
    return rc;
}

/* Start of a record's header list; `count` items follow via acc_header_item. */
static int acc_headers_begin(Acc *a, Py_ssize_t count)
{
    Py_ssize_t row = a->rows;
    if (a->list_offsets.len == 0) {
        if (buf_reserve(&a->list_offsets, 4) < 0)
            return -1;
        put_i32(&a->list_offsets, 0);
    }
    if ((row >> 3) >= a->list_validity.len) {
        if (buf_reserve(&a->list_validity, 1) < 0)
            return -1;
        *BUF_AT(&a->list_validity) = 0;
        a->list_validity.len++;
    }
    if (count > 0)
        ((uint8_t *)PyByteArray_AS_STRING(a->list_validity.ba))[row >> 3] |= (uint8_t)(1u << (row & 7));
    else
        a->list_nulls++;
    if (count > INT32_MAX - a->items) {
        PyErr_SetString(PyExc_OverflowError, "too many headers in one column chunk");
        return -1;
    }
    a->items += count;
    if (buf_reserve(&a->list_offsets, 4) < 0)
        return -1;
    put_i32(&a->list_offsets, (int32_t)a->items);
    return 0;
}

/* Appends one row's fixed-width columns; the caller appends key, value and headers. */
static inline void acc_fixed(Acc *a, int64_t offset, int64_t ts, int32_t ts_type)
{
    put_i64(&a->offsets, offset);
    put_i64(&a->timestamps, ts);
    put_i32(&a->ts_types, ts_type);
}

static int acc_reserve_fixed(Acc *a, Py_ssize_t rows)
{
    if (bincol_start(&a->keys) < 0 || bincol_start(&a->values) < 0)
        return -1;
    if (a->include_headers && (bincol_start(&a->hkeys) < 0 || bincol_start(&a->hvalues) < 0))
        return -1;
    return (buf_reserve(&a->offsets, 8 * rows) < 0 || buf_reserve(&a->timestamps, 8 * rows) < 0 ||
            buf_reserve(&a->ts_types, 4 * rows) < 0) ? -1 : 0;
}

PyDoc_STRVAR(acc_add_v2_doc,
"add_v2(data, pos, count, base_offset, base_timestamp, timestamp_type, log_append_time, start, end)\n"
"-> int\n\n"
"Walk and check every record of a v2 records area (data[pos:], exactly `count` records) and append\n"
"those whose offset is in [start, end). Returns how many were appended. On an error nothing of\n"
"this batch is kept.");

static int acc_truncate(Acc *a, Py_ssize_t rows);

/* ---------------------------------------------------------------------------------------------
 * add_v2's fast lane (no headers column): room reserved once per records area, then a walk that
 * keeps every length and write position in locals, with no check per row.  An area of n bytes
 * holds at most n bytes of keys (or of values) and at most `cap` records (area_bounds), so
 * reserving that much covers every row the area can yield.
 * ------------------------------------------------------------------------------------------- */

#define COPY_SLACK 16   /* spare bytes the fast lane keeps after a data buffer's reserved room */
#define SHORT_FIELD 128 /* keys and values up to this long are copied in 16-byte words */

static int bincol_reserve(BinCol *c, Py_ssize_t rows, Py_ssize_t bytes)
{
    Py_ssize_t validity = ((c->rows + rows + 7) >> 3) - c->validity.len;
    if (validity > 0 && buf_reserve(&c->validity, validity) < 0)
        return -1;
    if (buf_reserve(&c->offsets, 4 * rows) < 0)
        return -1;
    return bytes > 0 ? buf_reserve(&c->data, bytes) : 0;
}

/* 1: the fast lane may take an area of `bytes` bytes and up to `rows` records, and has reserved
 * room for it; 0: take the checked path (headers wanted, or int32 offsets close to overflowing);
 * -1: out of memory. */
static int acc_fast_lane(Acc *a, Py_ssize_t rows, Py_ssize_t bytes)
{
    if (a->include_headers || rows == 0 || bytes > (Py_ssize_t)INT32_MAX - a->keys.data.len ||
        bytes > (Py_ssize_t)INT32_MAX - a->values.data.len)
        return 0;
    /* + COPY_SLACK: fastcol_put copies short keys and values in whole 16-byte words */
    if (bincol_reserve(&a->keys, rows, bytes + COPY_SLACK) < 0 ||
        bincol_reserve(&a->values, rows, bytes + COPY_SLACK) < 0)
        return -1;
    return 1;
}

#define BA_AT(buf) ((uint8_t *)PyByteArray_AS_STRING((buf).ba))

typedef struct {
    uint8_t *valid, *offsets, *data;
    Py_ssize_t data_len, nulls;
} FastCol;

static inline void fastcol_open(FastCol *f, BinCol *c)
{
    f->valid = BA_AT(c->validity);
    f->offsets = BA_AT(c->offsets) + 4 * (c->rows + 1);
    f->data = BA_AT(c->data);
    f->data_len = c->data.len;
    f->nulls = 0;
}

/* Copies `len` bytes of a key or value; one short enough, with `room` readable bytes at `p`, in
 * 16-byte words (the last one overruns by up to 15 bytes: the data buffer keeps COPY_SLACK spare,
 * and the next key or value overwrites them) instead of a call to memcpy per field. */
static inline void copy_field(uint8_t *dst, const uint8_t *p, int32_t len, Py_ssize_t room)
{
    if (len <= SHORT_FIELD && room >= len + COPY_SLACK) {
        for (int32_t o = 0; o < len; o += 16)
            memcpy(dst + o, p + o, 16);
    } else {
        memcpy(dst, p, (size_t)len);
    }
}

static inline void fastcol_put(FastCol *f, Py_ssize_t row, Py_ssize_t n, const uint8_t *p, int32_t len,
                               Py_ssize_t room)
{
    if ((row & 7) == 0)
        f->valid[row >> 3] = 0;
    if (len >= 0) {
        copy_field(f->data + f->data_len, p, len, room);
        f->data_len += len;
        f->valid[row >> 3] |= (uint8_t)(1u << (row & 7));
    } else {
        f->nulls++;
    }
    int32_t end = (int32_t)f->data_len;
    memcpy(f->offsets + 4 * n, &end, 4);
}

static inline void fastcol_close(FastCol *f, BinCol *c, Py_ssize_t rows)
{
    c->data.len = f->data_len;
    c->nulls += f->nulls;
    c->offsets.len = 4 * (rows + 1);
    c->validity.len = (rows + 7) >> 3;
    c->rows = rows;
}

/* Walks `count` records from *pos (reserved by acc_fast_lane) and appends those with offsets in
 * [start, stop).  Returns -1 when all were walked, else the index of the record that failed (`e`
 * says why); either way the accumulator is consistent (the caller truncates a failed add). */
static Py_ssize_t acc_walk_fast(Acc *a, const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, Py_ssize_t count,
                                Py_ssize_t cap, int64_t base_offset, int64_t base_ts, int have_lat, int64_t lat,
                                int32_t ts_type, int64_t start, int64_t stop, Err *e)
{
    Py_ssize_t row = a->rows, n = 0, failed = -1, p = *pos;
    uint8_t *offs = BA_AT(a->offsets) + a->offsets.len, *tss = BA_AT(a->timestamps) + a->timestamps.len;
    uint8_t *types = BA_AT(a->ts_types) + a->ts_types.len;
    FastCol k, v;
    fastcol_open(&k, &a->keys);
    fastcol_open(&v, &a->values);
    Rec r;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (parse_record(d, end, &p, &r, e) < 0) { /* before the room check, as in the checked walk */
            failed = i;
            break;
        }
        if (i >= cap) {
            e->code = E_EOF;
            failed = i;
            break;
        }
        int64_t off = add64(base_offset, r.offset_delta);
        if (off < start || off >= stop)
            continue;
        int64_t ts = have_lat ? lat : add64(base_ts, r.ts_delta);
        memcpy(offs + 8 * n, &off, 8);
        memcpy(tss + 8 * n, &ts, 8);
        memcpy(types + 4 * n, &ts_type, 4);
        fastcol_put(&k, row, n, d + r.key_pos, r.key_len, end - r.key_pos);
        fastcol_put(&v, row, n, d + r.value_pos, r.value_len, end - r.value_pos);
        row++;
        n++;
    }
    fastcol_close(&k, &a->keys, row);
    fastcol_close(&v, &a->values, row);
    a->offsets.len += 8 * n;
    a->timestamps.len += 8 * n;
    a->ts_types.len += 4 * n;
    a->rows = row;
    *pos = p;
    return failed;
}

static PyObject *acc_add_v2(Acc *a, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos, count;
    long long base_offset, base_ts, start, stop;
    int ts_type;
    PyObject *lat_obj;
    if (!PyArg_ParseTuple(args, "y*nnLLiOLL:add_v2", &buf, &pos, &count, &base_offset, &base_ts, &ts_type,
                          &lat_obj, &start, &stop))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t cap, first_row = a->rows;
    int have_lat = lat_obj != Py_None;
    long long lat = 0;
    if (have_lat) {
        lat = PyLong_AsLongLong(lat_obj);
        if (lat == -1 && PyErr_Occurred())
            goto done;
    }
    if (area_bounds(&buf, pos, count, &cap) < 0 || acc_reserve_fixed(a, cap) < 0)
        goto done;
    const uint8_t *d = (const uint8_t *)buf.buf;
    Py_ssize_t end = buf.len;
    Err e = {0, 0, 0};
    int fast = acc_fast_lane(a, cap, end - pos);
    if (fast < 0)
        goto fail;
    if (fast) {
        Py_ssize_t failed = acc_walk_fast(a, d, end, &pos, count, cap, base_offset, base_ts, have_lat, lat,
                                          ts_type, start, stop, &e);
        if (failed >= 0) {
            raise_err(&e, failed);
            goto fail;
        }
    }
    Rec r;
    for (Py_ssize_t i = 0; !fast && i < count; i++) { /* the checked path */
        /* parse first: a record past the room ``cap`` allows cannot parse, and the walk's own
         * error (a varint too long, say) is the one the Python walk and Kafka report */
        if (parse_record(d, end, &pos, &r, &e) < 0 || i >= cap) {
            if (i >= cap && e.code == 0)
                e.code = E_EOF;
            raise_err(&e, i);
            goto fail;
        }
        int64_t off = add64(base_offset, r.offset_delta);
        if (off < start || off >= stop)
            continue;
        acc_fixed(a, off, have_lat ? lat : add64(base_ts, r.ts_delta), ts_type);
        if (bincol_append(&a->keys, d + r.key_pos, r.key_len) < 0 ||
            bincol_append(&a->values, d + r.value_pos, r.value_len) < 0)
            goto fail;
        if (a->include_headers) {
            if (acc_headers_begin(a, r.header_count) < 0)
                goto fail;
            Py_ssize_t hp = r.headers_pos;
            for (int32_t h = 0; h < r.header_count; h++) {
                Py_ssize_t kp, vp;
                int32_t kl, vl;
                if (next_header(d, end, &hp, &kp, &kl, &vp, &vl, &e) < 0) {
                    raise_err(&e, i);
                    goto fail;
                }
                if (append_header_key(&a->hkeys, d + kp, kl) < 0 || bincol_append(&a->hvalues, d + vp, vl) < 0)
                    goto fail;
            }
        }
        a->rows++;
    }
    if (check_area_end(pos, end, count, &e) < 0) {
        raise_err(&e, -1);
        goto fail;
    }
    result = PyLong_FromSsize_t(a->rows - first_row);
    goto done;
fail:
    acc_truncate(a, first_row);
done:
    PyBuffer_Release(&buf);
    return result;
}

/* Drops rows appended after `rows` (an add that failed halfway must leave nothing behind). */
static void bincol_truncate(BinCol *c, Py_ssize_t rows)
{
    if (c->rows <= rows)
        return;
    uint8_t *valid = (uint8_t *)PyByteArray_AS_STRING(c->validity.ba);
    Py_ssize_t nulls = 0;
    for (Py_ssize_t i = rows; i < c->rows; i++)
        nulls += !((valid[i >> 3] >> (i & 7)) & 1);
    c->nulls -= nulls;
    int32_t data_end;
    memcpy(&data_end, PyByteArray_AS_STRING(c->offsets.ba) + 4 * rows, 4);
    c->data.len = data_end;
    c->offsets.len = 4 * (rows + 1);
    c->validity.len = (rows + 7) >> 3;
    if (rows & 7)
        valid[rows >> 3] &= (uint8_t)((1u << (rows & 7)) - 1);
    c->rows = rows;
}

static int acc_truncate(Acc *a, Py_ssize_t rows)
{
    /* A row is complete only once a->rows counts it; columns may hold one partial row more. */
    Py_ssize_t items = 0;
    bincol_truncate(&a->keys, rows);
    bincol_truncate(&a->values, rows);
    a->offsets.len = 8 * rows;
    a->timestamps.len = 8 * rows;
    a->ts_types.len = 4 * rows;
    if (a->include_headers && a->list_offsets.len > 4 * rows) {
        int32_t it;
        memcpy(&it, PyByteArray_AS_STRING(a->list_offsets.ba) + 4 * rows, 4);
        items = it;
        uint8_t *valid = (uint8_t *)PyByteArray_AS_STRING(a->list_validity.ba);
        Py_ssize_t listed = a->list_offsets.len / 4 - 1;
        for (Py_ssize_t i = rows; i < listed; i++)
            a->list_nulls -= !((valid[i >> 3] >> (i & 7)) & 1);
        a->list_offsets.len = 4 * (rows + 1);
        a->list_validity.len = (rows + 7) >> 3;
        if (rows & 7)
            valid[rows >> 3] &= (uint8_t)((1u << (rows & 7)) - 1);
        a->items = items;
        bincol_truncate(&a->hkeys, items);
        bincol_truncate(&a->hvalues, items);
    }
    a->rows = rows;
    return 0;
}

PyDoc_STRVAR(acc_add_rows_doc,
"add_rows(offsets, timestamps, timestamp_types, keys, values, headers) -> None\n\n"
"Append already decoded rows (parallel sequences; headers: per row a sequence of objects with\n"
"`key` (str) and `value` (bytes or None) attributes). The path for legacy messages.");

static int bytes_arg(PyObject *o, const uint8_t **p, int32_t *len)
{
    if (o == Py_None) {
        *p = NULL;
        *len = -1;
        return 0;
    }
    if (!PyBytes_Check(o)) {
        PyErr_Format(PyExc_TypeError, "expected bytes or None, got %.100s", Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a key or value of more than 2 GiB");
        return -1;
    }
    *p = (const uint8_t *)PyBytes_AS_STRING(o);
    *len = (int32_t)n;
    return 0;
}

static PyObject *acc_add_rows(Acc *a, PyObject *args)
{
    PyObject *offs, *tss, *types, *keys, *values, *headers;
    if (!PyArg_ParseTuple(args, "OOOOOO:add_rows", &offs, &tss, &types, &keys, &values, &headers))
        return NULL;
    PyObject *seqs[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *src[6] = {offs, tss, types, keys, values, headers};
    PyObject *result = NULL;
    Py_ssize_t first_row = a->rows, n = -1;
    for (int s = 0; s < 6; s++) {
        seqs[s] = PySequence_Fast(src[s], "add_rows wants sequences");
        if (seqs[s] == NULL)
            goto done;
        Py_ssize_t len = PySequence_Fast_GET_SIZE(seqs[s]);
        if (n >= 0 && len != n) {
            PyErr_SetString(PyExc_ValueError, "add_rows: the sequences differ in length");
            goto done;
        }
        n = len;
    }
    if (acc_reserve_fixed(a, n) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long off, ts;
        long tt;
        if (((off = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seqs[0], i))) == -1 && PyErr_Occurred()) ||
            ((ts = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seqs[1], i))) == -1 && PyErr_Occurred()) ||
            ((tt = PyLong_AsLong(PySequence_Fast_GET_ITEM(seqs[2], i))) == -1 && PyErr_Occurred()))
            goto fail;
        const uint8_t *kp, *vp;
        int32_t kl, vl;
        if (bytes_arg(PySequence_Fast_GET_ITEM(seqs[3], i), &kp, &kl) < 0 ||
            bytes_arg(PySequence_Fast_GET_ITEM(seqs[4], i), &vp, &vl) < 0)
            goto fail;
        acc_fixed(a, off, ts, (int32_t)tt);
        if (bincol_append(&a->keys, kp, kl) < 0 || bincol_append(&a->values, vp, vl) < 0)
            goto fail;
        if (a->include_headers) {
            PyObject *hs = PySequence_Fast(PySequence_Fast_GET_ITEM(seqs[5], i), "headers must be sequences");
            if (hs == NULL)
                goto fail;
            Py_ssize_t hn = PySequence_Fast_GET_SIZE(hs);
            int bad = acc_headers_begin(a, hn) < 0;
            for (Py_ssize_t h = 0; !bad && h < hn; h++) {
                PyObject *hdr = PySequence_Fast_GET_ITEM(hs, h);
                PyObject *k = PyObject_GetAttrString(hdr, "key");
                PyObject *v = k ? PyObject_GetAttrString(hdr, "value") : NULL;
                Py_ssize_t ksz;
                const char *ku = v && PyUnicode_Check(k) ? PyUnicode_AsUTF8AndSize(k, &ksz) : NULL;
                if (ku == NULL && !PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "a header key must be a str");
                bad = ku == NULL || ksz > INT32_MAX || bincol_append(&a->hkeys, (const uint8_t *)ku, (int32_t)ksz) < 0 ||
                      bytes_arg(v, &vp, &vl) < 0 || bincol_append(&a->hvalues, vp, vl) < 0;
                Py_XDECREF(k);
                Py_XDECREF(v);
            }
            Py_DECREF(hs);
            if (bad)
                goto fail;
        }
        a->rows++;
    }
    result = Py_NewRef(Py_None);
    goto done;
fail:
    acc_truncate(a, first_row);
done:
    for (int s = 0; s < 6; s++)
        Py_XDECREF(seqs[s]);
    return result;
}

PyDoc_STRVAR(acc_take_doc,
"take() -> tuple\n\n"
"The accumulated rows as Arrow-layout buffers (bytearrays, native byte order), and empty the\n"
"accumulator: (rows, offsets_i64, timestamps_ms_i64, timestamp_types_i32, keys, values, headers)\n"
"where keys/values are (validity_bitmap, null_count, offsets_i32, data) and headers is None or\n"
"(list_validity, list_null_count, list_offsets_i32, header_keys, header_values).");

static PyObject *acc_take(Acc *a, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t rows = a->rows;
    PyObject *offs = NULL, *tss = NULL, *types = NULL, *keys = NULL, *values = NULL, *headers = NULL;
    PyObject *out = NULL;
    if ((offs = buf_take(&a->offsets)) == NULL || (tss = buf_take(&a->timestamps)) == NULL ||
        (types = buf_take(&a->ts_types)) == NULL || (keys = bincol_take(&a->keys)) == NULL ||
        (values = bincol_take(&a->values)) == NULL)
        goto done;
    if (a->include_headers) {
        if (a->list_offsets.len == 0) {
            if (buf_reserve(&a->list_offsets, 4) < 0)
                goto done;
            put_i32(&a->list_offsets, 0);
        }
        PyObject *lv = buf_take(&a->list_validity);
        PyObject *lo = lv ? buf_take(&a->list_offsets) : NULL;
        PyObject *hk = lo ? bincol_take(&a->hkeys) : NULL;
        PyObject *hv = hk ? bincol_take(&a->hvalues) : NULL;
        if (hv != NULL)
            headers = Py_BuildValue("(OnOOO)", lv, a->list_nulls, lo, hk, hv);
        Py_XDECREF(lv);
        Py_XDECREF(lo);
        Py_XDECREF(hk);
        Py_XDECREF(hv);
        if (headers == NULL)
            goto done;
    } else {
        headers = Py_NewRef(Py_None);
    }
    out = Py_BuildValue("(nOOOOOO)", rows, offs, tss, types, keys, values, headers);
done:
    Py_XDECREF(offs);
    Py_XDECREF(tss);
    Py_XDECREF(types);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(headers);
    int include_headers = a->include_headers;
    acc_clear(a);
    a->include_headers = include_headers;
    return out;
}

static PyObject *acc_nbytes(Acc *a, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(a->offsets.len + a->timestamps.len + a->ts_types.len + a->keys.data.len +
                              a->values.data.len + a->hkeys.data.len + a->hvalues.data.len +
                              4 * (a->keys.rows + a->values.rows + a->hkeys.rows + a->hvalues.rows));
}

static PyMethodDef acc_methods[] = {
    {"add_v2", (PyCFunction)acc_add_v2, METH_VARARGS, acc_add_v2_doc},
    {"add_rows", (PyCFunction)acc_add_rows, METH_VARARGS, acc_add_rows_doc},
    {"take", (PyCFunction)acc_take, METH_NOARGS, acc_take_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef acc_getset[] = {
    {"nbytes", (getter)acc_nbytes, NULL, "Bytes accumulated so far (data plus offsets).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods acc_as_sequence = {
    .sq_length = (lenfunc)acc_len,
};

static PyTypeObject AccType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkalog.records._native.ColumnAccumulator",
    .tp_doc = PyDoc_STR("Rows of one topic-partition accumulated as Arrow-layout column buffers."),
    .tp_basicsize = sizeof(Acc),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)acc_init,
    .tp_dealloc = (destructor)acc_dealloc,
    .tp_methods = acc_methods,
    .tp_getset = acc_getset,
    .tp_as_sequence = &acc_as_sequence,
};

/* ---------------------------------------------------------------------------------------------
 * encode_v2: many records in one call, exactly as the builder's append writes them
 * ------------------------------------------------------------------------------------------- */

/* _DefaultMemoryRecordsBuilder.append (records/memory.py) is the reference: this writes the same
 * bytes for every record it accepts, and *refuses* -- ValueError(message, record_index), nothing
 * written -- every record it cannot vouch for: a timestamp below -1, an offset delta past
 * 2^31 - 1, a null header key, and also any object whose Python handling it does not copy
 * exactly (a str or memoryview key, a Header subclass, an int too big for a long, ...).  The
 * caller encodes the records before the refused one here and hands the rest to the Python
 * append, which raises its own error or, for an object it takes, writes what it writes.  So a
 * refusal never has to reproduce a Python message, and an object type outside the few handled
 * here costs speed, never parity.
 *
 * Two passes over the records: the first checks them and sums their sizes, the second writes
 * into a bytes object of exactly that size.  No Python code can run in between (only exact
 * built-in types and the frozen Header dataclass are read), but the second pass still checks
 * every write against the allocation and its end against the first pass's total. */

#define MAX_OFFSET_DELTA 0x7FFFFFFFLL

/* Zig-zag of a long (Java's (v << 1) ^ (v >> 63), without C's implementation-defined shift of a
 * negative value). */
static inline uint64_t zigzag64(int64_t v)
{
    return v < 0 ? ~((uint64_t)v << 1) : (uint64_t)v << 1;
}

static inline Py_ssize_t zz_size(uint64_t z)
{
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_zz(uint8_t *p, uint64_t z)
{
    while (z >= 0x80) {
        *p++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *p++ = (uint8_t)z;
    return p;
}

/* A key, value or header value: bytes (len < 0: null). */
typedef struct {
    const char *p;
    Py_ssize_t len;
} Span;

/* Size of a length-prefixed byte string (the prefix is a varlong, -1 for null). */
static inline Py_ssize_t span_size(const Span *s)
{
    return s->len < 0 ? 1 : zz_size(zigzag64(s->len)) + s->len;
}

static inline uint8_t *put_span(uint8_t *p, const Span *s)
{
    if (s->len < 0) {
        *p++ = 0x01; /* varint -1 */
        return p;
    }
    p = put_zz(p, zigzag64(s->len));
    if (s->len > 0)
        memcpy(p, s->p, s->len);
    return p + s->len;
}

static PyObject *refuse(Py_ssize_t index, const char *format, ...)
{
    va_list va;
    va_start(va, format);
    PyObject *msg = PyUnicode_FromFormatV(format, va);
    va_end(va);
    if (msg == NULL)
        return NULL;
    PyObject *args = Py_BuildValue("(Nn)", msg, index);
    if (args != NULL) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* bytes, bytearray or None.  Exact types only: len() of a memoryview counts items, a bytes
 * subclass may redefine __len__ -- the Python path decides about those. */
static int span_of(PyObject *o, Span *s, Py_ssize_t index, const char *what)
{
    if (o == Py_None) {
        s->p = NULL;
        s->len = -1;
    } else if (PyBytes_CheckExact(o)) {
        s->p = PyBytes_AS_STRING(o);
        s->len = PyBytes_GET_SIZE(o);
    } else if (PyByteArray_CheckExact(o)) {
        s->p = PyByteArray_AS_STRING(o);
        s->len = PyByteArray_GET_SIZE(o);
    } else {
        refuse(index, "%s is a %.100s, not bytes, bytearray or None", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    return 0;
}

/* A long from an exact int (or bool); anything else, or an int past 64 bits, is refused: Python
 * arithmetic on it is not C's. */
static int long_of(PyObject *o, int64_t *out, Py_ssize_t index, const char *what)
{
    if (!PyLong_CheckExact(o) && !PyBool_Check(o)) {
        refuse(index, "%s is a %.100s, not an int", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) {
        refuse(index, "%s does not fit a long", what);
        return -1;
    }
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* records.types.Header, fetched once: encode_headers reads an instance's attributes and unpacks
 * anything else as a (key, value) pair. */
static PyObject *header_type, *str_key, *str_value;

static int load_header_type(void)
{
    if (header_type != NULL)
        return 0;
    PyObject *types = PyImport_ImportModule("kafkalog.records.types");
    if (types == NULL)
        return -1;
    PyObject *t = PyObject_GetAttrString(types, "Header");
    Py_DECREF(types);
    if (t == NULL)
        return -1;
    if (!PyType_Check(t)) {
        Py_DECREF(t);
        PyErr_SetString(PyExc_TypeError, "kafkalog.records.types.Header is not a class");
        return -1;
    }
    str_key = PyUnicode_InternFromString("key");
    str_value = PyUnicode_InternFromString("value");
    if (str_key == NULL || str_value == NULL) {
        Py_DECREF(t);
        Py_CLEAR(str_key);
        Py_CLEAR(str_value);
        return -1;
    }
    header_type = t;
    return 0;
}

/* One header's key (UTF-8) and value.  The pointers borrow from objects the header holds, and
 * the header from the caller's sequences, which nothing can change during the call. */
static int header_of(PyObject *h, Span *key, Span *value, Py_ssize_t index)
{
    PyObject *k, *v;
    if (Py_TYPE(h) == (PyTypeObject *)header_type) {
        /* A frozen slots dataclass: the attributes are member slots, reading them runs no code. */
        k = PyObject_GetAttr(h, str_key);
        if (k == NULL)
            return -1;
        v = PyObject_GetAttr(h, str_value);
        Py_DECREF(k); /* still held by the header */
        if (v == NULL)
            return -1;
        Py_DECREF(v);
    } else if ((PyTuple_CheckExact(h) || PyList_CheckExact(h)) && PySequence_Fast_GET_SIZE(h) == 2) {
        k = PySequence_Fast_GET_ITEM(h, 0);
        v = PySequence_Fast_GET_ITEM(h, 1);
    } else {
        refuse(index, "a header is a %.100s, not a Header or a (key, value) pair", Py_TYPE(h)->tp_name);
        return -1;
    }
    if (!PyUnicode_CheckExact(k)) {
        refuse(index, "a header key is a %.100s, not a str", Py_TYPE(k)->tp_name);
        return -1;
    }
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(k, &n); /* cached in the str: the second pass is free */
    if (u == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return -1;
        PyErr_Clear();
        refuse(index, "a header key is not encodable as UTF-8");
        return -1;
    }
    key->p = u;
    key->len = n;
    return span_of(v, value, index, "a header value");
}

/* One record, checked, with its size; `headers` stays a borrowed list or tuple (or NULL). */
typedef struct {
    int64_t ts;
    uint64_t ts_zz, od_zz;
    Span key, value;
    PyObject *headers;
    Py_ssize_t header_count;
    Py_ssize_t body; /* bytes after the length varint */
} EncRec;

typedef struct {
    PyObject *ts, *keys, *values, *headers; /* PySequence_Fast results (headers may be NULL) */
    int have_first_ts;
    int64_t first_ts;
    int64_t first_delta;
} EncArgs;

/* Size of a record's headers part (count included); with `out`, also writes it there (the caller
 * has checked the room). */
static Py_ssize_t headers_size(PyObject *hs, Py_ssize_t count, Py_ssize_t index, uint8_t **out)
{
    Py_ssize_t size = zz_size(zigzag64(count));
    if (out != NULL)
        *out = put_zz(*out, zigzag64(count));
    for (Py_ssize_t h = 0; h < count; h++) {
        Span k, v;
        if (header_of(PySequence_Fast_GET_ITEM(hs, h), &k, &v, index) < 0)
            return -1;
        size += span_size(&k) + span_size(&v);
        if (out != NULL) {
            *out = put_span(*out, &k);
            *out = put_span(*out, &v);
        }
    }
    return size;
}

/* Checks record i and fills `r`, its size included. */
static int enc_record(EncArgs *a, Py_ssize_t i, EncRec *r)
{
    if (long_of(PySequence_Fast_GET_ITEM(a->ts, i), &r->ts, i, "the timestamp") < 0)
        return -1;
    if (r->ts < -1) {
        refuse(i, "Invalid negative timestamp %lld", (long long)r->ts);
        return -1;
    }
    if (!a->have_first_ts) { /* the builder's first record: its timestamp is the batch's base */
        a->first_ts = r->ts;
        a->have_first_ts = 1;
    }
    /* The Python append computes the delta exactly; only first_ts = -1 with a timestamp of
     * 2^63 - 1 overflows a long, and that one the Python path should write as it does. */
    if (a->first_ts < 0 ? r->ts > INT64_MAX + a->first_ts : r->ts < INT64_MIN + a->first_ts) {
        refuse(i, "the timestamp delta does not fit a long");
        return -1;
    }
    r->ts_zz = zigzag64(r->ts - a->first_ts);
    /* first_delta + i, checked before it is computed so that it cannot overflow */
    if (a->first_delta > MAX_OFFSET_DELTA - (int64_t)i) {
        refuse(i, "Maximum offset delta exceeded");
        return -1;
    }
    r->od_zz = zigzag64(a->first_delta + (int64_t)i);
    if (span_of(PySequence_Fast_GET_ITEM(a->keys, i), &r->key, i, "the key") < 0 ||
        span_of(PySequence_Fast_GET_ITEM(a->values, i), &r->value, i, "the value") < 0)
        return -1;
    r->headers = NULL;
    r->header_count = 0;
    Py_ssize_t hsize = 1; /* header count 0 */
    if (a->headers != NULL) {
        PyObject *hs = PySequence_Fast_GET_ITEM(a->headers, i);
        if (hs != Py_None) {
            if (!PyList_CheckExact(hs) && !PyTuple_CheckExact(hs)) {
                /* e.g. a generator: refusing leaves it unconsumed for the Python path */
                refuse(i, "the headers are a %.100s, not a list or tuple", Py_TYPE(hs)->tp_name);
                return -1;
            }
            r->header_count = PySequence_Fast_GET_SIZE(hs);
            if (r->header_count > 0) {
                r->headers = hs;
                if ((hsize = headers_size(hs, r->header_count, i, NULL)) < 0)
                    return -1;
            }
        }
    }
    /* attributes, deltas, key, value, headers: every term is the size of something in memory
     * (or a few bytes), so the sum cannot overflow */
    r->body = 1 + zz_size(r->ts_zz) + zz_size(r->od_zz) + span_size(&r->key) + span_size(&r->value) + hsize;
    return 0;
}

PyDoc_STRVAR(encode_v2_doc,
"encode_v2(timestamps, keys, values, headers, first_timestamp, first_offset_delta) -> tuple\n\n"
"The v2 records area of len(timestamps) records, byte for byte what as many\n"
"MemoryRecordsBuilder.append calls write. keys/values: bytes, bytearray or None; headers: None\n"
"or per record None or a list/tuple of Header or (str, bytes|None) tuples. first_timestamp:\n"
"the batch's base timestamp (None: the first record's); record i gets offset delta\n"
"first_offset_delta + i. Returns (records_bytes, max_timestamp, index_of_max_timestamp) where\n"
"the max is over timestamps > -1 (with none: (-1, -1)) and its index is the first record having\n"
"it. A record this cannot encode exactly as the Python append would, or that the Python append\n"
"rejects, raises ValueError(message, record_index) and nothing is returned.");

static PyObject *encode_v2(PyObject *self, PyObject *args)
{
    PyObject *ts_obj, *keys_obj, *values_obj, *headers_obj, *first_ts_obj, *first_delta_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO:encode_v2", &ts_obj, &keys_obj, &values_obj, &headers_obj,
                          &first_ts_obj, &first_delta_obj))
        return NULL;
    EncArgs a = {NULL, NULL, NULL, NULL, 0, 0, 0};
    PyObject *out = NULL, *result = NULL;
    if ((a.ts = PySequence_Fast(ts_obj, "encode_v2: timestamps must be a sequence")) == NULL ||
        (a.keys = PySequence_Fast(keys_obj, "encode_v2: keys must be a sequence")) == NULL ||
        (a.values = PySequence_Fast(values_obj, "encode_v2: values must be a sequence")) == NULL)
        goto done;
    if (headers_obj != Py_None &&
        (a.headers = PySequence_Fast(headers_obj, "encode_v2: headers must be a sequence or None")) == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(a.ts);
    if (PySequence_Fast_GET_SIZE(a.keys) != n || PySequence_Fast_GET_SIZE(a.values) != n ||
        (a.headers != NULL && PySequence_Fast_GET_SIZE(a.headers) != n)) {
        PyErr_SetString(PyExc_ValueError, "encode_v2: the sequences differ in length");
        goto done;
    }
    if (a.headers != NULL && load_header_type() < 0)
        goto done;
    /* The builder's state, refused (at the first record) rather than rejected when it does not
     * fit a long: the Python path then decides. */
    if (first_ts_obj != Py_None) {
        if (long_of(first_ts_obj, &a.first_ts, 0, "the first timestamp") < 0)
            goto done;
        a.have_first_ts = 1;
    }
    if (long_of(first_delta_obj, &a.first_delta, 0, "the first offset delta") < 0)
        goto done;
    int have_first_ts = a.have_first_ts;
    int64_t first_ts = a.first_ts;

    /* Pass 1: check every record and size the area. */
    Py_ssize_t total = 0, max_index = -1;
    int64_t max_ts = -1;
    EncRec r;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (enc_record(&a, i, &r) < 0)
            goto done;
        Py_ssize_t rec = zz_size(zigzag64(r.body)) + r.body;
        if (rec > PY_SSIZE_T_MAX - total) {
            PyErr_NoMemory();
            goto done;
        }
        total += rec;
        if (r.ts > max_ts) { /* strictly greater: the first record with the max, as append keeps */
            max_ts = r.ts;
            max_index = i;
        }
    }

    /* Pass 2: write. */
    a.have_first_ts = have_first_ts;
    a.first_ts = first_ts;
    if ((out = PyBytes_FromStringAndSize(NULL, total)) == NULL)
        goto done;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out), *end = p + total;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (enc_record(&a, i, &r) < 0)
            goto done;
        if (zz_size(zigzag64(r.body)) + r.body > end - p)
            goto changed;
        p = put_zz(p, zigzag64(r.body));
        uint8_t *body = p;
        *p++ = 0; /* attributes */
        p = put_zz(p, r.ts_zz);
        p = put_zz(p, r.od_zz);
        p = put_span(p, &r.key);
        p = put_span(p, &r.value);
        if (r.headers == NULL) {
            *p++ = 0; /* header count */
        } else if (headers_size(r.headers, r.header_count, i, &p) < 0) {
            goto done;
        }
        if (p - body != r.body)
            goto changed;
    }
    if (p != end)
        goto changed;
    result = Py_BuildValue("(OLn)", out, (long long)max_ts, max_index);
    goto done;
changed:
    PyErr_SetString(PyExc_RuntimeError, "encode_v2: the records changed while they were encoded");
done:
    Py_XDECREF(out);
    Py_XDECREF(a.ts);
    Py_XDECREF(a.keys);
    Py_XDECREF(a.values);
    Py_XDECREF(a.headers);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * Module
 * ------------------------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------------------------
 * murmur2: the Java producer's key hash, per keyed record of a bulk write
 * ------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(murmur2_doc,
"murmur2(key) -> int\n\n"
"Kafka's Utils.murmur2 of the key bytes, as a signed 32-bit int (storage/partitioner.py has the\n"
"Python version this must equal).");

static PyObject *murmur2(PyObject *self, PyObject *arg)
{
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *d = (const uint8_t *)buf.buf;
    const uint32_t m = 0x5bd1e995u;
    /* Java: int length; int h = seed ^ length (lengths beyond 2^31 cannot be keys) */
    uint32_t h = 0x9747b28cu ^ (uint32_t)buf.len;
    Py_ssize_t words = buf.len / 4;
    for (Py_ssize_t i = 0; i < words; i++) {
        const uint8_t *p = d + 4 * i;
        uint32_t k = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *tail = d + 4 * words;
    switch (buf.len & 3) { /* Java's switch falls through 3 -> 2 -> 1 */
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    PyBuffer_Release(&buf);
    return PyLong_FromLong((int32_t)h);
}

static PyMethodDef module_methods[] = {
    {"decode_v2", decode_v2, METH_VARARGS, decode_v2_doc},
    {"summarize_v2", summarize_v2, METH_VARARGS, summarize_v2_doc},
    {"encode_v2", encode_v2, METH_VARARGS, encode_v2_doc},
    {"murmur2", murmur2, METH_O, murmur2_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkalog.records._native",
    .m_doc = "The magic-v2 record walk, and record encoding, in C (see records/native.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&AccType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&AccType);
    if (PyModule_AddObject(m, "ColumnAccumulator", (PyObject *)&AccType) < 0) {
        Py_DECREF(&AccType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
