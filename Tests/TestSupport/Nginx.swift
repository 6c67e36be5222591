import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real nginx (Debian's package) in a child process on 127.0.0.1, for the transport tests: a server whose HTTP/2,
/// TLS and early-answer behaviour is the one ingestion front ends have, not the one a test author imagined. Each
/// instance has its own prefix directory (configuration, a throwaway self-signed certificate made with the openssl
/// tool, the pid file, temp directories, the access log) and four listeners on free ports:
///
/// | listener | what it speaks |
/// |---|---|
/// | `.http1`       | HTTP/1.1, plain |
/// | `.https1`      | HTTP/1.1 over TLS (ALPN offers only http/1.1) |
/// | `.h2`          | HTTP/2 over TLS (ALPN h2), HTTP/1.1 for a client that does not offer h2 |
/// | `.otherOrigin` | HTTP/1.1, plain: another origin (port) for cross-origin redirects |
///
/// Every listener serves the same locations, none of which reads the request body (the answer comes while the
/// client may still be sending, as a front end answers a request it refuses):
///
/// | path | answer |
/// |---|---|
/// | `/ok` | `return 200;` (empty body, `Content-Length: 0`) |
/// | `/too-large` | `return 413;` |
/// | `/unauthorized` | `return 401;` |
/// | `/redirect/301`, `/302`, `/303`, `/307`, `/308` | that status, `Location:` `/ok` on the same origin |
/// | `/redirect/307-other-origin` | 307 to `/ok` on `.otherOrigin` |
/// | `/chain/1` … `/chain/4` | 307 to `/chain/N+1` on the same origin; `/chain/5` answers 200 |
/// | `/logs` | 200 with App Center's `{"status":"Success"}`: an engine delivers to nginx as to an ingestion server |
///
/// `NginxServer(mutualTLS: true)` adds a fifth listener (`mutualTLSPort`), HTTPS that demands a client certificate
/// of its own CA (`ssl_verify_client on`) and answers 403 without one (`error_page 495 496 =403`), with the client
/// files to use (`clientCertificatePath`, `clientKeyPath`) and a certificate of no CA (`strangerCertificatePath`,
/// `strangerKeyPath`) — SPEC K2.
///
/// The access log has one line per request (`loggedRequests`), written when nginx finishes the request: read it
/// after `stop()`, which waits for nginx to finish every request, to count exactly.
///
/// `stop()` (or the deinit) ends nginx; a test process killed outright leaves it running, its pid in
/// `directory/nginx.pid`.
///
/// ```swift
/// let nginx = try NginxServer()
/// defer { nginx.stop() }
/// // post to nginx.url(.h2, "/ok") with nginx.certificatePath as the trust anchor
/// nginx.stop()
/// #expect(nginx.loggedRequests.count == 30)
/// ```
public final class NginxServer: @unchecked Sendable {
    public enum Listener: CaseIterable, Sendable {
        case http1, https1, h2, otherOrigin

        public var isTLS: Bool { self == .https1 || self == .h2 }
    }

    /// One access-log line.
    public struct LoggedRequest: Sendable, Equatable {
        public var port: UInt16
        public var status: Int
        public var method: String
        /// The request target as sent (path and query).
        public var uri: String
        /// `HTTP/1.1` or `HTTP/2.0`.
        public var protocolVersion: String
        /// The request's `Content-Length` header, nil when it had none.
        public var contentLength: Int?
    }

    public static let openssl = "/usr/bin/openssl"
    /// Where Debian installs nginx.
    public static let executable = "/usr/sbin/nginx"

    /// Why the nginx tests cannot run here, or nil when they can.
    public static var unavailableReason: String? {
        if !FileManager.default.isExecutableFile(atPath: executable) {
            return "nginx is not installed (\(executable)); `make deps` installs Debian's nginx"
        }
        if !FileManager.default.isExecutableFile(atPath: openssl) {
            return "the openssl tool is not installed (\(openssl)); `make deps` installs it"
        }
        return nil
    }

    public static var isAvailable: Bool { unavailableReason == nil }

    /// The self-signed certificate (for 127.0.0.1 and localhost): the trust anchor for the TLS listeners.
    public let certificatePath: String
    public let ports: [Listener: UInt16]
    public let directory: URL
    /// The mutual-TLS listener's port (`init(mutualTLS: true)`), and the client's files.
    public private(set) var mutualTLSPort: UInt16?
    public var clientCertificatePath: String { directory.appendingPathComponent("client-cert.pem").path }
    public var clientKeyPath: String { directory.appendingPathComponent("client-key.pem").path }
    public var strangerCertificatePath: String { directory.appendingPathComponent("stranger-cert.pem").path }
    public var strangerKeyPath: String { directory.appendingPathComponent("stranger-key.pem").path }

    private let process: ChildProcess
    private let drained = DispatchGroup()
    private let lock = NSLock()
    private var errorLines: [String] = []
    private var stopped = false

    /// Starts nginx and returns once every listener accepts connections. Throws when nginx or openssl is missing
    /// (check `isAvailable` first), or when nginx does not start (its error output is in the error).
    public init(mutualTLS: Bool = false) throws {
        if let reason = Self.unavailableReason { throw NginxError.unavailable(reason) }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-nginx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        certificatePath = directory.appendingPathComponent("cert.pem").path
        let started: (process: ChildProcess, ports: [Listener: UInt16], mutualTLSPort: UInt16?, lines: [String], reader: LineReader)
        do {
            try Self.makeCertificate(in: directory)
            if mutualTLS { try Self.makeClientCertificates(in: directory) }
            started = try Self.start(directory: directory, mutualTLS: mutualTLS)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        process = started.process
        ports = started.ports
        mutualTLSPort = started.mutualTLSPort
        errorLines = started.lines
        drainErrorOutput(started.reader)
        for listener in Listener.allCases {
            guard let port = ports[listener], Self.accepts(port: port) else {
                stop()
                throw NginxError.didNotStart("nginx logged its start but does not accept connections on \(listener)")
            }
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    public func port(_ listener: Listener) -> UInt16 { ports[listener] ?? 0 }

    /// `scheme://127.0.0.1:port` of `listener`, followed by `path`.
    public func url(_ listener: Listener, _ path: String = "") -> String {
        "\(listener.isTLS ? "https" : "http")://127.0.0.1:\(port(listener))\(path)"
    }

    /// Every request nginx has logged so far, in the order it finished them.
    public var loggedRequests: [LoggedRequest] {
        let log = directory.appendingPathComponent("access.log")
        guard let text = try? String(contentsOf: log, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count == 6, let port = UInt16(fields[0]), let status = Int(fields[1]) else { return nil }
            return LoggedRequest(port: port, status: status, method: fields[2], uri: fields[3], protocolVersion: fields[4],
                                 contentLength: Int(fields[5]))
        }
    }

    /// nginx's error output so far (notices included), for a failing test's message.
    public var errorOutput: String { lock.withLock { errorLines.joined(separator: "\n") } }

    /// Stops nginx gracefully: it finishes the requests it is serving, writes their log lines, then exits. Returns
    /// once it has. Idempotent.
    public func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        // SIGQUIT is nginx's graceful shutdown: requests in progress finish and are logged.
        if process.isRunning { kill(process.processIdentifier, SIGQUIT) }
        process.waitUntilExit()
        drained.wait()
    }

    /// SPEC K2: curl's pin of the server's public key, `sha256//BASE64` of its DER SubjectPublicKeyInfo.
    public func publicKeyPin() throws -> String {
        let pipeline = "\(Self.openssl) x509 -in '\(certificatePath)' -pubkey -noout | \(Self.openssl) pkey -pubin -outform der"
            + " | \(Self.openssl) dgst -sha256 -binary | \(Self.openssl) enc -base64"
        let run = ChildProcess()
        run.executableURL = URL(fileURLWithPath: "/bin/sh")
        run.arguments = ["-c", pipeline]
        let output = Pipe()
        run.standardOutput = output
        try run.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        run.waitUntilExit()
        let digest = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard run.terminationStatus == 0, digest.count == 44 else { throw NginxError.didNotStart("openssl could not pin the key") }
        return "sha256//" + digest
    }

    // MARK: - Starting

    /// A CA, a client certificate it signed, and a certificate of no CA, each with its key (SPEC K2).
    private static func makeClientCertificates(in directory: URL) throws {
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try runOpenSSL(["req", "-x509"] + ec + ["-keyout", path("client-ca-key.pem"), "-out", path("client-ca.pem"),
                                                 "-days", "2", "-subj", "/CN=outbox test client CA"])
        try runOpenSSL(["req"] + ec + ["-keyout", path("client-key.pem"), "-out", path("client.csr"), "-subj", "/CN=outbox host"])
        try runOpenSSL(["x509", "-req", "-in", path("client.csr"), "-CA", path("client-ca.pem"), "-CAkey", path("client-ca-key.pem"),
                        "-CAcreateserial", "-out", path("client-cert.pem"), "-days", "2"])
        try runOpenSSL(["req", "-x509"] + ec + ["-keyout", path("stranger-key.pem"), "-out", path("stranger-cert.pem"),
                                                 "-days", "2", "-subj", "/CN=stranger"])
    }

    private static func runOpenSSL(_ arguments: [String]) throws {
        let run = ChildProcess()
        run.executableURL = URL(fileURLWithPath: openssl)
        run.arguments = arguments
        run.standardOutput = FileHandle.nullDevice
        run.standardError = FileHandle.nullDevice
        try run.run()
        run.waitUntilExit()
        guard run.terminationStatus == 0 else {
            throw NginxError.didNotStart("openssl \(arguments.first ?? "") exited with \(run.terminationStatus)")
        }
    }

    private static func makeCertificate(in directory: URL) throws {
        let generate = ChildProcess()
        generate.executableURL = URL(fileURLWithPath: openssl)
        generate.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                              "-keyout", directory.appendingPathComponent("key.pem").path,
                              "-out", directory.appendingPathComponent("cert.pem").path,
                              "-days", "2", "-subj", "/CN=localhost",
                              "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
        generate.standardOutput = FileHandle.nullDevice
        generate.standardError = FileHandle.nullDevice
        try generate.run()
        generate.waitUntilExit()
        guard generate.terminationStatus == 0 else {
            throw NginxError.didNotStart("openssl req exited with \(generate.terminationStatus)")
        }
    }

    static func configuration(directory: URL, ports: [Listener: UInt16], mutualTLSPort: UInt16? = nil) -> String {
        let prefix = directory.path
        let other = ports[.otherOrigin] ?? 0
        var locations = """
                location = /ok { return 200; }
                location = /logs { default_type application/json; return 200 '{"status":"Success"}'; }
                location = /too-large { return 413; }
                location = /unauthorized { return 401; }
                location = /redirect/307-other-origin { return 307 http://127.0.0.1:\(other)/ok; }

        """
        for status in [301, 302, 303, 307, 308] {
            locations += "        location = /redirect/\(status) { return \(status) $scheme://$http_host/ok; }\n"
        }
        for hop in 1...4 {
            locations += "        location = /chain/\(hop) { return 307 $scheme://$http_host/chain/\(hop + 1); }\n"
        }
        locations += "        location = /chain/5 { return 200; }\n"

        func server(_ listener: Listener, _ listen: String) -> String {
            let tls = listener.isTLS ? """
                    ssl_certificate \(prefix)/cert.pem;
                    ssl_certificate_key \(prefix)/key.pem;

            """ : ""
            return """
                server {
                    listen 127.0.0.1:\(ports[listener] ?? 0)\(listen);
            \(tls)\(locations)    }

            """
        }

        // SPEC K2: a client certificate of the client CA, or 403 (495: a certificate that does not verify; 496: none).
        let mutual = mutualTLSPort.map { port in """
                server {
                    listen 127.0.0.1:\(port) ssl;
                    ssl_certificate \(prefix)/cert.pem;
                    ssl_certificate_key \(prefix)/key.pem;
                    ssl_client_certificate \(prefix)/client-ca.pem;
                    ssl_verify_client on;
                    error_page 495 496 =403 /client-certificate-refused;
                    location = /client-certificate-refused { return 403; }
            \(locations)    }

            """ } ?? ""

        // The pid file and every temp path inside the prefix: other nginx instances on the machine (Debian's own,
        // another test's) must not collide with this one.
        return """
        pid \(prefix)/nginx.pid;
        worker_processes 1;
        error_log stderr notice;
        events { worker_connections 512; }
        http {
            log_format counted '$server_port $status $request_method $request_uri $server_protocol $content_length';
            access_log \(prefix)/access.log counted;
            client_body_temp_path \(prefix)/client_body;
            proxy_temp_path \(prefix)/proxy;
            fastcgi_temp_path \(prefix)/fastcgi;
            uwsgi_temp_path \(prefix)/uwsgi;
            scgi_temp_path \(prefix)/scgi;
            client_max_body_size 64m;
            default_type text/plain;
        \(server(.http1, ""))\(server(.https1, " ssl"))\(server(.h2, " ssl http2"))\(server(.otherOrigin, ""))\(mutual)}

        """
    }

    /// Writes the configuration and starts nginx. Free ports are found by binding port 0 and letting go: another
    /// process may take one in between, and nginx then fails to bind it; another attempt with new ports gets past that.
    private static func start(directory: URL, mutualTLS: Bool) throws
        -> (process: ChildProcess, ports: [Listener: UInt16], mutualTLSPort: UInt16?, lines: [String], reader: LineReader) {
        var attempt = 0
        while true {
            attempt += 1
            let free = try freePorts(count: Listener.allCases.count + 1)
            let ports = Dictionary(uniqueKeysWithValues: zip(Listener.allCases, free))
            let mutualTLSPort = mutualTLS ? free.last : nil
            try configuration(directory: directory, ports: ports, mutualTLSPort: mutualTLSPort)
                .write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
            let (process, reader) = try launch(directory: directory)
            let outcome = waitUntilStarted(reader)
            if outcome.started { return (process, ports, mutualTLSPort, outcome.lines, reader) }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            let output = outcome.lines.joined(separator: "\n")
            if attempt < 3, output.contains("Address already in use") { continue }
            throw NginxError.didNotStart(output)
        }
    }

    /// Runs nginx in the foreground (`daemon off`), its error output on a pipe. No wrapper shell that would stop
    /// nginx when this process dies: a shell's `wait` inherits the test thread's blocked SIGCHLD and never returns.
    private static func launch(directory: URL) throws -> (ChildProcess, LineReader) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["-p", directory.path + "/", "-c", directory.path + "/nginx.conf", "-e", "stderr",
                             "-g", "daemon off;"]
        let errors = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        return (process, LineReader(errors.fileHandleForReading))
    }

    /// Reads nginx's error output until its master process reports starting its workers, which it does after every
    /// listening socket is bound and listening; or until the output ends (nginx exited: the lines say why).
    private static func waitUntilStarted(_ reader: LineReader) -> (started: Bool, lines: [String]) {
        var lines: [String] = []
        while let line = reader.next() {
            lines.append(line)
            if line.contains("start worker processes") { return (true, lines) }
            if line.contains("[emerg]") { return (false, lines) }
        }
        return (false, lines)
    }

    /// Keeps reading nginx's error output (a full pipe would block nginx), kept for `errorOutput`.
    private func drainErrorOutput(_ reader: LineReader) {
        drained.enter()
        // The reader moves to the thread for good: nothing else reads it from now on.
        let reader = UncheckedReader(reader: reader)
        let thread = Thread { [self] in
            while let line = reader.reader.next() {
                lock.withLock { errorLines.append(line) }
            }
            drained.leave()
        }
        thread.name = "nginx-stderr"
        thread.start()
    }

    /// `count` distinct ports that were free a moment ago.
    public static func freePorts(count: Int) throws -> [UInt16] {
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        var ports: [UInt16] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw NginxError.didNotStart("socket: errno \(errno)") }
            sockets.append(fd)
            var address = loopback(port: 0)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { throw NginxError.didNotStart("bind: errno \(errno)") }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            ports.append(UInt16(bigEndian: address.sin_port))
        }
        return ports
    }

    /// Whether a TCP connection to 127.0.0.1:`port` is accepted.
    public static func accepts(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return connected == 0
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return address
    }
}

private struct UncheckedReader: @unchecked Sendable {
    let reader: LineReader
}

public enum NginxError: Error, CustomStringConvertible {
    case unavailable(String)
    case didNotStart(String)

    public var description: String {
        switch self {
        case .unavailable(let reason): return reason
        case .didNotStart(let output): return "nginx did not start:\n\(output)"
        }
    }
}
