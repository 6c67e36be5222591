import CTLSIdentity

/// SPEC K2: the host's TLS identity and the server's pins, checked at configuration, naming the file or the value.
enum TLSIdentity {
    static func validate(certificate: String?, key: String?, pins: String?) throws(OutboxError) {
        switch (certificate, key) {
        case (nil, nil):
            break
        case (nil, _?):
            throw .invalidConfiguration("clientKey is set without clientCertificate: give both or neither")
        case (_?, nil):
            throw .invalidConfiguration("clientCertificate is set without clientKey: give both or neither")
        case (let certificate?, let key?):
            switch outbox_tls_identity_check(certificate, key) {
            case Int32(OUTBOX_TLS_IDENTITY_OK.rawValue): break
            case Int32(OUTBOX_TLS_IDENTITY_CERTIFICATE_UNREADABLE.rawValue):
                throw .invalidConfiguration("clientCertificate \(certificate) is not a readable file")
            case Int32(OUTBOX_TLS_IDENTITY_CERTIFICATE_NOT_PEM.rawValue):
                throw .invalidConfiguration("clientCertificate \(certificate) holds no PEM certificate")
            case Int32(OUTBOX_TLS_IDENTITY_KEY_UNREADABLE.rawValue):
                throw .invalidConfiguration("clientKey \(key) is not a readable file")
            case Int32(OUTBOX_TLS_IDENTITY_KEY_NOT_PEM.rawValue):
                throw .invalidConfiguration("clientKey \(key) holds no unencrypted PEM private key")
            default:
                throw .invalidConfiguration("clientKey \(key) is not the key of clientCertificate \(certificate)")
            }
        }
        if let pins { try validate(pins: pins) }
    }

    /// curl's form: `sha256//BASE64` pins separated by `;`, each the base64 of 32 bytes (44 characters). curl is given
    /// the text as it is and splits it at `;sha256//`, so a space around a pin would make that pin never match: refused.
    static func validate(pins: String) throws(OutboxError) {
        for pin in pins.split(separator: ";", omittingEmptySubsequences: false) {
            guard pin.hasPrefix("sha256//") else {
                throw .invalidConfiguration("pinnedPublicKey: '\(pin)' is not a sha256//BASE64 pin (curl's form; several separated by ; without spaces)")
            }
            let digest = pin.dropFirst("sha256//".count)
            let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
            guard digest.count == 44, digest.hasSuffix("="), digest.dropLast().allSatisfy({ alphabet.contains($0) }) else {
                throw .invalidConfiguration("pinnedPublicKey: '\(pin)' is not a SHA-256 digest in base64 (44 characters ending in =)")
            }
        }
    }
}
