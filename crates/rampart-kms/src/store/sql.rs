//! The SQL both stores run, written once, and what differs between the two
//! dialects they speak.
//!
//! A shared statement is written in PostgreSQL's spelling (`$N`
//! parameters, casts where PostgreSQL cannot infer a parameter's type,
//! `COLLATE "C"` for byte order) and spelled for SQLite once, on first
//! use ([`Sql::sqlite`]): `?N` parameters, no casts, no collation (byte
//! order is SQLite's default, no `FOR UPDATE`: its writer holds the
//! whole database). What only one store can say (SQLite's `INDEXED BY`,
//! PostgreSQL's arrays and COPY) stays in its file.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::{ClientFilter, KeyFilter};

/// The SQL dialect of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `text` (in PostgreSQL's spelling) as this dialect spells it.
    pub(crate) fn spell(self, text: &str) -> Cow<'_, str> {
        match self {
            Dialect::Postgres => Cow::Borrowed(text),
            Dialect::Sqlite => Cow::Owned(to_sqlite(text)),
        }
    }
}

/// A statement both stores run, its SQLite spelling made once.
pub(crate) struct Sql {
    postgres: &'static str,
    sqlite: OnceLock<Box<str>>,
}

impl Sql {
    pub(crate) const fn new(postgres: &'static str) -> Self {
        Self { postgres, sqlite: OnceLock::new() }
    }

    pub(crate) fn postgres(&self) -> &'static str {
        self.postgres
    }

    /// The same text for SQLite (the key of its prepared-statement cache).
    pub(crate) fn sqlite(&'static self) -> &'static str {
        self.sqlite.get_or_init(|| to_sqlite(self.postgres).into_boxed_str())
    }

    /// The text as `dialect` spells it.
    pub(crate) fn spelled(&'static self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Postgres => self.postgres,
            Dialect::Sqlite => self.sqlite(),
        }
    }
}

/// PostgreSQL's `$N` and `$N::TYPE` become `?N`; `COLLATE "C"` and row
/// locks (`FOR UPDATE`) go.
fn to_sqlite(text: &str) -> String {
    let text = text.replace(" COLLATE \"C\"", "").replace(" FOR UPDATE", "");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        out.push('?');
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        out.push_str(&rest[..digits]);
        rest = &rest[digits..];
        if let Some(cast) = rest.strip_prefix("::") {
            let name = cast.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
            rest = &cast[name..];
            rest = rest.strip_prefix("[]").unwrap_or(rest);
        }
    }
    out.push_str(rest);
    out
}

/// The columns of [`rows::client`](super::rows::client), in order.
macro_rules! client_columns {
    () => {
        "name, labels, admin, serial, fingerprint, created_ms, not_after_ms, revoked_ms, \
         revoked_reason"
    };
}

/// [`client_columns`] of the table named `c`.
pub(crate) const CLIENT_COLUMNS_C: &str = "c.name, c.labels, c.admin, c.serial, c.fingerprint, \
     c.created_ms, c.not_after_ms, c.revoked_ms, c.revoked_reason";

/// The columns of [`rows::kmip_object`](super::rows::kmip_object), in order.
macro_rules! kmip_object_columns {
    () => {
        "key_name, version, object_type, algorithm, length, usage_mask, secret_type, owner, \
         activation_ms, deactivation_ms, compromise_occurrence_ms, compromised"
    };
}

/// The columns of [`rows::audit_entry`](super::rows::audit_entry) (and of
/// the chain pages), in order.
macro_rules! audit_columns {
    () => {
        "seq, time_ms, client, operation, key_name, key_version, outcome, detail, hash, mac"
    };
}
pub(crate) use audit_columns;

/// The columns of [`rows::material_row`](super::rows::material_row), in
/// order, and the tables they come from (keys `k`, versions `v`, KMIP
/// objects `o`).
macro_rules! key_material {
    () => {
        "k.allow, k.exportable, v.version, v.state, v.reason, v.created_ms, v.changed_ms,
             v.material, o.object_type, o.activation_ms, o.deactivation_ms, o.algorithm, o.length
         FROM kms_keys k JOIN kms_key_versions v ON v.name = k.name
         LEFT JOIN kms_kmip_objects o ON o.key_name = v.name AND o.version = v.version"
    };
}
pub(crate) use key_material;

