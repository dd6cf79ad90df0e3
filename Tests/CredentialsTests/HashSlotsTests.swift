import Credentials
import Dispatch
import Foundation
import XCTest

/// Round 3, item 8: one Argon2 slot let 10 addresses × 5 logins/s deny logins to everyone. The
/// slots now have a short queue served one client at a time.
final class HashSlotsTests: XCTestCase {
    /// Holds the only slot until `release()`, so that others queue behind it.
    private final class Holder: @unchecked Sendable {
        let entered = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        func release() { gate.signal() }
    }

    private func hold(_ slots: HashSlots) -> Holder {
        let holder = Holder()
        Thread.detachNewThread {
            _ = slots.withSlot(client: "holder") {
                holder.entered.signal()
                holder.gate.wait()
            }
        }
        holder.entered.wait()
        return holder
    }

    /// Queues `client`'s request and waits until it is in the queue; its outcome goes to `log`.
    private func enqueue(_ slots: HashSlots, _ client: String, _ name: String, log: Locked, group: DispatchGroup) {
        let before = slots.state.waiting
        group.enter()
        Thread.detachNewThread {
            let ran = slots.withSlot(client: client) { log.append(name) }
            if ran == nil { log.append("refused \(name)") }
            group.leave()
        }
        let deadline = Date().addingTimeInterval(5)
        while slots.state.waiting == before && Date() < deadline { usleep(1000) }
    }

