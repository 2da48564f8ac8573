/*
 * kafkalog.records._compact: the byte work of log compaction, in C (see storage/cleaner/).
 *
 * The cleaner reads every record twice: once to map each key to its latest offset, once to copy
 * what stays.  In Python that is a few microseconds per record; here it is a walk over the
 * segment's bytes with no Python object per record or per batch.  Three pieces:
 *
 *   siphash128      the key hash of the offset map: SipHash-1-3 with its 128-bit output, keyed
 *                   by a random secret per map (Aumasson & Bernstein, written from the paper).
 *   the table       one caller-owned array of `slots` entries of three 64-bit words (the hash's
 *                   two halves, the offset), so that a probe touches one cache line; an entry
 *                   whose halves are both 0 is empty; a key's first slot is the high 64 bits of
 *                   first half * slots ("multiply-shift"), collisions probe the next slot,
 *                   wrapping.  storage/cleaner/offset_map.py probes the same array in Python and
 *                   the parity tests compare the tables.
 *   the walkers     offset_map_put_v2 / offset_map_retain_v2 apply the cleaner's rules to the
 *                   records area of one batch (any codec: Python decompresses first), and
 *                   offset_map_put_batches / offset_map_filter_batches walk a buffer of whole
 *                   batches from a segment, handling the plain ones (magic 2, uncompressed, not
 *                   transactional, not control) end to end -- CRC check, records, and for the
 *                   second pass the cleaned batches themselves -- and stopping at the first batch
 *                   that needs the Python path (storage/cleaner/cleaner.py), which holds every
 *                   rule.  A batch the C walk refuses (bad CRC, malformed record, anything
 *                   unusual) is left untouched for the Python path, which raises the right error.
 *
 * The cleaned batches are byte for byte what records/memory.py's MemoryRecordsBuilder writes for
 * the same kept records (the parity tests compare whole cleaned segments).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_walk.h"
#include "_compact_api.h"

/* ---------------------------------------------------------------------------------------------
 * Little/big-endian loads and stores
 * ------------------------------------------------------------------------------------------- */

static inline uint64_t load_le64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8); /* one load */
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
#endif
}

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static inline uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint16_t load_be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void store_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void store_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* ---------------------------------------------------------------------------------------------
 * SipHash-1-3, 128-bit output
 *
 * One compression round per 8-byte word and three finalization rounds: the variant CPython and
 * Rust hash their tables with, keyed so that hash-flooding needs the key.  Keys are short (most
 * fit in one or two words), so the finalization is most of the cost: SipHash-2-4's eight rounds
 * of it made the hash a third of the map pass.  The 64-bit output (wide = 0) is there for the
 * reference vectors.
 * ------------------------------------------------------------------------------------------- */

static inline uint64_t rotl64(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                                                     \
    do {                                                                                             \
        v0 += v1;                                                                                    \
        v1 = rotl64(v1, 13);                                                                         \
        v1 ^= v0;                                                                                    \
        v0 = rotl64(v0, 32);                                                                         \
        v2 += v3;                                                                                    \
        v3 = rotl64(v3, 16);                                                                         \
        v3 ^= v2;                                                                                    \
        v0 += v3;                                                                                    \
        v3 = rotl64(v3, 21);                                                                         \
        v3 ^= v0;                                                                                    \
        v2 += v1;                                                                                    \
        v1 = rotl64(v1, 17);                                                                         \
        v1 ^= v2;                                                                                    \
        v2 = rotl64(v2, 32);                                                                         \
    } while (0)

/* The output's 64-bit words (first = bytes 0-7 read little-endian; second only when wide). */
static inline void siphash13(const uint8_t *d, size_t n, uint64_t k0, uint64_t k1, int wide, uint64_t *first,
                             uint64_t *second)
{
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
    uint64_t v1 = k1 ^ 0x646f72616e646f6dULL ^ (wide ? 0xee : 0);
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
    uint64_t v3 = k1 ^ 0x7465646279746573ULL;
    size_t full = n & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t m = load_le64(d + i);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)(n & 0xff) << 56;
    for (size_t i = 0; i < (n & 7); i++)
        b |= (uint64_t)d[full + i] << (8 * i);
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= wide ? 0xee : 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    *first = v0 ^ v1 ^ v2 ^ v3;
    if (!wide)
        return;
    v1 ^= 0xdd;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    *second = v0 ^ v1 ^ v2 ^ v3;
}

static inline void siphash128(const uint8_t *d, size_t n, uint64_t k0, uint64_t k1, uint64_t *first,
                              uint64_t *second)
{
    siphash13(d, n, k0, k1, 1, first, second);
}

/* Eight keys at once: SipHash-1-3-128 in the eight 64-bit lanes of AVX-512 registers, where the
 * CPU has them (checked once, at import).  A lane whose key has run out of whole blocks keeps its
 * state while the others go on (a masked blend), so keys of any lengths share a call; the result
 * is siphash128's, lane by lane (tested against it).  Walking and hashing 1 M records of 9-byte
 * keys (offset_map_hash_batches) took 27-28 ms with it against 34 ms and more without. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_SIPHASH_X8 1

#define SIPROUND_X8                                                                                  \
    do {                                                                                             \
        v0 = _mm512_add_epi64(v0, v1);                                                               \
        v1 = _mm512_rol_epi64(v1, 13);                                                               \
        v1 = _mm512_xor_si512(v1, v0);                                                               \
        v0 = _mm512_rol_epi64(v0, 32);                                                               \
        v2 = _mm512_add_epi64(v2, v3);                                                               \
        v3 = _mm512_rol_epi64(v3, 16);                                                               \
        v3 = _mm512_xor_si512(v3, v2);                                                               \
        v0 = _mm512_add_epi64(v0, v3);                                                               \
        v3 = _mm512_rol_epi64(v3, 21);                                                               \
        v3 = _mm512_xor_si512(v3, v0);                                                               \
        v2 = _mm512_add_epi64(v2, v1);                                                               \
        v1 = _mm512_rol_epi64(v1, 17);                                                               \
        v1 = _mm512_xor_si512(v1, v2);                                                               \
        v2 = _mm512_rol_epi64(v2, 32);                                                               \
    } while (0)

static int have_x8;

__attribute__((target("avx512f"))) static void siphash128_x8(const uint8_t *const *keys, const size_t *lens,
                                                             uint64_t k0, uint64_t k1, uint64_t *first,
                                                             uint64_t *second)
{
    __m512i v0 = _mm512_set1_epi64((long long)(k0 ^ 0x736f6d6570736575ULL));
    __m512i v1 = _mm512_set1_epi64((long long)(k1 ^ 0x646f72616e646f6dULL ^ 0xee));
    __m512i v2 = _mm512_set1_epi64((long long)(k0 ^ 0x6c7967656e657261ULL));
    __m512i v3 = _mm512_set1_epi64((long long)(k1 ^ 0x7465646279746573ULL));
    size_t most = 0;
    for (int i = 0; i < 8; i++)
        if (lens[i] >> 3 > most)
            most = lens[i] >> 3;
    uint64_t w[8];
    for (size_t j = 0; j < most; j++) {
        __mmask8 active = 0;
        for (int i = 0; i < 8; i++) {
            if (j < lens[i] >> 3) {
                w[i] = load_le64(keys[i] + 8 * j);
                active |= (__mmask8)(1u << i);
            } else {
                w[i] = 0;
            }
        }
        __m512i m = _mm512_loadu_si512((const void *)w);
        __m512i s0 = v0, s1 = v1, s2 = v2, s3 = v3;
        v3 = _mm512_xor_si512(v3, m);
        SIPROUND_X8;
        v0 = _mm512_xor_si512(v0, m);
        v0 = _mm512_mask_blend_epi64(active, s0, v0);
        v1 = _mm512_mask_blend_epi64(active, s1, v1);
        v2 = _mm512_mask_blend_epi64(active, s2, v2);
        v3 = _mm512_mask_blend_epi64(active, s3, v3);
    }
    for (int i = 0; i < 8; i++) {
        size_t n = lens[i], full = n & ~(size_t)7;
        uint64_t b = (uint64_t)(n & 0xff) << 56;
        for (size_t k = 0; k < (n & 7); k++)
            b |= (uint64_t)keys[i][full + k] << (8 * k);
        w[i] = b;
    }
    __m512i m = _mm512_loadu_si512((const void *)w);
    v3 = _mm512_xor_si512(v3, m);
    SIPROUND_X8;
    v0 = _mm512_xor_si512(v0, m);
    v2 = _mm512_xor_si512(v2, _mm512_set1_epi64(0xee));
    SIPROUND_X8;
    SIPROUND_X8;
    SIPROUND_X8;
    _mm512_storeu_si512((void *)first, _mm512_xor_si512(_mm512_xor_si512(v0, v1), _mm512_xor_si512(v2, v3)));
    v1 = _mm512_xor_si512(v1, _mm512_set1_epi64(0xdd));
    SIPROUND_X8;
    SIPROUND_X8;
    SIPROUND_X8;
    _mm512_storeu_si512((void *)second, _mm512_xor_si512(_mm512_xor_si512(v0, v1), _mm512_xor_si512(v2, v3)));
}
#endif

/* siphash128 of n keys: eight at a time where the CPU allows, the rest one by one. */
static void hash_keys(const uint8_t *const *keys, const size_t *lens, Py_ssize_t n, uint64_t k0, uint64_t k1,
                      uint64_t *first, uint64_t *second)
{
    Py_ssize_t i = 0;
#ifdef HAVE_SIPHASH_X8
    if (have_x8)
        for (; i + 8 <= n; i += 8)
            siphash128_x8(keys + i, lens + i, k0, k1, first + i, second + i);
#endif
    for (; i < n; i++)
        siphash128(keys[i], lens[i], k0, k1, &first[i], &second[i]);
}

