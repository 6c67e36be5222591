import CLibDeflate

/// What an accepted request's logs are read back from (`GET /_mock/logs`), shared by every log of the request:
/// the body as it came over the wire, with who sent it and when.
///
/// A gzip body is kept compressed, as it arrived, and inflated again when the logs are read. Reading is rare
/// and off the hot path; keeping the inflated JSON took many times the memory, and the kernel's page faults on
/// that much new memory for every request were the largest part of the mock's CPU per log after parsing
/// (SPEC M10; figures in BENCHMARKS.md).
final class StoredBody: Sendable {
    enum Bytes: Sendable {
        /// One gzip member and the size it inflates to.
        case gzip([UInt8], inflatedSize: Int)
        /// The body as decompressed (identity and `deflate` bodies, a gzip body the one-shot inflate did not
        /// take), or another vendor's event.
        case plain([UInt8])
    }

    let bytes: Bytes
    /// Whether the JSON has whitespace between tokens: the logs are then minified when read.
    let minify: Bool
    let install: String
    let receivedAtMs: Int64
    let vendor: Vendor
    /// An OTLP request: its records are decoded again and rendered as OTLP/JSON when read, and a log's span is
    /// the one-element range of its record's index.
    let otlp: OTLPSource?

    init(_ bytes: Bytes, minify: Bool, install: String, receivedAtMs: Int64, vendor: Vendor = .appcenter,
         otlp: OTLPSource? = nil) {
        self.bytes = bytes
        self.minify = minify
        self.install = install
        self.receivedAtMs = receivedAtMs
        self.vendor = vendor
        self.otlp = otlp
    }

    /// The body as received, inflated: the JSON the spans of this body's logs point into (or an OTLP request).
    /// Empty if a kept gzip body no longer inflates, which cannot happen to bytes that inflated when they arrived.
    func json() -> [UInt8] {
        switch bytes {
        case .plain(let json):
            return json
        case .gzip(let gzip, let size):
            guard let decompressor = libdeflate_alloc_decompressor() else { return [] }
            defer { libdeflate_free_decompressor(decompressor) }
            var ok = false
            let json = [UInt8](unsafeUninitializedCapacity: size) { out, count in
                let result = gzip.withUnsafeBufferPointer { src in
                    libdeflate_gzip_decompress(decompressor, src.baseAddress, src.count, out.baseAddress, size, nil)
                }
                ok = result == LIBDEFLATE_SUCCESS
                count = ok ? size : 0
            }
            return ok ? json : []
        }
    }
}

/// How an OTLP request's body is decoded again (`OTLPDecoder.decode`) to render its records when they are read.
struct OTLPSource: Sendable {
    var signal: OTLPSignal
    var encoding: OTLPEncoding
}

/// Reads logs back in arrival order: the logs of one request are consecutive, so each body is inflated (and an
/// OTLP request decoded) once.
struct StoredLogReader {
    private var body: StoredBody?
    private var json: [UInt8] = []
    private var records: [OTLPRecord] = []

    /// The log object as received, without whitespace between tokens.
    mutating func json(of log: StoredLog) -> ArraySlice<UInt8> {
        if body !== log.body {
            body = log.body
            json = log.body.json()
            records = []
            if let otlp = log.body.otlp {
                records = (try? OTLPDecoder.decode(signal: otlp.signal, encoding: otlp.encoding, body: json))?.records ?? []
            }
        }
        if log.body.otlp != nil {
            let index = log.span.lowerBound
            return index < records.count ? Array(records[index].json.utf8)[...] : []
        }
        guard log.span.upperBound <= json.count else { return [] }
        let slice = json[log.span]
        return log.body.minify ? Self.minified(slice) : slice
    }

    /// The bytes without whitespace outside strings (`JSONView.appendMinified`); they parsed when they arrived.
    static func minified(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var out: [UInt8] = []
        bytes.withUnsafeBufferPointer { JSONView.appendMinified($0, to: &out) }
        return out[...]
    }
}
