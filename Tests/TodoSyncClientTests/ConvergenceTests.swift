import Foundation
import GRDB
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// Five devices of one account, each going on- and offline at random and making random edits
/// (todos and tags, under every conflict policy). At the end every device's store equals the
/// server field for field, and every create a device was told `applied` is on the server unless
/// a delete that was applied removed it.
final class ConvergenceTests: StackTestCase {
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    func testFiveDevicesWithRandomSchedulesConverge() async throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["TODOSYNC_TEST_SEED"] ?? "") ?? UInt64.random(in: 1...1_000_000)
        print("[figures] client convergence seed=\(seed)")
        var random = Generator(state: seed)
        var devices: [Device] = []
        for index in 0..<5 { devices.append(try await device("device-\(index)")) }
        let policies: [ConflictStrategy] = [.merge, .reject, .clientWins, .askApp]
        var creates: [(device: Device, opID: String, localID: Int64, entity: EntityKind)] = []
        var deletes: [(device: Device, opID: String, clientID: String?)] = []
        var syncs = 0

        for _ in 0..<150 {
            let device = devices[Int.random(in: 0..<devices.count, using: &random)]
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                try edit(device, random: &random, creates: &creates, deletes: &deletes)
            }
            if Int.random(in: 0..<10, using: &random) < 4 {
                let policy = policies[Int.random(in: 0..<policies.count, using: &random)]
                try await device.client.sync(policy: policy)
                try settleInbox(device, random: &random)
                syncs += 1
            }
        }
        // Everyone comes online until nothing is left to send.
        for _ in 0..<4 {
            for device in devices {
                try settleInbox(device, random: &random)
                try await device.client.sync(policy: .merge)
                syncs += 1
            }
        }
        for device in devices { try await device.client.sync() }

        let token = try devices[0].token
        let server = try await serverState(token: token)
        for device in devices { try await assertEqualsServer(device) }

        // Nothing a device was told `applied` is missing.
        let liveTodoClientIDs = Set(server.todos.compactMap { $0["clientId"]?.stringValue })
        let liveTagClientIDs = Set(server.tags.compactMap { $0["clientId"]?.stringValue })
        // Deletes that applied (made by the app, or by resolving a conflict with "keep mine").
        var deleted = Set<String>()
        for device in devices {
            deleted.formUnion(try await device.store.pool.read { db in
                try String.fetchAll(db, sql: """
                    SELECT COALESCE(todo.clientId, tag.clientId) FROM operationLog
                    LEFT JOIN todo ON operationLog.entity = 'todo' AND todo.localId = operationLog.recordLocalId
                    LEFT JOIN tag ON operationLog.entity = 'tag' AND tag.localId = operationLog.recordLocalId
                    WHERE operationLog.action = 'delete' AND operationLog.status = 'applied'
                    """)
            })
        }
        XCTAssertGreaterThanOrEqual(deleted.count, Set(deletes.filter { (try? $0.device.store.status(ofOperation: $0.opID)) == .applied }.compactMap(\.clientID)).count)
        var applied = 0
        for create in creates where try create.device.store.status(ofOperation: create.opID) == .applied {
            applied += 1
            let clientID = try await create.device.store.pool.read { db in
                try String.fetchOne(db, sql: "SELECT clientId FROM \(create.entity.rawValue) WHERE localId = ?", arguments: [create.localID])
            }
            guard let clientID, !deleted.contains(clientID) else { continue }
            let live = create.entity == .todo ? liveTodoClientIDs : liveTagClientIDs
            XCTAssertTrue(live.contains(clientID), "applied \(create.entity) create \(clientID) is missing on the server")
        }
        print("[figures] client convergence: devices=\(devices.count) syncs=\(syncs) creates_applied=\(applied) deletes_applied=\(deleted.count) live_todos=\(server.todos.count) tags=\(server.tags.count) stats=\(server.stats.count)")
    }

    /// One random local edit.
    func edit(_ device: Device, random: inout Generator,
              creates: inout [(device: Device, opID: String, localID: Int64, entity: EntityKind)],
              deletes: inout [(device: Device, opID: String, clientID: String?)]) throws {
        let store = device.store
        let days = (20...30).map { Day(year: 2026, month: 11, day: $0)! }
        let todos = try store.todos(from: days.first!, to: days.last!)
        let tags = try store.tags()
        let words = ["alpha", "Bravo", "charlie", "Delta", "echo", "äpfel", "Apfel", "zulu", "Öl", "İz", "iz", "naïve"]
        func title() -> String { "\(words[Int.random(in: 0..<words.count, using: &random)]) \(Int.random(in: 1...99, using: &random))" }
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<25:
            let tag = tags.isEmpty || Bool.random(using: &random) ? nil : tags[Int.random(in: 0..<tags.count, using: &random)].localID
            let change = try store.addTodo(NewTodo(
                title: title(), deadline: days[Int.random(in: 0..<days.count, using: &random)], isImportant: Bool.random(using: &random),
                isLife: Bool.random(using: &random), tag: tag, difficulty: Int.random(in: 0...5, using: &random),
                estimatedTime: Int.random(in: 0...120, using: &random)))
            creates.append((device, change.opID!, change.localID, .todo))
        case 25..<55 where !todos.isEmpty:
            let todo = todos[Int.random(in: 0..<todos.count, using: &random)]
            var changes = TodoChanges()
            switch Int.random(in: 0..<6, using: &random) {
            case 0: changes.title = title()
            case 1: changes.isCompleted = !todo.isCompleted
            case 2: changes.deadline = days[Int.random(in: 0..<days.count, using: &random)]
            case 3: changes.tag = .some(tags.isEmpty ? nil : tags[Int.random(in: 0..<tags.count, using: &random)].localID)
            case 4: changes.difficulty = Int.random(in: 0...5, using: &random); changes.estimatedTime = Int.random(in: 0...240, using: &random)
            default: changes.isImportant = !todo.isImportant; changes.isLife = Bool.random(using: &random)
            }
            try store.updateTodo(todo.localID, changes)
        case 55..<65 where !todos.isEmpty:
            let todo = todos[Int.random(in: 0..<todos.count, using: &random)]
            if let opID = try store.deleteTodo(todo.localID).opID { deletes.append((device, opID, todo.clientID)) }
        case 65..<75 where tags.count < 6:
            let change = try store.addTag(name: "Tag \(Int.random(in: 1...999, using: &random))",
                                          color: String(format: "#%06X", Int.random(in: 0...0xFFFFFF, using: &random)))
            creates.append((device, change.opID!, change.localID, .tag))
        case 75..<85 where !tags.isEmpty:
            let tag = tags[Int.random(in: 0..<tags.count, using: &random)]
            try store.updateTag(tag.localID, name: "Renamed \(Int.random(in: 1...999, using: &random))")
        case 85..<90 where !tags.isEmpty:
            let tag = tags[Int.random(in: 0..<tags.count, using: &random)]
            if let opID = try store.deleteTag(tag.localID).opID { deletes.append((device, opID, tag.clientID)) }
        default:
            break
        }
    }

    /// The app's side of "ask": resolve each conflict one way or another; acknowledge rejections.
    func settleInbox(_ device: Device, random: inout Generator) throws {
        for conflict in try device.store.conflicts() {
            let choice: ConflictResolution = Bool.random(using: &random) ? .keepMine : .takeTheirs
            _ = try? device.store.resolveConflict(conflict.conflictID, choice)
        }
        for op in try device.store.operations(historyLimit: 0) where op.status == .rejected {
            try device.store.acknowledgeRejected(op.opID)
        }
    }
}
