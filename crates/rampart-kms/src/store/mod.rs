//! Where the key manager keeps its state: a [`Store`] holds the deployment
//! metadata (seal configuration, root key check value, CA), keys and their
//! versions (material sealed under the root key), clients, and the
//! hash-chained audit log.
//!
//! [`SqliteStore`] is the default (one file, `DIR/kms.db`);
//! [`PostgresStore`] lets several servers share one database.
//!
//! One store logic over two backends. The operations are written once
//! (`logic`) over a small interface (`backend::Tx`: statements with
//! parameters in a transaction, the dialect, and the few steps only one
//! backend takes, such as shredding material or lifting the audit log's
//! append-only guard for a prune). Beside them, written once too: the
//! schema and its migrations (`schema`), the SQL text (`sql`, in
//! PostgreSQL's spelling, spelled for SQLite once per statement), the
//! decoding of rows (`rows`) and the verdicts (`rules`: what is not found,
//! what conflicts, which audit segments a list probes). Each backend file
//! keeps its I/O model (SQLite synchronous on a writer and a few readers,
//! PostgreSQL async on a pool), how it opens and commits transactions,
//! and the operations whose SQL only it can say: the list pages' queries
//! shaped for its planner, key reads (SQLite's kept rows, PostgreSQL's
//! grouped reads), audit appends, the chain walk (binary COPY on
//! PostgreSQL) and the audit indexer.

mod backend;
mod copy_binary;
mod logic;
mod material_cache;
mod postgres;
mod postgres_audit;
mod postgres_changes;
mod postgres_connection;
mod rows;
mod rules;
mod schema;
mod sql;
mod sqlite;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use self::postgres::PostgresStore;
pub use self::schema::SCHEMA_VERSION;
pub use self::sqlite::SqliteStore;

use crate::audit::{ChainPage, ExportedEntry, Mark};
use crate::error::{KmsError, Result};
use crate::keys::RootKey;
use crate::model::{
    parse_policy, AuditDraft, AuditEntry, ClientInfo, KeyInfo, KeyState, KeyVersionInfo, Labels,
    Selector,
};

/// The columns `audit_chain_page` reads, in its order, named in errors.
const AUDIT_CHAIN_COLUMNS: [&str; 10] = [
    "sequence number",
    "time",
    "client",
    "operation",
    "key name",
    "key version",
    "outcome",
    "detail",
    "hash",
    "MAC",
];

/// The data-path operations: most of a busy log, so an `operation`
/// filter naming one walks the log in order (its matches are dense)
/// while the others walk the partial index of schema step 9, which holds
/// only them. The same list as that index's condition (schema step 12).
pub(crate) const DATA_PATH_OPERATIONS: &[&str] = &[
    "key.unwrap",
    "key.wrap",
    "key.sign",
    "key.verify",
    "kmip.get",
    "kmip.encrypt",
    "kmip.decrypt",
    "kmip.sign",
    "kmip.signature_verify",
    "kmip.mac",
    "kmip.mac_verify",
];

/// The condition of the partial operation index, spelled as in its
/// definition (a query must repeat it for the index to apply).
pub(crate) const RARE_OPERATION: &str = "operation NOT IN ('key.unwrap', 'key.wrap', 'key.sign', \
     'key.verify', 'kmip.get', 'kmip.encrypt', 'kmip.decrypt', 'kmip.sign', \
     'kmip.signature_verify', 'kmip.mac', 'kmip.mac_verify')";

/// The condition of the partial outcome index.
pub(crate) const RARE_OUTCOME: &str = "outcome <> 'ok'";

/// Entries per segment of `kms_audit_refs` (its leading key column is
/// `seq / AUDIT_REFS_SEGMENT`).
pub(crate) const AUDIT_REFS_SEGMENT: u64 = 65_536;

/// The last sequence number of the segment holding the first entry after
/// the indexed mark `done`, when the log's head has reached it: the range
/// [`Store::index_audit`] indexes next.
///
/// Whole segments only, because the references are sorted by segment,
/// then by name: a segment's rows written in one sorted run go in at the
/// end of the table, a few pages, whereas rows added a batch at a time
/// land at their names' places among the segment's earlier rows, nearly
/// a page each, and held SQLite's single writer, which every audited
/// request waits for (BENCHMARKS.md, "Key manager: fleet scale"). What is
/// not indexed yet, less than a segment, a filtered list scans.
pub(crate) fn segment_to_index(done: u64, head: u64) -> Option<u64> {
    let end = (done.checked_add(1)? / AUDIT_REFS_SEGMENT)
        .checked_add(1)?
        .checked_mul(AUDIT_REFS_SEGMENT)?
        .checked_sub(1)?;
    (end <= head).then_some(end)
}