/// The audit list's columns of the log named `a`.
pub(crate) const AUDIT_LIST_COLUMNS: &str = "a.seq, a.time_ms, a.client, a.operation, \
     a.key_name, a.key_version, a.outcome, a.detail, a.hash, a.mac";
/// The filters every way of walking the audit list applies ($2 to $7:
/// since, until, client, key, operation, outcome).
pub(crate) const AUDIT_LIST_FILTERS: &str = "($2::BIGINT IS NULL OR a.time_ms >= $2)
     AND ($3::BIGINT IS NULL OR a.time_ms < $3)
     AND ($4::TEXT IS NULL OR a.client = $4) AND ($5::TEXT IS NULL OR a.key_name = $5)
     AND ($6::TEXT IS NULL OR a.operation = $6) AND ($7::TEXT IS NULL OR a.outcome = $7)";

// Metadata.
pub(crate) static META_GET: Sql = Sql::new("SELECT value FROM kms_meta WHERE name = $1");
pub(crate) static META_EXISTS: Sql = Sql::new("SELECT 1 FROM kms_meta WHERE name = $1");
pub(crate) static META_INSERT: Sql = Sql::new("INSERT INTO kms_meta (name, value) VALUES ($1, $2)");

// Keys and versions.
/// Key $1, its row locked against a concurrent rotation.
pub(crate) static KEY_LOCK: Sql = Sql::new("SELECT 1 FROM kms_keys WHERE name = $1 FOR UPDATE");
/// A selector of a new key's policy, for the selector filter (schema step 10).
pub(crate) static KEY_SELECTOR_INSERT: Sql = Sql::new(
    "INSERT INTO kms_key_selectors (selector, name) VALUES ($1, $2) ON CONFLICT DO NOTHING",
);
pub(crate) static KEY_INSERT: Sql =
    Sql::new("INSERT INTO kms_keys (name, exportable, allow, created_ms) VALUES ($1, $2, $3, $4)");
pub(crate) static FIRST_VERSION_INSERT: Sql = Sql::new(
    "INSERT INTO kms_key_versions (name, version, state, created_ms, material)
     VALUES ($1, 1, 'active', $2, $3)",
);
pub(crate) static VERSION_INSERT: Sql = Sql::new(
    "INSERT INTO kms_key_versions (name, version, state, created_ms, material)
     VALUES ($1, $2, 'active', $3, $4)",
);
pub(crate) static NEWEST_VERSION: Sql =
    Sql::new("SELECT max(version) FROM kms_key_versions WHERE name = $1");
/// The key's versions a state change names ($1 key, $2 version or NULL: all).
pub(crate) static VERSIONS_COUNT: Sql = Sql::new(
    "SELECT count(*) FROM kms_key_versions
     WHERE name = $1 AND ($2::BIGINT IS NULL OR version = $2)",
);
/// Active versions become revoked ($3 reason, $4 time).
pub(crate) static VERSIONS_REVOKE: Sql = Sql::new(
    "UPDATE kms_key_versions SET state = 'revoked', reason = $3, changed_ms = $4
     WHERE name = $1 AND ($2::BIGINT IS NULL OR version = $2) AND state = 'active'",
);
/// Versions not yet destroyed lose their material ($3 time).
pub(crate) static VERSIONS_DESTROY: Sql = Sql::new(
    "UPDATE kms_key_versions SET state = 'destroyed', material = NULL, changed_ms = $3
     WHERE name = $1 AND ($2::BIGINT IS NULL OR version = $2) AND state != 'destroyed'",
);
/// Key $1 as [`rows::key`](super::rows::key) reads it.
pub(crate) static KEY_ROW: Sql =
    Sql::new("SELECT name, exportable, allow, created_ms FROM kms_keys WHERE name = $1");
/// Key $1's versions, each with its key's name.
pub(crate) static KEY_VERSIONS: Sql = Sql::new(
    "SELECT name, version, state, reason, created_ms, changed_ms FROM kms_key_versions
     WHERE name = $1",
);

