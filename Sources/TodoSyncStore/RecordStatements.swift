/// The writes every record table (`todos`, `tags`) takes the same way, from its columns
/// (`RecordColumns`): `SQL.Todos` and `SQL.Tags` name them, the write path binds them.
struct RecordStatements<Columns: RecordColumns> {
    /// Parameters: user id, clientId, client key, `Columns.contentValues`, version, created,
    /// updated, device.
    let insert: String
    /// Parameters: `Columns.contentValues`, version, updated, device, id, user id.
    let update: String
    /// Parameters: deleted, updated, version, device, id, user id.
    let softDelete: String

    init(table: String) {
        insert = """
            INSERT INTO \(table) (user_id, client_id, client_key, \(Columns.contentNames), version, created_at,
                                  updated_at, changed_by_device)
            VALUES (\(Columns.placeholders(contentPlus: 7)))
            """
        update = """
            UPDATE \(table) SET \(Columns.contentAssignments),
                                version = ?, updated_at = ?, deleted_at = NULL, changed_by_device = ?
             WHERE id = ? AND user_id = ?
            """
        softDelete = """
            UPDATE \(table) SET deleted_at = ?, updated_at = ?, version = ?, changed_by_device = ? WHERE id = ? AND user_id = ?
            """
    }
}
