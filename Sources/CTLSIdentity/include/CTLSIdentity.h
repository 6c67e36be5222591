#ifndef OUTBOX_TLS_IDENTITY_H
#define OUTBOX_TLS_IDENTITY_H

/* What `outbox_tls_identity_check` found (SPEC K2). */
enum outbox_tls_identity {
    OUTBOX_TLS_IDENTITY_OK = 0,
    OUTBOX_TLS_IDENTITY_CERTIFICATE_UNREADABLE = 1,
    OUTBOX_TLS_IDENTITY_CERTIFICATE_NOT_PEM = 2,
    OUTBOX_TLS_IDENTITY_KEY_UNREADABLE = 3,
    OUTBOX_TLS_IDENTITY_KEY_NOT_PEM = 4,
    OUTBOX_TLS_IDENTITY_KEY_MISMATCH = 5,
};

/* Reads a PEM certificate and a PEM private key (unencrypted) with OpenSSL's libcrypto, as curl will, and checks
 * that the key is the certificate's. */
int outbox_tls_identity_check(const char *certificate_path, const char *key_path);

#endif
