import Foundation

/// An HTTPS server on 127.0.0.1 with a fresh self-signed certificate (made with the `openssl` tool), run by
/// scripts/https-test-server.py (Python's `http.server` + `ssl`) in a child process: POST answers 200 with the
/// request body. Only for the TLS tests; they are skipped where `/usr/bin/openssl` or `/usr/bin/python3` is
/// missing.
final class TLSTestServer {
    static let openssl = "/usr/bin/openssl"
    static let python = "/usr/bin/python3"
    static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: openssl) && FileManager.default.isExecutableFile(atPath: python)
            && FileManager.default.fileExists(atPath: script)
    }

    let port: UInt16
    /// The self-signed certificate: the only trust anchor that accepts this server.
    let certificatePath: String
    var baseURL: String { "https://127.0.0.1:\(port)" }
    private let directory: URL
    private let process: Process
    private let input = Pipe()

    /// scripts/https-test-server.py, shared with scripts/cli-check.sh.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/https-test-server.py").path

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificate = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        certificatePath = certificate

        let generate = Process()
        generate.executableURL = URL(fileURLWithPath: Self.openssl)
        generate.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                              "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=localhost",
                              "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
        generate.standardOutput = FileHandle.nullDevice
        generate.standardError = FileHandle.nullDevice
        try generate.run()
        generate.waitUntilExit()
        guard generate.terminationStatus == 0 else { throw TestServerError.posix("openssl req", generate.terminationStatus) }

        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = [Self.script, "tls", certificate, key, "--exit-with-stdin"]
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The child prints its port once it listens.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            line.append(chunk)
        }
        guard let port = UInt16(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            try? input.fileHandleForWriting.close()
            throw TestServerError.posix("python https server did not start", 0)
        }
        self.port = port
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }
}
