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

struct TagEdit: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tag-edit", abstract: "Rename or recolor a tag.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The tag's name or number.") var tag: String
    @Option(help: "The new name.") var name: String?
    @Option(help: "The new color (#RRGGBB).") var color: String?

    func run() throws {
        guard name != nil || color != nil else { throw ValidationError("give --name, --color, or both") }
        let store = try options.openStore()
        let localID = try resolveTag(store, tag)
        try store.updateTag(localID, name: name, color: color)
        let edited = try store.tag(localID)
        let pending = try store.pendingCount()
        options.output.finish(
            human: "Changed tag \(localID)\(edited.map { " (\($0.name) \($0.color))" } ?? ""); \(pending) change(s) waiting to sync.",
            json: .object(["tag": edited.map(Render.tag) ?? .null, "pending": .int(pending)]))
    }
}
