#ifndef OUTBOX_FAST_GZIP_H
#define OUTBOX_FAST_GZIP_H

#include <stddef.h>
#include <stdint.h>

/// A gzip compressor for request bodies, faster than zlib's level 1 on JSON batches (BENCHMARKS.md): greedy
/// LZ77 with one candidate per 4-byte hash (32 KiB window, matches of 4–258 bytes) written with deflate's fixed
/// Huffman codes (RFC 1951 §3.2.6) in one block, framed as one gzip member (RFC 1952). The output is larger than
/// level 1's, which builds a Huffman code per block: CPU on the engine's loop is traded for bytes. Any inflater
/// reads it.
typedef struct outbox_fast_gzip outbox_fast_gzip;

/// A compressor with its tables (~19 KB: a 16 KB hash table of 4096 slots), or NULL when out of memory. One owner at
/// a time.
outbox_fast_gzip *outbox_fast_gzip_new(void);
void outbox_fast_gzip_free(outbox_fast_gzip *state);

/// The most bytes `outbox_fast_gzip_compress` can write for `length` input bytes; 0 when `length` is too large to
/// compress (4 GiB or more: positions are 32-bit).
size_t outbox_fast_gzip_bound(size_t length);

/// Writes one gzip member holding `input[0..<length]` to `output`, which must hold `outbox_fast_gzip_bound(length)`
/// bytes; returns the number written, or 0 when `length` is too large.
size_t outbox_fast_gzip_compress(outbox_fast_gzip *state, const uint8_t *input, size_t length, uint8_t *output);

/// gzip's CRC-32 of `data[0..<length]` continued from `crc` (0 to start), as zlib's `crc32_z` computes it; with
/// carry-less multiplication where the CPU has it (x86-64 with PCLMULQDQ), 16 bytes per step.
uint32_t outbox_crc32(uint32_t crc, const uint8_t *data, size_t length);

#endif
