#include "CTLSIdentity.h"

#include <stdio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

/* A passphrase callback that gives none: an encrypted key is refused instead of prompting on the terminal. */
static int no_passphrase(char *buffer, int size, int rwflag, void *userdata) {
    (void)buffer; (void)size; (void)rwflag; (void)userdata;
    return -1;
}

int outbox_tls_identity_check(const char *certificate_path, const char *key_path) {
    FILE *file = fopen(certificate_path, "r");
    if (!file) return OUTBOX_TLS_IDENTITY_CERTIFICATE_UNREADABLE;
    X509 *certificate = PEM_read_X509(file, NULL, no_passphrase, NULL);
    fclose(file);
    if (!certificate) { ERR_clear_error(); return OUTBOX_TLS_IDENTITY_CERTIFICATE_NOT_PEM; }
    file = fopen(key_path, "r");
    if (!file) { X509_free(certificate); return OUTBOX_TLS_IDENTITY_KEY_UNREADABLE; }
    EVP_PKEY *key = PEM_read_PrivateKey(file, NULL, no_passphrase, NULL);
    fclose(file);
    if (!key) { X509_free(certificate); ERR_clear_error(); return OUTBOX_TLS_IDENTITY_KEY_NOT_PEM; }
    int matches = X509_check_private_key(certificate, key);
    EVP_PKEY_free(key);
    X509_free(certificate);
    ERR_clear_error();
    return matches == 1 ? OUTBOX_TLS_IDENTITY_OK : OUTBOX_TLS_IDENTITY_KEY_MISMATCH;
}
