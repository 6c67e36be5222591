import Glibc
@_spi(CInterface) import Outbox

// SPEC H1 through include/outbox.h: `outbox_set_before_store` installs a C function as the engine's before-store hook.
// The engine calls it on the tracking thread with the event's JSON; it answers OUTBOX_HOOK_STORE (with or without a
// replacement JSON, which the engine reads and copies before the tracking call returns: the host owns its memory) or
// OUTBOX_HOOK_DROP. Anything else, or a replacement that is not valid, refuses the call with OUTBOX_EINVAL.

public typealias CBeforeStore = @convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?,
                                                UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32

let hookStore: Int32 = 0
let hookDrop: Int32 = 1

/// The host's function and its pointer; the host vouches for calling it from any tracking thread.
private struct CBeforeStoreFunction: @unchecked Sendable {
    let function: CBeforeStore
    let user: UnsafeMutableRawPointer?

    func run(_ event: inout OutgoingEvent) throws(OutboxError) -> Bool {
        let json = event.cJSON
        var replacement: UnsafePointer<CChar>?
        let verdict = json.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { function($0.baseAddress, user, &replacement) }
        }
        switch verdict {
        case hookDrop:
            return false
        case hookStore:
            guard let replacement else { return true }
            let text = UnsafeBufferPointer(start: UnsafeRawPointer(replacement).assumingMemoryBound(to: UInt8.self),
                                           count: strlen(replacement))
            event = try OutgoingEvent(replacementJSON: text)
            return true
        default:
            throw .beforeStoreHook("the callback returned \(verdict), not OUTBOX_HOOK_STORE (0) or OUTBOX_HOOK_DROP (1)")
        }
    }
}

@_cdecl("outbox_set_before_store")
public func outbox_set_before_store(_ handle: UnsafeMutableRawPointer?, _ function: CBeforeStore?,
                                    _ user: UnsafeMutableRawPointer?) -> Int32 {
    call(handle, "outbox_set_before_store") { c in
        let hook = function.map { function in
            let host = CBeforeStoreFunction(function: function, user: user)
            return BeforeStoreHook(throwing: { (event: inout OutgoingEvent) throws(OutboxError) -> Bool in try host.run(&event) })
        }
        try c.engine.update { $0.setBeforeStore(hook) }
    }
}
