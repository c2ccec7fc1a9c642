//! The schema, from one source for both stores: the base tables a new
//! database is created with ([`base_schema`], written in PostgreSQL's
//! types and spelled in SQLite's by [`Dialect`]), then every step of
//! [`MIGRATIONS`], which old and new databases walk alike.

use super::sql::Dialect;
use crate::error::{KmsError, Result};

/// The tables of schema version [`BASE_SCHEMA_VERSION`] both stores share,
/// in PostgreSQL's column types; [`base_schema`] spells them for SQLite
/// (where `INTEGER PRIMARY KEY` makes `kms_audit.seq` the row id).
const BASE_TABLES: &str = "
CREATE TABLE kms_schema (version BIGINT NOT NULL);
CREATE TABLE kms_meta (name TEXT PRIMARY KEY, value BYTEA NOT NULL);
CREATE TABLE kms_keys (
    name TEXT PRIMARY KEY,
    exportable BOOLEAN NOT NULL,
    allow TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE TABLE kms_key_versions (
    name TEXT NOT NULL REFERENCES kms_keys(name),
    version BIGINT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('active', 'revoked', 'destroyed')),
    reason TEXT,
    created_ms BIGINT NOT NULL,
    changed_ms BIGINT,
    material BYTEA,
    PRIMARY KEY (name, version)
);
CREATE TABLE kms_clients (
    name TEXT PRIMARY KEY,
    labels TEXT NOT NULL,
    admin BOOLEAN NOT NULL,
    serial TEXT NOT NULL,
    fingerprint TEXT NOT NULL UNIQUE,
    created_ms BIGINT NOT NULL,
    not_after_ms BIGINT NOT NULL,
    revoked_ms BIGINT,
    revoked_reason TEXT
);
CREATE TABLE kms_audit (
    seq BIGINT PRIMARY KEY,
    time_ms BIGINT NOT NULL,
    client TEXT NOT NULL,
    operation TEXT NOT NULL,
    key_name TEXT,
    key_version BIGINT,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    prev_hash BYTEA NOT NULL,
    hash BYTEA NOT NULL,
    mac BYTEA
);
CREATE INDEX kms_audit_time ON kms_audit (time_ms);
";

/// The append-only guard of the audit log on SQLite against deletes, as
/// [`base_schema`] creates it (pruning drops and recreates it inside its
/// transaction).
pub(crate) const SQLITE_AUDIT_NO_DELETE: &str =
    "CREATE TRIGGER kms_audit_no_delete BEFORE DELETE ON kms_audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;";

/// SQLite's append-only guards: a trigger per statement kind.
const SQLITE_BASE_EXTRA: &str = "CREATE TRIGGER kms_audit_no_update BEFORE UPDATE ON kms_audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
";

/// PostgreSQL's chain head (the row appenders lock, so that several
/// servers append to one chain) and its append-only guard.
const POSTGRES_BASE_EXTRA: &str =
    "CREATE TABLE kms_audit_head (id INT PRIMARY KEY, seq BIGINT NOT NULL, hash BYTEA NOT NULL);
CREATE FUNCTION kms_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$;
CREATE TRIGGER kms_audit_no_change BEFORE UPDATE OR DELETE ON kms_audit
    FOR EACH ROW EXECUTE FUNCTION kms_audit_append_only();
";

/// The schema a new database is created with, at [`BASE_SCHEMA_VERSION`].
pub(crate) fn base_schema(dialect: Dialect) -> String {
    match dialect {
        Dialect::Sqlite => {
            let tables = BASE_TABLES
                .replace("BIGINT", "INTEGER")
                .replace("BYTEA", "BLOB")
                .replace("BOOLEAN", "INTEGER");
            format!("{tables}{SQLITE_BASE_EXTRA}{SQLITE_AUDIT_NO_DELETE}\n")
        }
        Dialect::Postgres => format!("{BASE_TABLES}{POSTGRES_BASE_EXTRA}"),
    }
}

/// The version of [`base_schema`].
pub(crate) const BASE_SCHEMA_VERSION: i64 = 2;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = match MIGRATIONS.last() {
    Some(m) => m.to,
    None => BASE_SCHEMA_VERSION,
};

/// The steps that take a database at `version` to [`SCHEMA_VERSION`].
pub(crate) fn migrations_after(version: i64) -> impl Iterator<Item = &'static Migration> {
    MIGRATIONS.iter().filter(move |m| m.to > version)
}

/// Refuses a database written by a newer build (`place` names it).
pub(crate) fn check_version(version: i64, place: &str) -> Result<()> {
    if version > SCHEMA_VERSION {
        return Err(KmsError::Store(format!(
            "{place} has schema version {version}; this build uses {SCHEMA_VERSION}"
        )));
    }
    Ok(())
}

