#include "CStoreSeal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

/* Nonces are random, drawn from libcrypto's generator a pool at a time: one RAND_bytes call costs about as much as
   sealing a 300-byte row, so a call per row nearly doubled the cost of sealing. Each nonce is still 12 fresh random
   bytes, used once. */
enum { NONCE_POOL = 341 * OUTBOX_SEAL_NONCE };

/* The provider's own AES-256-GCM functions (provider-cipher(7)). OpenSSL 3.0's EVP layer asks the provider for the
   IV length through a parameter look-up at every init and builds another parameter array for every tag; for a
   400-byte row that made sealing cost about 1.6 times the provider's own calls, which do the same work without
   them (BENCHMARKS.md). They are those of the provider EVP_CIPHER_fetch chooses (so a FIPS configuration is
   honoured); a provider that does not offer them all leaves the sealer on EVP. */
struct gcm_calls {
    void *provctx;
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_encrypt_init_fn *encrypt_init;
    OSSL_FUNC_cipher_decrypt_init_fn *decrypt_init;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_get_ctx_params_fn *get_ctx_params;
    OSSL_FUNC_cipher_set_ctx_params_fn *set_ctx_params;
};

struct outbox_sealer {
    /* Holds the provider (and so the functions below) for the sealer's life. */
    EVP_CIPHER *cipher;
    /* Set: the provider's functions on seal_ctx and open_ctx. Unset: EVP on seal and open. */
    int direct;
    struct gcm_calls calls;
    void *seal_ctx, *open_ctx;
    EVP_CIPHER_CTX *seal, *open;
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

static int has_name(const char *names, const char *name) {
    size_t len = strlen(name);
    for (const char *at = names; at && *at; at = strchr(at, ':'), at = at ? at + 1 : NULL)
        if (strncmp(at, name, len) == 0 && (at[len] == ':' || at[len] == '\0')) return 1;
    return 0;
}

/* Fills calls from the provider of cipher; 0 when it does not offer every function sealing needs. */
static int find_calls(const EVP_CIPHER *cipher, struct gcm_calls *calls) {
    OSSL_PROVIDER *provider = (OSSL_PROVIDER *)EVP_CIPHER_get0_provider(cipher);
    if (!provider) return 0;
    int no_store = 0;
    const OSSL_ALGORITHM *algorithms = OSSL_PROVIDER_query_operation(provider, OSSL_OP_CIPHER, &no_store);
    if (!algorithms) return 0;
    memset(calls, 0, sizeof *calls);
    for (const OSSL_ALGORITHM *algorithm = algorithms; algorithm->algorithm_names; algorithm++) {
        if (!has_name(algorithm->algorithm_names, "AES-256-GCM")) continue;
        for (const OSSL_DISPATCH *call = algorithm->implementation; call->function_id; call++) {
            switch (call->function_id) {
            case OSSL_FUNC_CIPHER_NEWCTX: calls->newctx = OSSL_FUNC_cipher_newctx(call); break;
            case OSSL_FUNC_CIPHER_FREECTX: calls->freectx = OSSL_FUNC_cipher_freectx(call); break;
            case OSSL_FUNC_CIPHER_ENCRYPT_INIT: calls->encrypt_init = OSSL_FUNC_cipher_encrypt_init(call); break;
            case OSSL_FUNC_CIPHER_DECRYPT_INIT: calls->decrypt_init = OSSL_FUNC_cipher_decrypt_init(call); break;
            case OSSL_FUNC_CIPHER_UPDATE: calls->update = OSSL_FUNC_cipher_update(call); break;
            case OSSL_FUNC_CIPHER_FINAL: calls->final = OSSL_FUNC_cipher_final(call); break;
            case OSSL_FUNC_CIPHER_GET_CTX_PARAMS: calls->get_ctx_params = OSSL_FUNC_cipher_get_ctx_params(call); break;
            case OSSL_FUNC_CIPHER_SET_CTX_PARAMS: calls->set_ctx_params = OSSL_FUNC_cipher_set_ctx_params(call); break;
            default: break;
            }
        }
        break;
    }
    OSSL_PROVIDER_unquery_operation(provider, OSSL_OP_CIPHER, algorithms);
    calls->provctx = OSSL_PROVIDER_get0_provider_ctx(provider);
    return calls->newctx && calls->freectx && calls->encrypt_init && calls->decrypt_init && calls->update
        && calls->final && calls->get_ctx_params && calls->set_ctx_params;
}

void outbox_sealer_free(outbox_sealer *sealer) {
    if (!sealer) return;
    /* Both ways cleanse the expanded key when they free their contexts. */
    if (sealer->seal_ctx) sealer->calls.freectx(sealer->seal_ctx);
    if (sealer->open_ctx) sealer->calls.freectx(sealer->open_ctx);
    EVP_CIPHER_CTX_free(sealer->seal);
    EVP_CIPHER_CTX_free(sealer->open);
    EVP_CIPHER_free(sealer->cipher);
    OPENSSL_cleanse(sealer->pool, sizeof sealer->pool);
    free(sealer);
}

static int set_up_direct(outbox_sealer *sealer, const uint8_t key[32]) {
    if (!find_calls(sealer->cipher, &sealer->calls)) return 0;
    sealer->seal_ctx = sealer->calls.newctx(sealer->calls.provctx);
    sealer->open_ctx = sealer->calls.newctx(sealer->calls.provctx);
    if (sealer->seal_ctx && sealer->open_ctx
        && sealer->calls.encrypt_init(sealer->seal_ctx, key, 32, NULL, 0, NULL) == 1
        && sealer->calls.decrypt_init(sealer->open_ctx, key, 32, NULL, 0, NULL) == 1)
        return 1;
    if (sealer->seal_ctx) sealer->calls.freectx(sealer->seal_ctx);
    if (sealer->open_ctx) sealer->calls.freectx(sealer->open_ctx);
    sealer->seal_ctx = sealer->open_ctx = NULL;
    return 0;
}

outbox_sealer *outbox_sealer_new_via(const uint8_t key[32], int via_evp) {
    outbox_sealer *sealer = calloc(1, sizeof *sealer);
    if (!sealer) return NULL;
    sealer->pool_used = NONCE_POOL; /* empty: the first seal draws the pool */
    sealer->cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    if (!sealer->cipher) {
        outbox_sealer_free(sealer);
        return NULL;
    }
    if (!via_evp && set_up_direct(sealer, key)) {
        sealer->direct = 1;
        return sealer;
    }
    sealer->seal = EVP_CIPHER_CTX_new();
    sealer->open = EVP_CIPHER_CTX_new();
    if (!sealer->seal || !sealer->open
        || EVP_EncryptInit_ex(sealer->seal, sealer->cipher, NULL, key, NULL) != 1
        || EVP_DecryptInit_ex(sealer->open, sealer->cipher, NULL, key, NULL) != 1) {
        outbox_sealer_free(sealer);
        return NULL;
    }
    return sealer;
}

outbox_sealer *outbox_sealer_new(const uint8_t key[32]) { return outbox_sealer_new_via(key, 0); }

int outbox_sealer_is_direct(const outbox_sealer *sealer) { return sealer && sealer->direct; }

/* The key stays set from outbox_sealer_new: only the nonce changes per row. */
static int seal_direct(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len,
                       const uint8_t *nonce, uint8_t *body, uint8_t *tag) {
    const struct gcm_calls *calls = &sealer->calls;
    void *ctx = sealer->seal_ctx;
    size_t written = 0, final = 0;
    if (calls->encrypt_init(ctx, NULL, 0, nonce, OUTBOX_SEAL_NONCE, NULL) != 1) return -1;
    /* Additional data goes in with no output; the provider still wants room "for" it. */
    if (aad_len > 0 && calls->update(ctx, NULL, &written, aad_len, aad, aad_len) != 1) return -1;
    if (len > 0 && calls->update(ctx, body, &written, len, in, len) != 1) return -1;
    if (calls->final(ctx, body + written, &final, len - written) != 1) return -1;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, OUTBOX_SEAL_TAG), OSSL_PARAM_construct_end(),
    };
    return calls->get_ctx_params(ctx, params) == 1 ? 0 : -1;
}

