/*
 * _walk.h: the magic-v2 record walk shared by the C modules (_native.c, _compact.c).
 *
 * Errors raised as ValueError(message, record_index), zig-zag varints, one record's fields, and
 * the bounds of a records area -- exactly the rules records/default_record.py applies (see the
 * comment at the top of _native.c).  Everything is static: each module compiles its own copy.
 */
#ifndef KAFKALOG_WALK_H
#define KAFKALOG_WALK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The smallest possible record: seven one-byte fields (length, attributes, timestamp delta,
 * offset delta, key length, value length, header count). */
#define MIN_RECORD_BYTES 7

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */

enum {
    E_EOF = 1,
    E_VARINT_LONG,
    E_VARLONG_LONG,
    E_RECORD_SIZE,
    E_HEADER_COUNT_NEGATIVE,
    E_HEADER_COUNT_TOO_BIG,
    E_HEADER_KEY_NEGATIVE,
    E_TRAILING,
    E_PYTHON, /* a Python exception is already set (MemoryError, ...) */
};

typedef struct {
    int code;
    long long a, b;
} Err;

static void raise_err(const Err *e, Py_ssize_t index)
{
    PyObject *msg = NULL;
    switch (e->code) {
    case E_EOF:
        msg = PyUnicode_FromString("Incorrect declared batch size, premature EOF reached");
        break;
    case E_VARINT_LONG:
        msg = PyUnicode_FromFormat("Varint is too long (more than 5 bytes) at position %lld", e->a);
        break;
    case E_VARLONG_LONG:
        msg = PyUnicode_FromFormat("Varlong is too long (more than 10 bytes) at position %lld", e->a);
        break;
    case E_RECORD_SIZE:
        msg = PyUnicode_FromFormat(
            "Invalid record size: the record ends at byte %lld of the records data, but its length "
            "field says byte %lld", e->a, e->b);
        break;
    case E_HEADER_COUNT_NEGATIVE:
        msg = PyUnicode_FromFormat("Found invalid number of record headers %lld", e->a);
        break;
    case E_HEADER_COUNT_TOO_BIG:
        msg = PyUnicode_FromFormat(
            "Found invalid number of record headers. %lld is larger than the remaining size of the "
            "buffer", e->a);
        break;
    case E_HEADER_KEY_NEGATIVE:
        msg = PyUnicode_FromFormat("Invalid negative header key size %lld", e->a);
        break;
    case E_TRAILING:
        msg = PyUnicode_FromFormat(
            "Incorrect declared batch size, records still remaining in file ({where}: %lld bytes "
            "after %lld records)", e->a, e->b);
        index = -1;
        break;
    default:
        return; /* E_PYTHON: already set */
    }
    if (msg == NULL)
        return;
    PyObject *args = Py_BuildValue("(Nn)", msg, index);
    if (args != NULL) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Varints (zig-zag), exactly as records/varint.py reads them
 * ------------------------------------------------------------------------------------------- */

static inline int read_varint(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, int32_t *out, Err *e)
{
    Py_ssize_t p = *pos;
    if (p >= end) {
        e->code = E_EOF;
        return -1;
    }
    uint32_t b = d[p++];
    if (b < 0x80) {
        *out = (int32_t)((b >> 1) ^ (uint32_t)-(int32_t)(b & 1));
        *pos = p;
        return 0;
    }
    uint32_t result = b & 0x7F;
    int shift = 7;
    for (;;) {
        if (p >= end) {
            e->code = E_EOF;
            return -1;
        }
        b = d[p++];
        result |= (b & 0x7F) << shift; /* bits past 32 fall off, like the Python mask */
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 28) {
            e->code = E_VARINT_LONG;
            e->a = p - 5;
            return -1;
        }
    }
    *out = (int32_t)((result >> 1) ^ (uint32_t)-(int32_t)(result & 1));
    *pos = p;
    return 0;
}