// Clients.
pub(crate) static CLIENT_INSERT: Sql = Sql::new(
    "INSERT INTO kms_clients (name, labels, admin, serial, fingerprint, created_ms, not_after_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7)",
);
/// Client $1's labels for the label filter (schema step 10).
pub(crate) static CLIENT_LABELS_CLEAR: Sql =
    Sql::new("DELETE FROM kms_client_labels WHERE name = $1");
pub(crate) static CLIENT_LABEL_INSERT: Sql =
    Sql::new("INSERT INTO kms_client_labels (label, value, name) VALUES ($1, $2, $3)");
pub(crate) static CLIENT_BY_FINGERPRINT: Sql =
    Sql::new(concat!("SELECT ", client_columns!(), " FROM kms_clients WHERE fingerprint = $1"));
pub(crate) static CLIENT_BY_NAME: Sql =
    Sql::new(concat!("SELECT ", client_columns!(), " FROM kms_clients WHERE name = $1"));
/// Only the first revocation is recorded; a repeat reads it back.
pub(crate) static CLIENT_REVOKE: Sql = Sql::new(
    "UPDATE kms_clients SET revoked_ms = $2, revoked_reason = $3
     WHERE name = $1 AND revoked_ms IS NULL",
);
pub(crate) static CLIENT_SET_LABELS: Sql = Sql::new(concat!(
    "UPDATE kms_clients SET labels = $2 WHERE name = $1 RETURNING ",
    client_columns!()
));

// KMIP objects and attributes.
pub(crate) static KMIP_OBJECT_PUT: Sql = Sql::new(concat!(
    "INSERT INTO kms_kmip_objects (",
    kmip_object_columns!(),
    ")
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     ON CONFLICT (key_name, version) DO UPDATE SET
         object_type = excluded.object_type, algorithm = excluded.algorithm,
         length = excluded.length, usage_mask = excluded.usage_mask,
         secret_type = excluded.secret_type, owner = excluded.owner,
         activation_ms = excluded.activation_ms,
         deactivation_ms = excluded.deactivation_ms,
         compromise_occurrence_ms = excluded.compromise_occurrence_ms,
         compromised = excluded.compromised"
));
/// The KMIP object of key $1's version $2, or else of its newest below.
pub(crate) static KMIP_OBJECT_AT: Sql = Sql::new(concat!(
    "SELECT ",
    kmip_object_columns!(),
    " FROM kms_kmip_objects
     WHERE key_name = $1 AND version <= $2 ORDER BY version DESC LIMIT 1"
));
pub(crate) static KMIP_OBJECTS: Sql = Sql::new(concat!(
    "SELECT ",
    kmip_object_columns!(),
    " FROM kms_kmip_objects ORDER BY key_name, version"
));
/// The KMIP objects of the keys named $1 to $64 (a name may repeat).
pub(crate) static KMIP_OBJECTS_OF: Sql = Sql::new(concat!(
    "SELECT ",
    kmip_object_columns!(),
    " FROM kms_kmip_objects WHERE key_name IN ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41, $42, $43, $44, $45, $46, $47, $48, $49, $50, $51, $52, $53, $54, $55, $56, $57, $58, $59, $60, $61, $62, $63, $64)"
));
/// How many names [`KMIP_OBJECTS_OF`] takes.
pub(crate) const KMIP_OBJECTS_OF_NAMES: usize = 64;
pub(crate) static KMIP_ATTRIBUTE_INSERT: Sql = Sql::new(
    "INSERT INTO kms_kmip_version_attributes (key_name, version, name, position, value)
     VALUES ($1, $2, $3, $4, $5)",
);
/// Key $1's version $2 takes a copy of version $3's attributes (those it
/// has not already).
pub(crate) static KMIP_ATTRIBUTES_INHERIT: Sql = Sql::new(
    "INSERT INTO kms_kmip_version_attributes (key_name, version, name, position, value)
     SELECT key_name, $2, name, position, value FROM kms_kmip_version_attributes
     WHERE key_name = $1 AND version = $3
     ON CONFLICT DO NOTHING",
);
/// Key $1's Names stay on version $2 only (KMIP Re-key).
pub(crate) static KMIP_NAMES_KEEP: Sql = Sql::new(
    "DELETE FROM kms_kmip_version_attributes
     WHERE key_name = $1 AND name = 'Name' AND version <> $2",
);
/// Key $1's own KMIP objects, by version.
pub(crate) static KMIP_KEY_OBJECTS: Sql = Sql::new(concat!(
    "SELECT ",
    kmip_object_columns!(),
    " FROM kms_kmip_objects WHERE key_name = $1 ORDER BY version"
));
pub(crate) static KMIP_KEY_OBJECTS_DELETE: Sql =
    Sql::new("DELETE FROM kms_kmip_objects WHERE key_name = $1");
