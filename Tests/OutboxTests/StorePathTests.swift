import Foundation
import Testing
@testable import Outbox

/// SPEC S7 (round 3): the engine opens its own files only. A path that holds something else is refused by name and
/// left byte for byte as it was, with nothing created beside it; a path it cannot use names the directory and why.
@Suite("Store path (SPEC S7)")
struct StorePathTests {
    /// Expects `notAStore` for `path`, then that the directory holds exactly `entries` and the file `bytes`.
    private func expectRefusedUntouched(_ path: String, in dir: TempDirectory, bytes: Data,
                                        sourceLocation: SourceLocation = #_sourceLocation) {
        let before = dir.contents()
        do {
            _ = try Fixture.open(path)
            Issue.record("a file that is not a store was opened", sourceLocation: sourceLocation)
        } catch let error as OutboxError {
            guard case .notAStore(let named, _) = error else {
                Issue.record("expected notAStore, got \(error)", sourceLocation: sourceLocation)
                return
            }
            #expect(named == path, sourceLocation: sourceLocation)
            #expect("\(error)".contains(path), sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
        #expect(dir.contents() == before, "nothing is created beside it", sourceLocation: sourceLocation)
        #expect(FileManager.default.contents(atPath: path) == bytes, "left byte for byte", sourceLocation: sourceLocation)
        #expect(throws: OutboxError.self, sourceLocation: sourceLocation) { try StoreInspector.inspect(path: path) }
        #expect(dir.contents() == before, sourceLocation: sourceLocation)
    }

    @Test func aTextFileIsRefusedAndLeftUntouched() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("notes.txt")
        let bytes = Data("shopping: milk, eggs\nSQLite format 3 is not at the start of this file\n".utf8)
        try bytes.write(to: URL(fileURLWithPath: path))
        expectRefusedUntouched(path, in: dir, bytes: bytes)
    }

    @Test func anotherProgramsDatabaseIsRefusedAndLeftUntouched() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("contacts.db")
        let other = try Database(path: path)
        try other.exec("CREATE TABLE contacts (name TEXT, phone TEXT)")
        try other.exec("INSERT INTO contacts VALUES ('Ada', '555')")
        other.close()
        let bytes = try #require(FileManager.default.contents(atPath: path))
        expectRefusedUntouched(path, in: dir, bytes: bytes)
    }

    @Test func aDatabaseWithAnotherApplicationIDIsRefused() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("app.db")
        let other = try Database(path: path)
        try other.exec("PRAGMA application_id = 1234")
        try other.exec("CREATE TABLE meta (key TEXT, value TEXT)")  // even with a table of the same name
        other.close()
        let bytes = try #require(FileManager.default.contents(atPath: path))
        expectRefusedUntouched(path, in: dir, bytes: bytes)
    }

    @Test func aZeroLengthFileBecomesAStoreMarkedAsOutboxs() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("empty.outbox")
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let store = try Fixture.open(path)
        #expect(try store.append([Fixture.log(1)]).stored == 1)
        #expect(try store.db.pragma("application_id") == StorePathCheck.applicationID)
        store.close()
        #expect(try StorePathCheck.classify(path) == .store)
    }

    // A store copied alone (no lock, mark or WAL beside it) is still recognised by its header; and so is one
    // written before stores carried the application id, by its tables.
    @Test func aStoreWithoutItsCompanionFilesStillOpens() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file()
        let store = try Fixture.open(path)
        _ = try store.append((0..<3).map { Fixture.log($0) })
        store.close()
        for companion in StorePathCheck.companions(of: path) { FileSystem.remove(companion) }
        let reopened = try Fixture.open(path)
        #expect(try reopened.allLogs().count == 3)
        #expect(reopened.recoveredFromCorruption == nil)
        try reopened.db.exec("PRAGMA application_id = 0")  // as written by the previous release
        reopened.close()
        for companion in StorePathCheck.companions(of: path) { FileSystem.remove(companion) }
        #expect(try StorePathCheck.classify(path) == .store)
        let older = try Fixture.open(path)
        defer { older.close() }
        #expect(try older.allLogs().count == 3)
        #expect(try older.db.pragma("application_id") == StorePathCheck.applicationID)
    }

    // Only a file that was a store is moved aside: a store's header with damage behind it, alone in its directory.
    @Test func aDamagedStoreAloneIsStillMovedAside() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file()
        let store = try Fixture.open(path)
        _ = try store.append((0..<2000).map { Fixture.log($0, payloadBytes: 200) })
        store.close()
        for companion in StorePathCheck.companions(of: path) { FileSystem.remove(companion) }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 64 * 4096))
        try handle.close()
        let fresh = try Fixture.open(path)
        defer { fresh.close() }
        #expect(fresh.recoveredFromCorruption != nil)
        #expect(try fresh.allLogs().isEmpty)
    }

    @Test func aMissingDirectoryIsNamed() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let missing = dir.file("no-such-dir")
        #expect(throws: OutboxError.io(path: missing, message: "the store's directory does not exist: create it first")) {
            try Fixture.open(missing + "/store.outbox")
        }
        #expect(dir.contents().isEmpty)
    }

    @Test func aDirectoryAsTheStorePathIsNamed() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        do {
            _ = try Fixture.open(dir.path)
            Issue.record("a directory was opened as a store")
        } catch let error as OutboxError {
            guard case .io(let path, let message) = error else { Issue.record("got \(error)"); return }
            #expect(path == dir.path)
            #expect(message.contains("is a directory"))
        }
        #expect(dir.contents().isEmpty)
    }

    @Test func aFileInThePathsDirectoryPartIsNamed() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let file = dir.file("plain")
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        do {
            _ = try Fixture.open(file + "/store.outbox")
            Issue.record("a store was opened under a regular file")
        } catch let error as OutboxError {
            guard case .io(let path, let message) = error else { Issue.record("got \(error)"); return }
            #expect(path == file)
            #expect(message.contains("not a directory"))
        }
    }

    // As root every directory is writable; elsewhere a directory without write permission is named.
    @Test(.enabled(if: geteuid() != 0)) func anUnwritableDirectoryIsNamed() throws {
        let dir = TempDirectory(); defer { chmod(dir.path, 0o700); dir.remove() }
        chmod(dir.path, 0o500)
        do {
            _ = try Fixture.open(dir.file())
            Issue.record("a store was created in a read-only directory")
        } catch let error as OutboxError {
            guard case .io(let path, let message) = error else { Issue.record("got \(error)"); return }
            #expect(path == dir.path)
            #expect(message.contains("not writable"))
        }
    }
}