static int seal_evp(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len,
                    const uint8_t *nonce, uint8_t *body, uint8_t *tag) {
    int written = 0, final = 0;
    if (EVP_EncryptInit_ex(sealer->seal, NULL, NULL, NULL, nonce) != 1) return -1;
    if (aad_len > 0 && EVP_EncryptUpdate(sealer->seal, NULL, &written, aad, (int)aad_len) != 1) return -1;
    if (len > 0 && EVP_EncryptUpdate(sealer->seal, body, &written, in, (int)len) != 1) return -1;
    if (EVP_EncryptFinal_ex(sealer->seal, body + written, &final) != 1) return -1;
    return EVP_CIPHER_CTX_ctrl(sealer->seal, EVP_CTRL_GCM_GET_TAG, OUTBOX_SEAL_TAG, tag) == 1 ? 0 : -1;
}

int outbox_seal(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len, uint8_t *out) {
    if (!sealer || len > INT_MAX || aad_len > INT_MAX) return -1;
    uint8_t *nonce = out, *body = out + OUTBOX_SEAL_NONCE, *tag = body + len;
    if (next_nonce(sealer, nonce) != 0) return -1;
    return sealer->direct ? seal_direct(sealer, aad, aad_len, in, len, nonce, body, tag)
                          : seal_evp(sealer, aad, aad_len, in, len, nonce, body, tag);
}