pub(crate) static KMIP_KEY_ATTRIBUTES_DELETE: Sql =
    Sql::new("DELETE FROM kms_kmip_version_attributes WHERE key_name = $1");
/// The sealed material of key $1's version $2 (NULL once destroyed).
pub(crate) static VERSION_MATERIAL: Sql =
    Sql::new("SELECT material FROM kms_key_versions WHERE name = $1 AND version = $2");
/// Key $1's versions after $2.
pub(crate) static VERSIONS_AFTER_DELETE: Sql =
    Sql::new("DELETE FROM kms_key_versions WHERE name = $1 AND version > $2");
/// Key $1's versions as an Undo puts them back.
pub(crate) static VERSION_ROWS: Sql = Sql::new(
    "SELECT version, state, reason, changed_ms, material FROM kms_key_versions
     WHERE name = $1 ORDER BY version",
);
/// Key $1's version $2 back as it was: state $3, reason $4, time $5,
/// material $6.
pub(crate) static VERSION_PUT_BACK: Sql = Sql::new(
    "UPDATE kms_key_versions SET state = $3, reason = $4, changed_ms = $5, material = $6
     WHERE name = $1 AND version = $2",
);
pub(crate) static KEY_SELECTORS_DELETE: Sql =
    Sql::new("DELETE FROM kms_key_selectors WHERE name = $1");
pub(crate) static KEY_DELETE: Sql = Sql::new("DELETE FROM kms_keys WHERE name = $1");
/// Key $1's attributes of version $2 (of every version when NULL).
pub(crate) static KMIP_ATTRIBUTES: Sql = Sql::new(
    "SELECT version, name, position, value FROM kms_kmip_version_attributes
     WHERE key_name = $1 AND ($2::BIGINT IS NULL OR version = $2)
     ORDER BY version, name, position",
);
/// The attributes of key $1's KMIP object at version $2 (that of its
/// newest version at or below $2, as [`KMIP_OBJECT_AT`] finds it).
pub(crate) static KMIP_OBJECT_ATTRIBUTES_AT: Sql = Sql::new(
    "SELECT version, name, position, value FROM kms_kmip_version_attributes
     WHERE key_name = $1 AND version = (
         SELECT max(version) FROM kms_kmip_objects WHERE key_name = $1 AND version <= $2)
     ORDER BY name, position",
);
pub(crate) static KMIP_ATTRIBUTE_CLEAR: Sql = Sql::new(
    "DELETE FROM kms_kmip_version_attributes
     WHERE key_name = $1 AND version = $2 AND name = $3",
);
/// Keys after $3 (byte order) with a version whose attribute $1 is $2.
pub(crate) static KMIP_FIND_PAGE: Sql = Sql::new(
    "SELECT DISTINCT key_name COLLATE \"C\" FROM kms_kmip_version_attributes
     WHERE name = $1 AND value = $2 AND key_name COLLATE \"C\" > $3
     ORDER BY 1 LIMIT $4",
);

// The audit log.
pub(crate) static AUDIT_PAGE: Sql = Sql::new(concat!(
    "SELECT ",
    audit_columns!(),
    " FROM kms_audit WHERE seq > $1 AND ($2::BIGINT IS NULL OR time_ms >= $2)
     ORDER BY seq LIMIT $3"
));
pub(crate) static AUDIT_SEQ_AT: Sql =
    Sql::new("SELECT max(seq) FROM kms_audit WHERE time_ms <= $1");
pub(crate) static AUDIT_HASH: Sql = Sql::new("SELECT hash FROM kms_audit WHERE seq = $1");
pub(crate) static AUDIT_FIRST_AFTER: Sql =
    Sql::new("SELECT min(seq) FROM kms_audit WHERE seq > $1");