PyDoc_STRVAR(siphash128_many_doc,
"siphash128_many(keys, k0, k1) -> [(first, second), ...]\n\n"
"siphash13(key, k0, k1) of every bytes object in the list, hashed as the map pass hashes keys\n"
"(eight at a time where the CPU allows): for tests.");

static PyObject *py_siphash128_many(PyObject *self, PyObject *args)
{
    PyObject *list;
    unsigned long long k0, k1;
    if (!PyArg_ParseTuple(args, "O!KK:siphash128_many", &PyList_Type, &list, &k0, &k1))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    const uint8_t **keys = PyMem_Malloc((size_t)(n + 1) * sizeof(const uint8_t *));
    size_t *lens = PyMem_Malloc((size_t)(n + 1) * sizeof(size_t));
    uint64_t *out = PyMem_Malloc((size_t)(n + 1) * 2 * sizeof(uint64_t));
    PyObject *result = NULL;
    if (keys == NULL || lens == NULL || out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keys must be bytes");
            goto done;
        }
        keys[i] = (const uint8_t *)PyBytes_AS_STRING(key);
        lens[i] = (size_t)PyBytes_GET_SIZE(key);
    }
    hash_keys(keys, lens, n, k0, k1, out, out + n);
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *pair = Py_BuildValue("(KK)", (unsigned long long)out[i], (unsigned long long)out[n + i]);
        if (pair == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, pair);
    }
done:
    PyMem_Free((void *)keys);
    PyMem_Free(lens);
    PyMem_Free(out);
    return result;
}

PyDoc_STRVAR(siphash13_doc,
"siphash13(data, k0, k1, wide=True) -> (first, second)\n\n"
"SipHash-1-3 of data keyed by the 64-bit integers k0 and k1 (the key's two halves read\n"
"little-endian): the 128-bit output's two halves read little-endian, or with wide=False the\n"
"64-bit output and 0.");

static PyObject *py_siphash13(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long k0, k1;
    int wide = 1;
    if (!PyArg_ParseTuple(args, "y*KK|p:siphash13", &buf, &k0, &k1, &wide))
        return NULL;
    uint64_t a, b = 0;
    siphash13((const uint8_t *)buf.buf, (size_t)buf.len, k0, k1, wide, &a, &b);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(KK)", (unsigned long long)a, (unsigned long long)b);
}

/* ---------------------------------------------------------------------------------------------
 * CRC-32C (Castagnoli), the checksum of v2 batches: SSE 4.2 where the CPU has it, else
 * slicing-by-8 tables
 * ------------------------------------------------------------------------------------------- */

static uint32_t crc_table[8][256];

static void crc32c_init_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc32c_soft(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    while (n >= 8) {
        uint64_t w = load_le64(p) ^ c;
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff]
            ^ crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff]
            ^ crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_HW_CRC 1

/* The crc32 instruction takes 3 cycles but can start one every cycle: long inputs are cut into
 * three streams of CRC_LANE bytes checksummed side by side, then joined.  Joining uses that the CRC
 * register is linear: running it over A then B is running it over A then over |B| zero bytes
 * (`crc_shift`, tabled per byte of the register), XORed with B's CRC from a zero register. */
#define CRC_LANE 512
static uint32_t crc_shift_table[4][256];

__attribute__((target("sse4.2"))) static uint32_t crc_zeros(uint32_t c, size_t n)
{
    uint64_t r = c;
    for (size_t i = 0; i < n / 8; i++)
        r = _mm_crc32_u64(r, 0);
    return (uint32_t)r;
}

__attribute__((target("sse4.2"))) static void crc_shift_init(void)
{
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            crc_shift_table[k][b] = crc_zeros(b << (8 * k), CRC_LANE);
}