static int unseal_direct(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *nonce,
                         const uint8_t *body, size_t body_len, const uint8_t *tag, uint8_t *out) {
    const struct gcm_calls *calls = &sealer->calls;
    void *ctx = sealer->open_ctx;
    size_t written = 0, final = 0;
    if (calls->decrypt_init(ctx, NULL, 0, nonce, OUTBOX_SEAL_NONCE, NULL) != 1) return -1;
    if (aad_len > 0 && calls->update(ctx, NULL, &written, aad_len, aad, aad_len) != 1) return -1;
    written = 0;
    if (body_len > 0 && calls->update(ctx, out, &written, body_len, body, body_len) != 1) return -1;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, (void *)tag, OUTBOX_SEAL_TAG),
        OSSL_PARAM_construct_end(),
    };
    if (calls->set_ctx_params(ctx, params) != 1) return -1;
    return calls->final(ctx, out + written, &final, body_len - written) == 1 ? 0 : -1;
}

static int unseal_evp(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *nonce,
                      const uint8_t *body, size_t body_len, const uint8_t *tag, uint8_t *out) {
    int written = 0, final = 0;
    if (EVP_DecryptInit_ex(sealer->open, NULL, NULL, NULL, nonce) != 1) return -1;
    if (aad_len > 0 && EVP_DecryptUpdate(sealer->open, NULL, &written, aad, (int)aad_len) != 1) return -1;
    written = 0;
    if (body_len > 0 && EVP_DecryptUpdate(sealer->open, out, &written, body, (int)body_len) != 1) return -1;
    if (EVP_CIPHER_CTX_ctrl(sealer->open, EVP_CTRL_GCM_SET_TAG, OUTBOX_SEAL_TAG, (void *)tag) != 1) return -1;
    return EVP_DecryptFinal_ex(sealer->open, out + written, &final) == 1 ? 0 : -1;
}

int outbox_unseal(outbox_sealer *sealer, const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len, uint8_t *out) {
    if (!sealer || len < OUTBOX_SEAL_OVERHEAD || len > INT_MAX || aad_len > INT_MAX) return -1;
    size_t body_len = len - OUTBOX_SEAL_OVERHEAD;
    const uint8_t *nonce = in, *body = in + OUTBOX_SEAL_NONCE, *tag = body + body_len;
    int failed = sealer->direct ? unseal_direct(sealer, aad, aad_len, nonce, body, body_len, tag, out)
                                : unseal_evp(sealer, aad, aad_len, nonce, body, body_len, tag, out);
    /* Fails when the tag does not verify; what was written to out is then not to be used. */
    if (failed) OPENSSL_cleanse(out, body_len);
    return failed;
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