pub(crate) static AUDIT_HEAD_SEQ: Sql = Sql::new("SELECT coalesce(max(seq), 0) FROM kms_audit");
pub(crate) static AUDIT_REFS_DONE: Sql = Sql::new("SELECT seq FROM kms_audit_refs_done");
pub(crate) static AUDIT_ANCHOR: Sql =
    Sql::new("SELECT seq, hash, time_ms, mac FROM kms_audit_anchor");
/// The anchor's entry, locked until a prune commits.
pub(crate) static AUDIT_ANCHOR_SEQ_LOCK: Sql =
    Sql::new("SELECT seq FROM kms_audit_anchor WHERE id = 1 FOR UPDATE");
pub(crate) static AUDIT_LAST_CHECKPOINT: Sql =
    Sql::new("SELECT seq, hash, time_ms, mac FROM kms_audit_checkpoints ORDER BY seq DESC LIMIT 1");
/// One already recorded at the same entry (by another server) is kept.
pub(crate) static AUDIT_CHECKPOINT_ADD: Sql = Sql::new(
    "INSERT INTO kms_audit_checkpoints (seq, hash, time_ms, mac) VALUES ($1, $2, $3, $4)
     ON CONFLICT (seq) DO NOTHING",
);
pub(crate) static AUDIT_EXPORT_RECORD: Sql = Sql::new(
    "INSERT INTO kms_audit_exports (after_seq, until_seq, until_hash, time_ms, client)
     VALUES ($1, $2, $3, $4, $5)",
);
pub(crate) static AUDIT_EXPORT_COVERS: Sql =
    Sql::new("SELECT 1 FROM kms_audit_exports WHERE after_seq <= $1 AND until_seq >= $2 LIMIT 1");
// A prune, up to the anchor's entry.
pub(crate) static AUDIT_PRUNE_ENTRIES: Sql = Sql::new("DELETE FROM kms_audit WHERE seq <= $1");
pub(crate) static AUDIT_PRUNE_CHECKPOINTS: Sql =
    Sql::new("DELETE FROM kms_audit_checkpoints WHERE seq < $1");
/// The references go with their entries: whole segments first (a range of
/// the table's leading column), then the anchor's.
pub(crate) static AUDIT_PRUNE_SEGMENTS: Sql =
    Sql::new("DELETE FROM kms_audit_refs WHERE segment < $1");
pub(crate) static AUDIT_PRUNE_REFS: Sql =
    Sql::new("DELETE FROM kms_audit_refs WHERE segment = $1 AND seq <= $2");
pub(crate) static AUDIT_ANCHOR_PUT: Sql = Sql::new(
    "INSERT INTO kms_audit_anchor (id, seq, hash, time_ms, mac) VALUES (1, $1, $2, $3, $4)
     ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
         time_ms = excluded.time_ms, mac = excluded.mac",
);

// Servers sharing the store.
pub(crate) static SERVER_CHECKIN: Sql = Sql::new(
    "INSERT INTO kms_servers (id, host, address, version, started_ms, seen_ms)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (id) DO UPDATE SET seen_ms = excluded.seen_ms",
);
pub(crate) static SERVERS_FORGET: Sql = Sql::new("DELETE FROM kms_servers WHERE seen_ms < $1");
pub(crate) static SERVERS_SEEN: Sql = Sql::new(
    "SELECT id, host, address, version, started_ms, seen_ms FROM kms_servers
     WHERE seen_ms >= $1 ORDER BY started_ms, id LIMIT 1000",
);

// The list pages. Their queries are shaped for each planner, so each
// dialect has its own text, side by side. The parameters: $1 and $2 the
// name range ([`name_range`](super::name_range)), then the filters.

