import Foundation
import NIOHTTP1

/// Batches in the form each vendor's official Python client sends them (Fixtures/vendors): Segment and
/// PostHog as gzip JSON (their `gzip=True`), Snowplow as tp2 JSON, Mixpanel as BufferedConsumer's form, OTLP as
/// protobuf log batches gzipped (the exporter's `compression=Gzip`).
/// Every event has its own key, so the server de-duplicates nothing.
enum VendorMaker {
    static let vendors: Set<String> = ["segment", "posthog", "snowplow", "mixpanel", "otlp"]

    static func gzipped(_ vendor: String) -> Bool { vendor == "segment" || vendor == "posthog" || vendor == "otlp" }

    static func head(_ vendor: String) -> HTTPRequestHead {
        var head: HTTPRequestHead
        switch vendor {
        case "segment":
            head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/batch")
            head.headers.add(name: "Authorization", value: "Basic V0tfYmVuY2g6")
        case "posthog":
            head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/batch/")
        case "snowplow":
            head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/com.snowplowanalytics.snowplow/tp2")
        case "otlp":
            head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/logs")
            head.headers.add(name: "Content-Type", value: "application/x-protobuf")
            head.headers.add(name: "Content-Encoding", value: "gzip")
            return head
        default:
            head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/track")
            head.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            return head
        }
        head.headers.add(name: "Content-Type", value: "application/json")
        if gzipped(vendor) { head.headers.add(name: "Content-Encoding", value: "gzip") }
        return head
    }

    static func body(_ vendor: String, r: Int, batchSize: Int, timestamp: String) -> [UInt8] {
        if vendor == "otlp" {
            return OTLPMaker.logsRequest(r: r, batchSize: batchSize, nowNs: UInt64(Date().timeIntervalSince1970 * 1e9))
        }
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let events = (0..<batchSize).map { i -> String in
            let n = r * batchSize + i
            let id = UUID().uuidString.lowercased()
            let name = LogMaker.names[n % LogMaker.names.count]
            let user = "user-\(r % 97)"
            switch vendor {
            case "segment":
                return #"{"integrations":{},"anonymousId":null,"properties":{"i":\#(n),"price":\#(Double(n % 1000) / 10 + 0.99),"#
                    + #""sku":"A-\#(n % 50)","premium":\#(n % 3 == 0)},"timestamp":"\#(timestamp)","context":{"library":"#
                    + #"{"name":"analytics-python","version":"2.4.0"}},"userId":"\#(user)","type":"track","#
                    + #""event":"\#(name)","messageId":"\#(id)"}"#
            case "posthog":
                return #"{"properties":{"i":\#(n),"price":\#(Double(n % 1000) / 10 + 0.99),"sku":"A-\#(n % 50)","#
                    + #""$python_runtime":"CPython","$python_version":"3.11.7","$os":"Linux","$lib":"posthog-python","#
                    + #""$lib_version":"7.91.1","$geoip_disable":true},"timestamp":"\#(timestamp)","#
                    + #""distinct_id":"\#(user)","event":"\#(name)","uuid":"\#(id)"}"#
            case "snowplow":
                return #"{"e":"se","se_ca":"shop","se_ac":"\#(name)","se_la":"A-\#(n % 50)","se_pr":"\#(n)","#
                    + #""se_va":"9.99","p":"pc","uid":"\#(user)","eid":"\#(id)","dtm":"\#(nowMs)","tv":"py-1.1.0","#
                    + #""tna":"ns1","aid":"app-1","stm":"\#(nowMs)"}"#
            default:
                return #"{"event":"\#(name)","properties":{"token":"mp_token","distinct_id":"\#(user)","#
                    + #""time":\#(Double(nowMs) / 1000),"$insert_id":"\#(id.replacingOccurrences(of: "-", with: ""))","#
                    + #""mp_lib":"python","$lib_version":"5.4.1","i":\#(n),"price":9.99,"sku":"A-\#(n % 50)"}}"#
            }
        }.joined(separator: ",")
        switch vendor {
        case "segment":
            return Array(#"{"batch":[\#(events)],"sentAt":"\#(timestamp)","writeKey":"WK_bench"}"#.utf8)
        case "posthog":
            return Array(#"{"batch":[\#(events)],"historical_migration":false,"sent_at":"\#(timestamp)","#
                .utf8) + Array(#""api_key":"phc_bench"}"#.utf8)
        case "snowplow":
            return Array(#"{"schema":"iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4","#
                .utf8) + Array(#""data":[\#(events)]}"#.utf8)
        default:
            let json = "[\(events)]"
            let encoded = json.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? json
            return Array("data=\(encoded)&verbose=1&ip=0".utf8)
        }
    }
}
