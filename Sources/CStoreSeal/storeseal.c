#include "CStoreSeal.h"

#include <limits.h>
#include <stdlib.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

struct outbox_sealer {
    EVP_CIPHER_CTX *seal;
    EVP_CIPHER_CTX *open;
};

void outbox_sealer_free(outbox_sealer *sealer) {
    if (!sealer) return;
    /* EVP_CIPHER_CTX_free cleanses the expanded key. */
    EVP_CIPHER_CTX_free(sealer->seal);
    EVP_CIPHER_CTX_free(sealer->open);
    free(sealer);
}

outbox_sealer *outbox_sealer_new(const uint8_t key[32]) {
    outbox_sealer *sealer = calloc(1, sizeof *sealer);
    if (!sealer) return NULL;
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
    if (RAND_bytes(nonce, OUTBOX_SEAL_NONCE) != 1) return -1;
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