/// The kinds of `kms_audit_refs` rows.
pub(crate) const REF_CLIENT: i64 = 1;
pub(crate) const REF_KEY: i64 = 2;

/// Metadata names.
pub mod meta {
    /// JSON [`crate::SealConfig`].
    pub const SEAL: &str = "seal";
    /// The root key check value.
    pub const ROOT_CHECK: &str = "root_check";
    /// The CA certificate, PEM.
    pub const CA_CERT: &str = "ca_cert";
    /// The CA private key (PKCS#8 DER) sealed under the root key.
    pub const CA_KEY: &str = "ca_key";
}

/// A boxed future of a store operation.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// A server of the deployment as it last announced itself in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPresence {
    /// Random, chosen at each start.
    pub id: String,
    pub host: String,
    /// The REST listener's address.
    pub address: String,
    pub version: String,
    pub started_ms: i64,
    pub seen_ms: i64,
}

/// A key's policy and one version with its sealed material: what a data
/// operation needs, read in one query.
#[derive(Debug, Clone)]
pub struct MaterialRow {
    pub allow: Vec<Selector>,
    pub exportable: bool,
    pub version: KeyVersionInfo,
    /// `None` once destroyed.
    pub material: Option<Vec<u8>>,
    /// The KMIP object of this version, when it has one (dates bound its use).
    pub kmip: Option<KmipUse>,
}

/// What of a version's KMIP object limits its use over every front end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KmipUse {
    /// KMIP Object Type (2: Symmetric Key, 7: Secret Data, 4: Private Key...).
    pub object_type: u32,
    /// Unix milliseconds; `None`: Pre-Active until activated.
    pub activation_ms: Option<i64>,
    pub deactivation_ms: Option<i64>,
    /// KMIP Cryptographic Algorithm and Length, where the object has them.
    pub algorithm: Option<u32>,
    pub length: Option<i32>,
}

/// The KMIP object of one key version (schema step 3). Dates in Unix
/// milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmipObject {
    pub key: String,
    pub version: u32,
    pub object_type: u32,
    pub algorithm: Option<u32>,
    pub length: Option<i32>,
    pub usage_mask: Option<i32>,
    /// The enumeration that completes the object type: a Secret Data's
    /// Secret Data Type, an Opaque Object's Opaque Data Type, a
    /// Certificate's Certificate Type, and for a private or public key
    /// the Key Format Type it was registered in (Get answers in it by
    /// default; the material itself is always PKCS#8 or
    /// SubjectPublicKeyInfo).
    pub secret_type: Option<u32>,
    /// The client that created or registered it.
    pub owner: String,
    pub activation_ms: Option<i64>,
    pub deactivation_ms: Option<i64>,
    pub compromise_occurrence_ms: Option<i64>,
    pub compromised: bool,
}

/// What a KMIP operation reads of one object (see [`Store::kmip_view`]).
#[derive(Debug, Clone)]
pub struct KmipView {
    /// The key, with every version.
    pub key: KeyInfo,
    /// The KMIP object of the version asked for, or else of its newest
    /// version below (as [`Store::kmip_object`]).
    pub object: Option<KmipObject>,
    /// That object's attributes, when asked for.
    pub attributes: Vec<KmipAttributeRow>,
    /// The asked version's sealed material (`None` once destroyed), so
    /// an operation that uses the key needs no second read.
    pub material: Option<Arc<[u8]>>,
}

/// A key to create with its version 1's KMIP object and attributes (see
/// [`Store::kmip_create_keys`]); the material is sealed.
#[derive(Debug, Clone)]
pub struct NewKmipKey {
    pub key: KeyInfo,
    pub material: Vec<u8>,
    pub object: KmipObject,
    pub attributes: Vec<KmipAttributeRow>,
}

/// A new version of an existing key with its KMIP object and attributes
/// (see [`Store::kmip_add_version`]); the material is sealed.
#[derive(Debug, Clone)]
pub struct NewKmipVersion {
    pub object: KmipObject,
    pub created_ms: i64,
    pub material: Vec<u8>,
    pub attributes: Vec<KmipAttributeRow>,
}

