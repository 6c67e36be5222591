// Greedy LZ77 + fixed Huffman codes, as one gzip member. See include/CFastGzip.h for what and why.
//
// Correctness rests on three facts, each tested in Tests/OutboxTests/FastGzipTests.swift against zlib's inflate:
// - a hash slot is only a candidate: a match is taken after its first 4 bytes compare equal, at a distance of
//   1…32768, so stale slots (left by earlier bodies; the table is never cleared) cost nothing but a miss;
// - every code is written through one 64-bit bit buffer, least significant bit first, Huffman codes bit-reversed
//   (RFC 1951 §3.1.1);
// - nothing expands more than 9 bits per input byte (a literal ≥ 144; a match of 4+ bytes takes ≤ 31 bits), which
//   is what `outbox_fast_gzip_bound` allows for.
#include "CFastGzip.h"
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum {
    // 4096 slots (16 KB). A body is compressed between SQLite's and the kernel's work, which evict the table from
    // the cache: a table that stays small enough to come back quickly beats a larger one that finds more matches.
    hash_bits = 12,
    window = 32768,
    min_match = 4,
    max_match = 258,
    end_of_block = 256,
};

struct outbox_fast_gzip {
    /// The last position (in the current input) whose 4 bytes hashed to each slot.
    uint32_t head[1u << hash_bits];
    /// Literal/length symbols 0…285: bit-reversed fixed code and its length.
    uint32_t literal_bits[286];
    uint8_t literal_length[286];
    /// Match lengths 3…258: the length symbol's code with its extra bits above it, and the total bit count.
    uint32_t match_bits[max_match + 1];
    uint8_t match_length[max_match + 1];
    /// Distance code of distance-1: [d] for d < 256, [256 + (d >> 7)] above (zlib's `_dist_code` layout).
    uint8_t distance_code[512];
    uint32_t distance_code_bits[30];
};

static const uint16_t length_base[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59,
                                         67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t length_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4,
                                         5, 5, 5, 5, 0};
static const uint16_t distance_base[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513,
                                           769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t distance_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10,
                                           11, 11, 12, 12, 13, 13};

static uint32_t reversed(uint32_t code, int bits) {
    uint32_t result = 0;
    for (int i = 0; i < bits; i++) {
        result = (result << 1) | (code & 1);
        code >>= 1;
    }
    return result;
}

outbox_fast_gzip *outbox_fast_gzip_new(void) {
    outbox_fast_gzip *state = calloc(1, sizeof *state);
    if (!state) return NULL;
    // RFC 1951 §3.2.6: 0–143 → 8 bits from 0x30, 144–255 → 9 bits from 0x190, 256–279 → 7 bits from 0,
    // 280–287 → 8 bits from 0xC0.
    for (int symbol = 0; symbol < 286; symbol++) {
        uint32_t code;
        int bits;
        if (symbol < 144) { code = 0x30 + symbol; bits = 8; }
        else if (symbol < 256) { code = 0x190 + (symbol - 144); bits = 9; }
        else if (symbol < 280) { code = symbol - 256; bits = 7; }
        else { code = 0xC0 + (symbol - 280); bits = 8; }
        state->literal_bits[symbol] = reversed(code, bits);
        state->literal_length[symbol] = (uint8_t)bits;
    }
    for (int index = 0; index < 29; index++) {
        int symbol = 257 + index;
        // 258 has its own symbol (285), not 284's last extra value.
        int last = index == 28 ? 258 : (index == 27 ? 257 : length_base[index + 1] - 1);
        for (int length = length_base[index]; length <= last; length++) {
            state->match_bits[length] = state->literal_bits[symbol]
                | ((uint32_t)(length - length_base[index]) << state->literal_length[symbol]);
            state->match_length[length] = (uint8_t)(state->literal_length[symbol] + length_extra[index]);
        }
    }
    for (int code = 0; code < 30; code++) {
        state->distance_code_bits[code] = reversed((uint32_t)code, 5);
        uint32_t end = code == 29 ? window + 1 : distance_base[code + 1];
        for (uint32_t distance = distance_base[code]; distance < end; distance++) {
            uint32_t d = distance - 1;
            state->distance_code[d < 256 ? d : 256 + (d >> 7)] = (uint8_t)code;
        }
    }
    return state;
}

void outbox_fast_gzip_free(outbox_fast_gzip *state) { free(state); }

size_t outbox_fast_gzip_bound(size_t length) {
    if (length >= UINT32_MAX) return 0;
    // 10-byte header, 3 block-header bits, ≤ 9 bits per byte, 7-bit end of block, 8-byte trailer, slack.
    return length + length / 8 + 64;
}

static inline uint32_t load32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t load64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t hash4(uint32_t bytes) { return (bytes * 2654435761u) >> (32 - hash_bits); }

// The bit buffer: `bits` holds `count` < 32 pending bits; whole 32-bit words go out little-endian.
#define PUT(value, width) do {                                              \
        bits |= (uint64_t)(value) << count;                                 \
        count += (width);                                                   \
        if (count >= 32) {                                                  \
            uint32_t word = (uint32_t)bits;                                 \
            out[0] = (uint8_t)word; out[1] = (uint8_t)(word >> 8);          \
            out[2] = (uint8_t)(word >> 16); out[3] = (uint8_t)(word >> 24); \
            out += 4;                                                       \
            bits >>= 32;                                                    \
            count -= 32;                                                    \
        }                                                                   \
    } while (0)

