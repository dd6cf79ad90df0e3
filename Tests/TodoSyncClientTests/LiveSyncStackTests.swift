import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// Live sync through the real stack (nginx nchan → responders → MariaDB): a change pushed by
/// one device reaches another device's store through its engine, with no `sync()` call on it.
final class LiveSyncStackTests: StackTestCase {
    func testAChangePushedFromAReachesBsStoreWithinTwoSeconds() async throws {
        let a = try await device("A")
        let b = try await device("B")
        // The timer is out of the way: only the live stream can bring the change in time.
        let engine = SyncEngine(client: b.client, settings: SyncEngine.Settings(interval: 3600))
        let log = EventLog(engine)
        await engine.start()
        await waitFor("B's stream is open and its first sync done", timeout: 10) {
            log.events.contains(.connected) && !log.synced.isEmpty
        }
        await settle(engine)

        let day = Day("2026-11-24")!
        var latencies: [Double] = []
        for index in 0..<3 {
            let title = "From A \(index)"
            try a.store.addTodo(NewTodo(title: title, deadline: day))
            try await a.client.sync()
            let pushed = Date()
            await waitFor("B has \(title)", timeout: 2) {
                ((try? b.store.todos(from: day, to: day)) ?? []).contains { $0.title == title }
            }
            latencies.append(Date().timeIntervalSince(pushed))
        }
        print("live propagation A → B (push answered → in B's store), seconds: \(latencies)")
        XCTAssertTrue(latencies.allSatisfy { $0 < 2 }, "\(latencies)")
        XCTAssertTrue(log.synced.contains(.poke), "B pulled because of a poke")
        await engine.stop()
        try await assertEqualsServer(b)
    }
}
