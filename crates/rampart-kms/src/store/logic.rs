//! The store's operations, written once over either backend's [`Tx`]:
//! each function is the body of one [`Store`](super::Store) method inside
//! the transaction its backend opened (and commits). What stays in a
//! backend file is how it connects, opens and commits, and the operations
//! whose SQL only it can say (the list pages' planner-shaped queries, key
//! reads, audit appends, the chain walk and the audit indexer).

use crate::audit::Mark;
use crate::error::Result;
use crate::model::{AuditEntry, ClientInfo, KeyInfo, Labels};

use super::backend::{Param, Tx};
use super::rows::{self, Columns};
use super::rules;
use super::sql::{self, Dialect, AUDIT_LIST_COLUMNS, AUDIT_LIST_FILTERS};
use super::{
    encode_labels, encode_policy, meta, name_range, to_u64, AuditFilter, ClientFilter, KeyFilter,
    KmipAttributeRow, KmipChanges, KmipKeyState, KmipObject, KmipView, NewKmipKey, ServerPresence,
    StateChange,
};

/// A sequence number as the stores keep it (BIGINT).
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) async fn get_meta(tx: &impl Tx, name: &str) -> Result<Option<Vec<u8>>> {
    tx.scalar(&sql::META_GET, &[&name]).await
}

