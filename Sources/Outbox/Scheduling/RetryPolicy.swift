import FoundationEssentials

/// SPEC R3: the retry intervals of one batch, each drawn uniformly from [interval/2, interval).
struct RetryPolicy: Sendable, Equatable {
    /// Default `[10 s, 5 min, 20 min]`: at most 4 attempts.
    var intervalsMs: [Int64] = [10_000, 300_000, 1_200_000]
    /// SPEC R4: the longest pause a server's Retry-After may impose.
    var maxRetryAfterMs: Int64 = 3_600_000

    var maxAttempts: Int { intervalsMs.count + 1 }

    /// The delay before attempt `attempts + 1` after `attempts` failed ones, or nil when the batch used them all.
    func delay<R: RandomNumberGenerator>(afterFailedAttempts attempts: Int, using random: inout R) -> Int64? {
        guard attempts >= 1, attempts <= intervalsMs.count else { return nil }
        let interval = intervalsMs[attempts - 1]
        let low = interval / 2
        // Guard the empty range: Int64.random(in: 0..<0) traps.
        guard interval > low else { return interval }
        return Int64.random(in: low..<interval, using: &random)
    }

    /// SPEC R4: the server's wish, capped; only a wait longer than the scheduled one pauses the pipeline.
    func pipelinePause(retryAfterMs: Int64?, scheduledMs: Int64) -> Int64? {
        guard let retryAfterMs, retryAfterMs > scheduledMs else { return nil }
        return min(retryAfterMs, maxRetryAfterMs)
    }

    /// Parses `Retry-After` (delta seconds or an HTTP date) and `x-ms-retry-after-ms` into milliseconds from `nowMs`.
    static func retryAfterMs(retryAfter: String?, msRetryAfter: String?, nowMs: Int64) -> Int64? {
        if let text = msRetryAfter?.trimming(\.isSpaceOrTab), let ms = Int64(text), ms >= 0 { return ms }
        guard let text = retryAfter?.trimming(\.isSpaceOrTab), !text.isEmpty else { return nil }
        if let seconds = Int64(text), seconds >= 0 {
            // A wait too long for milliseconds in 64 bits is as good as forever: `pipelinePause` caps it (SPEC R4).
            let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
            return overflow ? Int64.max : ms
        }
        if let dateMs = HTTPDate.parse(text) { return max(0, dateMs - nowMs) }
        return nil
    }
}

/// RFC 7231 IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form servers send in `Date` and `Retry-After`.
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func parse(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        // Four-digit years only (RFC 9110 §5.6.7): any other number would overflow the day count below.
        guard parts.count == 6, parts[5] == "GMT", let day = Int64(parts[1]),
              let monthIndex = months.firstIndex(of: String(parts[2])), let year = Int64(parts[3]),
              (0...9999).contains(year) else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let hour = Int64(time[0]), let minute = Int64(time[1]), let second = Int64(time[2]),
              (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = daysFromCivil(year: year, month: Int64(monthIndex + 1), day: day)
        return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000
    }

    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