/// Schema step 9's backfill of `kms_audit_refs`: the references of the
/// entries after the indexed mark (each store then orders or de-duplicates
/// them its own way).
macro_rules! refs_of_unindexed_entries {
    () => {
        "INSERT INTO kms_audit_refs (segment, kind, value, seq)
    SELECT seq / 65536, 1, client, seq FROM kms_audit
        WHERE seq > coalesce((SELECT seq FROM kms_audit_refs_done), 0)
    UNION ALL
    SELECT seq / 65536, 2, key_name, seq FROM kms_audit
        WHERE key_name IS NOT NULL AND seq > coalesce((SELECT seq FROM kms_audit_refs_done), 0)
"
    };
}

/// One step of the schema's history: the SQL that takes a database from
/// version `to - 1` to `to`. The same text runs on SQLite and PostgreSQL.
pub(crate) struct Migration {
    pub(crate) to: i64,
    pub(crate) sql: &'static str,
    /// Run after `sql` on SQLite only.
    pub(crate) sqlite_only: &'static str,
    /// Run after `sql` on PostgreSQL only (what SQLite has no syntax for).
    pub(crate) postgres_only: &'static str,
}

/// Every step after version 1, in order. A new database is created at
/// [`BASE_SCHEMA_VERSION`] and then walks the same steps an old one does,
/// so both end with exactly the same tables.
pub(crate) const MIGRATIONS: &[Migration] = &[
    // Clients can be revoked.
    Migration {
        to: 2,
        sql: "ALTER TABLE kms_clients ADD COLUMN revoked_ms BIGINT;
ALTER TABLE kms_clients ADD COLUMN revoked_reason TEXT;",
        sqlite_only: "",
        postgres_only: "",
    },
    // The KMIP front end: each key version's KMIP object (type, algorithm,
    // owner, activation and deactivation dates, compromise), and the
    // client-settable attributes of each key (Name, Object Group, custom
    // x- attributes...), values indexed for Locate.
    Migration {
        to: 3,
        sql: "CREATE TABLE kms_kmip_objects (
    key_name TEXT NOT NULL REFERENCES kms_keys(name),
    version BIGINT NOT NULL,
    object_type BIGINT NOT NULL,
    algorithm BIGINT,
    length BIGINT,
    usage_mask BIGINT,
    secret_type BIGINT,
    owner TEXT NOT NULL,
    activation_ms BIGINT,
    deactivation_ms BIGINT,
    compromise_occurrence_ms BIGINT,
    compromised BIGINT NOT NULL,
    PRIMARY KEY (key_name, version)
);
CREATE TABLE kms_kmip_attributes (
    key_name TEXT NOT NULL REFERENCES kms_keys(name),
    name TEXT NOT NULL,
    position BIGINT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (key_name, name, position)
);
CREATE INDEX kms_kmip_attributes_value ON kms_kmip_attributes (name, value);",
        sqlite_only: "",
        postgres_only: "",
    },
    // The audit log can be checkpointed, exported and pruned: verified
    // checkpoints of the chain, the anchor the remaining entries link to
    // after a prune, and the exports that allow one. Hashes and MACs are
    // hex text, so the same SQL runs on both stores. Written to run again
    // harmlessly on a database whose recorded version was set back.
    Migration {
        to: 5,
        sql: "CREATE TABLE IF NOT EXISTS kms_audit_checkpoints (
    seq BIGINT PRIMARY KEY,
    hash TEXT NOT NULL,
    time_ms BIGINT NOT NULL,
    mac TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kms_audit_anchor (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL,
    time_ms BIGINT NOT NULL,
    mac TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kms_audit_exports (
    after_seq BIGINT NOT NULL,
    until_seq BIGINT NOT NULL,
    until_hash TEXT NOT NULL,
    time_ms BIGINT NOT NULL,
    client TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS kms_audit_exports_until ON kms_audit_exports (until_seq);",
        sqlite_only: "",
        postgres_only: "",
    },
    // (Step 4 was reserved and never written.) Lists at fleet scale: a
    // filter few rows pass is answered from an index led by the filtered
    // column (in the list's order), so a page costs the rows it returns,
    // not the rows it passes over. On PostgreSQL the key and client lists
    // are in byte order (`COLLATE \"C\"`, the order SQLite keeps), so a
    // name prefix is one range of an index whatever the database's
    // locale. Written to run again harmlessly.
    Migration {
        to: 6,
        sql: "CREATE INDEX IF NOT EXISTS kms_audit_client ON kms_audit (client, seq);
CREATE INDEX IF NOT EXISTS kms_audit_key ON kms_audit (key_name, seq);
CREATE INDEX IF NOT EXISTS kms_audit_operation ON kms_audit (operation, seq);
CREATE INDEX IF NOT EXISTS kms_audit_outcome ON kms_audit (outcome, seq);",
        sqlite_only:
            "CREATE INDEX IF NOT EXISTS kms_key_versions_state ON kms_key_versions (state, name);
CREATE INDEX IF NOT EXISTS kms_clients_admin ON kms_clients (admin, name);",
        postgres_only:
            "CREATE INDEX IF NOT EXISTS kms_keys_name_c ON kms_keys (name COLLATE \"C\");
CREATE INDEX IF NOT EXISTS kms_key_versions_state_c
    ON kms_key_versions (state, name COLLATE \"C\");
CREATE INDEX IF NOT EXISTS kms_clients_name_c ON kms_clients (name COLLATE \"C\");
CREATE INDEX IF NOT EXISTS kms_clients_admin_c ON kms_clients (admin, name COLLATE \"C\");",
    },
    // Servers sharing a store announce themselves, so that each can show
    // its peers (the console's Health page). Written to run again
    // harmlessly.
    Migration {
        to: 7,
        sql: "CREATE TABLE IF NOT EXISTS kms_servers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    address TEXT NOT NULL,
    version TEXT NOT NULL,
    started_ms BIGINT NOT NULL,
    seen_ms BIGINT NOT NULL
);",
        sqlite_only: "",
        postgres_only: "",
    },
    // KMIP attributes belong to each object (key version), as KMIP's
    // Re-key says which of them the new object inherits. The attributes
    // kept per key until now are copied to every version that has a KMIP
    // object, Names to the newest only (where they were shown), and the
    // old table is emptied. Written to run again harmlessly (the copy
    // finds nothing the second time); depends on no other step after 3.
    Migration {
        to: 8,
        sql: "CREATE TABLE IF NOT EXISTS kms_kmip_version_attributes (
    key_name TEXT NOT NULL REFERENCES kms_keys(name),
    version BIGINT NOT NULL,
    name TEXT NOT NULL,
    position BIGINT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (key_name, version, name, position)
);
CREATE INDEX IF NOT EXISTS kms_kmip_version_attributes_value
    ON kms_kmip_version_attributes (name, value);
INSERT INTO kms_kmip_version_attributes (key_name, version, name, position, value)
    SELECT a.key_name, o.version, a.name, a.position, a.value
    FROM kms_kmip_attributes a JOIN kms_kmip_objects o ON o.key_name = a.key_name
    WHERE a.name <> 'Name' OR o.version = (SELECT max(m.version) FROM kms_kmip_objects m
                                           WHERE m.key_name = a.key_name)
    ON CONFLICT DO NOTHING;
DELETE FROM kms_kmip_attributes;",
        sqlite_only: "",
        postgres_only: "",
    },
    // The audit filters without their cost on every request: schema step
    // 6's four (column, seq) indexes made every audited request update
    // four more B-trees, which cost unwrap throughput (BENCHMARKS.md, "Key
    // manager: fleet scale"), two of them at random places once a fleet's keys
    // and hosts fill the log. Now operations and outcomes are indexed
    // only where they are rare (partial indexes: not the data-path
    // operations, not `ok`), and the key and client of each entry go to
    // the reference table `kms_audit_refs` in the background, ordered by
    // segment (2^16 entries) first so that a segment's rows, written
    // sorted once it is complete, land at the table's end; a filter
    // probes each segment's (key or client, seq) range, then scans the
    // entries not indexed yet (after `kms_audit_refs_done`). Written
    // to run again harmlessly.
    Migration {
        to: 9,
        sql: "DROP INDEX IF EXISTS kms_audit_client;
DROP INDEX IF EXISTS kms_audit_key;
DROP INDEX IF EXISTS kms_audit_operation;
DROP INDEX IF EXISTS kms_audit_outcome;
CREATE INDEX IF NOT EXISTS kms_audit_rare_operation ON kms_audit (operation, seq)
    WHERE operation NOT IN ('key.unwrap', 'key.wrap', 'kmip.get', 'kmip.encrypt', 'kmip.decrypt');
CREATE INDEX IF NOT EXISTS kms_audit_rare_outcome ON kms_audit (outcome, seq)
    WHERE outcome <> 'ok';
CREATE TABLE IF NOT EXISTS kms_audit_refs_done (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq BIGINT NOT NULL
);",
        sqlite_only: concat!(
            "CREATE TABLE IF NOT EXISTS kms_audit_refs (
    segment BIGINT NOT NULL,
    kind INTEGER NOT NULL,
    value TEXT NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (segment, kind, value, seq)
) WITHOUT ROWID;
",
            refs_of_unindexed_entries!(),
            "    ORDER BY 1, 2, 3, 4;
INSERT INTO kms_audit_refs_done (id, seq) SELECT 1, coalesce(max(seq), 0) FROM kms_audit WHERE true
    ON CONFLICT (id) DO UPDATE SET seq = excluded.seq;"
        ),
        postgres_only: concat!(
            "CREATE TABLE IF NOT EXISTS kms_audit_refs (
    segment BIGINT NOT NULL,
    kind INTEGER NOT NULL,
    value TEXT COLLATE \"C\" NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (segment, kind, value, seq)
);
",
            refs_of_unindexed_entries!(),
            "    ON CONFLICT DO NOTHING;
INSERT INTO kms_audit_refs_done (id, seq) SELECT 1, coalesce(max(seq), 0) FROM kms_audit
    ON CONFLICT (id) DO UPDATE SET seq = excluded.seq;"
        ),
    },
    // The selector filter of the key list and the label filter of the
    // client list from an index, as the other filters: each selector of
    // a key's policy and each label of a client is a row of a side table
    // written in the transaction that writes the key or the client's
    // labels, keyed (selector or label, value, name) so a filter few
    // items pass is one range in the list's order. Names in byte order
    // on PostgreSQL, as the lists are. Written to run again harmlessly.
    Migration {
        to: 10,
        sql: "",
        sqlite_only: "CREATE TABLE IF NOT EXISTS kms_key_selectors (
    selector TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (selector, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kms_client_labels (
    label TEXT NOT NULL,
    value TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (label, value, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kms_client_labels_name ON kms_client_labels (name);
INSERT OR IGNORE INTO kms_key_selectors (selector, name)
    SELECT j.value, k.name FROM kms_keys k, json_each(k.allow) j;
INSERT OR IGNORE INTO kms_client_labels (label, value, name)
    SELECT j.key, j.value, c.name FROM kms_clients c, json_each(c.labels) j;",
        postgres_only: "CREATE TABLE IF NOT EXISTS kms_key_selectors (
    selector TEXT NOT NULL,
    name TEXT COLLATE \"C\" NOT NULL,
    PRIMARY KEY (selector, name)
);
CREATE TABLE IF NOT EXISTS kms_client_labels (
    label TEXT NOT NULL,
    value TEXT NOT NULL,
    name TEXT COLLATE \"C\" NOT NULL,
    PRIMARY KEY (label, value, name)
);
CREATE INDEX IF NOT EXISTS kms_client_labels_name ON kms_client_labels (name);
INSERT INTO kms_key_selectors (selector, name)
    SELECT j, k.name FROM kms_keys k, jsonb_array_elements_text(k.allow::jsonb) j
    ON CONFLICT DO NOTHING;
INSERT INTO kms_client_labels (label, value, name)
    SELECT j.key, j.value, c.name FROM kms_clients c, jsonb_each_text(c.labels::jsonb) j
    ON CONFLICT DO NOTHING;",
    },
    // KMIP's Locate (and the check that a Name is free) walks the keys
    // holding one attribute value a page at a time, in key order: the
    // (name, value) index of step 8 made each page read and sort every
    // key with that value (all of them, for an Object Group most keys
    // share). Byte order on PostgreSQL, as the lists. Written to run again
    // harmlessly.
    Migration {
        to: 11,
        sql: "DROP INDEX IF EXISTS kms_kmip_version_attributes_value;",
        sqlite_only: "CREATE INDEX IF NOT EXISTS kms_kmip_version_attributes_find
    ON kms_kmip_version_attributes (name, value, key_name);",
        postgres_only: "CREATE INDEX IF NOT EXISTS kms_kmip_version_attributes_find
    ON kms_kmip_version_attributes (name, value, key_name COLLATE \"C\");",
    },
    // Signing, verifying and MACs are data-path operations as much as
    // Encrypt: out of the partial operation index, which every one of
    // them otherwise paid an index insert for. The condition is
    // `RARE_OPERATION`'s. Written to run again harmlessly.
    Migration {
        to: 12,
        sql: "DROP INDEX IF EXISTS kms_audit_rare_operation;
CREATE INDEX kms_audit_rare_operation ON kms_audit (operation, seq)
    WHERE operation NOT IN ('key.unwrap', 'key.wrap', 'key.sign', 'key.verify', 'kmip.get',
        'kmip.encrypt', 'kmip.decrypt', 'kmip.sign', 'kmip.signature_verify', 'kmip.mac',
        'kmip.mac_verify');",
        sqlite_only: "",
        postgres_only: "",
    },
];

impl Migration {
    /// The step's SQL on `dialect`: the shared text, then that dialect's.
    pub(crate) fn statements(&self, dialect: Dialect) -> [&'static str; 2] {
        match dialect {
            Dialect::Sqlite => [self.sql, self.sqlite_only],
            Dialect::Postgres => [self.sql, self.postgres_only],
        }
    }
}