/// Every value of attribute `name` of `key`'s version `version` replaced
/// (see [`Store::kmip_set_attribute`]); with `inherit`, the version first
/// takes a copy of that version's attributes and then its own KMIP object.
#[derive(Debug, Clone)]
pub struct KmipAttributeValues {
    pub key: String,
    pub version: u32,
    pub name: String,
    pub values: Vec<String>,
    pub inherit: Option<(u32, KmipObject)>,
}

/// What one KMIP operation writes to several keys at once (see
/// [`Store::kmip_apply`]): keys created, versions added, attributes
/// replaced, in that order.
#[derive(Debug, Clone, Default)]
pub struct KmipChanges {
    pub keys: Vec<NewKmipKey>,
    pub versions: Vec<NewKmipVersion>,
    pub attributes: Vec<KmipAttributeValues>,
}

/// A key's state as a batch under Batch Error Continuation Undo found it
/// (see [`Store::kmip_restore`]): its versions (state and sealed
/// material), and the KMIP objects and attributes of those versions.
#[derive(Debug, Clone)]
pub struct KmipKeyState {
    pub versions: Vec<VersionRow>,
    pub objects: Vec<KmipObject>,
    pub attributes: Vec<KmipAttributeRow>,
}

/// One key version's row as [`KmipKeyState`] keeps it.
#[derive(Clone)]
pub struct VersionRow {
    pub version: u32,
    /// `active`, `revoked` or `destroyed`.
    pub state: String,
    pub reason: Option<String>,
    pub changed_ms: Option<i64>,
    /// The sealed material (`None` once destroyed).
    pub material: Option<Vec<u8>>,
}

impl std::fmt::Debug for VersionRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionRow")
            .field("version", &self.version)
            .field("state", &self.state)
            .field("material", &self.material.as_ref().map(|m| format!("{} bytes", m.len())))
            .finish_non_exhaustive()
    }
}

/// One stored KMIP attribute value of a KMIP object (key version): the
/// version, the attribute name, its position among that name's values,
/// and the value (hex of its TTLV).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmipAttributeRow {
    pub version: u32,
    pub name: String,
    pub position: u32,
    pub value: String,
}

/// Most items one page of a list may hold (the API's `limit`).
pub const MAX_PAGE: u32 = 10_000;

/// Which keys a page of the key list holds. Every field narrows the list.
///
/// The one model of the key list's filters: the REST query string and the
/// console's form are parsed into it ([`KeyFilter::parse`]), and the client
/// names its parameters ([`KeyFilter::PARAMETERS`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyFilter {
    /// Names starting with this text.
    pub prefix: Option<String>,
    /// Keys whose newest version is in this state (one of
    /// [`KeyFilter::STATES`]).
    pub state: Option<&'static str>,
    /// Keys whose policy holds this selector.
    pub selector: Option<Selector>,
}

impl KeyFilter {
    /// The key list's filter parameters: `prefix`, `state`, `selector`.
    pub const PARAMETERS: [&'static str; 3] = ["prefix", "state", "selector"];
    /// The states the key list filters on (the newest version's).
    pub const STATES: [&'static str; 3] = ["active", "revoked", "destroyed"];

    /// The filter named by the key list's parameters, as text: a name
    /// prefix (empty: none), a state of [`KeyFilter::STATES`] and a
    /// selector (`client:NAME`, `label:KEY=VALUE`).
    pub fn parse(
        prefix: Option<&str>,
        state: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Self> {
        let state = match state {
            None => None,
            Some(text) => {
                Some(Self::STATES.into_iter().find(|s| *s == text).ok_or_else(|| {
                    KmsError::invalid("state must be active, revoked or destroyed")
                })?)
            }
        };
        let selector = selector.map(Selector::parse).transpose()?;
        Ok(Self { prefix: parse_prefix(prefix)?, state, selector })
    }

    /// The filter's canonical text, which a list cursor is bound to.
    #[must_use]
    pub fn binding(&self) -> String {
        format!(
            "prefix={}&state={}&selector={}",
            self.prefix.as_deref().unwrap_or(""),
            self.state.unwrap_or(""),
            self.selector.as_ref().map(ToString::to_string).unwrap_or_default()
        )
    }
}

/// A list's name prefix: at most [`crate::model::MAX_NAME`] letters,
/// digits, `.`, `_` or `-`; absent or empty, no prefix.
pub(crate) fn parse_prefix(text: Option<&str>) -> Result<Option<String>> {
    match text {
        None | Some("") => Ok(None),
        Some(p) => {
            let ok = p.len() <= crate::model::MAX_NAME
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(KmsError::invalid(format!(
                    "prefix must be at most {} letters, digits, '.', '_' or '-'",
                    crate::model::MAX_NAME
                )));
            }
            Ok(Some(p.to_owned()))
        }
    }
}

/// Which clients a page of the client list holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFilter {
    /// Names starting with this text.
    pub prefix: Option<String>,
    /// Clients carrying this label (key, value).
    pub label: Option<(String, String)>,
    /// Admin clients only (`true`) or non-admin only (`false`).
    pub admin: Option<bool>,
    /// Revoked clients only (`true`) or unrevoked only (`false`).
    pub revoked: Option<bool>,
}

/// Which entries a page of the audit list holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// At or after this Unix time in milliseconds.
    pub since_ms: Option<i64>,
    /// Before this Unix time in milliseconds.
    pub until_ms: Option<i64>,
    /// Made by this client (its name, or `cert:...` before it was known).
    pub client: Option<String>,
    /// About this key.
    pub key: Option<String>,
    /// This operation (`key.unwrap`, `client.issue`...).
    pub operation: Option<String>,
    /// This outcome (`ok`, `denied`, `invalid`, `unavailable`, `error`).
    pub outcome: Option<String>,
}

