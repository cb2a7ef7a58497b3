import BillingStore
import BillingTestSupport
import Foundation
import GRDB
import PostgresNIO
import Testing

/// The two backends' DDL describe one schema: the same tables and columns, keys and indexes, save
/// the differences listed here on purpose.
@Suite("One schema on both backends")
struct SchemaContractTests {
    /// The deliberate differences between the two schemas, as PostgreSQL names them. Anything else
    /// that differs is drift: a migration written for one backend and not the other.
    enum Differences {
        /// Columns only PostgreSQL has, for several replicas on one database.
        static let postgresOnlyColumns: [String: [String]] = [
            // The applier's claims: on PostgreSQL several replicas drain one inbox, so a row names the
            // replica that claimed it; SQLite's one writer needs no claim.
            "inboxevent": ["claimedby text"]
        ]
        /// Tables only PostgreSQL has, with their columns, primary key and indexes.
        static let postgresOnlyTables: [String: (columns: [String], primaryKey: [String])] = [
            // The ids a reconcile run listed: a TEMP table of the one connection on SQLite, a real
            // table on PostgreSQL, where a run's statements may use several connections.
            "reconcileseen": (["listing text not null", "kind text not null", "id text not null", "seenat bigint not null"], ["listing", "kind", "id"])
        ]
        /// Indexes only PostgreSQL has.
        static let postgresOnlyIndexes: [String: String] = [
            // Ages out reconcileseen's rows of runs that ended (see above).
            "reconcileseen_age": "reconcileseen(seenat)"
        ]
        /// Tables only SQLite has: none.
        static let sqliteOnlyTables: Set<String> = []
    }

    @Test("The PostgreSQL schema has every table, column, key and index the SQLite migrations create, in PostgreSQL's types, and only the listed differences")
    func schemaMatchesSQLite() async throws {
        let sqlite = try SQLiteDatabase.inMemory()
        var expected = try await sqlite.writer.read { db in try Self.sqliteSchema(db) }
        #expect(expected.tables.count == 44 && expected.indexes.count == 45, "the comparison covers the whole SQLite schema")
        for table in Differences.sqliteOnlyTables {
            expected.tables[table] = nil
            expected.primaryKeys[table] = nil
        }
        for (table, columns) in Differences.postgresOnlyColumns { expected.tables[table]?.append(contentsOf: columns) }
        for (table, shape) in Differences.postgresOnlyTables {
            #expect(expected.tables[table] == nil, "\(table) is listed as PostgreSQL's only, but SQLite has it too")
            expected.tables[table] = shape.columns
            expected.primaryKeys[table] = shape.primaryKey
        }
        for (name, index) in Differences.postgresOnlyIndexes { expected.indexes[name] = index }
        try await PostgresTestDatabase.withStore { store in
            let actual = try await Self.postgresSchema(store.client)
            #expect(Set(actual.tables.keys) == Set(expected.tables.keys))
            for (table, columns) in expected.tables.sorted(by: { $0.key < $1.key }) {
                #expect(actual.tables[table] == columns, "table \(table)")
            }
            #expect(actual.primaryKeys == expected.primaryKeys)
            #expect(actual.indexes == expected.indexes)
        }
    }

    struct Schema {
        /// Table → its columns in order, as "name type" with " not null" where it applies.
        var tables: [String: [String]] = [:]
        /// Table → its primary key's columns in order.
        var primaryKeys: [String: [String]] = [:]
        /// Named indexes (not those behind a primary key or a unique constraint) → "table(columns)",
        /// an expression (`lower(email)`) spelled `expression`.
        var indexes: [String: String] = [:]
    }

    /// SQLite's schema, lower-cased as PostgreSQL folds names, its types as the PostgreSQL ones.
    static func sqliteSchema(_ db: GRDB.Database) throws -> Schema {
        let types = ["INTEGER": "bigint", "BOOLEAN": "boolean", "TEXT": "text", "BLOB": "bytea"]
        var schema = Schema()
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'grdb_migrations'")
        for table in tables {
            var columns: [String] = []
            var key: [(Int, String)] = []
            for column in try Row.fetchAll(db, sql: "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)", arguments: [table]) {
                let name = (column["name"] as String).lowercased()
                let primary: Int = column["pk"]
                let notNull = (column["notnull"] as Bool) || primary > 0
                columns.append("\(name) \(types[column["type"] as String] ?? "?")" + (notNull ? " not null" : ""))
                if primary > 0 { key.append((primary, name)) }
            }
            schema.tables[table.lowercased()] = columns
            schema.primaryKeys[table.lowercased()] = key.sorted { $0.0 < $1.0 }.map(\.1)
        }
        for index in try Row.fetchAll(
            db, sql: "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex%'")
        {
            let name: String = index["name"]
            let columns = try String.fetchAll(db, sql: "SELECT coalesce(name, 'expression') FROM pragma_index_info(?) ORDER BY seqno", arguments: [name])
            schema.indexes[name.lowercased()] = "\((index["tbl_name"] as String).lowercased())(\(columns.map { $0.lowercased() }.joined(separator: ", ")))"
        }
        return schema
    }

    /// The PostgreSQL schema of the store's database, without the migrations' own table.
    static func postgresSchema(_ client: PostgresClient) async throws -> Schema {
        var schema = Schema()
        let columns = try await client.query(
            """
            SELECT table_name::text, column_name::text, data_type::text, is_nullable::text FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name <> 'schemamigration'
            ORDER BY table_name, ordinal_position
            """)
        for try await (table, column, type, nullable) in columns.decode((String, String, String, String).self) {
            schema.tables[table, default: []].append("\(column) \(type)" + (nullable == "NO" ? " not null" : ""))
        }
        let keys = try await client.query(
            """
            SELECT c.relname::text, a.attname::text
            FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
            WHERE i.indisprimary AND c.relnamespace = current_schema()::regnamespace AND c.relname <> 'schemamigration'
            ORDER BY c.relname, k.n
            """)
        for try await (table, column) in keys.decode((String, String).self) {
            schema.primaryKeys[table, default: []].append(column)
        }
        let indexes = try await client.query(
            """
            SELECT ic.relname::text, tc.relname::text,
                (SELECT string_agg(coalesce(a.attname::text, 'expression'), ', ' ORDER BY k.n) FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
                 LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum)
            FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class tc ON tc.oid = i.indrelid
            WHERE tc.relnamespace = current_schema()::regnamespace AND NOT i.indisprimary
                AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = i.indexrelid)
            """)
        for try await (name, table, columns) in indexes.decode((String, String, String).self) {
            schema.indexes[name] = "\(table)(\(columns))"
        }
        return schema
    }
}
