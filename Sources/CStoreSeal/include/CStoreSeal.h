#ifndef OUTBOX_CSTORESEAL_H
#define OUTBOX_CSTORESEAL_H

#include <stddef.h>
#include <stdint.h>

/* SPEC K1: AES-256-GCM sealing of the store's rows, with OpenSSL's libcrypto. A sealer holds one key's two cipher
 * contexts (sealing, opening), set up once, so that each row costs only its nonce and its bytes. Not thread-safe:
 * one sealer per store connection. */
typedef struct outbox_sealer outbox_sealer;

enum { OUTBOX_SEAL_NONCE = 12, OUTBOX_SEAL_TAG = 16, OUTBOX_SEAL_OVERHEAD = 28 };

/* NULL when libcrypto cannot set up the cipher. The key is copied; the copy is wiped by outbox_sealer_free. */
outbox_sealer *outbox_sealer_new(const uint8_t key[32]);
void outbox_sealer_free(outbox_sealer *sealer);

/* outbox_sealer_new through EVP's calls when via_evp is set, else through the provider's own ones when it offers
 * them (what outbox_sealer_new does). Both ways write and open the same values: the tests prove each opens the
 * other's. */
outbox_sealer *outbox_sealer_new_via(const uint8_t key[32], int via_evp);
/* 1 when the sealer calls the provider's functions, 0 when it calls EVP's. */
int outbox_sealer_is_direct(const outbox_sealer *sealer);

/* Writes nonce (12 random bytes) | ciphertext (len) | tag (16) to out, which holds len + 28 bytes. aad is
 * authenticated, not stored. Returns 0, or -1 when libcrypto fails. */
int outbox_seal(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len, uint8_t *out);

/* Opens what outbox_seal wrote (len >= 28) into out (len - 28 bytes). Returns 0, or -1 when the tag does not
 * verify: another key, other aad, or bytes altered. */
int outbox_unseal(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len, uint8_t *out);

/* HMAC-SHA-256 of data under key into out (32 bytes). Returns 0 or -1. */
int outbox_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data, size_t len, uint8_t out[32]);

/* len bytes from libcrypto's CSPRNG. Returns 0 or -1. */
int outbox_random_bytes(uint8_t *out, size_t len);

/* Overwrites len bytes at p with zeros in a way the compiler keeps. */
void outbox_wipe(void *p, size_t len);

#endif