/// The page of keys `filter` asks for ($3 selector, $4 state, $5 limit),
/// each key with all its versions, in name order.
///
/// Only keys with a version count toward the limit (the page is joined
/// with the versions): a key caught between its rows' writes must not
/// shorten a page, which would end the walk. One statement: the page and
/// its versions come from one snapshot. The prefix is a range of the
/// primary-key index in byte order (PostgreSQL: `COLLATE "C"`, the order
/// of the index schema step 6 adds, whatever the database's locale). A
/// state filter walks the (state, name) index in the same order instead,
/// so a state few keys are in costs only those keys, each candidate kept
/// when that version is its key's newest; a selector walks its range of
/// the (selector, name) side table (schema step 10), a state checked on
/// the keys it yields.
pub(crate) fn key_page(dialect: Dialect, filter: &KeyFilter) -> String {
    match dialect {
        Dialect::Sqlite => {
            let page = if filter.selector.is_some() {
                "SELECT k.name, k.exportable, k.allow, k.created_ms
                 FROM kms_key_selectors s JOIN kms_keys k ON k.name = s.name
                 WHERE s.selector = ?3 AND s.name > ?1 AND s.name < ?2
                   AND EXISTS (SELECT 1 FROM kms_key_versions e WHERE e.name = k.name)
                   AND (?4 IS NULL OR (SELECT v.state FROM kms_key_versions v WHERE v.name = k.name
                                       ORDER BY v.version DESC LIMIT 1) = ?4)
                 ORDER BY s.name LIMIT ?5"
            } else if filter.state.is_some() {
                "SELECT k.name, k.exportable, k.allow, k.created_ms
                 FROM kms_key_versions s INDEXED BY kms_key_versions_state
                 JOIN kms_keys k ON k.name = s.name
                 WHERE s.state = ?4 AND s.name > ?1 AND s.name < ?2
                   AND s.version = (SELECT max(version) FROM kms_key_versions m
                                    WHERE m.name = s.name)
                   AND ?3 IS NULL
                 ORDER BY s.name LIMIT ?5"
            } else {
                "SELECT name, exportable, allow, created_ms FROM kms_keys k
                 WHERE name > ?1 AND name < ?2
                   AND EXISTS (SELECT 1 FROM kms_key_versions e WHERE e.name = k.name)
                   AND ?3 IS NULL AND ?4 IS NULL
                 ORDER BY name LIMIT ?5"
            };
            format!(
                "WITH page AS ({page})
                 SELECT p.name, p.exportable, p.allow, p.created_ms, v.version, v.state,
                        v.reason, v.created_ms, v.changed_ms
                 FROM page p JOIN kms_key_versions v ON v.name = p.name
                 ORDER BY p.name, v.version"
            )
        }
        // "Newest" is written as "no newer version" (an anti-join): written
        // as `version = (SELECT max(version) ...)` the planner guessed that
        // 0.5% of rows pass and, on stores of tens of thousands of keys,
        // read and sorted every version for one page. The page's versions
        // are looked up key by key (`OFFSET 0` keeps the planner from
        // turning that into a hash join over the whole version table, its
        // choice below about 50,000 keys).
        Dialect::Postgres => {
            let page = if filter.selector.is_some() {
                "SELECT k.name, k.exportable, k.allow, k.created_ms
                 FROM kms_key_selectors s JOIN kms_keys k ON k.name = s.name
                 WHERE s.selector = $3 AND s.name > $1 AND s.name < $2
                   AND EXISTS (SELECT 1 FROM kms_key_versions e WHERE e.name = k.name)
                   AND ($4::TEXT IS NULL OR (SELECT v.state FROM kms_key_versions v
                                             WHERE v.name = k.name
                                             ORDER BY v.version DESC LIMIT 1) = $4)
                 ORDER BY s.name LIMIT $5"
            } else if filter.state.is_some() {
                "SELECT k.name, k.exportable, k.allow, k.created_ms
                 FROM kms_key_versions s JOIN kms_keys k ON k.name = s.name
                 WHERE s.state = $4 AND s.name COLLATE \"C\" > $1 AND s.name COLLATE \"C\" < $2
                   AND NOT EXISTS (SELECT 1 FROM kms_key_versions n
                                   WHERE n.name = s.name AND n.version > s.version)
                   AND $3::TEXT IS NULL
                 ORDER BY s.name COLLATE \"C\" LIMIT $5"
            } else {
                "SELECT name, exportable, allow, created_ms FROM kms_keys k
                 WHERE name COLLATE \"C\" > $1 AND name COLLATE \"C\" < $2
                   AND EXISTS (SELECT 1 FROM kms_key_versions e WHERE e.name = k.name)
                   AND $3::TEXT IS NULL AND $4::TEXT IS NULL
                 ORDER BY name COLLATE \"C\" LIMIT $5"
            };
            format!(
                "WITH page AS ({page})
                 SELECT p.name, p.exportable, p.allow, p.created_ms, v.version, v.state,
                        v.reason, v.created_ms, v.changed_ms
                 FROM page p CROSS JOIN LATERAL (
                     SELECT version, state, reason, created_ms, changed_ms
                     FROM kms_key_versions WHERE name = p.name OFFSET 0) v
                 ORDER BY p.name COLLATE \"C\", v.version"
            )
        }
    }
}