static inline uint32_t crc_shift(uint32_t c)
{
    return crc_shift_table[0][c & 0xff] ^ crc_shift_table[1][(c >> 8) & 0xff] ^ crc_shift_table[2][(c >> 16) & 0xff]
           ^ crc_shift_table[3][c >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hard(const uint8_t *p, size_t n)
{
    uint64_t c = 0xffffffffu;
    while (n >= 3 * CRC_LANE) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < CRC_LANE; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + CRC_LANE + i, 8);
            memcpy(&w2, p + 2 * CRC_LANE + i, 8);
            c = _mm_crc32_u64(c, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c = crc_shift(crc_shift((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * CRC_LANE;
        n -= 3 * CRC_LANE;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}
#endif

static int hw_crc;

static inline uint32_t crc32c(const uint8_t *p, size_t n)
{
#ifdef HAVE_HW_CRC
    if (hw_crc)
        return crc32c_hard(p, n);
#endif
    return crc32c_soft(p, n);
}

PyDoc_STRVAR(crc32c_doc, "crc32c(data) -> int\n\nThe CRC-32C of data (what the batch walkers check).");

static PyObject *py_crc32c(PyObject *self, PyObject *arg)
{
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = crc32c((const uint8_t *)buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(c);
}

/* ---------------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------------- */

/* Table: see _compact_api.h. */
static int table_open(PyObject *entries, unsigned long long k0, unsigned long long k1, Table *t)
{
    if (PyObject_GetBuffer(entries, &t->view, PyBUF_WRITABLE) < 0)
        return -1;
    t->e = (uint64_t *)t->view.buf;
    t->slots = t->view.len / 24;
    t->k0 = k0;
    t->k1 = k1;
    if (t->slots < 1 || t->view.len % 24) {
        PyErr_SetString(PyExc_ValueError, "the offset map table must hold whole 24-byte entries");
        PyBuffer_Release(&t->view);
        return -1;
    }
    return 0;
}

static void table_close(Table *t)
{
    PyBuffer_Release(&t->view);
}

/* The high 64 bits of h * slots: a slot in [0, slots) without a division. */
static inline Py_ssize_t first_slot(uint64_t h, Py_ssize_t slots)
{
#ifdef __SIZEOF_INT128__
    return (Py_ssize_t)(((unsigned __int128)h * (uint64_t)slots) >> 64);
#else
    uint64_t s = (uint64_t)slots;
    uint64_t h_lo = h & 0xffffffffu, h_hi = h >> 32, s_lo = s & 0xffffffffu, s_hi = s >> 32;
    uint64_t mid1 = h_hi * s_lo, mid2 = h_lo * s_hi;
    uint64_t carry = ((h_lo * s_lo >> 32) + (mid1 & 0xffffffffu) + (mid2 & 0xffffffffu)) >> 32;
    return (Py_ssize_t)(h_hi * s_hi + (mid1 >> 32) + (mid2 >> 32) + carry);
#endif
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* A key's hash and first slot.  Probing is split in two so that the walks can hash a group of
 * records and prefetch their slots before probing any: the table is far larger than the caches,
 * and waiting for one slot at a time was most of the cost. */
typedef struct {
    uint64_t h, l;
    Py_ssize_t slot;
} Probe;

/* A probe for a key already hashed: its first slot, prefetched. */
static inline void probe_hashed(const Table *t, uint64_t h, uint64_t l, Probe *p)
{
    *p = (Probe){h, l, first_slot(h, t->slots)};
    PREFETCH(t->e + 3 * p->slot);
}

static inline void probe_start(const Table *t, const uint8_t *key, Py_ssize_t len, Probe *p)
{
    uint64_t h, l;
    siphash128(key, (size_t)len, t->k0, t->k1, &h, &l);
    probe_hashed(t, h, l, p);
}

/* The slot holding the probed hash, or the empty slot where it would go. */
static inline Py_ssize_t probe_finish(const Table *t, const Probe *p, long long *probes)
{
    Py_ssize_t slot = p->slot;
    for (;;) {
        (*probes)++;
        const uint64_t *e = t->e + 3 * slot;
        if ((e[0] == p->h && e[1] == p->l) || (e[0] == 0 && e[1] == 0))
            return slot;
        if (++slot == t->slots)
            slot = 0;
    }
}

/* The offset mapped for the probed hash, or -1. */
static inline int64_t probe_get(const Table *t, const Probe *p, long long *probes)
{
    const uint64_t *e = t->e + 3 * probe_finish(t, p, probes);
    return (e[0] == 0 && e[1] == 0) ? -1 : (int64_t)e[2];
}

/* Map the probed hash to offset; entries counts the keys held. */
static inline void probe_put(Table *t, const Probe *p, int64_t offset, Py_ssize_t *entries, long long *probes)
{
    uint64_t *e = t->e + 3 * probe_finish(t, p, probes);
    if (e[0] == 0 && e[1] == 0) {
        e[0] = p->h;
        e[1] = p->l;
        (*entries)++;
    }
    e[2] = (uint64_t)offset;
}

/* The map built newest segment first (Cleaner's overlapped round): a segment's records are put in
 * offset order, but every segment newer than it is already mapped.  An entry holding a later
 * offset than the one put then belongs to a newer segment and stays; otherwise the new offset
 * replaces it.  Either way the entry ends as the key's latest offset over everything mapped, and
 * once a segment is done no later put changes any of its entries -- so it can be cleaned while
 * older ones are still being mapped.  The latest-offset bits (see "The latest offsets" below) are
 * kept as entries change, so they need no scan of the table: a put only ever clears a bit of the
 * segment being mapped. */
static inline void track_bit(const MapState *s, int64_t offset, int on)
{
    uint64_t i = (uint64_t)offset - (uint64_t)s->track_lo; /* wraps below lo: then i >= count */
    if (offset < s->track_lo || i >= (uint64_t)s->track_count)
        return;
    if (on)
        s->track_bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    else
        s->track_bits[i >> 3] &= (uint8_t)~(1u << (i & 7));
}

static inline void probe_put_newest(Table *t, const Probe *p, int64_t offset, Py_ssize_t *entries,
                                    long long *probes, const MapState *s)
{
    uint64_t *e = t->e + 3 * probe_finish(t, p, probes);
    if (e[0] == 0 && e[1] == 0) {
        e[0] = p->h;
        e[1] = p->l;
        (*entries)++;
    } else if ((int64_t)e[2] > offset) {
        return; /* a newer segment holds the key's latest record */
    } else {
        track_bit(s, (int64_t)e[2], 0);
    }
    e[2] = (uint64_t)offset;
    track_bit(s, offset, 1);
}

/* Records are hashed and their slots prefetched this many at a time. */
#define GROUP 32

/* ---------------------------------------------------------------------------------------------
 * The latest offsets: one bit per offset of the mapped range
 *
 * Once the map pass is done, every keyed record of the mapped range [lo, latest] has been put, so
 * the record rule's "not older than its key's mapped offset" is, there, "its offset is the offset
 * some entry holds" (entries hold distinct offsets; a hash collision keeps the later offset, as a
 * probe would find).  A bit per offset answers that without hashing the key or touching the table:
 * the cleaning pass then costs a walk, not a second round of hashing.
 * ------------------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *bits;
    int64_t lo, count; /* bit i is offset lo + i */
} Latest;

/* Whether the bits cover `offset`; then *is_latest says whether an entry holds it. */
static inline int latest_covers(const Latest *l, int64_t offset, int *is_latest)
{
    uint64_t i = (uint64_t)offset - (uint64_t)l->lo; /* no signed overflow, whatever the two are */
    if (offset < l->lo || i >= (uint64_t)l->count)
        return 0;
    *is_latest = (l->bits[i >> 3] >> (i & 7)) & 1;
    return 1;
}

PyDoc_STRVAR(offset_map_index_latest_doc,
"offset_map_index_latest(table, lo, bits) -> marked\n\n"
"Clear the writable buffer bits, then set bit i (of byte i // 8, least significant first) for\n"
"each entry of the table whose offset is lo + i; returns how many were set.");

static PyObject *offset_map_index_latest(PyObject *self, PyObject *args)
{
    PyObject *table;
    long long lo;
    Py_buffer bits;
    if (!PyArg_ParseTuple(args, "OLw*:offset_map_index_latest", &table, &lo, &bits))
        return NULL;
    Table t;
    if (table_open(table, 0, 0, &t) < 0) {
        PyBuffer_Release(&bits);
        return NULL;
    }
    uint8_t *b = (uint8_t *)bits.buf;
    uint64_t count = (uint64_t)bits.len * 8;
    long long marked = 0;
    Py_BEGIN_ALLOW_THREADS
    memset(b, 0, (size_t)bits.len);
    for (Py_ssize_t slot = 0; slot < t.slots; slot++) {
        const uint64_t *e = t.e + 3 * slot;
        uint64_t i = e[2] - (uint64_t)lo; /* wraps below lo: then i >= count */
        if ((e[0] | e[1]) != 0 && (int64_t)e[2] >= lo && i < count) {
            b[i >> 3] |= (uint8_t)(1u << (i & 7));
            marked++;
        }
    }
    Py_END_ALLOW_THREADS
    table_close(&t);
    PyBuffer_Release(&bits);
    return PyLong_FromLongLong(marked);
}

PyDoc_STRVAR(offset_map_zero_doc,
"offset_map_zero(table)\n\n"
"Zero the writable buffer table (every entry empty), without holding the GIL.");

static PyObject *offset_map_zero(PyObject *self, PyObject *table)
{
    Py_buffer view;
    if (PyObject_GetBuffer(table, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    memset(view.buf, 0, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* Why the record rule let a record go. */
typedef struct {
    long long superseded, tombstones, keyless, probes;
} Dropped;

/* Whether to probe a record's key before the rule can decide (keyed, within the mapped range). */
static inline int needs_probe(const Rec *r, int64_t offset, int64_t latest)
{
    return offset <= latest && r->key_len >= 0;
}

/* The cleaner's record rule (Kafka's shouldRetainRecord): a record past the mapped range stays;
 * otherwise it must be keyed, not older than its key's mapped offset (`found`, looked up when
 * needs_probe said so), and have a value unless deletes are no longer retained.  Counts why the
 * others go. */
static inline int retain_record(const Rec *r, int64_t offset, int64_t latest, int retain_deletes, int64_t found,
                                Dropped *dropped)
{
    if (offset > latest)
        return 1;
    if (r->key_len < 0) {
        dropped->keyless++;
        return 0;
    }
    if (offset < found) {
        dropped->superseded++;
        return 0;
    }
    if (r->value_len < 0 && !retain_deletes) {
        dropped->tombstones++;
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------------------------------------
 * One batch's records area: the map pass and the record rule (any codec)
 * ------------------------------------------------------------------------------------------- */

/* Put the keyed records of a records area with offset >= start_offset, stopping (as Kafka does)
 * at the first such record met once `entries` reaches max_entries.  Returns the records consumed
 * (count unless the map filled), or -1 with *e set and *bad_index the failing record; the
 * records before it are mapped. */
static Py_ssize_t put_area(Table *t, const uint8_t *d, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count,
                           int64_t base_offset, int64_t start_offset, Py_ssize_t max_entries, Py_ssize_t *entries,
                           int64_t *latest, long long *lookups, long long *probes, Py_ssize_t *bad_index, Err *e,
                           const MapState *newest)
{
    Py_ssize_t cap = (end - pos) / MIN_RECORD_BYTES;
    if (count < cap)
        cap = count;
    Probe group[GROUP];
    int64_t offsets[GROUP];
    Py_ssize_t indexes[GROUP];
    const uint8_t *keys[GROUP];
    size_t lens[GROUP];
    uint64_t hs[GROUP], ls[GROUP];
    Py_ssize_t i = 0;
    int failed = 0;
    while (i < count && !failed) {
        int n = 0;
        for (; i < count && n < GROUP; i++) {
            Rec r;
            /* parse first, so a damaged record reports its own error, as the Python walk does */
            if (parse_record(d, end, &pos, &r, e) < 0 || i >= cap) {
                if (i >= cap && e->code == 0)
                    e->code = E_EOF;
                *bad_index = i;
                failed = 1;
                break;
            }
            int64_t offset = add64(base_offset, r.offset_delta);
            if (r.key_len < 0 || offset < start_offset)
                continue;
            keys[n] = d + r.key_pos;
            lens[n] = (size_t)r.key_len;
            offsets[n] = offset;
            indexes[n++] = i;
        }
        hash_keys(keys, lens, n, t->k0, t->k1, hs, ls);
        for (int k = 0; k < n; k++)
            probe_hashed(t, hs[k], ls[k], &group[k]);
        /* Counters in locals: through the pointers, every store to the table would make the
         * compiler reload them. */
        Py_ssize_t held = *entries;
        long long probed = 0;
        int k = 0;
        if (newest == NULL)
            for (; k < n && held < max_entries; k++)
                probe_put(t, &group[k], offsets[k], &held, &probed);
        else
            for (; k < n && held < max_entries; k++)
                probe_put_newest(t, &group[k], offsets[k], &held, &probed, newest);
        *entries = held;
        *lookups += k;
        *probes += probed;
        if (k > 0)
            *latest = offsets[k - 1];
        if (k < n)
            return indexes[k];
    }
    if (failed)
        return -1;
    if (check_area_end(pos, end, count, e) < 0) {
        *bad_index = -1;
        return -1;
    }
    return count;
}

PyDoc_STRVAR(offset_map_put_v2_doc,
"offset_map_put_v2(data, pos, count, base_offset, table, k0, k1, start_offset, max_entries,\n"
"                  entries, latest) -> (consumed, entries, latest, lookups, probes)\n\n"
"Walk `count` records of data[pos:] (checked like decode_v2) and map each keyed record with\n"
"offset >= start_offset to its offset, stopping at the first such record met once `entries`\n"
"reaches max_entries (consumed is then its index; else count).");

static PyObject *offset_map_put_v2(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos, count, max_entries, entries;
    long long base_offset, start_offset, latest;
    unsigned long long k0, k1;
    PyObject *table;
    if (!PyArg_ParseTuple(args, "y*nnLOKKLnnL:offset_map_put_v2", &buf, &pos, &count, &base_offset, &table, &k0,
                          &k1, &start_offset, &max_entries, &entries, &latest))
        return NULL;
    PyObject *result = NULL;
    Table t;
    if (table_open(table, k0, k1, &t) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (max_entries > t.slots - 1)
        max_entries = t.slots - 1; /* one slot stays empty so that probing ends */
    Py_ssize_t cap;
    if (area_bounds(&buf, pos, count, &cap) < 0)
        goto done;
    Err e = {0, 0, 0};
    long long lookups = 0, probes = 0;
    int64_t last = latest;
    Py_ssize_t bad = 0;
    Py_ssize_t consumed = put_area(&t, (const uint8_t *)buf.buf, pos, buf.len, count, base_offset, start_offset,
                                   max_entries, &entries, &last, &lookups, &probes, &bad, &e, NULL);
    if (consumed < 0) {
        raise_err(&e, bad);
        goto done;
    }
    result = Py_BuildValue("(nnLLL)", consumed, entries, (long long)last, lookups, probes);
done:
    table_close(&t);
    PyBuffer_Release(&buf);
    return result;
}

PyDoc_STRVAR(offset_map_retain_v2_doc,
"offset_map_retain_v2(data, pos, count, base_offset, base_timestamp, log_append_time, table,\n"
"                     k0, k1, latest_offset, retain_deletes)\n"
"    -> (kept, superseded, tombstones, keyless, kept_tombstone)\n\n"
"The cleaner's record rule over `count` records of data[pos:]: a record stays if its offset is\n"
"past latest_offset, else if it is keyed, not older than its key's mapped offset, and has a value\n"
"or retain_deletes.  kept is None when every record stays, else a list of\n"
"(offset, timestamp, key, value, headers) of those that do (headers as decode_v2 gives them).\n"
"The counts say why the others went; kept_tombstone whether a kept record has a null value.");

static PyObject *offset_map_retain_v2(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t pos, count;
    long long base_offset, base_ts, latest;
    unsigned long long k0, k1;
    PyObject *lat_obj, *table;
    int retain_deletes;
    if (!PyArg_ParseTuple(args, "y*nnLLOOKKLp:offset_map_retain_v2", &buf, &pos, &count, &base_offset,
                          &base_ts, &lat_obj, &table, &k0, &k1, &latest, &retain_deletes))
        return NULL;
    PyObject *result = NULL, *kept = NULL;
    Table t;
    if (table_open(table, k0, k1, &t) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    Py_ssize_t cap;
    if (area_bounds(&buf, pos, count, &cap) < 0)
        goto done;
    int have_lat = lat_obj != Py_None;
    long long lat = 0;
    if (have_lat) {
        lat = PyLong_AsLongLong(lat_obj);
        if (lat == -1 && PyErr_Occurred())
            goto done;
    }
    kept = PyList_New(0);
    if (kept == NULL)
        goto done;
    const uint8_t *d = (const uint8_t *)buf.buf;
    Py_ssize_t end = buf.len;
    Err e = {0, 0, 0};
    Rec r;
    Dropped dropped = {0, 0, 0, 0};
    int kept_tombstone = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (parse_record(d, end, &pos, &r, &e) < 0 || i >= cap) { /* the record's own error first */
            if (i >= cap && e.code == 0)
                e.code = E_EOF;
            raise_err(&e, i);
            goto done;
        }
        int64_t offset = add64(base_offset, r.offset_delta);
        int64_t found = -1;
        if (needs_probe(&r, offset, latest)) {
            Probe p;
            probe_start(&t, d + r.key_pos, r.key_len, &p);
            found = probe_get(&t, &p, &dropped.probes);
        }
        if (!retain_record(&r, offset, latest, retain_deletes, found, &dropped))
            continue;
        kept_tombstone |= r.value_len < 0;
        /* "N" hands the new objects over to the tuple (and releases them if it cannot be built). */
        PyObject *item = Py_BuildValue(
            "(LLNNN)", (long long)offset, have_lat ? lat : (long long)add64(base_ts, r.ts_delta),
            bytes_or_none(d, r.key_pos, r.key_len), bytes_or_none(d, r.value_pos, r.value_len),
            r.header_count > 0 ? headers_tuple(d, end, &r) : PyTuple_New(0));
        if (item == NULL)
            goto done;
        int appended = PyList_Append(kept, item);
        Py_DECREF(item);
        if (appended < 0)
            goto done;
    }
    if (check_area_end(pos, end, count, &e) < 0) {
        raise_err(&e, -1);
        goto done;
    }
    if (PyList_GET_SIZE(kept) == count) {
        Py_DECREF(kept);
        Py_INCREF(Py_None);
        kept = Py_None;
    }
    result = Py_BuildValue("(OLLLO)", kept, dropped.superseded, dropped.tombstones, dropped.keyless,
                           kept_tombstone ? Py_True : Py_False);
done:
    Py_XDECREF(kept);
    table_close(&t);
    PyBuffer_Release(&buf);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * Whole batches of a segment (spec §3.5: the v2 batch header, 61 bytes, big-endian)
 * ------------------------------------------------------------------------------------------- */

#define BATCH_OVERHEAD 61
#define LENGTH_OFFSET 8
#define PLE_OFFSET 12
#define MAGIC_OFFSET 16
#define CRC_OFFSET 17
#define ATTRIBUTES_OFFSET 21
#define LAST_OFFSET_DELTA_OFFSET 23
#define BASE_TIMESTAMP_OFFSET 27
#define MAX_TIMESTAMP_OFFSET 35
#define PRODUCER_ID_OFFSET 43
#define PRODUCER_EPOCH_OFFSET 51
#define BASE_SEQUENCE_OFFSET 53
#define RECORDS_COUNT_OFFSET 57

#define ATTR_CODEC 0x07
#define ATTR_LOG_APPEND_TIME 0x08
#define ATTR_TRANSACTIONAL 0x10
#define ATTR_CONTROL 0x20
#define ATTR_DELETE_HORIZON 0x40

#define NO_TIMESTAMP (-1LL)

/* Why a buffer walk stopped: STOP_* in _compact_api.h. */

typedef struct {
    int64_t base_offset, last_offset, base_ts, max_ts, producer_id;
    Py_ssize_t size;
    int32_t count;
    int attributes;
} Batch;

/* BatchEntry (the batch directory's entry): see _compact_api.h. */

/* The batch at d[0, avail): 1 when it is whole and plain (the C path takes it), 0 when it is not
 * whole in the buffer, -1 when the Python path must take it.  Its CRC is checked unless all of it
 * lies in [checked_lo, checked_hi]: offsets whose batches the map pass has just checked. */
static int plain_batch(const uint8_t *d, Py_ssize_t avail, Batch *b, int64_t checked_lo, int64_t checked_hi)
{
    if (avail < BATCH_OVERHEAD)
        return avail < LENGTH_OFFSET + 4 || (int32_t)load_be32(d + LENGTH_OFFSET) >= BATCH_OVERHEAD - 12 ? 0 : -1;
    int32_t length = (int32_t)load_be32(d + LENGTH_OFFSET);
    if (length < BATCH_OVERHEAD - 12)
        return -1;
    b->size = (Py_ssize_t)length + 12;
    if (b->size > avail)
        return 0;
    int attributes = load_be16(d + ATTRIBUTES_OFFSET);
    if (d[MAGIC_OFFSET] != 2 || (attributes & (ATTR_CODEC | ATTR_TRANSACTIONAL | ATTR_CONTROL)))
        return -1;
    b->count = (int32_t)load_be32(d + RECORDS_COUNT_OFFSET);
    if (b->count < 0)
        return -1;
    b->attributes = attributes;
    b->base_offset = (int64_t)load_be64(d);
    b->last_offset = add64(b->base_offset, (int32_t)load_be32(d + LAST_OFFSET_DELTA_OFFSET));
    b->base_ts = (int64_t)load_be64(d + BASE_TIMESTAMP_OFFSET);
    b->max_ts = (int64_t)load_be64(d + MAX_TIMESTAMP_OFFSET);
    b->producer_id = (int64_t)load_be64(d + PRODUCER_ID_OFFSET);
    int checked = b->base_offset >= checked_lo && b->last_offset <= checked_hi && b->base_offset <= b->last_offset;
    if (!checked && crc32c(d + ATTRIBUTES_OFFSET, (size_t)(b->size - ATTRIBUTES_OFFSET)) != load_be32(d + CRC_OFFSET))
        return -1;
    return 1;
}

PyDoc_STRVAR(offset_map_put_batches_doc,
"offset_map_put_batches(data, position, table, k0, k1, start_offset, max_entries, entries, latest)\n"
"    -> (consumed, stop, entries, latest, records_read, lookups, probes, batches)\n\n"
"The map pass over the whole batches at the start of data: each plain batch's keyed records with\n"
"offset >= start_offset are mapped, and latest becomes the batch's last offset (if >= start_offset).\n"
"consumed is the bytes of the batches done; stop says why the walk ended (0: no whole batch left,\n"
"2: the batch at `consumed` needs the Python path, 3: the map filled within it after records_read\n"
"counted its consumed records).  batches holds a BatchEntry for each batch done, data[0] being\n"
"at file position `position`.");

static Py_ssize_t most_batches(Py_ssize_t len)
{
    return len / BATCH_OVERHEAD + 1; /* a batch takes at least BATCH_OVERHEAD bytes */
}

static Py_ssize_t most_hashed(Py_ssize_t len)
{
    return len / MIN_RECORD_BYTES + 1; /* a record takes at least MIN_RECORD_BYTES */
}

/* The walk of offset_map_put_batches (no GIL needed): see CompactApi.put_batches. */
static Py_ssize_t put_batches_core(Table *t, const uint8_t *d, Py_ssize_t len, int64_t position, MapState *s,
                                   BatchEntry *out, Py_ssize_t *n_out, int *stop)
{
    Py_ssize_t at = 0, n = *n_out, entries = s->entries;
    long long records = 0, lookups = s->lookups, probes = s->probes;
    int64_t last = s->latest;
    *stop = STOP_END;
    for (;;) {
        Batch b;
        int kind = plain_batch(d + at, len - at, &b, 1, 0);
        if (kind <= 0) {
            *stop = kind == 0 ? STOP_END : STOP_PYTHON;
            break;
        }
        Err e = {0, 0, 0};
        Py_ssize_t bad;
        long long looked = lookups;
        Py_ssize_t done = put_area(t, d + at, BATCH_OVERHEAD, b.size, b.count, b.base_offset, s->start_offset,
                                   s->max_entries, &entries, &last, &lookups, &probes, &bad, &e,
                                   s->track_bits != NULL ? s : NULL);
        if (done < 0) {
            /* Left to the Python path, which raises the right error (what was mapped of this
             * batch would be mapped again: putting a key twice at one offset changes nothing). */
            *stop = STOP_PYTHON;
            break;
        }
        records += done;
        if (done < b.count) {
            *stop = STOP_FULL;
            break;
        }
        if (b.last_offset >= s->start_offset)
            last = b.last_offset;
        out[n++] = (BatchEntry){position + at, position + at + b.size, b.base_offset, b.last_offset, b.count,
                                lookups - looked};
        at += b.size;
    }
    *n_out = n;
    s->entries = entries;
    s->latest = last;
    s->records += records;
    s->lookups = lookups;
    s->probes = probes;
    return at;
}

static PyObject *offset_map_put_batches(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    PyObject *table;
    unsigned long long k0, k1;
    long long position, start_offset, latest;
    Py_ssize_t max_entries, entries;
    if (!PyArg_ParseTuple(args, "y*LOKKLnnL:offset_map_put_batches", &buf, &position, &table, &k0, &k1,
                          &start_offset, &max_entries, &entries, &latest))
        return NULL;
    Table t;
    if (table_open(table, k0, k1, &t) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    BatchEntry *batches = PyMem_RawMalloc((size_t)most_batches(buf.len) * sizeof(BatchEntry));
    if (batches == NULL) {
        table_close(&t);
        PyBuffer_Release(&buf);
        return PyErr_NoMemory();
    }
    MapState st = map_state(&t, start_offset, max_entries, entries, latest);
    Py_ssize_t at, n_batches = 0;
    int stop;
    /* Pure C over buffers this call holds: other threads (the broker's event loop) run meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    at = put_batches_core(&t, (const uint8_t *)buf.buf, buf.len, position, &st, batches, &n_batches, &stop);
    Py_END_ALLOW_THREADS
    table_close(&t);
    PyBuffer_Release(&buf);
    PyObject *bt = PyBytes_FromStringAndSize((const char *)batches, n_batches * (Py_ssize_t)sizeof(BatchEntry));
    PyMem_RawFree(batches);
    if (bt == NULL)
        return NULL;
    return Py_BuildValue("(ninLLLLN)", at, stop, st.entries, (long long)st.latest, st.records, st.lookups,
                         st.probes, bt);
}

/* --- the map pass on two threads ------------------------------------------------------------------
 *
 * Hashing is most of the map pass and needs no table: a helper thread can hash the second half of
 * a read (offset_map_hash_batches) while the caller hashes and puts the first (put_batches); the
 * caller then puts the helper's hashes in order (offset_map_put_hashes).  The table only ever
 * sees the one thread, in offset order, so the map is the one put_batches alone would build.
 */

/* Hashed (one keyed record hashed): see _compact_api.h. */

/* Hash up to GROUP keys into the entries `out` (a group at a time, so eight may share a call). */
static inline void fill_hashes(const uint8_t *const *keys, const size_t *lens, int n, uint64_t k0, uint64_t k1,
                               Hashed *out)
{
    uint64_t hs[GROUP], ls[GROUP];
    hash_keys(keys, lens, n, k0, k1, hs, ls);
    for (int k = 0; k < n; k++) {
        out[k].h = hs[k];
        out[k].l = ls[k];
    }
}

PyDoc_STRVAR(offset_map_hash_batches_doc,
"offset_map_hash_batches(data, position, k0, k1, start_offset) -> (consumed, stop, hashed, batches)\n\n"
"The hashing half of offset_map_put_batches over the whole plain batches at the start of data,\n"
"without the table (the GIL is released): hashed holds (hash first half, second half, offset,\n"
"index in the batch) for each keyed record with offset >= start_offset, as native 64-bit words,\n"
"batches a BatchEntry for each batch (data[0] being at file position `position`).  stop is 0\n"
"when no whole batch is left, 2 when the batch at `consumed` needs the Python path.");

/* The walk of offset_map_hash_batches (no GIL, no table): see CompactApi.hash_batches. */
static Py_ssize_t hash_batches_core(const uint8_t *d, Py_ssize_t len, int64_t position, uint64_t k0, uint64_t k1,
                                    int64_t start_offset, Hashed *hashed, Py_ssize_t *n_hashed_out,
                                    BatchEntry *batches, Py_ssize_t *n_batches_out, int *stop)
{
    const uint8_t *keys[GROUP]; /* the keys of the last `pending` entries of hashed, not yet hashed */
    size_t lens[GROUP];
    Py_ssize_t at = 0, n_hashed = 0, n_batches = 0;
    *stop = STOP_END;
    for (;;) {
        Batch b;
        int kind = plain_batch(d + at, len - at, &b, 1, 0);
        if (kind <= 0) {
            *stop = kind == 0 ? STOP_END : STOP_PYTHON;
            break;
        }
        const uint8_t *bd = d + at;
        Py_ssize_t pos = BATCH_OVERHEAD, cap = (b.size - BATCH_OVERHEAD) / MIN_RECORD_BYTES;
        Py_ssize_t mark = n_hashed;
        Err e = {0, 0, 0};
        int bad = 0, pending = 0;
        for (int32_t i = 0; i < b.count; i++) {
            Rec r;
            if (i >= cap || parse_record(bd, b.size, &pos, &r, &e) < 0) {
                bad = 1;
                break;
            }
            int64_t offset = add64(b.base_offset, r.offset_delta);
            if (r.key_len < 0 || offset < start_offset)
                continue;
            keys[pending] = bd + r.key_pos;
            lens[pending++] = (size_t)r.key_len;
            Hashed *x = &hashed[n_hashed++];
            x->offset = offset;
            x->index = i;
            if (pending == GROUP) {
                fill_hashes(keys, lens, pending, k0, k1, &hashed[n_hashed - pending]);
                pending = 0;
            }
        }
        fill_hashes(keys, lens, pending, k0, k1, &hashed[n_hashed - pending]);
        if (bad || pos != b.size) {
            n_hashed = mark; /* left to the Python path, which raises the right error */
            *stop = STOP_PYTHON;
            break;
        }
        at += b.size;
        batches[n_batches++] = (BatchEntry){position + at - b.size, position + at, b.base_offset, b.last_offset,
                                            b.count, n_hashed - mark};
    }
    *n_hashed_out = n_hashed;
    *n_batches_out = n_batches;
    return at;
}

static PyObject *offset_map_hash_batches(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long k0, k1;
    long long position, start_offset;
    if (!PyArg_ParseTuple(args, "y*LKKL:offset_map_hash_batches", &buf, &position, &k0, &k1, &start_offset))
        return NULL;
    Hashed *hashed = PyMem_RawMalloc((size_t)most_hashed(buf.len) * sizeof(Hashed));
    BatchEntry *batches = PyMem_RawMalloc((size_t)most_batches(buf.len) * sizeof(BatchEntry));
    if (hashed == NULL || batches == NULL) {
        PyMem_RawFree(hashed);
        PyMem_RawFree(batches);
        PyBuffer_Release(&buf);
        return PyErr_NoMemory();
    }
    Py_ssize_t at, n_hashed, n_batches;
    int stop;
    Py_BEGIN_ALLOW_THREADS
    at = hash_batches_core((const uint8_t *)buf.buf, buf.len, position, k0, k1, start_offset, hashed, &n_hashed,
                           batches, &n_batches, &stop);
    Py_END_ALLOW_THREADS
    PyObject *h = PyBytes_FromStringAndSize((const char *)hashed, n_hashed * (Py_ssize_t)sizeof(Hashed));
    PyObject *bt = h ? PyBytes_FromStringAndSize((const char *)batches, n_batches * (Py_ssize_t)sizeof(BatchEntry))
                     : NULL;
    PyMem_RawFree(hashed);
    PyMem_RawFree(batches);
    PyBuffer_Release(&buf);
    if (bt == NULL) {
        Py_XDECREF(h);
        return NULL;
    }
    return Py_BuildValue("(niNN)", at, stop, h, bt);
}

PyDoc_STRVAR(offset_map_put_hashes_doc,
"offset_map_put_hashes(hashed, batches, table, start_offset, max_entries, entries, latest)\n"
"    -> (consumed, full, entries, latest, records_read, lookups, probes, batches_done)\n\n"
"Put what offset_map_hash_batches gave, batch by batch, as offset_map_put_batches puts it:\n"
"consumed is the bytes of the batches done (the first batches_done of `batches`), full whether\n"
"the map filled within the next one (records_read then counts its records before the first one\n"
"not put).");

/* The walk of offset_map_put_hashes (no GIL needed): see CompactApi.put_hashes. */
static Py_ssize_t put_hashes_core(Table *t, const Hashed *hashed, Py_ssize_t n_hashed, const BatchEntry *batches,
                                  Py_ssize_t n_batches, MapState *s, int *full_out, Py_ssize_t *done_out)
{
    Py_ssize_t held = s->entries, consumed = 0, next = 0, done = 0, hashed_end = 0;
    long long records = 0, probed = 0, looked = 0;
    int64_t last = s->latest;
    int full = 0;
    for (Py_ssize_t k = 0; k < n_batches && !full; k++) {
        const BatchEntry *b = &batches[k];
        hashed_end += (Py_ssize_t)b->keyed;
        Py_ssize_t end = hashed_end < n_hashed ? hashed_end : n_hashed;
        for (; next < end; next++) {
            const Hashed *x = &hashed[next];
            if (next + GROUP < end)
                PREFETCH(t->e + 3 * first_slot(hashed[next + GROUP].h, t->slots));
            if (held >= s->max_entries) {
                records += x->index;
                full = 1;
                break;
            }
            Probe p = {x->h, x->l, first_slot(x->h, t->slots)};
            looked++;
            if (s->track_bits == NULL)
                probe_put(t, &p, x->offset, &held, &probed);
            else
                probe_put_newest(t, &p, x->offset, &held, &probed, s);
            last = x->offset;
        }
        if (full)
            break;
        records += b->count;
        if (b->last_offset >= s->start_offset)
            last = b->last_offset;
        consumed = (Py_ssize_t)(b->end - batches[0].start);
        done = k + 1;
    }
    s->entries = held;
    s->latest = last;
    s->records += records;
    s->lookups += looked;
    s->probes += probed;
    *full_out = full;
    *done_out = done;
    return consumed;
}

static PyObject *offset_map_put_hashes(PyObject *self, PyObject *args)
{
    Py_buffer hb, bb;
    PyObject *table;
    long long start_offset, latest;
    Py_ssize_t max_entries, entries;
    if (!PyArg_ParseTuple(args, "y*y*OLnnL:offset_map_put_hashes", &hb, &bb, &table, &start_offset,
                          &max_entries, &entries, &latest))
        return NULL;
    PyObject *result = NULL;
    Table t;
    if (table_open(table, 0, 0, &t) < 0)
        goto release;
    if (hb.len % (Py_ssize_t)sizeof(Hashed) || bb.len % (Py_ssize_t)sizeof(BatchEntry)) {
        PyErr_SetString(PyExc_ValueError, "hashed and batches must come from offset_map_hash_batches");
        goto close;
    }
    MapState st = map_state(&t, start_offset, max_entries, entries, latest);
    Py_ssize_t consumed, done;
    int full;
    Py_BEGIN_ALLOW_THREADS
    consumed = put_hashes_core(&t, (const Hashed *)hb.buf, hb.len / (Py_ssize_t)sizeof(Hashed),
                               (const BatchEntry *)bb.buf, bb.len / (Py_ssize_t)sizeof(BatchEntry), &st, &full,
                               &done);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(ninLLLLn)", consumed, full, st.entries, (long long)st.latest, st.records, st.lookups,
                           st.probes, done);
close:
    table_close(&t);
release:
    PyBuffer_Release(&hb);
    PyBuffer_Release(&bb);
    return result;
}

static const CompactApi compact_api = {
    table_open, table_close, most_batches, most_hashed, put_batches_core, hash_batches_core, put_hashes_core,
};

/* --- the cleaning pass -------------------------------------------------------------------------- */

typedef struct {
    uint8_t *data;
    Py_ssize_t len, cap;
} Out;

/* Room for `extra` more bytes; -1 when memory runs out.  Raw allocations, no Python call: the
 * walk runs without the GIL. */
static int out_reserve(Out *o, Py_ssize_t extra)
{
    if (o->len + extra <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 65536;
    while (cap < o->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2)
            return -1;
        cap *= 2;
    }
    uint8_t *data = PyMem_RawRealloc(o->data, (size_t)cap);
    if (data == NULL)
        return -1;
    o->data = data;
    o->cap = cap;
    return 0;
}

/* Zig-zag varint of v into p (p has room for 10 bytes); returns the bytes written. */
static inline int put_varlong(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 0;
    while (z >= 0x80) {
        p[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    p[n++] = (uint8_t)z;
    return n;
}

static inline int varlong_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

typedef struct {
    Rec r;
    int64_t offset, timestamp;
    int64_t ts_delta; /* rebuild: against the new base timestamp */
    Py_ssize_t body;  /* rebuild: the re-encoded record's length field */
} Kept;

/* The size of a kept record's headers re-encoded (key as UTF-8 text, value or null); -1 when a
 * header key is not plain ASCII (Python decodes and re-encodes those: left to it). */
static Py_ssize_t headers_size(const uint8_t *d, Py_ssize_t end, const Rec *r)
{
    Py_ssize_t pos = r->headers_pos, size = varlong_size(r->header_count);
    Err e = {0, 0, 0};
    for (int32_t h = 0; h < r->header_count; h++) {
        Py_ssize_t kp, vp;
        int32_t kl, vl;
        if (next_header(d, end, &pos, &kp, &kl, &vp, &vl, &e) < 0)
            return -1;
        for (int32_t i = 0; i < kl; i++)
            if (d[kp + i] & 0x80)
                return -1;
        size += varlong_size(kl) + kl + varlong_size(vl < 0 ? -1 : vl) + (vl > 0 ? vl : 0);
    }
    return size;
}

static Py_ssize_t put_headers(uint8_t *p, const uint8_t *d, Py_ssize_t end, const Rec *r)
{
    Py_ssize_t pos = r->headers_pos, n = put_varlong(p, r->header_count);
    Err e = {0, 0, 0};
    for (int32_t h = 0; h < r->header_count; h++) {
        Py_ssize_t kp = 0, vp = 0;
        int32_t kl = 0, vl = -1;
        next_header(d, end, &pos, &kp, &kl, &vp, &vl, &e); /* validated by headers_size */
        n += put_varlong(p + n, kl);
        memcpy(p + n, d + kp, (size_t)kl);
        n += kl;
        n += put_varlong(p + n, vl < 0 ? -1 : vl);
        if (vl > 0) {
            memcpy(p + n, d + vp, (size_t)vl);
            n += vl;
        }
    }
    return n;
}

/* The kept records of batch `b` (at d) as a new batch, as MemoryRecordsBuilder writes them: the
 * same base offset, last offset delta and producer fields; base timestamp the delete horizon if
 * there is one, else the first kept record's; records re-encoded.  Appends it to `o` and returns
 * its max timestamp in *max_ts; 1 on success, 0 when the Python path must rebuild it, -1 when
 * memory runs out. */
static int rebuild(Out *o, const uint8_t *d, const Batch *b, Kept *kept, Py_ssize_t n, int64_t horizon,
                   int64_t *max_ts)
{
    int lat = b->attributes & ATTR_LOG_APPEND_TIME;
    int64_t first_ts = horizon != NO_TIMESTAMP ? horizon : kept[0].timestamp;
    int64_t mts = lat ? b->max_ts : NO_TIMESTAMP;
    Py_ssize_t size = BATCH_OVERHEAD;
    for (Py_ssize_t i = 0; i < n; i++) {
        Kept *k = &kept[i];
        if (k->timestamp < NO_TIMESTAMP || k->r.offset_delta < 0 || (i > 0 && k->offset <= kept[i - 1].offset)
            || __builtin_sub_overflow(k->timestamp, first_ts, &k->ts_delta))
            return 0;
        Py_ssize_t hsize = headers_size(d, b->size, &k->r);
        if (hsize < 0)
            return 0;
        int32_t klen = k->r.key_len, vlen = k->r.value_len;
        k->body = 1 + varlong_size(k->ts_delta) + varlong_size(k->r.offset_delta)
                  + varlong_size(klen < 0 ? -1 : klen) + (klen > 0 ? klen : 0)
                  + varlong_size(vlen < 0 ? -1 : vlen) + (vlen > 0 ? vlen : 0) + hsize;
        size += varlong_size(k->body) + k->body;
        if (!lat && k->timestamp > mts)
            mts = k->timestamp;
    }
    if (size - 12 > INT32_MAX)
        return 0;
    if (out_reserve(o, size) < 0)
        return -1;
    uint8_t *p = o->data + o->len;
    memcpy(p, d, BATCH_OVERHEAD); /* base offset, partition leader epoch, last offset delta, producer fields */
    store_be32(p + LENGTH_OFFSET, (uint32_t)(size - 12));
    p[MAGIC_OFFSET] = 2;
    store_be16(p + ATTRIBUTES_OFFSET,
               (uint16_t)((b->attributes & ATTR_LOG_APPEND_TIME) | (horizon != NO_TIMESTAMP ? ATTR_DELETE_HORIZON : 0)));
    store_be64(p + BASE_TIMESTAMP_OFFSET, (uint64_t)first_ts);
    store_be64(p + MAX_TIMESTAMP_OFFSET, (uint64_t)mts);
    store_be32(p + RECORDS_COUNT_OFFSET, (uint32_t)n);
    Py_ssize_t w = BATCH_OVERHEAD;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Kept *k = &kept[i];
        int32_t klen = k->r.key_len, vlen = k->r.value_len;
        w += put_varlong(p + w, k->body);
        p[w++] = 0; /* attributes */
        w += put_varlong(p + w, k->ts_delta);
        w += put_varlong(p + w, k->r.offset_delta);
        w += put_varlong(p + w, klen < 0 ? -1 : klen);
        if (klen > 0) {
            memcpy(p + w, d + k->r.key_pos, (size_t)klen);
            w += klen;
        }
        w += put_varlong(p + w, vlen < 0 ? -1 : vlen);
        if (vlen > 0) {
            memcpy(p + w, d + k->r.value_pos, (size_t)vlen);
            w += vlen;
        }
        w += put_headers(p + w, d, b->size, &k->r);
    }
    store_be32(p + CRC_OFFSET, crc32c(p + ATTRIBUTES_OFFSET, (size_t)(size - ATTRIBUTES_OFFSET)));
    o->len += size;
    *max_ts = mts;
    return 1;
}

/* Is `offset` in the sorted array? */
static int contains(const int64_t *sorted, Py_ssize_t n, int64_t offset)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == offset;
}

/* --- skipping what the map pass has shown superseded ---------------------------------------------
 *
 * Once the map pass is done, a batch it walked whose offsets hold no key's latest record loses all
 * its records to the cleaning pass: the directory of batches the map pass kept, with the latest
 * bits, says so without the batch being read again.  Most of a log's batches are like that when
 * its keys are updated often, which is what compaction is for.
 */

/* Whether any offset of [first, last] (within the bits) is some key's latest. */
static int any_latest(const Latest *l, int64_t first, int64_t last)
{
    uint64_t i = (uint64_t)first - (uint64_t)l->lo, j = (uint64_t)last - (uint64_t)l->lo;
    for (; i <= j && (i & 7); i++)
        if ((l->bits[i >> 3] >> (i & 7)) & 1)
            return 1;
    for (; i + 7 <= j; i += 8)
        if (l->bits[i >> 3])
            return 1;
    for (; i <= j; i++)
        if ((l->bits[i >> 3] >> (i & 7)) & 1)
            return 1;
    return 0;
}

/* Whether none of the batch's records stays: it lies within the mapped range and the bits, holds
 * no key's latest record, and is not a batch whose header must stay (`protected`: a producer's last,
 * the round's last). */
static int superseded_batch(const BatchEntry *e, const Latest *l, int64_t latest, const int64_t *protected_offsets,
                            Py_ssize_t n_protected)
{
    if (e->base_offset < l->lo || e->base_offset > e->last_offset || e->last_offset > latest
        || (uint64_t)e->last_offset - (uint64_t)l->lo >= (uint64_t)l->count || e->keyed > e->count
        || contains(protected_offsets, n_protected, e->last_offset))
        return 0;
    return !any_latest(l, e->base_offset, e->last_offset);
}

/* A batch dropped from its directory entry: its records counted as read, the keyed ones superseded,
 * the others keyless -- what the record rule would have said of each. */
static inline void drop_entry(const BatchEntry *e, long long *records, Dropped *dropped)
{
    *records += e->count;
    dropped->superseded += e->keyed;
    dropped->keyless += e->count - e->keyed;
}

/* The BatchEntry words of a directory buffer; -1 (ValueError set) when it holds something else. */
static int directory_entries(const Py_buffer *dir, const BatchEntry **entries, Py_ssize_t *n)
{
    if (dir->len % (Py_ssize_t)sizeof(BatchEntry)) {
        PyErr_SetString(PyExc_ValueError, "directory must hold BatchEntry words");
        return -1;
    }
    *entries = (const BatchEntry *)dir->buf;
    *n = dir->len / (Py_ssize_t)sizeof(BatchEntry);
    return 0;
}

/* The first of the n entries (in file order) that starts at or past file position `position`. */
static Py_ssize_t first_entry_from(const BatchEntry *entries, Py_ssize_t n, int64_t position)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (entries[mid].start < position)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

PyDoc_STRVAR(offset_map_filter_batches_doc,
"offset_map_filter_batches(data, table, k0, k1, latest_offset, current_time,\n"
"                          delete_retention_ms, protected, chunk_bytes, read_size, mapped_from,\n"
"                          latest_bits, directory, position)\n"
"    -> (consumed, stop, out, max_offset, max_timestamp, shallow_offset, counts)\n\n"
"The cleaning pass over the whole batches at the start of data, as Cleaner._filter_batch does it\n"
"for a plain batch: records kept by the record rule (see offset_map_retain_v2), the batch copied\n"
"whole when all stay (and it needs no delete horizon), dropped when none do, else rebuilt.\n"
"A batch whose last offset is in `protected` (sorted int64: the last data batches of active\n"
"producers, the round's last batch) is left to the Python path.  The walk stops before a batch that\n"
"would make chunk_bytes + the bytes walked exceed read_size (stop 1) unless nothing is in the chunk\n"
"yet.  Batches within [mapped_from, latest_offset] were checked by the map pass: their CRC is not\n"
"checked again.  latest_bits (see offset_map_index_latest, lo = mapped_from; may be empty) answers\n"
"the record rule for the offsets it covers without a probe.  A batch the directory (BatchEntry\n"
"words of the segment, data[0] being at file position `position`; may be empty) shows keeping\n"
"nothing is dropped from its entry, unread, as offset_map_skip_superseded drops it.\n"
"out is the cleaned bytes; max_offset, max_timestamp, shallow_offset are what the segment\n"
"append needs (-1 when out is empty); counts is (messages_read, messages_written, bytes_written,\n"
"superseded, tombstones, keyless).");

static PyObject *offset_map_filter_batches(PyObject *self, PyObject *args)
{
    Py_buffer buf, prot, bits, dir;
    PyObject *table;
    unsigned long long k0, k1;
    long long latest, now, retention, mapped_from, position;
    Py_ssize_t chunk_bytes, read_size;
    if (!PyArg_ParseTuple(args, "y*OKKLLLy*nnLy*y*L:offset_map_filter_batches", &buf, &table, &k0, &k1, &latest,
                          &now, &retention, &prot, &chunk_bytes, &read_size, &mapped_from, &bits, &dir, &position))
        return NULL;
    const BatchEntry *entries;
    Py_ssize_t n_entries, ei;
    if (directory_entries(&dir, &entries, &n_entries) < 0) {
        PyBuffer_Release(&buf);
        PyBuffer_Release(&prot);
        PyBuffer_Release(&bits);
        PyBuffer_Release(&dir);
        return NULL;
    }
    Latest lb = {(const uint8_t *)bits.buf, mapped_from, (int64_t)bits.len * 8};
    PyObject *result = NULL;
    Out o = {NULL, 0, 0};
    Kept *kept = NULL;
    Py_ssize_t kept_cap = 0;
    Table t;
    if (table_open(table, k0, k1, &t) < 0) {
        PyBuffer_Release(&buf);
        PyBuffer_Release(&prot);
        PyBuffer_Release(&bits);
        PyBuffer_Release(&dir);
        return NULL;
    }
    const int64_t *protected_offsets = (const int64_t *)prot.buf;
    Py_ssize_t n_protected = prot.len / 8;
    const uint8_t *d = (const uint8_t *)buf.buf;
    Py_ssize_t at = 0;
    int stop = STOP_END;
    int64_t agg_offset = -1, agg_ts = NO_TIMESTAMP, agg_shallow = -1;
    long long read = 0, written = 0, bytes_written = 0;
    Dropped dropped = {0, 0, 0, 0};
    int nomem = 0;
    /* Pure C over buffers this call holds (raw allocations): other threads run meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    ei = first_entry_from(entries, n_entries, position);
    for (;;) {
        /* Where live batches are sparse, superseded ones lie between them: dropped here from their
         * directory entries, in the bytes already read, instead of a skip call per run. */
        int64_t file_at = position + at;
        while (ei < n_entries && entries[ei].start < file_at)
            ei++;
        if (ei < n_entries && entries[ei].start == file_at
            && superseded_batch(&entries[ei], &lb, latest, protected_offsets, n_protected)) {
            const BatchEntry *de = &entries[ei];
            int64_t size = de->end - de->start;
            if (size <= 0 || size > buf.len - at) {
                stop = STOP_END; /* not whole here: the caller's skip takes it */
                break;
            }
            if (chunk_bytes + at > 0 && chunk_bytes + at + size > read_size) {
                stop = STOP_BUDGET;
                break;
            }
            drop_entry(de, &read, &dropped);
            at += (Py_ssize_t)size;
            continue;
        }
        Batch b;
        int kind = plain_batch(d + at, buf.len - at, &b, mapped_from, latest);
        if (kind <= 0) {
            stop = kind == 0 ? STOP_END : STOP_PYTHON; /* the Python path applies the budget itself */
            break;
        }
        if (chunk_bytes + at > 0 && chunk_bytes + at + b.size > read_size) {
            stop = STOP_BUDGET;
            break;
        }
        if (contains(protected_offsets, n_protected, b.last_offset)) {
            stop = STOP_PYTHON;
            break;
        }
        const uint8_t *bd = d + at;
        int has_horizon = (b.attributes & ATTR_DELETE_HORIZON) != 0;
        int retain_deletes = !has_horizon || now < b.base_ts;
        if (b.count > kept_cap) {
            /* bounded by the batch's bytes: a record takes at least MIN_RECORD_BYTES */
            Py_ssize_t most = (b.size - BATCH_OVERHEAD) / MIN_RECORD_BYTES;
            Py_ssize_t want = b.count < most ? b.count : most;
            if (want > kept_cap) {
                Kept *grown = PyMem_RawRealloc(kept, (size_t)want * sizeof(Kept));
                if (grown == NULL) {
                    nomem = 1;
                    break;
                }
                kept = grown;
                kept_cap = want;
            }
        }
        Py_ssize_t n_kept = 0;
        Dropped b_dropped = {0, 0, 0, 0};  /* this batch's, counted once it is done */
        int kept_tombstone = 0, bad = 0;
        Py_ssize_t pos = BATCH_OVERHEAD;
        Err e = {0, 0, 0};
        Rec group[GROUP];
        Probe probe[GROUP];
        int64_t offsets[GROUP], found[GROUP];
        int probed[GROUP];
        for (int32_t i = 0; i < b.count && !bad;) {
            int n = 0;
            for (; i < b.count && n < GROUP; i++, n++) {
                if (i >= kept_cap || parse_record(bd, b.size, &pos, &group[n], &e) < 0) {
                    bad = 1;
                    break;
                }
                offsets[n] = add64(b.base_offset, group[n].offset_delta);
                probed[n] = 0;
                found[n] = -1;
                if (needs_probe(&group[n], offsets[n], latest)) {
                    int is_latest;
                    if (latest_covers(&lb, offsets[n], &is_latest)) {
                        found[n] = is_latest ? offsets[n] : INT64_MAX;
                    } else {
                        probe_start(&t, bd + group[n].key_pos, group[n].key_len, &probe[n]);
                        probed[n] = 1;
                    }
                }
            }
            for (int k = 0; k < n && !bad; k++) {
                const Rec *r = &group[k];
                int64_t offset = offsets[k];
                if (probed[k])
                    found[k] = probe_get(&t, &probe[k], &b_dropped.probes);
                if (!retain_record(r, offset, latest, retain_deletes, found[k], &b_dropped))
                    continue;
                kept_tombstone |= r->value_len < 0;
                kept[n_kept].r = *r;
                kept[n_kept].offset = offset;
                kept[n_kept].timestamp = (b.attributes & ATTR_LOG_APPEND_TIME) ? b.max_ts
                                                                               : add64(b.base_ts, r->ts_delta);
                n_kept++;
            }
        }
        if (bad || pos != b.size) {
            stop = STOP_PYTHON; /* the Python path raises the right error */
            break;
        }
        int need_horizon = kept_tombstone && !has_horizon;
        int64_t out_offset, out_ts;
        Py_ssize_t before = o.len;
        if (n_kept == b.count && n_kept > 0 && !need_horizon) {
            if (out_reserve(&o, b.size) < 0) {
                nomem = 1;
                break;
            }
            memcpy(o.data + o.len, bd, (size_t)b.size);
            o.len += b.size;
            out_offset = b.last_offset;
            out_ts = b.max_ts;
        } else if (n_kept > 0) {
            int64_t horizon = need_horizon ? now + retention : (has_horizon ? b.base_ts : NO_TIMESTAMP);
            int built = rebuild(&o, bd, &b, kept, n_kept, horizon, &out_ts);
            if (built < 0) {
                nomem = 1;
                break;
            }
            if (built == 0) {
                stop = STOP_PYTHON;
                break;
            }
            out_offset = kept[n_kept - 1].offset;
        }
        read += b.count;
        dropped.superseded += b_dropped.superseded;
        dropped.tombstones += b_dropped.tombstones;
        dropped.keyless += b_dropped.keyless;
        if (n_kept > 0) {
            written += n_kept;
            bytes_written += o.len - before;
            if (out_offset > agg_offset)
                agg_offset = out_offset;
            if (out_ts > agg_ts) {
                agg_ts = out_ts;
                agg_shallow = b.last_offset;
            }
        }
        at += b.size;
    }
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)o.data, o.len);
    if (out != NULL)
        result = Py_BuildValue("(niNLLL(LLLLLL))", at, stop, out, (long long)agg_offset, (long long)agg_ts,
                               (long long)agg_shallow, read, written, bytes_written, dropped.superseded,
                               dropped.tombstones, dropped.keyless);
done:
    PyMem_RawFree(kept);
    PyMem_RawFree(o.data);
    table_close(&t);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&prot);
    PyBuffer_Release(&bits);
    PyBuffer_Release(&dir);
    return result;
}

PyDoc_STRVAR(offset_map_skip_superseded_doc,
"offset_map_skip_superseded(directory, position, mapped_from, latest_offset, latest_bits, protected,\n"
"                           chunk_bytes, read_size, chunk_empty)\n"
"    -> (consumed, stop, records, superseded, keyless, chunk_bytes)\n\n"
"From the batch of the directory (BatchEntry words, in file order) that starts at file position\n"
"`position`, pass over the consecutive batches none of whose records stays (wholly within\n"
"[mapped_from, latest_offset] and latest_bits with no offset of theirs set, last offset not in\n"
"`protected`): their records go, the keyed ones as superseded, the others as keyless -- what\n"
"offset_map_filter_batches would decide -- without their bytes being read again.  Stops before a\n"
"batch that would take chunk_bytes + consumed past read_size (stop 1) unless nothing is in the\n"
"chunk yet; when the chunk holds no cleaned bytes (chunk_empty), its appending would do nothing:\n"
"a new chunk starts there instead and the walk goes on.  Else it stops with stop 0.  The\n"
"chunk_bytes returned are those of the chunk the walk ends in.");

static PyObject *offset_map_skip_superseded(PyObject *self, PyObject *args)
{
    Py_buffer dir, bits, prot;
    long long position, mapped_from, latest;
    Py_ssize_t chunk_bytes, read_size;
    int chunk_empty;
    if (!PyArg_ParseTuple(args, "y*LLLy*y*nnp:offset_map_skip_superseded", &dir, &position, &mapped_from,
                          &latest, &bits, &prot, &chunk_bytes, &read_size, &chunk_empty))
        return NULL;
    const BatchEntry *entries;
    Py_ssize_t n;
    if (directory_entries(&dir, &entries, &n) < 0) {
        PyBuffer_Release(&dir);
        PyBuffer_Release(&bits);
        PyBuffer_Release(&prot);
        return NULL;
    }
    Latest lb = {(const uint8_t *)bits.buf, mapped_from, (int64_t)bits.len * 8};
    const int64_t *protected_offsets = (const int64_t *)prot.buf;
    Py_ssize_t n_protected = prot.len / 8;
    long long records = 0;
    Dropped dropped = {0, 0, 0, 0};
    int64_t at = position;
    int stop = STOP_END;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = first_entry_from(entries, n, position);
    for (; i < n && entries[i].start == at && superseded_batch(&entries[i], &lb, latest, protected_offsets, n_protected);
         i++) {
        int64_t size = entries[i].end - entries[i].start;
        if (chunk_bytes > 0 && chunk_bytes + size > read_size) {
            if (!chunk_empty) {
                stop = STOP_BUDGET;
                break;
            }
            chunk_bytes = 0;
        }
        chunk_bytes += (Py_ssize_t)size;
        drop_entry(&entries[i], &records, &dropped);
        at = entries[i].end;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&dir);
    PyBuffer_Release(&bits);
    PyBuffer_Release(&prot);
    return Py_BuildValue("(LiLLLn)", (long long)(at - position), stop, records, dropped.superseded,
                         dropped.keyless, chunk_bytes);
}

static PyMethodDef module_methods[] = {
    {"siphash13", py_siphash13, METH_VARARGS, siphash13_doc},
    {"siphash128_many", py_siphash128_many, METH_VARARGS, siphash128_many_doc},
    {"crc32c", py_crc32c, METH_O, crc32c_doc},
    {"offset_map_put_v2", offset_map_put_v2, METH_VARARGS, offset_map_put_v2_doc},
    {"offset_map_retain_v2", offset_map_retain_v2, METH_VARARGS, offset_map_retain_v2_doc},
    {"offset_map_put_batches", offset_map_put_batches, METH_VARARGS, offset_map_put_batches_doc},
    {"offset_map_filter_batches", offset_map_filter_batches, METH_VARARGS, offset_map_filter_batches_doc},
    {"offset_map_index_latest", offset_map_index_latest, METH_VARARGS, offset_map_index_latest_doc},
    {"offset_map_zero", offset_map_zero, METH_O, offset_map_zero_doc},
    {"offset_map_hash_batches", offset_map_hash_batches, METH_VARARGS, offset_map_hash_batches_doc},
    {"offset_map_put_hashes", offset_map_put_hashes, METH_VARARGS, offset_map_put_hashes_doc},
    {"offset_map_skip_superseded", offset_map_skip_superseded, METH_VARARGS, offset_map_skip_superseded_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkalog.records._compact",
    .m_doc = "The log cleaner's key hash, offset table and batch walks in C (see storage/cleaner/).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__compact(void)
{
    crc32c_init_tables();
#if defined(HAVE_HW_CRC) || defined(HAVE_SIPHASH_X8)
    __builtin_cpu_init();
#endif
#ifdef HAVE_HW_CRC
    hw_crc = __builtin_cpu_supports("sse4.2");
    if (hw_crc)
        crc_shift_init();
#endif
#ifdef HAVE_SIPHASH_X8
    have_x8 = __builtin_cpu_supports("avx512f") && getenv("KAFKALOG_NO_AVX512") == NULL;
#endif
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *api = PyCapsule_New((void *)&compact_api, COMPACT_API_CAPSULE, NULL);
    if (api == NULL || PyModule_AddObject(m, "_API", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