static inline int read_varlong(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, int64_t *out, Err *e)
{
    Py_ssize_t p = *pos;
    if (p >= end) {
        e->code = E_EOF;
        return -1;
    }
    uint64_t b = d[p++];
    if (b < 0x80) {
        *out = (int64_t)((b >> 1) ^ (uint64_t)-(int64_t)(b & 1));
        *pos = p;
        return 0;
    }
    uint64_t result = b & 0x7F;
    int shift = 7;
    for (;;) {
        if (p >= end) {
            e->code = E_EOF;
            return -1;
        }
        b = d[p++];
        result |= (b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 63) {
            e->code = E_VARLONG_LONG;
            e->a = p - 10;
            return -1;
        }
    }
    *out = (int64_t)((result >> 1) ^ (uint64_t)-(int64_t)(result & 1));
    *pos = p;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * One record
 * ------------------------------------------------------------------------------------------- */

typedef struct {
    int64_t ts_delta;
    int32_t offset_delta;
    Py_ssize_t key_pos;
    int32_t key_len; /* < 0: null key */
    Py_ssize_t value_pos;
    int32_t value_len; /* < 0: null value */
    int32_t header_count;
    Py_ssize_t headers_pos; /* first header, after the count */
} Rec;

/* A byte string of `len` bytes at *pos (len < 0: null); advances *pos.  Like the Python walk's
 * slices, this may step past `end`: the next read, or the record's end check, says what is
 * wrong, and parse_record never accepts a record that ends past `end`, so nothing outside the
 * buffer is ever copied. */
static inline void skip_bytes(Py_ssize_t *pos, int32_t len)
{
    if (len > 0)
        *pos += len;
}

/* Header walk shared by validation and copying: (key_pos, key_len, value_pos, value_len). */
static inline int next_header(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, Py_ssize_t *kp,
                              int32_t *kl, Py_ssize_t *vp, int32_t *vl, Err *e)
{
    if (read_varint(d, end, pos, kl, e) < 0)
        return -1;
    if (*kl < 0) {
        e->code = E_HEADER_KEY_NEGATIVE;
        e->a = *kl;
        return -1;
    }
    *kp = *pos;
    skip_bytes(pos, *kl);
    if (read_varint(d, end, pos, vl, e) < 0)
        return -1;
    *vp = *pos;
    skip_bytes(pos, *vl);
    return 0;
}

/* Inlined even where the compiler would rather call (it kept parse_record a call in _native.c). */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* A varint of one to three bytes at q (a zig-zag value within +-2^20: every length, offset delta
 * and key or value size of a batch of up to a million records, and timestamp deltas up to about
 * 17 minutes), advancing q; anything longer goes to `slow`. */
#define SHORT_VARINT(q, out, slow)                                          \
    do {                                                                    \
        uint32_t b_ = (q)[0];                                               \
        if (b_ < 0x80) {                                                    \
            (q) += 1;                                                       \
        } else {                                                            \
            uint32_t c_ = (q)[1];                                           \
            if (c_ < 0x80) {                                                \
                b_ = (b_ & 0x7F) | c_ << 7;                                 \
                (q) += 2;                                                   \
            } else {                                                        \
                uint32_t t_ = (q)[2];                                       \
                if (t_ >= 0x80)                                             \
                    goto slow;                                              \
                b_ = (b_ & 0x7F) | (c_ & 0x7F) << 7 | t_ << 14;             \
                (q) += 3;                                                   \
            }                                                               \
        }                                                                   \
        (out) = (int32_t)((b_ >> 1) ^ (uint32_t) - (int32_t)(b_ & 1));      \
    } while (0)

/* The common record, whole in the buffer with room to spare: short varints, no headers.  No end
 * check per byte (a short varint read from within the record stays inside the buffer); on anything
 * else it answers 0 and parse_record walks the record the careful way, which gives the errors. */
ALWAYS_INLINE int parse_short_record(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, Rec *r)
{
    const uint8_t *q = d + *pos, *rec_end;
    int32_t length, offset_delta, key_len, value_len, ts;
    if (end - *pos < 19) /* the length's three bytes and the margin below */
        goto slow;
    SHORT_VARINT(q, length, slow);
    /* 16 bytes past the record stay in the buffer: a short varint read at its end cannot leave it */
    if (length < 6 || length > end - (q - d) - 16)
        goto slow;
    rec_end = q + length;
    q += 1; /* attributes */
    SHORT_VARINT(q, ts, slow);
    SHORT_VARINT(q, offset_delta, slow);
    SHORT_VARINT(q, key_len, slow);
    Py_ssize_t key_pos = q - d;
    if (key_len > rec_end - q) /* a key or value past the record's end would take q out of the buffer */
        goto slow;
    q += key_len > 0 ? key_len : 0;
    SHORT_VARINT(q, value_len, slow);
    Py_ssize_t value_pos = q - d;
    if (value_len > rec_end - q)
        goto slow;
    q += value_len > 0 ? value_len : 0;
    if (q + 1 != rec_end || *q != 0) /* a header count of zero ends the record */
        goto slow;
    r->ts_delta = ts;
    r->offset_delta = offset_delta;
    r->key_pos = key_pos;
    r->key_len = key_len;
    r->value_pos = value_pos;
    r->value_len = value_len;
    r->header_count = 0;
    r->headers_pos = rec_end - d;
    *pos = rec_end - d;
    return 1;
slow:
    return 0;
}

static int parse_any_record(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, Rec *r, Err *e)
{
    int32_t length;
    if (read_varint(d, end, pos, &length, e) < 0)
        return -1;
    Py_ssize_t rec_end = *pos + length;
    *pos += 1; /* attributes: unused by any record-level rule */
    if (read_varlong(d, end, pos, &r->ts_delta, e) < 0)
        return -1;
    if (read_varint(d, end, pos, &r->offset_delta, e) < 0)
        return -1;
    if (read_varint(d, end, pos, &r->key_len, e) < 0)
        return -1;
    r->key_pos = *pos;
    skip_bytes(pos, r->key_len);
    if (read_varint(d, end, pos, &r->value_len, e) < 0)
        return -1;
    r->value_pos = *pos;
    skip_bytes(pos, r->value_len);
    if (read_varint(d, end, pos, &r->header_count, e) < 0)
        return -1;
    r->headers_pos = *pos;
    if (r->header_count < 0) {
        e->code = E_HEADER_COUNT_NEGATIVE;
        e->a = r->header_count;
        return -1;
    }
    if (r->header_count > end - *pos) {
        e->code = E_HEADER_COUNT_TOO_BIG;
        e->a = r->header_count;
        return -1;
    }
    for (int32_t h = 0; h < r->header_count; h++) {
        Py_ssize_t kp, vp;
        int32_t kl, vl;
        if (next_header(d, end, pos, &kp, &kl, &vp, &vl, e) < 0)
            return -1;
    }
    if (*pos != rec_end) {
        e->code = E_RECORD_SIZE;
        e->a = *pos;
        e->b = rec_end;
        return -1;
    }
    if (*pos > end) {
        e->code = E_EOF;
        return -1;
    }
    return 0;
}

/* One record at *pos, advancing it: the short way inlined where the walks call it, the careful
 * way (a call) for the others. */
ALWAYS_INLINE int parse_record(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, Rec *r, Err *e)
{
    if (parse_short_record(d, end, pos, r))
        return 0;
    return parse_any_record(d, end, pos, r, e);
}

static inline int check_area_end(Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count, Err *e)
{
    if (pos != end) {
        e->code = E_TRAILING;
        e->a = end - pos;
        e->b = count;
        return -1;
    }
    return 0;
}

/* Java's long arithmetic: wrap around instead of overflowing (undefined in C). */
static inline int64_t add64(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* The records area [pos, end) of `buf`, checked against the caller's arguments. */
static int area_bounds(Py_buffer *buf, Py_ssize_t pos, Py_ssize_t count, Py_ssize_t *capacity)
{
    if (pos < 0 || pos > buf->len) {
        PyErr_Format(PyExc_IndexError, "records area position %zd is outside a buffer of %zd bytes", pos,
                     buf->len);
        return -1;
    }
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "negative record count %zd", count);
        return -1;
    }
    /* Never size anything by the untrusted count: an area of n bytes holds at most n / 7 records
     * (with more, the walk fails with premature EOF before reaching them). */
    Py_ssize_t most = (buf->len - pos) / MIN_RECORD_BYTES;
    *capacity = count < most ? count : most;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * decode_v2: Python lists, for RecordColumns
 * ------------------------------------------------------------------------------------------- */

static PyObject *bytes_or_none(const uint8_t *d, Py_ssize_t pos, int32_t len)
{
    if (len < 0)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)d + pos, len);
}

static PyObject *headers_tuple(const uint8_t *d, Py_ssize_t end, const Rec *r)
{
    /* Already validated by parse_record, so the walk cannot fail on structure. */
    PyObject *out = PyTuple_New(r->header_count);
    if (out == NULL)
        return NULL;
    Py_ssize_t pos = r->headers_pos;
    Err e = {0, 0, 0};
    for (int32_t h = 0; h < r->header_count; h++) {
        Py_ssize_t kp, vp;
        int32_t kl, vl;
        if (next_header(d, end, &pos, &kp, &kl, &vp, &vl, &e) < 0) {
            raise_err(&e, -1);
            Py_DECREF(out);
            return NULL;
        }
        /* Java decodes header keys leniently (malformed UTF-8 becomes U+FFFD); so do we. */
        PyObject *key = PyUnicode_DecodeUTF8((const char *)d + kp, kl, "replace");
        PyObject *value = key ? bytes_or_none(d, vp, vl) : NULL;
        if (value == NULL) {
            Py_XDECREF(key);
            Py_DECREF(out);
            return NULL;
        }
        PyObject *pair = PyTuple_Pack(2, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, h, pair);
    }
    return out;
}

#endif /* KAFKALOG_WALK_H */
