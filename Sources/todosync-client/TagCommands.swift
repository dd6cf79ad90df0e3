import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

struct Tags: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List tags.")
    @OptionGroup var options: StoreOptions

    func run() throws {
        let tags = try options.openStore().tags()
        for tag in tags {
            options.output.say(String(format: "%5lld  %@  %@%@", tag.localID, tag.color, tag.name, tag.serverID == nil ? "  (not synced)" : ""))
        }
        options.output.finish(json: .object(["tags": .array(tags.map(Render.tag))]))
    }
}

struct TagAdd: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tag-add", abstract: "Add a tag.")
    @OptionGroup var options: StoreOptions
    @Argument var name: String
    @Argument(help: "#RRGGBB") var color: String

    func run() throws {
        let store = try options.openStore()
        let change = try store.addTag(name: name, color: color)
        options.output.finish(
            human: "Added tag \(change.localID).",
            json: .object(["tag": try store.tag(change.localID).map(Render.tag) ?? .null, "pending": .int(try store.pendingCount())]))
    }
}

struct TagRemove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tag-rm", abstract: "Delete a tag (its todos lose it).")
    @OptionGroup var options: StoreOptions
    @Argument var tag: String

    func run() throws {
        let store = try options.openStore()
        let localID = try resolveTag(store, tag)
        try store.deleteTag(localID)
        options.output.finish(human: "Deleted tag \(tag).", json: .object(["deleted": .int(localID), "pending": .int(try store.pendingCount())]))
    }
}