/// The deployment metadata and the first client, once.
pub(crate) async fn initialize(
    tx: &impl Tx,
    entries: &[(&'static str, Vec<u8>)],
    admin: &ClientInfo,
) -> Result<()> {
    let exists = tx.scalar::<i32>(&sql::META_EXISTS, &[&meta::ROOT_CHECK]).await?.is_some();
    rules::check_not_initialised(exists)?;
    for (name, value) in entries {
        tx.run(&sql::META_INSERT, &[name, value]).await?;
    }
    insert_client(tx, admin).await
}

pub(crate) async fn insert_client(tx: &impl Tx, c: &ClientInfo) -> Result<()> {
    let labels = encode_labels(&c.labels);
    let params: [&dyn Param; 7] =
        [&c.name, &labels, &c.admin, &c.serial, &c.fingerprint, &c.created_ms, &c.not_after_ms];
    tx.insert(&sql::CLIENT_INSERT, &params, || rules::client_taken(&c.name)).await?;
    put_labels(tx, &c.name, &c.labels).await
}

/// Client `name`'s labels for the label filter (schema step 10), in place
/// of those it had; in the transaction that writes them.
async fn put_labels(tx: &impl Tx, name: &str, labels: &Labels) -> Result<()> {
    tx.run(&sql::CLIENT_LABELS_CLEAR, &[&name]).await?;
    for (label, value) in labels.as_map() {
        tx.run(&sql::CLIENT_LABEL_INSERT, &[label, value, &name]).await?;
    }
    Ok(())
}

/// Key `key` with its version 1 and the selectors of its policy.
pub(crate) async fn insert_key(tx: &impl Tx, key: &KeyInfo, material: &[u8]) -> Result<()> {
    let policy = encode_policy(&key.allow);
    let params: [&dyn Param; 4] = [&key.name, &key.exportable, &policy, &key.created_ms];
    tx.insert(&sql::KEY_INSERT, &params, || rules::key_taken(&key.name)).await?;
    tx.run(&sql::FIRST_VERSION_INSERT, &[&key.name, &key.created_ms, &material]).await?;
    for selector in &key.allow {
        tx.run(&sql::KEY_SELECTOR_INSERT, &[&selector.to_string(), &key.name]).await?;
    }
    Ok(())
}

/// Version `version` of key `name`, which must be the newest plus one;
/// the key's row locked against a concurrent rotation.
pub(crate) async fn insert_version(
    tx: &impl Tx,
    name: &str,
    version: u32,
    created_ms: i64,
    material: &[u8],
) -> Result<()> {
    if tx.scalar::<i32>(&sql::KEY_LOCK, &[&name]).await?.is_none() {
        return Err(rules::key_not_found(name));
    }
    let newest = tx.scalar::<Option<i64>>(&sql::NEWEST_VERSION, &[&name]).await?;
    rules::check_next_version(name, newest.flatten().unwrap_or(0), version)?;
    let params: [&dyn Param; 4] = [&name, &i64::from(version), &created_ms, &material];
    tx.run(&sql::VERSION_INSERT, &params).await?;
    Ok(())
}

/// Key `name` with its versions, oldest first.
pub(crate) async fn load_key(tx: &impl Tx, name: &str) -> Result<Option<KeyInfo>> {
    let Some(mut key) = tx.one(&sql::KEY_ROW, &[&name], |r| rows::key(r)).await? else {
        return Ok(None);
    };
    key.versions = tx.query(&sql::KEY_VERSIONS, &[&name], |r| rows::version(r, 1)).await?;
    key.versions.sort_by_key(|v| v.version);
    Ok(Some(key))
}

/// Revokes or destroys version `version` (every version when `None`);
/// how many changed.
pub(crate) async fn change_state(
    tx: &impl Tx,
    name: &str,
    version: Option<u32>,
    change: &StateChange,
    changed_ms: i64,
) -> Result<u32> {
    let number = version.map(i64::from);
    let found = tx.scalar(&sql::VERSIONS_COUNT, &[&name, &number]).await?.unwrap_or(0);
    rules::check_versions_found(found, name, version)?;
    let update = change.statement();
    let changed = match change {
        StateChange::Revoke { reason } => {
            tx.run(update, &[&name, &number, reason, &changed_ms]).await?
        }
        StateChange::Destroy => {
            tx.shred_material(name, number).await?;
            tx.run(update, &[&name, &number, &changed_ms]).await?
        }
    };
    Ok(u32::try_from(changed).unwrap_or(u32::MAX))
}

pub(crate) async fn client_by_fingerprint(
    tx: &impl Tx,
    fingerprint: &str,
) -> Result<Option<ClientInfo>> {
    tx.one(&sql::CLIENT_BY_FINGERPRINT, &[&fingerprint], |r| rows::client(r)).await
}

/// Revokes client `name` (a repeat keeps the first revocation).
pub(crate) async fn revoke_client(
    tx: &impl Tx,
    name: &str,
    reason: &str,
    revoked_ms: i64,
) -> Result<ClientInfo> {
    tx.run(&sql::CLIENT_REVOKE, &[&name, &revoked_ms, &reason]).await?;
    let client = tx.one(&sql::CLIENT_BY_NAME, &[&name], |r| rows::client(r)).await?;
    rules::found_client(name, client)
}

pub(crate) async fn set_client_labels(
    tx: &impl Tx,
    name: &str,
    labels: &Labels,
) -> Result<ClientInfo> {
    let text = encode_labels(labels);
    let client = tx.one(&sql::CLIENT_SET_LABELS, &[&name, &text], |r| rows::client(r)).await?;
    let client = rules::found_client(name, client)?;
    put_labels(tx, name, labels).await?;
    Ok(client)
}

/// Up to `limit` keys after `after` that pass `filter`, with their
/// versions ([`sql::key_page`]).
pub(crate) async fn key_page<X: Tx>(
    tx: &X,
    after: &str,
    filter: &KeyFilter,
    limit: u32,
) -> Result<Vec<KeyInfo>> {
    let (low, high) = name_range(after, filter.prefix.as_deref());
    let selector = filter.selector.as_ref().map(ToString::to_string);
    let params: [&dyn Param; 5] = [&low, &high, &selector, &filter.state, &i64::from(limit)];
    let mut keys: Vec<KeyInfo> = Vec::new();
    let text = sql::key_page(X::DIALECT, filter);
    tx.rows(&text, &params, |r| rows::push_key_page_row(&mut keys, r)).await?;
    Ok(keys)
}

/// Up to `limit` clients after `after` that pass `filter`
/// ([`sql::client_page`]).
pub(crate) async fn client_page<X: Tx>(
    tx: &X,
    after: &str,
    filter: &ClientFilter,
    limit: u32,
) -> Result<Vec<ClientInfo>> {
    let (low, high) = name_range(after, filter.prefix.as_deref());
    let (label, value) = filter.label.clone().unzip();
    let params: [&dyn Param; 7] =
        [&low, &high, &label, &filter.admin, &filter.revoked, &i64::from(limit), &value];
    tx.rows(&sql::client_page(X::DIALECT, filter), &params, |r| rows::client(r)).await
}

// The audit log's marks, exports and pages.

pub(crate) async fn audit_anchor(tx: &impl Tx) -> Result<Option<Mark>> {
    tx.one(&sql::AUDIT_ANCHOR, &[], |r| rows::mark(r)).await
}

pub(crate) async fn last_audit_checkpoint(tx: &impl Tx) -> Result<Option<Mark>> {
    tx.one(&sql::AUDIT_LAST_CHECKPOINT, &[], |r| rows::mark(r)).await
}

pub(crate) async fn add_audit_checkpoint(tx: &impl Tx, mark: &Mark) -> Result<()> {
    let params: [&dyn Param; 4] = [&to_i64(mark.seq), &mark.hash, &mark.time_ms, &mark.mac];
    tx.run(&sql::AUDIT_CHECKPOINT_ADD, &params).await?;
    Ok(())
}

pub(crate) async fn audit_seq_at(tx: &impl Tx, until_ms: i64) -> Result<Option<u64>> {
    let seq: Option<Option<i64>> = tx.scalar(&sql::AUDIT_SEQ_AT, &[&until_ms]).await?;
    seq.flatten().map(|s| to_u64(s, "audit sequence number")).transpose()
}

pub(crate) async fn audit_hash(tx: &impl Tx, seq: u64) -> Result<Option<String>> {
    let hash: Option<Vec<u8>> = tx.scalar(&sql::AUDIT_HASH, &[&to_i64(seq)]).await?;
    Ok(hash.map(hex::encode))
}

pub(crate) async fn record_audit_export(
    tx: &impl Tx,
    after_seq: u64,
    until_seq: u64,
    until_hash: &str,
    client: &str,
    time_ms: i64,
) -> Result<()> {
    let params: [&dyn Param; 5] =
        [&to_i64(after_seq), &to_i64(until_seq), &until_hash, &time_ms, &client];
    tx.run(&sql::AUDIT_EXPORT_RECORD, &params).await?;
    Ok(())
}

pub(crate) async fn audit_export_covers(
    tx: &impl Tx,
    after_seq: u64,
    until_seq: u64,
) -> Result<bool> {
    let params: [&dyn Param; 2] = [&to_i64(after_seq), &to_i64(until_seq)];
    Ok(tx.scalar::<i32>(&sql::AUDIT_EXPORT_COVERS, &params).await?.is_some())
}

pub(crate) async fn audit_page(
    tx: &impl Tx,
    after_seq: u64,
    since_ms: Option<i64>,
    limit: u32,
) -> Result<Vec<AuditEntry>> {
    let params: [&dyn Param; 3] = [&to_i64(after_seq), &since_ms, &i64::from(limit)];
    tx.query(&sql::AUDIT_PAGE, &params, |r| rows::audit_entry(r)).await
}

/// Removes the entries up to `anchor.seq` and records the anchor; how
/// many entries went.
pub(crate) async fn prune_audit(
    tx: &impl Tx,
    expected_anchor_seq: u64,
    anchor: &Mark,
) -> Result<u64> {
    // The head first, as appenders take it: no deadlock with them.
    tx.lock_audit_head().await?;
    let current: i64 = tx.scalar(&sql::AUDIT_ANCHOR_SEQ_LOCK, &[]).await?.unwrap_or(0);
    let seq = to_i64(anchor.seq);
    let hash = tx.scalar(&sql::AUDIT_HASH, &[&seq]).await?;
    rules::check_prune(current, expected_anchor_seq, hash, anchor)?;
    let lifted = tx.lift_audit_guard().await?;
    let removed = tx.run(&sql::AUDIT_PRUNE_ENTRIES, &[&seq]).await?;
    tx.restore_audit_guard(lifted).await?;
    tx.run(&sql::AUDIT_PRUNE_CHECKPOINTS, &[&seq]).await?;
    let last = rules::segment_of(seq);
    tx.run(&sql::AUDIT_PRUNE_SEGMENTS, &[&last]).await?;
    tx.run(&sql::AUDIT_PRUNE_REFS, &[&last, &seq]).await?;
    let params: [&dyn Param; 4] = [&seq, &anchor.hash, &anchor.time_ms, &anchor.mac];
    tx.run(&sql::AUDIT_ANCHOR_PUT, &params).await?;
    Ok(removed)
}

/// Up to `want` entries after `after` that pass `filter`, in sequence
/// order, or along a partial index (`rare`: the filtered column, the
/// index's name and its condition, repeated so the index applies).
pub(crate) async fn audit_scan<X: Tx>(
    tx: &X,
    after: i64,
    filter: &AuditFilter,
    rare: Option<(&str, &str, &str)>,
    want: u32,
) -> Result<Vec<AuditEntry>> {
    let (from, driver) = match rare {
        Some((column, index, condition)) => {
            // SQLite is told the index; PostgreSQL's planner finds it.
            let from = match X::DIALECT {
                Dialect::Sqlite => format!("kms_audit a INDEXED BY {index}"),
                Dialect::Postgres => "kms_audit a".to_owned(),
            };
            let param = if column == "operation" { 6 } else { 7 };
            (from, format!("a.{column} = ${param} AND a.{condition} AND"))
        }
        None => ("kms_audit a".to_owned(), String::new()),
    };
    let text = X::DIALECT
        .spell(&format!(
            "SELECT {AUDIT_LIST_COLUMNS} FROM {from}
         WHERE {driver} a.seq > $1 AND {AUDIT_LIST_FILTERS}
         ORDER BY a.seq LIMIT $8"
        ))
        .into_owned();
    let params: [&dyn Param; 8] = [
        &after,
        &filter.since_ms,
        &filter.until_ms,
        &filter.client,
        &filter.key,
        &filter.operation,
        &filter.outcome,
        &i64::from(want),
    ];
    tx.rows(&text, &params, |r| rows::audit_entry(r)).await
}

// Servers sharing the store.

pub(crate) async fn server_checkin(
    tx: &impl Tx,
    server: &ServerPresence,
    forget_before_ms: i64,
) -> Result<()> {
    let params: [&dyn Param; 6] = [
        &server.id,
        &server.host,
        &server.address,
        &server.version,
        &server.started_ms,
        &server.seen_ms,
    ];
    tx.run(&sql::SERVER_CHECKIN, &params).await?;
    tx.run(&sql::SERVERS_FORGET, &[&forget_before_ms]).await?;
    Ok(())
}

pub(crate) async fn servers_seen(tx: &impl Tx, since_ms: i64) -> Result<Vec<ServerPresence>> {
    tx.query(&sql::SERVERS_SEEN, &[&since_ms], |r| rows::server(r)).await
}

// KMIP objects and attributes.

/// Creates or replaces a version's KMIP object.
async fn put_kmip_object(tx: &impl Tx, o: &KmipObject) -> Result<()> {
    let params: [&dyn Param; 12] = [
        &o.key,
        &i64::from(o.version),
        &i64::from(o.object_type),
        &o.algorithm.map(i64::from),
        &o.length.map(i64::from),
        &o.usage_mask.map(i64::from),
        &o.secret_type.map(i64::from),
        &o.owner,
        &o.activation_ms,
        &o.deactivation_ms,
        &o.compromise_occurrence_ms,
        &i64::from(o.compromised),
    ];
    tx.run(&sql::KMIP_OBJECT_PUT, &params).await?;
    Ok(())
}

async fn insert_kmip_attribute(tx: &impl Tx, key: &str, a: &KmipAttributeRow) -> Result<()> {
    let params: [&dyn Param; 5] =
        [&key, &i64::from(a.version), &a.name, &i64::from(a.position), &a.value];
    tx.run(&sql::KMIP_ATTRIBUTE_INSERT, &params).await?;
    Ok(())
}

/// Gives version `to` of `key` a copy of version `from`'s KMIP attributes
/// (those it has not already), the Names moving.
async fn inherit_kmip_attributes(tx: &impl Tx, key: &str, to: u32, from: u32) -> Result<()> {
    tx.run(&sql::KMIP_ATTRIBUTES_INHERIT, &[&key, &i64::from(to), &i64::from(from)]).await?;
    keep_names_on(tx, key, to).await
}

/// Moves a key's Names to version `to` (KMIP Re-key): the others lose theirs.
async fn keep_names_on(tx: &impl Tx, key: &str, to: u32) -> Result<()> {
    tx.run(&sql::KMIP_NAMES_KEEP, &[&key, &i64::from(to)]).await?;
    Ok(())
}

pub(crate) async fn kmip_create_key(
    tx: &impl Tx,
    key: &KeyInfo,
    material: &[u8],
    object: &KmipObject,
    attributes: &[KmipAttributeRow],
) -> Result<()> {
    insert_key(tx, key, material).await?;
    put_kmip_object(tx, object).await?;
    for a in attributes {
        insert_kmip_attribute(tx, &key.name, a).await?;
    }
    Ok(())
}

/// Creates several keys as [`kmip_create_key`], in the caller's one
/// transaction (the two halves of a KMIP key pair).
pub(crate) async fn kmip_create_keys(tx: &impl Tx, keys: &[NewKmipKey]) -> Result<()> {
    for k in keys {
        kmip_create_key(tx, &k.key, &k.material, &k.object, &k.attributes).await?;
    }
    Ok(())
}

pub(crate) async fn kmip_add_version(
    tx: &impl Tx,
    object: &KmipObject,
    created_ms: i64,
    material: &[u8],
    attributes: &[KmipAttributeRow],
) -> Result<()> {
    let name = &object.key;
    insert_version(tx, name, object.version, created_ms, material).await?;
    put_kmip_object(tx, object).await?;
    for a in attributes {
        insert_kmip_attribute(tx, name, a).await?;
    }
    keep_names_on(tx, name, object.version).await
}

/// Applies a KMIP operation's changes to several keys in the caller's one
/// transaction: keys created, versions added, attributes replaced.
pub(crate) async fn kmip_apply(tx: &impl Tx, changes: &KmipChanges) -> Result<()> {
    kmip_create_keys(tx, &changes.keys).await?;
    for v in &changes.versions {
        kmip_add_version(tx, &v.object, v.created_ms, &v.material, &v.attributes).await?;
    }
    for a in &changes.attributes {
        let inherit = a.inherit.as_ref().map(|(from, _)| *from);
        kmip_set_attribute(tx, &a.key, a.version, &a.name, a.values.clone(), inherit).await?;
        if let Some((_, object)) = &a.inherit {
            put_kmip_object(tx, object).await?;
        }
    }
    Ok(())
}

pub(crate) async fn kmip_put_object(
    tx: &impl Tx,
    object: &KmipObject,
    inherit: Option<u32>,
) -> Result<()> {
    if let Some(from) = inherit {
        inherit_kmip_attributes(tx, &object.key, object.version, from).await?;
    }
    put_kmip_object(tx, object).await
}

pub(crate) async fn kmip_object(
    tx: &impl Tx,
    key: &str,
    version: u32,
) -> Result<Option<KmipObject>> {
    tx.one(&sql::KMIP_OBJECT_AT, &[&key, &i64::from(version)], |r| rows::kmip_object(r)).await
}

/// Key `name`, its KMIP object at `version` and (`with_attributes`) that
/// object's attributes: four statements sent together, so PostgreSQL
/// answers them in one round trip.
pub(crate) async fn kmip_view(
    tx: &impl Tx,
    name: &str,
    version: u32,
    with_attributes: bool,
) -> Result<Option<KmipView>> {
    let number = i64::from(version);
    let by_name: [&dyn Param; 1] = [&name];
    let at_version: [&dyn Param; 2] = [&name, &number];
    let attributes = async {
        if with_attributes {
            tx.query(&sql::KMIP_OBJECT_ATTRIBUTES_AT, &at_version, |r| rows::kmip_attribute(r))
                .await
        } else {
            Ok(Vec::new())
        }
    };
    let (key, versions, object, attributes, material) = tokio::try_join!(
        tx.one(&sql::KEY_ROW, &by_name, |r| rows::key(r)),
        tx.query(&sql::KEY_VERSIONS, &by_name, |r| rows::version(r, 1)),
        tx.one(&sql::KMIP_OBJECT_AT, &at_version, |r| rows::kmip_object(r)),
        attributes,
        tx.one(&sql::VERSION_MATERIAL, &at_version, |r| r.get::<Option<Vec<u8>>>(0)),
    )?;
    Ok(key.map(|mut key| {
        key.versions = versions;
        key.versions.sort_by_key(|v| v.version);
        KmipView { key, object, attributes, material: material.flatten().map(std::sync::Arc::from) }
    }))
}

pub(crate) async fn kmip_objects(tx: &impl Tx) -> Result<Vec<KmipObject>> {
    tx.query(&sql::KMIP_OBJECTS, &[], |r| rows::kmip_object(r)).await
}

/// The KMIP objects of the keys `names`, a fixed-size statement at a time
/// (the last chunk padded with its first name).
pub(crate) async fn kmip_objects_of(tx: &impl Tx, names: &[String]) -> Result<Vec<KmipObject>> {
    let mut out = Vec::new();
    for chunk in names.chunks(sql::KMIP_OBJECTS_OF_NAMES) {
        let params: Vec<&dyn Param> = (0..sql::KMIP_OBJECTS_OF_NAMES)
            .map(|i| chunk.get(i).unwrap_or(&chunk[0]) as &dyn Param)
            .collect();
        out.extend(tx.query(&sql::KMIP_OBJECTS_OF, &params, |r| rows::kmip_object(r)).await?);
    }
    Ok(out)
}

pub(crate) async fn kmip_attributes(
    tx: &impl Tx,
    key: &str,
    version: Option<u32>,
) -> Result<Vec<KmipAttributeRow>> {
    let version = version.map(i64::from);
    tx.query(&sql::KMIP_ATTRIBUTES, &[&key, &version], |r| rows::kmip_attribute(r)).await
}

pub(crate) async fn kmip_set_attribute(
    tx: &impl Tx,
    key: &str,
    version: u32,
    name: &str,
    values: Vec<String>,
    inherit: Option<u32>,
) -> Result<()> {
    if let Some(from) = inherit {
        inherit_kmip_attributes(tx, key, version, from).await?;
    }
    tx.run(&sql::KMIP_ATTRIBUTE_CLEAR, &[&key, &i64::from(version), &name]).await?;
    for (position, value) in (0u32..).zip(values) {
        let row = KmipAttributeRow { version, name: name.to_owned(), position, value };
        insert_kmip_attribute(tx, key, &row).await?;
    }
    Ok(())
}

pub(crate) async fn kmip_key_state(tx: &impl Tx, key: &str) -> Result<Option<KmipKeyState>> {
    let versions = tx.query(&sql::VERSION_ROWS, &[&key], |r| rows::version_row(r)).await?;
    if versions.is_empty() {
        return Ok(None);
    }
    let objects = tx.query(&sql::KMIP_KEY_OBJECTS, &[&key], |r| rows::kmip_object(r)).await?;
    let attributes = kmip_attributes(tx, key, None).await?;
    Ok(Some(KmipKeyState { versions, objects, attributes }))
}

pub(crate) async fn kmip_restore(
    tx: &impl Tx,
    key: &str,
    earlier: Option<&KmipKeyState>,
) -> Result<()> {
    tx.run(&sql::KMIP_KEY_ATTRIBUTES_DELETE, &[&key]).await?;
    tx.run(&sql::KMIP_KEY_OBJECTS_DELETE, &[&key]).await?;
    let Some(state) = earlier else {
        tx.shred_material(key, None).await?;
        tx.run(&sql::KEY_SELECTORS_DELETE, &[&key]).await?;
        tx.run(&sql::VERSIONS_AFTER_DELETE, &[&key, &0i64]).await?;
        tx.run(&sql::KEY_DELETE, &[&key]).await?;
        return Ok(());
    };
    // Versions are numbered from 1 without gaps: those after the newest
    // kept are the ones the batch added.
    let kept = state.versions.last().map_or(0, |v| i64::from(v.version));
    let newest = tx.scalar::<Option<i64>>(&sql::NEWEST_VERSION, &[&key]).await?.flatten();
    for version in kept + 1..=newest.unwrap_or(kept) {
        tx.shred_material(key, Some(version)).await?;
    }
    tx.run(&sql::VERSIONS_AFTER_DELETE, &[&key, &kept]).await?;
    for v in &state.versions {
        let params: [&dyn Param; 6] =
            [&key, &i64::from(v.version), &v.state, &v.reason, &v.changed_ms, &v.material];
        tx.run(&sql::VERSION_PUT_BACK, &params).await?;
    }
    for object in &state.objects {
        put_kmip_object(tx, object).await?;
    }
    for attribute in &state.attributes {
        insert_kmip_attribute(tx, key, attribute).await?;
    }
    Ok(())
}

pub(crate) async fn kmip_find_page(
    tx: &impl Tx,
    name: &str,
    value: &str,
    after: &str,
    limit: u32,
) -> Result<Vec<String>> {
    let params: [&dyn Param; 4] = [&name, &value, &after, &i64::from(limit)];
    tx.query(&sql::KMIP_FIND_PAGE, &params, |r| r.get(0)).await
}
