import MariaDB

/// A multi-row statement (`INSERT … VALUES (…), (…)`) prepared at fixed row counts, the powers
/// of two up to `largest`: any number of rows is written in few statements (one per set bit of
/// the count, plus one per `largest` rows), from at most eight cached prepared statements.
struct MultiRowStatement: Sendable {
    static let sizes = [128, 64, 32, 16, 8, 4, 2, 1]
    /// The statement of each of `sizes`, in its order.
    private let texts: [String]

    /// `make` gets the `VALUES` rows' text: `(?, …, ?)` with `columns` placeholders, `rows` times.
    init(columns: Int, _ make: (String) -> String) {
        let row = "(" + Array(repeating: "?", count: columns).joined(separator: ", ") + ")"
        texts = Self.sizes.map { count in make(Array(repeating: row, count: count).joined(separator: ", ")) }
    }

    /// `count` rows as chunks, in order: each chunk's statement and the range of rows it writes.
    func chunks(_ count: Int) -> [(sql: String, rows: Range<Int>)] {
        var chunks: [(sql: String, rows: Range<Int>)] = []
        var start = 0
        for (size, sql) in zip(Self.sizes, texts) {
            while count - start >= size {
                chunks.append((sql, start..<start + size))
                start += size
            }
        }
        return chunks
    }
}

/// A statement ending in an `IN` list of `size` placeholders, prepared once: any number of values
/// take ⌈count / size⌉ executions, the last list filled up by repeating its last value (a value
/// repeated in `IN` changes nothing).
struct InListStatement: Sendable {
    let size: Int
    let sql: String

    /// `make` gets the list's text: `?, …, ?`, `size` times.
    init(size: Int, _ make: (String) -> String) {
        self.size = size
        sql = make(Array(repeating: "?", count: size).joined(separator: ", "))
    }

    /// `values` as the lists of successive executions, each `size` values long.
    func lists(_ values: [DatabaseValue]) -> [[DatabaseValue]] {
        stride(from: 0, to: values.count, by: size).map { start in
            let chunk = values[start..<min(start + size, values.count)]
            return (0..<size).map { chunk[min(chunk.startIndex + $0, chunk.endIndex - 1)] }
        }
    }
}