/// How an audit list finds the entries its filter lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuditDriver {
    /// Probes `kms_audit_refs` rows of this kind and value, segment by
    /// segment, up to the indexed mark; then scans what follows it.
    Refs(i64, String),
    /// Walks a partial index (schema step 9): this condition on the
    /// filtered column, and the index's name and condition.
    Rare(&'static str, &'static str, &'static str),
    /// Walks the log in sequence order.
    Sequence,
}

impl AuditFilter {
    /// The way to the entries likeliest to match fewest of them: a key,
    /// then a client (the reference table), a rare operation or outcome
    /// (their partial indexes); a data-path operation or `ok` outcome
    /// alone matches most entries, so the log is walked in order.
    pub(crate) fn driver(&self) -> AuditDriver {
        if let Some(key) = &self.key {
            AuditDriver::Refs(REF_KEY, key.clone())
        } else if let Some(client) = &self.client {
            AuditDriver::Refs(REF_CLIENT, client.clone())
        } else if self.operation.as_deref().is_some_and(|o| !DATA_PATH_OPERATIONS.contains(&o)) {
            AuditDriver::Rare("operation", "kms_audit_rare_operation", RARE_OPERATION)
        } else if self.outcome.as_deref().is_some_and(|o| o != "ok") {
            AuditDriver::Rare("outcome", "kms_audit_rare_outcome", RARE_OUTCOME)
        } else {
            AuditDriver::Sequence
        }
    }
}

/// The names after `after` that start with `prefix`, as an exclusive
/// range in byte order. Names hold only `-`, `.`, digits, letters and `_`
/// (all between `,` and `~`), so "PREFIX with its last byte lowered, then
/// `~`" sorts just below every name starting with PREFIX and "PREFIX with
/// its last byte raised" just above.
pub(crate) fn name_range(after: &str, prefix: Option<&str>) -> (String, String) {
    let Some(prefix) = prefix.filter(|p| !p.is_empty()) else {
        return (after.to_owned(), "~".to_owned());
    };
    let bytes = prefix.as_bytes();
    let (head, last) = bytes.split_at(bytes.len() - 1);
    let mut below = head.to_vec();
    below.push(last[0].saturating_sub(1));
    below.push(b'~');
    let mut above = head.to_vec();
    above.push(last[0].saturating_add(1));
    let below = String::from_utf8_lossy(&below).into_owned();
    let above = String::from_utf8_lossy(&above).into_owned();
    (if below.as_str() > after { below } else { after.to_owned() }, above)
}

/// A key state change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateChange {
    /// Active versions become revoked with this reason.
    Revoke { reason: String },
    /// Versions not yet destroyed lose their material.
    Destroy,
}

