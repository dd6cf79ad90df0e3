import TodoSyncCore

extension Application {
    func registerTagRoutes() {
        router.add("GET", "/api/v1/tags") { context in
            let userID = try context.requireUser()
            return .json(200, itemsBody(try context.store.listTags(userID: userID)) { $0.write(to: &$1) })
        }
        router.add("POST", "/api/v1/tags") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let draft = try TagDraft.parse(&reader)
            let created = try context.store.createTag(userID: userID, draft)
            return .record(created.isNew ? 201 : 200, version: created.record.version, write: created.record.write)
        }
        router.add("GET", "/api/v1/tags/:id") { context in
            let userID = try context.requireUser()
            guard let tag = try context.store.tag(userID: userID, id: try context.id()) else { throw DomainError.notFound }
            return .record(200, version: tag.version, write: tag.write)
        }
        router.add("PATCH", "/api/v1/tags/:id") { context in
            let userID = try context.requireUser()
            let id = try context.id()
            var reader = try context.bodyReader()
            let patch = try TagPatch.parse(&reader)
            let tag = try context.store.updateTag(userID: userID, id: id, patch, ifMatch: context.ifMatch)
            return .record(200, version: tag.version, write: tag.write)
        }
        router.add("DELETE", "/api/v1/tags/:id") { context in
            let userID = try context.requireUser()
            try context.store.deleteTag(userID: userID, id: try context.id(), ifMatch: context.ifMatch)
            return .noContent
        }
    }
}