/// The page of clients `filter` asks for ($3 label, $7 its value, $4
/// admin, $5 revoked, $6 limit), in name order. An admin filter walks the
/// (admin, name) index, so the few admin clients among thousands of
/// hosts cost only themselves (PostgreSQL: spelled as the index's leading
/// column so the planner walks it); a label walks its range of the
/// (label, value, name) side table (schema step 10), the other filters
/// checked on the clients it yields.
pub(crate) fn client_page(dialect: Dialect, filter: &ClientFilter) -> String {
    match dialect {
        Dialect::Sqlite => {
            let (from, by_label) = if filter.label.is_some() {
                (
                    "kms_client_labels l JOIN kms_clients c ON c.name = l.name",
                    "l.label = ?3 AND l.value = ?7 AND l.name > ?1 AND l.name < ?2",
                )
            } else if filter.admin.is_some() {
                (
                    "kms_clients c INDEXED BY kms_clients_admin",
                    "?3 IS NULL AND ?7 IS NULL AND c.name > ?1 AND c.name < ?2",
                )
            } else {
                ("kms_clients c", "?3 IS NULL AND ?7 IS NULL AND c.name > ?1 AND c.name < ?2")
            };
            format!(
                "SELECT {CLIENT_COLUMNS_C} FROM {from}
                 WHERE {by_label}
                   AND (?4 IS NULL OR c.admin = ?4)
                   AND (?5 IS NULL OR (c.revoked_ms IS NOT NULL) = ?5)
                 ORDER BY c.name LIMIT ?6"
            )
        }
        Dialect::Postgres => {
            let (from, driver) = if filter.label.is_some() {
                (
                    "kms_client_labels l JOIN kms_clients c ON c.name = l.name",
                    "l.label = $3 AND l.value = $7 AND l.name > $1 AND l.name < $2",
                )
            } else if filter.admin.is_some() {
                (
                    "kms_clients c",
                    "c.admin = $4 AND c.name COLLATE \"C\" > $1 AND c.name COLLATE \"C\" < $2",
                )
            } else {
                ("kms_clients c", "c.name COLLATE \"C\" > $1 AND c.name COLLATE \"C\" < $2")
            };
            let order = if filter.label.is_some() { "l.name" } else { "c.name COLLATE \"C\"" };
            format!(
                "SELECT {CLIENT_COLUMNS_C} FROM {from}
                 WHERE {driver} AND ($3::TEXT IS NULL) = ($7::TEXT IS NULL)
                   AND ($4::BOOLEAN IS NULL OR c.admin = $4)
                   AND ($5::BOOLEAN IS NULL OR (c.revoked_ms IS NOT NULL) = $5)
                 ORDER BY {order} LIMIT $6"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::to_sqlite;

    #[test]
    fn sqlite_spelling_numbers_parameters_and_drops_casts_byte_collation_and_row_locks() {
        assert_eq!(
            to_sqlite("a = $1 AND ($2::BIGINT IS NULL OR b = $2) AND c COLLATE \"C\" > $10"),
            "a = ?1 AND (?2 IS NULL OR b = ?2) AND c > ?10"
        );
        assert_eq!(to_sqlite("unnest($1::TEXT[]), $2"), "unnest(?1), ?2");
        assert_eq!(to_sqlite("SELECT 1"), "SELECT 1");
        assert_eq!(
            to_sqlite("SELECT 1 FROM t WHERE a = $1 FOR UPDATE"),
            "SELECT 1 FROM t WHERE a = ?1"
        );
    }
}
