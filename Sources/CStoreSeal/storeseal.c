#include "CStoreSeal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* Nonces are random, drawn from libcrypto's generator a pool at a time: one RAND_bytes call costs about as much as
   sealing a 300-byte row, so a call per row nearly doubled the cost of sealing. Each nonce is still 12 fresh random
   bytes, used once. */
enum { NONCE_POOL = 341 * OUTBOX_SEAL_NONCE };

struct outbox_sealer {
    EVP_CIPHER_CTX *seal;
    EVP_CIPHER_CTX *open;
    size_t pool_used;
    uint8_t pool[NONCE_POOL];
};

static int next_nonce(outbox_sealer *sealer, uint8_t *nonce) {
    if (sealer->pool_used + OUTBOX_SEAL_NONCE > NONCE_POOL) {
        if (RAND_bytes(sealer->pool, NONCE_POOL) != 1) return -1;
        sealer->pool_used = 0;
    }
    memcpy(nonce, sealer->pool + sealer->pool_used, OUTBOX_SEAL_NONCE);
    /* A nonce handed out is wiped from the pool: it can never be handed out again. */
    OPENSSL_cleanse(sealer->pool + sealer->pool_used, OUTBOX_SEAL_NONCE);
    sealer->pool_used += OUTBOX_SEAL_NONCE;
    return 0;
}

void outbox_sealer_free(outbox_sealer *sealer) {
    if (!sealer) return;
    /* EVP_CIPHER_CTX_free cleanses the expanded key. */
    EVP_CIPHER_CTX_free(sealer->seal);
    EVP_CIPHER_CTX_free(sealer->open);
    OPENSSL_cleanse(sealer->pool, sizeof sealer->pool);
    free(sealer);
}

outbox_sealer *outbox_sealer_new(const uint8_t key[32]) {
    outbox_sealer *sealer = calloc(1, sizeof *sealer);
    if (!sealer) return NULL;
    sealer->pool_used = NONCE_POOL; /* empty: the first seal draws the pool */
    sealer->seal = EVP_CIPHER_CTX_new();
    sealer->open = EVP_CIPHER_CTX_new();
    if (!sealer->seal || !sealer->open
        || EVP_EncryptInit_ex(sealer->seal, EVP_aes_256_gcm(), NULL, key, NULL) != 1
        || EVP_DecryptInit_ex(sealer->open, EVP_aes_256_gcm(), NULL, key, NULL) != 1) {
        outbox_sealer_free(sealer);
        return NULL;
    }
    return sealer;
}

int outbox_seal(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len, uint8_t *out) {
    if (!sealer || len > INT_MAX || aad_len > INT_MAX) return -1;
    uint8_t *nonce = out, *body = out + OUTBOX_SEAL_NONCE, *tag = body + len;
    if (next_nonce(sealer, nonce) != 0) return -1;
    int written = 0, final = 0;
    /* The key stays set from outbox_sealer_new: only the nonce changes per row. */
    if (EVP_EncryptInit_ex(sealer->seal, NULL, NULL, NULL, nonce) != 1) return -1;
    if (aad_len > 0 && EVP_EncryptUpdate(sealer->seal, NULL, &written, aad, (int)aad_len) != 1) return -1;
    if (len > 0 && EVP_EncryptUpdate(sealer->seal, body, &written, in, (int)len) != 1) return -1;
    if (EVP_EncryptFinal_ex(sealer->seal, body + written, &final) != 1) return -1;
    if (EVP_CIPHER_CTX_ctrl(sealer->seal, EVP_CTRL_GCM_GET_TAG, OUTBOX_SEAL_TAG, tag) != 1) return -1;
    return 0;
}

int outbox_unseal(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len, uint8_t *out) {
    if (!sealer || len < OUTBOX_SEAL_OVERHEAD || len > INT_MAX || aad_len > INT_MAX) return -1;
    size_t body_len = len - OUTBOX_SEAL_OVERHEAD;
    const uint8_t *nonce = in, *body = in + OUTBOX_SEAL_NONCE, *tag = body + body_len;
    int written = 0, final = 0;
    if (EVP_DecryptInit_ex(sealer->open, NULL, NULL, NULL, nonce) != 1) return -1;
    if (aad_len > 0 && EVP_DecryptUpdate(sealer->open, NULL, &written, aad, (int)aad_len) != 1) return -1;
    if (body_len > 0 && EVP_DecryptUpdate(sealer->open, out, &written, body, (int)body_len) != 1) return -1;
    if (EVP_CIPHER_CTX_ctrl(sealer->open, EVP_CTRL_GCM_SET_TAG, OUTBOX_SEAL_TAG, (void *)tag) != 1) return -1;
    /* Fails when the tag does not verify; what was written to out is then not to be used. */
    if (EVP_DecryptFinal_ex(sealer->open, out + written, &final) != 1) {
        OPENSSL_cleanse(out, body_len);
        return -1;
    }
    return 0;
}

int outbox_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data, size_t len, uint8_t out[32]) {
    unsigned int out_len = 0;
    if (key_len > INT_MAX) return -1;
    if (!HMAC(EVP_sha256(), key, (int)key_len, data, len, out, &out_len) || out_len != 32) return -1;
    return 0;
}

int outbox_random_bytes(uint8_t *out, size_t len) {
    if (len > INT_MAX) return -1;
    return RAND_bytes(out, (int)len) == 1 ? 0 : -1;
}

void outbox_wipe(void *p, size_t len) { OPENSSL_cleanse(p, len); }
