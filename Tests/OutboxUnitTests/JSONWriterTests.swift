import Foundation
import Testing
@testable import Outbox

/// The escapes of RFC 8259 written one byte at a time: what `JSONWriter.string` wrote before it scanned eight bytes
/// at a time, and must still write byte for byte.
private func escapedOneByteAtATime(_ bytes: [UInt8]) -> [UInt8] {
    let hex = Array("0123456789abcdef".utf8)
    var out: [UInt8] = [UInt8(ascii: "\"")]
    for byte in bytes {
        switch byte {
        case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
        case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
        case 0x0A: out += Array(#"\n"#.utf8)
        case 0x0D: out += Array(#"\r"#.utf8)
        case 0x09: out += Array(#"\t"#.utf8)
        case 0x08: out += Array(#"\b"#.utf8)
        case 0x0C: out += Array(#"\f"#.utf8)
        case 0..<0x20: out += Array(#"\u00"#.utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
        default: out.append(byte)
        }
    }
    out.append(UInt8(ascii: "\""))
    return out
}

private func written(_ bytes: [UInt8]) -> [UInt8] {
    var writer = JSONWriter()
    bytes.withUnsafeBufferPointer { writer.string(utf8: $0) }
    return writer.bytes
}

private func written(_ text: String) -> [UInt8] {
    var writer = JSONWriter()
    writer.string(text)
    return writer.bytes
}

/// Bytes whose neighbours matter to the word-at-a-time scan: each class's bounds, and bytes with the high bit set.
private let edgeBytes: [UInt8] = [0x00, 0x01, 0x08, 0x0A, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0xA2, 0xDC, 0xFF]

@Suite("JSONWriter strings (SPEC W2)")
struct JSONWriterTests {
    // W2: every byte value, at every position of strings of 0 to 33 bytes (the scan's steps of two words and of one,
    // and the tail after them), is written as the one-byte-at-a-time escaper writes it.
    @Test(arguments: 0...33) func everyByteAtEveryPositionIsEscapedAsOneByteAtATime(length: Int) {
        #expect(written([UInt8](repeating: UInt8(ascii: "a"), count: length))
                == escapedOneByteAtATime([UInt8](repeating: UInt8(ascii: "a"), count: length)))
        for position in 0..<length {
            for value in 0...255 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                bytes[position] = UInt8(value)
                #expect(written(bytes) == escapedOneByteAtATime(bytes), "byte \(value) at \(position) of \(length)")
            }
        }
    }

    // W2: two bytes that need escaping in one word: the scan's borrows flag bytes above the first match falsely,
    // so the first must be found exactly and the scan must go on after it.
    @Test func pairsOfEdgeBytesInOneWordAreEscapedAsOneByteAtATime() {
        for first in 0..<16 {
            for second in first + 1..<min(first + 10, 21) {
                for a in edgeBytes {
                    for b in edgeBytes {
                        var bytes = [UInt8](repeating: UInt8(ascii: "x"), count: 21)
                        bytes[first] = a
                        bytes[second] = b
                        #expect(written(bytes) == escapedOneByteAtATime(bytes), "\(a) at \(first), \(b) at \(second)")
                    }
                }
            }
        }
    }

    // The mask's lowest flag is the first byte to escape, whatever the other bytes of the word.
    @Test func theMasksLowestFlagIsTheFirstByteToEscape() {
        var generator = IDGenerator(seed: 11)
        for _ in 0..<20_000 {
            // Random words biased towards the bytes around each class bound.
            var word: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 8) {
                let random = generator.next()
                let byte = random & 1 == 0 ? edgeBytes[Int(random >> 8) % edgeBytes.count] : UInt8(truncatingIfNeeded: random >> 16)
                word |= UInt64(byte) << UInt64(shift)
            }
            let bytes = withUnsafeBytes(of: word.littleEndian) { Array($0) }
            let expected = bytes.firstIndex(where: JSONWriter.needsEscape)
            let mask = JSONWriter.escapeMask(word)
            #expect((mask == 0 ? nil : mask.trailingZeroBitCount >> 3) == expected, "word \(String(word, radix: 16))")
        }
    }

    // W2: multi-byte UTF-8 passes through unchanged, next to escapes and across word boundaries.
    @Test(arguments: ["é", "ü😀", "日本語のテキスト", "\u{01}é\"😀\\\n", "aaaaaaé", "aaaaaaa😀b", "😀😀😀😀\u{1F}",
                      "e\u{301}\u{302}", String(repeating: "ñ\t", count: 9)])
    func multiByteUTF8IsKeptAndItsNeighboursEscaped(text: String) throws {
        #expect(written(text) == escapedOneByteAtATime(Array(text.utf8)))
        let decoded = try JSONSerialization.jsonObject(with: Data(written(text)), options: .fragmentsAllowed) as? String
        #expect(decoded == text)
    }

    // A writer given too small a buffer (an event's stack buffer, sized for no escapes) moves on to the heap and
    // loses nothing.
    @Test(arguments: [0, 1, 7, 8, 30, 64]) func aWriterOutgrowsTheBufferItWasGiven(size: Int) {
        func write(_ writer: inout JSONWriter) {
            writer.raw("{\"name\":")
            writer.string("q\"\u{01}\u{1F}\\ü😀" + String(repeating: "\n", count: 20))
            writer.raw(",\"n\":")
            writer.int(-1234567890)
            writer.raw(",\"d\":")
            writer.double(2.5)
            writer.raw(",\"t\":")
            writer.timestamp(ms: 1_795_332_826_123)
            writer.raw(UInt8(ascii: "}"))
        }
        var heap = JSONWriter()
        write(&heap)
        let stack = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: size)
        defer { stack.deallocate() }
        var writer = JSONWriter(buffer: stack)
        write(&writer)
        #expect(writer.bytes == heap.bytes)
        #expect(writer.count == heap.count)
        writer.withBytes { #expect(Array($0) == heap.bytes) }
        #expect(String(decoding: heap.bytes, as: UTF8.self).hasSuffix(#","n":-1234567890,"d":2.5,"t":"2026-11-22T07:33:46.123Z"}"#))
    }

    // W2: the strings of 0 to 17 characters that the scan splits differently (words, tail, both) round-trip.
    @Test func stringsOfEveryShortLengthRoundTrip() throws {
        for length in 0...17 {
            for special in ["a", "\"", "\\", "\u{00}", "\u{1F}", "ö"] {
                let text = String(repeating: "a", count: length / 2) + special + String(repeating: "b", count: length - length / 2)
                let decoded = try JSONSerialization.jsonObject(with: Data(written(text)), options: .fragmentsAllowed) as? String
                #expect(decoded == text)
            }
        }
    }
}