    final class Locked: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [String] = []
        func append(_ item: String) { lock.withLock { items.append(item) } }
        var all: [String] { lock.withLock { items } }
    }

    func testWithoutAQueueABusySlotTurnsAwayAtOnce() {
        let slots = HashSlots(limit: 1, queueLimit: 0)
        let holder = hold(slots)
        XCTAssertNil(slots.withSlot(client: "a") { 1 })
        holder.release()
    }

    /// Issue 34: with a share per client (an account's snapshot builds, its exports), a client at
    /// its share is turned away at once, free slots or not, and never waits behind itself; another
    /// client waits for the slot and gets it before the holder's next request.
    func testAClientAtItsShareIsTurnedAwayAtOnceAndOthersWaitForTheSlot() {
        let slots = HashSlots(limit: 2, queueLimit: 2, maximumWait: 10, perClientLimit: 1)
        let holder = hold(slots)
        XCTAssertEqual(slots.held(by: "holder"), 1)
        XCTAssertNil(slots.withSlot(client: "holder") { 1 }, "the holder's second request, with a slot free")
        XCTAssertEqual(slots.withSlot(client: "other") { 2 }, 2, "another client takes the free slot")
        let second = hold2(slots, client: "flooder")
        let log = Locked(), group = DispatchGroup()
        enqueue(slots, "bystander", "bystander", log: log, group: group)
        XCTAssertNil(slots.withSlot(client: "flooder") { 3 }, "at its share")
        holder.release()
        group.wait()
        XCTAssertEqual(log.all, ["bystander"])
        second.release()
        usleep(50_000)
        XCTAssertEqual(slots.state.inUse, 0)
        XCTAssertEqual(slots.held(by: "holder") + slots.held(by: "flooder") + slots.held(by: "bystander"), 0)
    }

    private func hold2(_ slots: HashSlots, client: String) -> Holder {
        let holder = Holder()
        Thread.detachNewThread {
            _ = slots.withSlot(client: client) {
                holder.entered.signal()
                holder.gate.wait()
            }
        }
        holder.entered.wait()
        return holder
    }

    func testAFreedSlotGoesToEachWaitingClientInTurn() {
        let slots = HashSlots(limit: 1, queueLimit: 10, maximumWait: 10)
        let holder = hold(slots)
        let log = Locked(), group = DispatchGroup()
        for name in ["flood-1", "flood-2", "flood-3"] { enqueue(slots, "10.0.0.1", name, log: log, group: group) }
        enqueue(slots, "192.0.2.7", "honest", log: log, group: group)
        XCTAssertEqual(slots.state.waiting, 4)
        holder.release()
        group.wait()
        XCTAssertEqual(log.all, ["flood-1", "honest", "flood-2", "flood-3"])
        XCTAssertEqual(slots.state.inUse, 0)
    }

    func testAFullQueueMakesRoomForAnotherClientAtTheFloodersExpense() {
        let slots = HashSlots(limit: 1, queueLimit: 2, maximumWait: 10)
        let holder = hold(slots)
        let log = Locked(), group = DispatchGroup()
        enqueue(slots, "10.0.0.1", "flood-1", log: log, group: group)
        enqueue(slots, "10.0.0.1", "flood-2", log: log, group: group)
        // The queue is full; the honest request pushes out the flooder's newest.
        group.enter()
        Thread.detachNewThread {
            if slots.withSlot(client: "192.0.2.7", { log.append("honest") }) == nil { log.append("refused honest") }
            group.leave()
        }
        let deadline = Date().addingTimeInterval(5)
        while !log.all.contains("refused flood-2") && Date() < deadline { usleep(1000) }
        XCTAssertEqual(log.all, ["refused flood-2"])
        holder.release()
        group.wait()
        XCTAssertEqual(log.all, ["refused flood-2", "flood-1", "honest"])
        // One client alone cannot push out its own requests: a full queue turns it away.
        let second = hold(slots)
        let more = Locked(), group2 = DispatchGroup()
        enqueue(slots, "10.0.0.1", "a", log: more, group: group2)
        enqueue(slots, "10.0.0.1", "b", log: more, group: group2)
        XCTAssertNil(slots.withSlot(client: "10.0.0.1") { 1 })
        second.release()
        group2.wait()
        XCTAssertEqual(more.all, ["a", "b"])
    }

    /// Issue 34, item 7: a user logging in often from their own address used more hashes lately
    /// than each guessing address of a flood, so by use alone the guessers went first and a full
    /// queue pushed the user out. Failures weigh `failureWeight` hashes each: the address without
    /// failures goes first and pushes a guesser out of a full queue, never the other way round.
    func testAClientWithoutFailuresGoesBeforeGuessersThatUsedFewerHashes() {
        let slots = HashSlots(limit: 1, queueLimit: 2, maximumWait: 10)
        for _ in 0..<6 { _ = slots.withSlot(client: "192.0.2.7") { () } }  // the user's logins: 6 hashes
        for client in ["10.0.0.1", "10.0.0.2"] {  // each guesser: 2 hashes, both failed
            for _ in 0..<2 { _ = slots.withSlot(client: client) { () }; slots.recordFailure(client: client) }
        }
        let holder = hold(slots)
        let log = Locked(), group = DispatchGroup()
        enqueue(slots, "10.0.0.1", "guess-1", log: log, group: group)
        enqueue(slots, "10.0.0.2", "guess-2", log: log, group: group)
        // The queue is full: the user's login takes a guesser's place and goes first.
        group.enter()
        Thread.detachNewThread {
            if slots.withSlot(client: "192.0.2.7", { log.append("user") }) == nil { log.append("refused user") }
            group.leave()
        }
        let deadline = Date().addingTimeInterval(5)
        while !log.all.contains(where: { $0.hasPrefix("refused") }) && Date() < deadline { usleep(1000) }
        holder.release()
        group.wait()
        XCTAssertEqual(log.all.count, 3, "\(log.all)")
        XCTAssertEqual(log.all.filter { $0.hasPrefix("refused") }.count, 1, "\(log.all)")
        XCTAssertFalse(log.all.contains("refused user"), "\(log.all)")
        XCTAssertEqual(log.all.filter { !$0.hasPrefix("refused") }.first, "user", "\(log.all)")
    }

    func testAFreedSlotGoesToTheClientThatUsedTheFewestLately() {
        let slots = HashSlots(limit: 1, queueLimit: 10, maximumWait: 10)
        for _ in 0..<5 { _ = slots.withSlot(client: "10.0.0.1") { () } }  // the flooder's recent use
        let holder = hold(slots)
        let log = Locked(), group = DispatchGroup()
        enqueue(slots, "10.0.0.1", "flood", log: log, group: group)
        enqueue(slots, "192.0.2.7", "honest", log: log, group: group)
        holder.release()
        group.wait()
        XCTAssertEqual(log.all, ["honest", "flood"])
    }

    func testAFullQueueOfManyFloodersStillAdmitsAnOccasionalClient() {
        let slots = HashSlots(limit: 1, queueLimit: 3, maximumWait: 10)
        for flooder in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] {
            for _ in 0..<3 { _ = slots.withSlot(client: flooder) { () } }
        }
        let holder = hold(slots)
        let log = Locked(), group = DispatchGroup()
        for flooder in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] { enqueue(slots, flooder, flooder, log: log, group: group) }
        group.enter()
        Thread.detachNewThread {
            if slots.withSlot(client: "192.0.2.7", { log.append("honest") }) == nil { log.append("refused honest") }
            group.leave()
        }
        let deadline = Date().addingTimeInterval(5)
        while !log.all.contains(where: { $0.hasPrefix("refused") }) && Date() < deadline { usleep(1000) }
        holder.release()
        group.wait()
        XCTAssertTrue(log.all.first?.hasPrefix("refused 10.0.0.") == true, "a flooder's newest waiter made room: \(log.all)")
        XCTAssertEqual(log.all.dropFirst().first, "honest", "and the occasional client went first")
    }

    func testAWaitEndsAfterTheLongestWait() {
        let slots = HashSlots(limit: 1, queueLimit: 4, maximumWait: 0.1)
        let holder = hold(slots)
        let started = Date()
        XCTAssertNil(slots.withSlot(client: "a") { 1 })
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.09)
        XCTAssertEqual(slots.state.waiting, 0)
        holder.release()
    }
}
