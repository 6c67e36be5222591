// TEMPORARY STAND-IN — replaced by the real transport (Sources/Outbox/Transport/).
typealias TransferID = Int
struct HTTPRequest { var url: String; var headers: [(String, String)]; var body: [UInt8] }
struct HTTPResponse { var status: Int; var body: [UInt8]; func header(_ name: String) -> String? { nil } }
enum TransportFailure: Error, Equatable { case connectionRefused, connectionReset, dns, tls, timeout, cancelled, malformedResponse, other(code: Int32, message: String) }
enum TransferResult { case response(HTTPResponse), failure(TransportFailure) }
struct TransportOptions { var maxActiveTransfers = 3; var requestTimeout: Duration = .seconds(30); var connectTimeout: Duration = .seconds(10); var caFile: String? = nil; var userAgent = "outbox" }
final class Transport {
    init(loop: EventLoop, options: TransportOptions) throws {}
    func send(_ request: HTTPRequest, completion: @escaping (TransferResult) -> Void) -> TransferID { 0 }
    func cancel(_ id: TransferID) {}
    func cancelAll() {}
    func close() {}
    var activeCount: Int { 0 }
}
enum Gzip { static func compress(_ bytes: [UInt8], level: Int32 = 6) throws -> [UInt8] { bytes } }