/// The storage backend of the key manager. Every method is one
/// transaction; implementations serialise audit appends so the chain has
/// one order even with several servers on one database.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// `sqlite` or `postgresql`.
    fn kind(&self) -> &'static str;

    fn get_meta(&self, name: &'static str) -> StoreFuture<'_, Option<Vec<u8>>>;

    /// Writes the deployment metadata and the first (admin) client, once:
    /// [`KmsError::Conflict`] when the store is already initialised.
    fn initialize(
        &self,
        meta: Vec<(&'static str, Vec<u8>)>,
        admin: ClientInfo,
    ) -> StoreFuture<'_, ()>;

    /// Creates a key with its version 1 and that version's sealed material.
    fn create_key(&self, key: KeyInfo, material: Vec<u8>) -> StoreFuture<'_, ()>;

    /// Up to `limit` keys with names after `after` (all when empty) that
    /// pass `filter`, in name order, with their versions: one indexed
    /// range scan, so a page costs the same whatever the store holds.
    fn key_page(
        &self,
        after: String,
        filter: KeyFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<KeyInfo>>;

    fn get_key(&self, name: String) -> StoreFuture<'_, Option<KeyInfo>>;

    /// The key's policy and version `version` (the newest when `None`) with
    /// its sealed material (shared: the SQLite store keeps the rows the
    /// data path reads, and hands out the kept row itself).
    fn key_material(
        &self,
        name: String,
        version: Option<u32>,
    ) -> StoreFuture<'_, Option<Arc<MaterialRow>>>;

    /// Adds version `version` (which must be the newest plus one:
    /// [`KmsError::Conflict`] otherwise, e.g. after a concurrent rotation).
    fn add_version(
        &self,
        name: String,
        version: u32,
        created_ms: i64,
        material: Vec<u8>,
    ) -> StoreFuture<'_, ()>;

    /// Revokes or destroys version `version` (all versions when `None`);
    /// returns how many versions changed. Destroying overwrites the sealed
    /// material. [`KmsError::NotFound`] for an unknown key or version.
    fn change_state(
        &self,
        name: String,
        version: Option<u32>,
        change: StateChange,
        changed_ms: i64,
    ) -> StoreFuture<'_, u32>;

    /// Registers a client; [`KmsError::Conflict`] if the name is taken.
    fn add_client(&self, client: ClientInfo) -> StoreFuture<'_, ()>;

    fn client_by_fingerprint(&self, fingerprint: String) -> StoreFuture<'_, Option<ClientInfo>>;

    /// Up to `limit` clients with names after `after` (all when empty)
    /// that pass `filter`, in name order.
    fn client_page(
        &self,
        after: String,
        filter: ClientFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ClientInfo>>;

    /// Revokes client `name`; a second revocation keeps the first one's
    /// time and reason. Returns the client; [`KmsError::NotFound`] when
    /// unknown.
    fn revoke_client(
        &self,
        name: String,
        reason: String,
        revoked_ms: i64,
    ) -> StoreFuture<'_, ClientInfo>;

    /// Replaces client `name`'s labels; returns the client.
    /// [`KmsError::NotFound`] when unknown.
    fn set_client_labels(&self, name: String, labels: Labels) -> StoreFuture<'_, ClientInfo>;

    /// Appends entries to the audit chain in order, MACed when `root` is
    /// given; returns their sequence numbers.
    fn append_audit(
        &self,
        drafts: Vec<AuditDraft>,
        root: Option<Arc<RootKey>>,
    ) -> StoreFuture<'_, Vec<u64>>;

    /// Up to `limit` entries after sequence number `after_seq`, at or after
    /// `since_ms` when given, in order.
    fn audit_page(
        &self,
        after_seq: u64,
        since_ms: Option<i64>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<AuditEntry>>;

    /// Up to `limit` entries after sequence number `after_seq`, in order,
    /// in the form the verification walk checks (canonical bytes, hash,
    /// MAC), read without an allocation per entry.
    fn audit_chain_page(&self, after_seq: u64, limit: u32) -> StoreFuture<'_, ChainPage>;

    /// Up to `limit` entries after sequence number `after_seq` that pass
    /// `filter`, in order (a walk of the sequence-number index).
    fn audit_list(
        &self,
        after_seq: u64,
        filter: AuditFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<AuditEntry>>;

    /// Creates a key (as [`Store::create_key`]) with its version 1's KMIP
    /// object and that object's KMIP attributes, in one transaction.
    fn kmip_create_key(
        &self,
        key: KeyInfo,
        material: Vec<u8>,
        object: KmipObject,
        attributes: Vec<KmipAttributeRow>,
    ) -> StoreFuture<'_, ()>;

    /// Creates keys as [`Store::kmip_create_key`], all or none, in one
    /// transaction (the private and public key of a KMIP key pair).
    fn kmip_create_keys(&self, keys: Vec<NewKmipKey>) -> StoreFuture<'_, ()>;

    /// Adds version `object.version` (the newest plus one, as
    /// [`Store::add_version`]) with its KMIP object and attributes, in one
    /// transaction. Names move: the key's other versions lose theirs
    /// (KMIP Re-key).
    fn kmip_add_version(
        &self,
        object: KmipObject,
        created_ms: i64,
        material: Vec<u8>,
        attributes: Vec<KmipAttributeRow>,
    ) -> StoreFuture<'_, ()>;

    /// Applies `changes` all or none, in one transaction: the keys and
    /// versions a KMIP operation makes with the links it changes on other
    /// keys (Re-key Key Pair's two halves, Certify's certificate and the
    /// public key's Certificate Link).
    fn kmip_apply(&self, changes: KmipChanges) -> StoreFuture<'_, ()>;

    /// Creates or replaces a version's KMIP object. With `inherit`, in the
    /// same transaction, the version first takes a copy of version
    /// `inherit`'s attributes (as [`Store::kmip_set_attribute`]), since a
    /// version with its own object no longer shows an older one's.
    fn kmip_put_object(&self, object: KmipObject, inherit: Option<u32>) -> StoreFuture<'_, ()>;

    /// The KMIP object of `key`'s version `version`, or else of its newest
    /// version below (a version added by a REST rotation has none).
    fn kmip_object(&self, key: String, version: u32) -> StoreFuture<'_, Option<KmipObject>>;

    /// Key `key` with its versions, the KMIP object of version `version`
    /// (as [`Store::kmip_object`]) and, `with_attributes`, that object's
    /// attributes: what every KMIP operation reads first, in one round trip
    /// to PostgreSQL (its statements pipelined on one connection).
    fn kmip_view(
        &self,
        key: String,
        version: u32,
        with_attributes: bool,
    ) -> StoreFuture<'_, Option<Arc<KmipView>>>;

    /// Every KMIP object.
    fn kmip_objects(&self) -> StoreFuture<'_, Vec<KmipObject>>;

    /// The KMIP objects of every version of the keys `names`, in no
    /// particular order: a page of the key list learns its objects in a
    /// read per 64 keys rather than per key.
    fn kmip_objects_of(&self, names: Vec<String>) -> StoreFuture<'_, Vec<KmipObject>>;

    /// The KMIP attributes of `key`'s version `version` (of every version
    /// when `None`), by version, name and position.
    fn kmip_attributes(
        &self,
        key: String,
        version: Option<u32>,
    ) -> StoreFuture<'_, Vec<KmipAttributeRow>>;

    /// Replaces every value of attribute `name` of `key`'s version
    /// `version` with `values`, in one transaction. With `inherit`, the
    /// version first takes a copy of version `inherit`'s attributes (one
    /// added by a REST rotation shows its predecessor's until it has its
    /// own), the Names moving.
    fn kmip_set_attribute(
        &self,
        key: String,
        version: u32,
        name: String,
        values: Vec<String>,
        inherit: Option<u32>,
    ) -> StoreFuture<'_, ()>;

    /// Key `key`'s KMIP state for [`Store::kmip_restore`]; `None` for an
    /// unknown key.
    fn kmip_key_state(&self, key: String) -> StoreFuture<'_, Option<KmipKeyState>>;

    /// Undoes what a KMIP batch did to key `key` (Batch Error Continuation
    /// Undo), in one transaction. With `earlier`, the versions it does not
    /// hold go, their material shredded, those it holds get back their
    /// state and sealed material (a revocation or destruction undone), and
    /// the key's KMIP objects and attributes become exactly `earlier`'s.
    /// Without, the key (which the batch made) goes whole: versions,
    /// material, policy, objects and attributes.
    fn kmip_restore(&self, key: String, earlier: Option<KmipKeyState>) -> StoreFuture<'_, ()>;

    /// Up to `limit` keys after `after` (in byte order) with a version
    /// whose attribute `name` has the value `value`: one range of the
    /// (name, value, key) index of schema step 11, so a value most keys
    /// share (an Object Group) is walked a page at a time.
    fn kmip_find_page(
        &self,
        name: String,
        value: String,
        after: String,
        limit: u32,
    ) -> StoreFuture<'_, Vec<String>>;

    /// As [`Store::append_audit`], returning the entries as stored (with
    /// their links, hashes and MACs), for the audit sinks.
    fn append_audit_entries(
        &self,
        drafts: Vec<AuditDraft>,
        root: Option<Arc<RootKey>>,
    ) -> StoreFuture<'_, Vec<ExportedEntry>>;

    /// How many [`Store::append_audit_entries`] calls the audit writer may
    /// have unfinished at once. Above 1, the store appends batches in the
    /// order their futures were first polled.
    fn audit_appends_in_flight(&self) -> usize {
        1
    }

    /// Adds the key and client of the entries after the indexed mark to
    /// `kms_audit_refs` up to the end of their segment, once that segment
    /// is complete ([`segment_to_index`]), sorted, and moves the mark
    /// there; returns how many sequence numbers the mark moved over (0:
    /// no segment after the mark is complete yet). Rows already present
    /// (a run cut short) are kept, so it may run again, and several
    /// servers may run it at once.
    fn index_audit(&self) -> StoreFuture<'_, u64>;

    /// The anchor left by the last prune, if any.
    fn audit_anchor(&self) -> StoreFuture<'_, Option<Mark>>;

    /// Leaves the store after a bulk load (`kms populate`) as a server
    /// that has run for a while finds it. On PostgreSQL: the tables the
    /// load filled vacuumed and analysed (hint bits and visibility map
    /// set, planner statistics current), which autovacuum would otherwise
    /// do over minutes of the first requests. SQLite needs nothing.
    fn settle_after_bulk_load(&self) -> StoreFuture<'_, ()>;

    /// Records that `server` is up at `server.seen_ms`, and forgets
    /// servers not seen since `forget_before_ms`.
    fn server_checkin(&self, server: ServerPresence, forget_before_ms: i64) -> StoreFuture<'_, ()>;

    /// The servers seen at or after `since_ms`, oldest start first (a
    /// deployment has a handful).
    fn servers_seen(&self, since_ms: i64) -> StoreFuture<'_, Vec<ServerPresence>>;

    /// The newest checkpoint, if any.
    fn last_audit_checkpoint(&self) -> StoreFuture<'_, Option<Mark>>;

    /// Records a checkpoint; one already recorded at the same entry (by
    /// another server) is kept.
    fn add_audit_checkpoint(&self, mark: Mark) -> StoreFuture<'_, ()>;

    /// The newest entry stamped at or before `until_ms`.
    fn audit_seq_at(&self, until_ms: i64) -> StoreFuture<'_, Option<u64>>;

    /// The hash (hex) of entry `seq`, if it is stored.
    fn audit_hash(&self, seq: u64) -> StoreFuture<'_, Option<String>>;

    /// Records that `client` exported the entries after `after_seq` up to
    /// `until_seq`, whose hash is `until_hash`.
    fn record_audit_export(
        &self,
        after_seq: u64,
        until_seq: u64,
        until_hash: String,
        client: String,
        time_ms: i64,
    ) -> StoreFuture<'_, ()>;

    /// Whether an export recorded so far covers every entry after
    /// `after_seq` up to `until_seq`.
    fn audit_export_covers(&self, after_seq: u64, until_seq: u64) -> StoreFuture<'_, bool>;

    /// Removes the entries up to `anchor.seq` (and the checkpoints before
    /// it) and records `anchor` in one transaction. The anchor in place
    /// must still be at `expected_anchor_seq` (0: none), and the stored
    /// hash of entry `anchor.seq` must be `anchor.hash`:
    /// [`KmsError::Conflict`] otherwise. Returns how many entries went.
    fn prune_audit(&self, expected_anchor_seq: u64, anchor: Mark) -> StoreFuture<'_, u64>;
}

/// Opens the store a `--store` value names: `sqlite` (the default, with
/// `DIR/kms.db`), a path ending in `.db`, or a `postgres://` /
/// `postgresql://` URL.
pub async fn open(spec: Option<&str>, data_dir: &std::path::Path) -> Result<Arc<dyn Store>> {
    match spec {
        None | Some("sqlite") => Ok(Arc::new(SqliteStore::open(&data_dir.join("kms.db"))?)),
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(Arc::new(PostgresStore::connect(url).await?))
        }
        Some(path) if path.ends_with(".db") => {
            Ok(Arc::new(SqliteStore::open(std::path::Path::new(path))?))
        }
        Some(other) => Err(KmsError::Config(format!(
            "--store '{other}' is not sqlite, a .db path or a postgres:// URL"
        ))),
    }
}

// Row conversions shared by the backends.

pub(crate) fn encode_policy(allow: &[Selector]) -> String {
    serde_json::Value::from(allow.iter().map(ToString::to_string).collect::<Vec<_>>()).to_string()
}

pub(crate) fn decode_policy(text: &str) -> Result<Vec<Selector>> {
    let items: Vec<String> = serde_json::from_str(text)
        .map_err(|e| KmsError::Corrupt(format!("stored policy is not a JSON list: {e}")))?;
    parse_policy(&items).map_err(|e| KmsError::Corrupt(format!("stored policy: {e}")))
}

pub(crate) fn encode_labels(labels: &Labels) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "{}".into())
}

pub(crate) fn decode_labels(text: &str) -> Result<Labels> {
    let map = serde_json::from_str(text)
        .map_err(|e| KmsError::Corrupt(format!("stored labels are not a JSON object: {e}")))?;
    Labels::new(map).map_err(|e| KmsError::Corrupt(format!("stored labels: {e}")))
}

pub(crate) fn to_u32(value: i64, what: &str) -> Result<u32> {
    u32::try_from(value)
        .map_err(|_| KmsError::Corrupt(format!("stored {what} {value} is out of range")))
}

pub(crate) fn to_u64(value: i64, what: &str) -> Result<u64> {
    u64::try_from(value)
        .map_err(|_| KmsError::Corrupt(format!("stored {what} {value} is out of range")))
}

pub(crate) fn version_info(
    version: i64,
    state: &str,
    reason: Option<String>,
    created_ms: i64,
    changed_ms: Option<i64>,
) -> Result<KeyVersionInfo> {
    Ok(KeyVersionInfo {
        version: to_u32(version, "key version")?,
        state: KeyState::from_stored(state, reason)?,
        created_ms,
        changed_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::{segment_to_index, KeyFilter};
    use crate::client::KeyQuery;
    use crate::model::Selector;

    #[test]
    fn a_key_filter_is_parsed_from_its_parameters_and_sent_as_them() {
        let filter =
            KeyFilter::parse(Some("db-"), Some("revoked"), Some("label:region=eu")).unwrap();
        assert_eq!(filter.prefix.as_deref(), Some("db-"));
        assert_eq!(filter.state, Some("revoked"));
        assert_eq!(filter.selector, Some(Selector::parse("label:region=eu").unwrap()));
        assert_eq!(filter.binding(), "prefix=db-&state=revoked&selector=label:region=eu");
        let query = KeyQuery::from_filter(&filter, Some(7));
        let parsed = KeyFilter::parse(
            query.prefix.as_deref(),
            query.state.as_deref(),
            query.selector.as_deref(),
        )
        .unwrap();
        assert_eq!((parsed, query.limit), (filter, Some(7)));
        assert_eq!(KeyFilter::parse(Some(""), None, None).unwrap(), KeyFilter::default());
        assert_eq!(KeyFilter::default().binding(), "prefix=&state=&selector=");
        let error = KeyFilter::parse(None, Some("gone"), None).unwrap_err();
        assert_eq!(
            error.to_string(),
            crate::KmsError::invalid("state must be active, revoked or destroyed").to_string()
        );
        assert!(KeyFilter::parse(Some("a b"), None, None)
            .unwrap_err()
            .to_string()
            .contains("prefix must be"));
        assert!(KeyFilter::parse(None, None, Some("nobody")).is_err());
    }

    #[test]
    fn the_next_segment_to_index_is_the_first_unindexed_one_once_complete() {
        // Sequence numbers start at 1: the first segment holds 1..=65,535.
        assert_eq!(segment_to_index(0, 65_534), None);
        assert_eq!(segment_to_index(0, 65_535), Some(65_535));
        assert_eq!(segment_to_index(0, 1_000_000), Some(65_535));
        // A mark at a segment's end: the next whole segment.
        assert_eq!(segment_to_index(65_535, 131_070), None);
        assert_eq!(segment_to_index(65_535, 131_071), Some(131_071));
        // A mark inside a segment: the rest of it.
        assert_eq!(segment_to_index(90_000, 131_071), Some(131_071));
        assert_eq!(segment_to_index(131_071, 140_000), None);
        // No overflow at the top of the range.
        assert_eq!(segment_to_index(u64::MAX, u64::MAX), None);
        assert_eq!(segment_to_index(u64::MAX - 1, u64::MAX), None);
    }
}
