import Foundation

// Google Analytics 4's Measurement Protocol (SPEC D12), as its documentation states it
// (https://developers.google.com/analytics/devguides/collection/protocol/ga4/sending-events,
// https://developers.google.com/analytics/devguides/collection/protocol/ga4/validating-events,
// https://support.google.com/analytics/answer/9267744):
// - `POST /mp/collect?measurement_id=…&api_secret=…` with `{"client_id", "user_id"?, "timestamp_micros"?,
//   "user_properties"?, "events": [{"name", "params"?, "timestamp_micros"?}]}`; GA4 answers 2xx whatever the body
//   holds, and drops what breaks its rules without saying so: the mock answers 204 as GA4 does, records every event,
//   and counts in `events_invalid` what `/debug/mp/collect` would flag;
// - `POST /debug/mp/collect`: the same validation answered as `{"validationMessages": [{"fieldPath", "description",
//   "validationCode"}]}`, nothing recorded;
// - rules: at most 25 events a request and 130 kB; event names `[A-Za-z][A-Za-z0-9_]*` of at most 40 characters,
//   not reserved; at most 25 parameters an event, names as events', string values of at most 100; at most 25 user
//   properties, names of at most 24, values of at most 36; an event at most 72 hours old;
// - no de-duplication: `events_unique` counts events distinct by client_id, name, timestamp_micros and params, the
//   others `events_duplicate`; nothing is dropped. `log_name` is `name`; the delay uses `timestamp_micros`.

enum GA4Wire {
    static let collectPath = "/mp/collect"
    static let debugPath = "/debug/mp/collect"
    static let reservedEvents: Set<String> = [
        "ad_activeview", "ad_click", "ad_exposure", "ad_impression", "ad_query", "ad_reward", "adunit_exposure",
        "app_background", "app_clear_data", "app_exception", "app_remove", "app_store_refund",
        "app_store_subscription_cancel", "app_store_subscription_convert", "app_store_subscription_renew", "app_update",
        "app_upgrade", "dynamic_link_app_open", "dynamic_link_app_update", "dynamic_link_first_open", "error",
        "firebase_campaign", "firebase_in_app_message_action", "firebase_in_app_message_dismiss",
        "firebase_in_app_message_impression", "first_open", "first_visit", "in_app_purchase", "notification_dismiss",
        "notification_foreground", "notification_open", "notification_receive", "notification_send", "os_update",
        "session_start", "session_start_with_rollout", "user_engagement"]
    static let reservedPrefixes = ["_", "firebase_", "ga_", "google_", "gtag."]
    static let reservedUserProperties: Set<String> = ["first_open_time", "first_visit_time", "last_deep_link_referrer",
                                                      "user_id", "first_open_after_install"]