size_t outbox_fast_gzip_compress(outbox_fast_gzip *state, const uint8_t *input, size_t length, uint8_t *output) {
    if (length >= UINT32_MAX) return 0;
    uint8_t *out = output;
    // RFC 1952: magic, CM = 8 (deflate), no flags, no mtime, no extra flags, OS = 3 (Unix).
    static const uint8_t header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    memcpy(out, header, sizeof header);
    out += sizeof header;

    uint64_t bits = 0;
    unsigned count = 0;
    PUT(1 | (1 << 1), 3);  // BFINAL = 1, BTYPE = 01 (fixed Huffman codes)

    uint32_t *head = state->head;
    size_t position = 0;
    // A position can start a match while 4 bytes remain.
    const size_t last_start = length >= min_match ? length - min_match + 1 : 0;
    while (position < last_start) {
        uint32_t bytes = load32(input + position);
        uint32_t slot = hash4(bytes);
        size_t candidate = head[slot];
        head[slot] = (uint32_t)position;
        if (candidate < position && position - candidate <= window && load32(input + candidate) == bytes) {
            size_t longest = length - position < max_match ? length - position : max_match;
            size_t match = min_match;
            while (match + 8 <= longest) {
                uint64_t differ = load64(input + position + match) ^ load64(input + candidate + match);
                if (differ) {
                    // The first differing byte is the lowest set byte on a little-endian load.
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                    match += (size_t)__builtin_ctzll(differ) >> 3;
#else
                    match += (size_t)__builtin_clzll(differ) >> 3;
#endif
                    goto matched;
                }
                match += 8;
            }
            while (match < longest && input[position + match] == input[candidate + match]) match++;
        matched:;
            uint32_t d = (uint32_t)(position - candidate) - 1;
            unsigned code = state->distance_code[d < 256 ? d : 256 + (d >> 7)];
            uint32_t distance = state->distance_code_bits[code] | ((d + 1 - distance_base[code]) << 5);
            // ≤ 13 length bits + ≤ 18 distance bits: one PUT of ≤ 31 bits.
            PUT(state->match_bits[match] | (distance << state->match_length[match]),
                state->match_length[match] + 5u + distance_extra[code]);
            size_t end = position + match;
            // The match's last two positions go into the table too: the next repeat often starts there.
            for (size_t p = end - 2; p < end && p < last_start; p++) head[hash4(load32(input + p))] = (uint32_t)p;
            position = end;
        } else {
            PUT(state->literal_bits[input[position]], state->literal_length[input[position]]);
            position++;
        }
    }
    while (position < length) {
        PUT(state->literal_bits[input[position]], state->literal_length[input[position]]);
        position++;
    }
    PUT(state->literal_bits[end_of_block], state->literal_length[end_of_block]);
    while (count > 0) {
        *out++ = (uint8_t)bits;
        bits >>= 8;
        count = count > 8 ? count - 8 : 0;
    }
    // Trailer: CRC-32 and the length modulo 2^32, little-endian.
    uint32_t crc = outbox_crc32(0, input, length);
    for (int i = 0; i < 4; i++) *out++ = (uint8_t)(crc >> (8 * i));
    for (int i = 0; i < 4; i++) *out++ = (uint8_t)((uint32_t)length >> (8 * i));
    return (size_t)(out - output);
}

// CRC-32 (gzip's, as zlib's crc32_z computes it). zlib's byte-table version is a visible share of the loop's work per
// delivered log; carry-less multiplication folds 16 bytes in a few instructions.

/// The CRC register after `data`, starting from `state`, without gzip's inversions before and after.
static uint32_t crc32_register(uint32_t state, const uint8_t *data, size_t length) {
    return ~(uint32_t)crc32_z(~state, data, length);
}

#if defined(__x86_64__)
/// Folds the input 16 bytes at a time (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"):
/// the 128-bit accumulator A followed by the rest of the input has the same CRC as the input read so far followed by
/// the rest, because the next block is added to A·x^128 mod P, which two carry-less products give from A's halves
/// (constants x^(128+32) and x^(128-32) mod P, bit-reflected and shifted left by one, as in Linux's crc32-pclmul;
/// checked by computing them). The last accumulator is then 16 bytes of input like any other: zlib finishes from
/// there.
__attribute__((target("pclmul,sse2")))
static uint32_t crc32_register_folded(uint32_t state, const uint8_t *data, size_t length) {
    __m128i accumulator = _mm_xor_si128(_mm_loadu_si128((const __m128i *)data), _mm_cvtsi32_si128((int)state));
    data += 16;
    length -= 16;
    const __m128i constants = _mm_set_epi64x(0x00000000ccaa009eLL, 0x00000001751997d0LL);
    while (length >= 16) {
        __m128i low = _mm_clmulepi64_si128(accumulator, constants, 0x00);
        __m128i high = _mm_clmulepi64_si128(accumulator, constants, 0x11);
        accumulator = _mm_xor_si128(_mm_xor_si128(low, high), _mm_loadu_si128((const __m128i *)data));
        data += 16;
        length -= 16;
    }
    uint8_t folded[16];
    _mm_storeu_si128((__m128i *)folded, accumulator);
    return crc32_register(crc32_register(0, folded, 16), data, length);
}
#endif

uint32_t outbox_crc32(uint32_t crc, const uint8_t *data, size_t length) {
#if defined(__x86_64__)
    if (length >= 64 && __builtin_cpu_supports("pclmul")) {
        return ~crc32_register_folded(~crc, data, length);
    }
#endif
    return (uint32_t)crc32_z(crc, data, length);
}