    static func error(_ status: Int, _ reason: String) -> HTTPResponse {
        HTTPResponse(status: status, body: #"{"error":{"code":\#(status),"message":\#(jsonString(reason))}}"#)
    }

    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse {
        { status in (200..<300).contains(status) ? HTTPResponse(status: status, body: []) : error(status, "\(status) injected by the scenario") }
    }

    static func isName(_ text: String, max: Int) -> Bool {
        guard let first = text.utf8.first, text.utf8.count <= max, (first | 0x20) >= 97, (first | 0x20) <= 122 else { return false }
        return text.utf8.allSatisfy { ($0 | 0x20) >= 97 && ($0 | 0x20) <= 122 || ($0 >= 48 && $0 <= 57) || $0 == 95 }
    }

    static func decode(_ request: VendorRequest) -> VendorBatch {
        let injected = injected(request)
        guard request.method == .POST else {
            var r = error(405, "\(request.path) only accepts POST")
            r.headers.append(("Allow", "POST"))
            return .refusedWhole(.ga4, r, injected: injected)
        }
        let debug = request.path == debugPath
        var messages: [(String, String, String)] = []
        let query = request.query
        for name in ["measurement_id", "api_secret"] where (query.first { $0.0 == name }?.1 ?? "").isEmpty {
            messages.append((name, "\(name) is missing from the query", "VALUE_REQUIRED"))
        }
        if request.body.count > 130_000 { messages.append(("", "the body is over 130 kB", "VALUE_INVALID")) }
        let parsed = withJSON(request.body) { doc -> VendorBatch in
            var batch = VendorBatch(vendor: .ga4, normal: HTTPResponse(status: 204, body: []), injected: injected)
            guard doc[0].kind == .object else {
                messages.append(("", "the body must be a JSON object", "VALUE_INVALID"))
                return batch
            }
            let client = doc.stringMember(0, "client_id") ?? doc.stringMember(0, "app_instance_id")
            if (client ?? "").isEmpty { messages.append(("client_id", "client_id is required", "VALUE_REQUIRED")) }
            if let properties = doc.member(0, "user_properties") {
                var count = 0
                doc.forEachMember(of: properties) { k, v in
                    count += 1
                    let name = doc.string(k)
                    if !isName(name, max: 24) || reservedUserProperties.contains(name) || reservedPrefixes.contains(where: name.hasPrefix) {
                        messages.append(("user_properties.\(name)", "user property name not valid or reserved", "NAME_INVALID"))
                    }
                    if let value = doc.member(v, "value"), doc[value].kind == .string, doc.characterCount(value) > 36 {
                        messages.append(("user_properties.\(name).value", "value over 36 characters", "VALUE_INVALID"))
                    }
                }
                if count > 25 { messages.append(("user_properties", "more than 25 user properties", "VALUE_INVALID")) }
            }
            guard let list = doc.member(0, "events"), doc[list].kind == .array else {
                messages.append(("events", "events is required", "VALUE_REQUIRED"))
                return batch
            }
            var events: [Int] = []
            doc.forEachElement(of: list) { _, e in events.append(e) }
            if events.isEmpty || events.count > 25 {
                messages.append(("events", "a request carries 1 to 25 events, got \(events.count)", "VALUE_INVALID"))
            }
            batch.eventCount = events.count
            let requestLevel = messages.count
            let nowMicros = Int64(Date().timeIntervalSince1970 * 1_000_000)
            let requestTime = doc.member(0, "timestamp_micros").flatMap(doc.int64)
            for (position, e) in events.enumerated() {
                let before = messages.count
                let name = doc.stringMember(e, "name") ?? ""
                batch.names.append(name)
                if !isName(name, max: 40) || reservedEvents.contains(name) || reservedPrefixes.contains(where: name.hasPrefix) {
                    messages.append(("events[\(position)].name", "event name \(name) not valid or reserved", "NAME_INVALID"))
                }
                var params: [UInt8] = []
                if let p = doc.member(e, "params") {
                    params = doc.minified(p)
                    var count = 0
                    doc.forEachMember(of: p) { k, v in
                        count += 1
                        let key = doc.string(k)
                        if !isName(key, max: 40) || reservedPrefixes.contains(where: key.hasPrefix) {
                            messages.append(("events[\(position)].params.\(key)", "parameter name not valid or reserved", "NAME_INVALID"))
                        }
                        if doc[v].kind == .string, doc.characterCount(v) > 100 {
                            messages.append(("events[\(position)].params.\(key)", "value over 100 characters", "VALUE_INVALID"))
                        }
                    }
                    if count > 25 { messages.append(("events[\(position)].params", "more than 25 parameters", "VALUE_INVALID")) }
                }
                let micros = doc.member(e, "timestamp_micros").flatMap(doc.int64) ?? requestTime
                if let micros, nowMicros - micros > 72 * 3600 * 1_000_000 {
                    messages.append(("events[\(position)].timestamp_micros", "more than 72 hours old", "VALUE_INVALID"))
                }
                if messages.count > before { batch.invalid += 1 }
                let key = "\(client ?? "")|\(name)|\(micros.map(String.init) ?? "")|" + String(decoding: params, as: UTF8.self)
                batch.events.append(VendorEvent(key: key, name: name, timestampMs: micros.map { $0 / 1000 },
                                                json: doc.minified(e)))
            }
            // A fault of the request's own (its query, its client_id) makes every event of it one GA4 drops.
            if requestLevel > 0 { batch.invalid = events.count }
            return batch
        }
        var batch: VendorBatch
        switch parsed {
        case .success(let read): batch = read
        case .failure(let error):
            messages.append(("", "the body is not JSON: \(error.reason)", "VALUE_INVALID"))
            batch = VendorBatch(vendor: .ga4, normal: HTTPResponse(status: 204, body: []), injected: injected)
        }
        guard debug else { return batch }
        // The validation server records nothing; it answers what it found.
        let list = messages.map {
            #"{"fieldPath":\#(jsonString($0.0)),"description":\#(jsonString($0.1)),"validationCode":\#(jsonString($0.2))}"#
        }
        var answer = VendorBatch(vendor: .ga4, normal: HTTPResponse(status: 200, body: #"{"validationMessages":[\#(list.joined(separator: ","))]}"#),
                                 injected: injected)
        answer.eventCount = batch.eventCount
        return answer
    }
}
