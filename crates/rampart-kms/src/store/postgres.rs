//! The PostgreSQL store, for several servers on one database
//! (active-active). Each call is one transaction on one of a few pooled
//! connections; a connection that dropped (a database restart) is replaced
//! on the next call. The audit chain is serialised by a row lock on its
//! head, so all servers append to one chain in one order.
//!
//! The hot paths are few round trips: the statements a data operation and
//! an audit append run are prepared once per connection, and an append is
//! one statement that inserts every entry of the batch (a single multi-row
//! INSERT) after the head the server's previous batch leaves, moving the
//! head and committing, sent while that batch still commits; when another
//! server moved the head, one exchange to lock and read it and one to
//! insert, move and commit ([`postgres_audit`](super::postgres_audit)).
//! The audit writer has a connection of its own, so a batch never waits
//! for a pooled one behind the reads of the requests it records. The key reads
//! of concurrent data operations are grouped the same way: the reads that
//! arrive while one group's statement is out go, together, into the next
//! (one statement, one round trip, on a connection of their own that
//! plans it once), each sent after its request arrived. What those reads
//! and KMIP object views return is kept between key changes, as on
//! SQLite, and served only once every change any server committed before
//! the request has been heard ([`postgres_changes`](super::postgres_changes)).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{oneshot, Mutex, MutexGuard};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, GenericClient, Row, Statement};

use super::backend::{Params, Tx};
use super::copy_binary::CopyReader;
use super::logic::{self, to_i64};
use super::material_cache::MaterialCache;
use super::postgres_audit::AuditPipe;
use super::postgres_changes::{Changes, NOTIFY};
use super::postgres_connection::connect;
use super::rows;
use super::rules;
use super::schema::{base_schema, check_version, migrations_after, BASE_SCHEMA_VERSION};
use super::sql::Dialect;
use super::sql::{self, audit_columns, key_material, Sql, AUDIT_LIST_COLUMNS, AUDIT_LIST_FILTERS};
use super::{
    segment_to_index, to_u32, to_u64, AuditDriver, AuditFilter, ClientFilter, KeyFilter,
    KmipAttributeRow, KmipChanges, KmipKeyState, KmipObject, KmipView, MaterialRow, NewKmipKey,
    ServerPresence, StateChange, Store, StoreFuture, AUDIT_CHAIN_COLUMNS, AUDIT_REFS_SEGMENT,
};
use crate::audit::{ChainPage, ExportedEntry, Mark, GENESIS};
use crate::error::{KmsError, Result};
use crate::keys::RootKey;
use crate::model::{AuditDraft, AuditEntry, ClientInfo, KeyInfo, Labels};

const POOL: usize = 4;

/// Serialises schema creation between servers starting at once.
const MIGRATION_LOCK: i64 = 0x0072_616d_706b_6d73; // "rampkms"

/// The PostgreSQL store.
pub struct PostgresStore {
    url: Arc<str>,
    slots: Arc<Vec<Mutex<Option<Conn>>>>,
    /// Key-material reads waiting for the next grouped statement.
    reads: Arc<ReadGroup>,
    /// The audit writer's connection, batches pipelined on it.
    audit: AuditPipe,
    next: AtomicUsize,
    /// Key material and KMIP views kept between key changes, served only
    /// once every change committed before a request has been heard.
    cache: Arc<MaterialCache>,
    changes: Arc<Changes>,
}

/// A connection and the statements prepared on it (by their SQL text).
struct Conn {
    client: Client,
    prepared: Prepared,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: never shown.
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

/// Session settings of the key-read connection: the grouped read
/// ([`KEY_MATERIAL_GROUP`]) is planned once. Left to choose, PostgreSQL
/// plans it again for every group, since a custom plan knowing each
/// array's length always looks cheaper, and the planning then costs
/// several times the execution (pg_stat_statements' `track_planning`
/// shows it). Its plan does not depend on the parameters (index lookups
/// per pair).
const KEY_READ_OPTIONS: &str = "-c plan_cache_mode=force_generic_plan";

fn map_unique(error: tokio_postgres::Error, what: impl FnOnce() -> String) -> KmsError {
    if error.code() == Some(&SqlState::UNIQUE_VIOLATION) {
        KmsError::Conflict(what())
    } else {
        error.into()
    }
}

/// A pooled connection, reconnected when it was lost.
struct Lease<'a> {
    guard: MutexGuard<'a, Option<Conn>>,
}

impl Lease<'_> {
    fn conn(&mut self) -> Result<&mut Conn> {
        self.guard.as_mut().ok_or_else(|| KmsError::Store("postgresql: not connected".into()))
    }

    fn client(&mut self) -> Result<&mut Client> {
        Ok(&mut self.conn()?.client)
    }

    /// The client and the statements prepared on it, apart, so a
    /// transaction on the one can use the other.
    fn parts(&mut self) -> Result<(&mut Client, &Prepared)> {
        let conn = self.conn()?;
        Ok((&mut conn.client, &conn.prepared))
    }

    /// `sql` prepared on this connection, once.
    async fn statement(&mut self, sql: &'static str) -> Result<Statement> {
        let conn = self.conn()?;
        conn.prepared.statement(&conn.client, sql).await
    }

    /// Closes the connection: after a failure in the middle of a pipelined
    /// transaction its state is unknown, and the database rolls back what
    /// a closed session left open.
    fn discard(&mut self) {
        *self.guard = None;
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if self.guard.as_ref().is_some_and(|c| c.client.is_closed()) {
            *self.guard = None;
        }
    }
}

impl PostgresStore {
    /// Connects and creates or checks the schema.
    pub async fn connect(url: &str) -> Result<Self> {
        let url: Arc<str> = Arc::from(url);
        let cache = Arc::new(MaterialCache::default());
        let store = Self {
            changes: Arc::new(Changes::new(Arc::clone(&url), Arc::clone(&cache))),
            cache,
            url,
            slots: Arc::new((0..POOL).map(|_| Mutex::new(None)).collect()),
            reads: Arc::new(ReadGroup::default()),
            audit: AuditPipe::default(),
            next: AtomicUsize::new(0),
        };
        let mut lease = store.lease().await?;
        let client = lease.client()?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
        let exists: bool =
            tx.query_one("SELECT to_regclass('kms_schema') IS NOT NULL", &[]).await?.try_get(0)?;
        let version: i64 = if exists {
            tx.query_one("SELECT max(version) FROM kms_schema", &[]).await?.try_get(0)?
        } else {
            tx.batch_execute(&base_schema(Dialect::Postgres)).await?;
            tx.execute("INSERT INTO kms_schema VALUES ($1)", &[&BASE_SCHEMA_VERSION]).await?;
            tx.execute(
                "INSERT INTO kms_audit_head (id, seq, hash) VALUES (1, 0, $1)",
                &[&GENESIS.as_slice()],
            )
            .await?;
            BASE_SCHEMA_VERSION
        };
        check_version(version, "the database")?;
        for step in migrations_after(version) {
            for sql in step.statements(Dialect::Postgres) {
                tx.batch_execute(sql).await?;
            }
            tx.execute("INSERT INTO kms_schema VALUES ($1)", &[&step.to]).await?;
        }
        tx.commit().await?;
        drop(lease);
        Ok(store)
    }

    async fn lease(&self) -> Result<Lease<'_>> {
        lease_from(&self.slots, &self.url, self.next.fetch_add(1, Ordering::Relaxed)).await
    }
}

/// A pooled connection: a free one, else the `start`th when it frees.
async fn lease_from<'a>(
    slots: &'a [Mutex<Option<Conn>>],
    url: &str,
    start: usize,
) -> Result<Lease<'a>> {
    let mut guard = None;
    for i in 0..slots.len() {
        if let Ok(g) = slots[(start + i) % slots.len()].try_lock() {
            guard = Some(g);
            break;
        }
    }
    let guard = match guard {
        Some(g) => g,
        None => slots[start % slots.len()].lock().await,
    };
    ready(url, guard).await
}

async fn ready<'a>(url: &str, guard: MutexGuard<'a, Option<Conn>>) -> Result<Lease<'a>> {
    ready_with(url, guard, None).await
}

/// [`ready`], a new connection opened with these session `options`.
async fn ready_with<'a>(
    url: &str,
    mut guard: MutexGuard<'a, Option<Conn>>,
    options: Option<&str>,
) -> Result<Lease<'a>> {
    if guard.as_ref().is_none_or(|c| c.client.is_closed()) {
        *guard = Some(Conn { client: connect(url, options).await?, prepared: Prepared::default() });
    }
    Ok(Lease { guard })
}

/// One key read waiting for its group: key name, version (newest when
/// `None`), and where its answer goes.
type KeyRead = (String, Option<i64>, oneshot::Sender<Result<Option<MaterialRow>>>);

/// Group reads of key material: one statement answers every read that
/// arrived while the previous group's was out. A read is only ever
/// answered by a statement sent after it arrived, so it sees every change
/// committed before its request, as a read of its own would.
#[derive(Default)]
struct ReadGroup {
    /// The waiting reads, and whether a task is sending groups.
    pending: std::sync::Mutex<(Vec<KeyRead>, bool)>,
    /// The connection the groups go over, one at a time, opened with
    /// [`KEY_READ_OPTIONS`].
    conn: Mutex<Option<Conn>>,
}

/// Most reads in one statement.
const MAX_READ_GROUP: usize = 256;

impl ReadGroup {
    /// Queues a read; starts the task that sends groups when none runs.
    fn submit(self: &Arc<Self>, url: &Arc<str>, read: KeyRead) {
        let start = {
            let mut pending =
                self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            pending.0.push(read);
            !std::mem::replace(&mut pending.1, true)
        };
        if start {
            let (group, url) = (Arc::clone(self), Arc::clone(url));
            // A task of its own: the reads it answers belong to many
            // requests, none of which may cancel it.
            tokio::spawn(async move { group.run(&url).await });
        }
    }

    async fn run(&self, url: &str) {
        loop {
            let group: Vec<KeyRead> = {
                let mut pending =
                    self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if pending.0.is_empty() {
                    pending.1 = false;
                    return;
                }
                let n = pending.0.len().min(MAX_READ_GROUP);
                pending.0.drain(..n).collect()
            };
            let names: Vec<&str> = group.iter().map(|(n, _, _)| n.as_str()).collect();
            let versions: Vec<Option<i64>> = group.iter().map(|(_, v, _)| *v).collect();
            let read = match ready_with(url, self.conn.lock().await, Some(KEY_READ_OPTIONS)).await {
                Ok(mut lease) => read_group(&mut lease, &names, &versions).await,
                Err(error) => Err(error),
            };
            match read {
                Ok(mut rows) => {
                    for (i, (_, _, answer)) in group.into_iter().enumerate() {
                        let _ = answer.send(Ok(rows[i].take()));
                    }
                }
                Err(error) => {
                    let text = error.to_string();
                    for (_, _, answer) in group {
                        let _ = answer.send(Err(KmsError::Store(text.clone())));
                    }
                }
            }
        }
    }
}

/// Reads key material for every (name, version) pair in one statement;
/// the answers in the pairs' order.
async fn read_group(
    lease: &mut Lease<'_>,
    names: &[&str],
    versions: &[Option<i64>],
) -> Result<Vec<Option<MaterialRow>>> {
    let statement = lease.statement(KEY_MATERIAL_GROUP).await?;
    let rows = lease.client()?.query(&statement, &[&names, &versions]).await?;
    let mut out: Vec<Option<MaterialRow>> = (0..names.len()).map(|_| None).collect();
    for row in &rows {
        let i: i64 = row.try_get(0)?;
        let slot = usize::try_from(i - 1)
            .ok()
            .and_then(|i| out.get_mut(i))
            .ok_or_else(|| KmsError::Store("postgresql: a key read out of range".into()))?;
        *slot = Some(rows::material_row(row, 1)?);
    }
    Ok(out)
}

/// The key material of many (name, version) pairs ($1, $2: arrays of the
/// same length; a NULL version is the newest), each answer tagged with the
/// pair's place (from 1); a pair without a key has no row.
const KEY_MATERIAL_GROUP: &str = concat!(
    "SELECT q.i, m.*
     FROM unnest($1::TEXT[], $2::BIGINT[]) WITH ORDINALITY AS q(name, version, i)
     CROSS JOIN LATERAL (
         SELECT ",
    key_material!(),
    " WHERE k.name = q.name AND (q.version IS NULL OR v.version = q.version)
         ORDER BY v.version DESC LIMIT 1
     ) m"
);
/// The references of the entries numbered $1 (exclusive) to $2, in the
/// table's order, $3 entries to a segment (see [`Store::index_audit`]).
const SEGMENT_REFS: &str = "(segment, kind, value, seq)
     SELECT seq / $3, 1, client, seq FROM kms_audit WHERE seq > $1 AND seq <= $2
     UNION ALL
     SELECT seq / $3, 2, key_name, seq FROM kms_audit
         WHERE seq > $1 AND seq <= $2 AND key_name IS NOT NULL
     ORDER BY 1, 2, 3, 4";
/// A PostgreSQL connection, or a transaction on it, as the store logic's
/// [`Tx`].
struct Pg<'a, C> {
    client: &'a C,
    prepared: &'a Prepared,
}

/// Most statements a connection keeps prepared: the store's fixed
/// statements and the few shapes its filtered listings take.
const MAX_PREPARED: usize = 256;

/// The statements prepared on one connection, by their SQL text. A
/// statement given as text alone costs a round trip to prepare it every
/// time (tokio-postgres sends Parse, then Bind and Execute), so each is
/// prepared once per connection and run by name after that.
#[derive(Default)]
struct Prepared(std::sync::Mutex<HashMap<Box<str>, Statement>>);

impl Prepared {
    fn cached(&self, sql: &str) -> Option<Statement> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(sql).cloned()
    }

    /// `sql` prepared on `client`'s connection (directly or through a
    /// transaction on it), once.
    async fn statement<C: GenericClient + Sync>(&self, client: &C, sql: &str) -> Result<Statement> {
        if let Some(statement) = self.cached(sql) {
            return Ok(statement);
        }
        let statement = client.prepare(sql).await?;
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() < MAX_PREPARED {
            map.insert(sql.into(), statement.clone());
        }
        Ok(statement)
    }

    /// Forgets `sql`: its prepared form no longer fits the table (another
    /// server changed the schema), so it is prepared again.
    fn forget(&self, sql: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(sql);
    }
}

/// Whether `error` says a prepared statement's result no longer fits its
/// tables ("cached plan must not change result type" after a schema change).
fn stale_statement(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::FEATURE_NOT_SUPPORTED)
}

impl<'a, C: GenericClient + Sync> Pg<'a, C> {
    fn new(client: &'a C, prepared: &'a Prepared) -> Self {
        Self { client, prepared }
    }

    /// Runs `run` with `text` prepared, preparing it again once if the
    /// cached form went stale.
    async fn prepared<T, F, Fut>(&self, text: &str, run: F) -> Result<T>
    where
        F: Fn(Statement) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    {
        let statement = self.prepared.statement(self.client, text).await?;
        match run(statement).await {
            Err(error) if stale_statement(&error) => {
                self.prepared.forget(text);
                let statement = self.prepared.statement(self.client, text).await?;
                Ok(run(statement).await?)
            }
            other => Ok(other?),
        }
    }
}

/// A statement's parameters as tokio-postgres binds them.
fn bind<'p>(params: &'p Params<'_>) -> Vec<&'p (dyn ToSql + Sync)> {
    params.iter().map(|p| p.postgres()).collect()
}

impl<C: GenericClient + Sync> Tx for Pg<'_, C> {
    type Row<'r> = Row;
    const DIALECT: Dialect = Dialect::Postgres;

    async fn rows<T>(
        &self,
        text: &str,
        params: &Params<'_>,
        mut decode: impl FnMut(&Self::Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let params = &bind(params);
        let rows = self.prepared(text, |s| async move { self.client.query(&s, params).await });
        rows.await?.iter().map(&mut decode).collect()
    }

    async fn execute(&self, text: &str, params: &Params<'_>) -> Result<u64> {
        let params = &bind(params);
        self.prepared(text, |s| async move { self.client.execute(&s, params).await }).await
    }

    async fn insert(
        &self,
        sql: &'static Sql,
        params: &Params<'_>,
        what: impl FnOnce() -> String,
    ) -> Result<u64> {
        let params = bind(params);
        let statement = self.prepared.statement(self.client, sql.postgres()).await?;
        self.client.execute(&statement, &params).await.map_err(|e| map_unique(e, what))
    }

    async fn shred_material(&self, _name: &str, _version: Option<i64>) -> Result<()> {
        // The dead row versions that still hold it go with the VACUUM
        // after the commit.
        Ok(())
    }

    async fn lock_audit_head(&self) -> Result<()> {
        self.client.execute("SELECT 1 FROM kms_audit_head WHERE id = 1 FOR UPDATE", &[]).await?;
        Ok(())
    }

    async fn lift_audit_guard(&self) -> Result<bool> {
        // ALTER TABLE is transactional and locks the table until the
        // commit, when the guard is back.
        let guarded = self
            .client
            .query_opt(
                "SELECT 1 FROM pg_trigger WHERE tgname = 'kms_audit_no_change'
                 AND tgrelid = 'kms_audit'::regclass",
                &[],
            )
            .await?
            .is_some();
        if guarded {
            self.client
                .batch_execute("ALTER TABLE kms_audit DISABLE TRIGGER kms_audit_no_change")
                .await?;
        }
        Ok(guarded)
    }

    async fn restore_audit_guard(&self, lifted: bool) -> Result<()> {
        if lifted {
            self.client
                .batch_execute("ALTER TABLE kms_audit ENABLE TRIGGER kms_audit_no_change")
                .await?;
        }
        Ok(())
    }
}

/// `$body` run by the store logic on a pooled connection (`$tx`).
macro_rules! on_connection {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut lease = $store.lease().await?;
        let (client, prepared) = lease.parts()?;
        let $tx = &Pg::new(&*client, prepared);
        $body.await
    }};
}

/// `$body` run by the store logic in a new transaction (`$tx`), committed
/// when it succeeds.
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut lease = $store.lease().await?;
        let (client, prepared) = lease.parts()?;
        let transaction = client.transaction().await?;
        let value = {
            let $tx = &Pg::new(&transaction, prepared);
            $body.await?
        };
        transaction.commit().await?;
        Ok::<_, KmsError>(value)
    }};
}

/// [`in_transaction!`] for a change to keys or KMIP objects: the
/// transaction notifies every server's listener ([`Changes`]) as it
/// commits, and this server's cache is emptied once it is done, committed
/// or not.
macro_rules! changing_keys {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let result = in_transaction!($store, |$tx| async {
            let value = $body.await?;
            $tx.client.batch_execute(NOTIFY).await?;
            Ok::<_, KmsError>(value)
        });
        $store.cache.invalidate();
        result
    }};
}

impl Store for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgresql"
    }

    fn get_meta(&self, name: &'static str) -> StoreFuture<'_, Option<Vec<u8>>> {
        Box::pin(async move { on_connection!(self, |tx| logic::get_meta(tx, name)) })
    }

    fn initialize(
        &self,
        entries: Vec<(&'static str, Vec<u8>)>,
        admin: ClientInfo,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            changing_keys!(self, |tx| async {
                tx.client.execute("LOCK TABLE kms_meta IN EXCLUSIVE MODE", &[]).await?;
                logic::initialize(tx, &entries, &admin).await
            })
        })
    }

    fn create_key(&self, key: KeyInfo, material: Vec<u8>) -> StoreFuture<'_, ()> {
        Box::pin(async move { changing_keys!(self, |tx| logic::insert_key(tx, &key, &material)) })
    }

    fn key_page(
        &self,
        after: String,
        filter: KeyFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<KeyInfo>> {
        Box::pin(
            async move { on_connection!(self, |tx| logic::key_page(tx, &after, &filter, limit)) },
        )
    }

    fn get_key(&self, name: String) -> StoreFuture<'_, Option<KeyInfo>> {
        Box::pin(async move { on_connection!(self, |tx| logic::load_key(tx, &name)) })
    }

    fn key_material(
        &self,
        name: String,
        version: Option<u32>,
    ) -> StoreFuture<'_, Option<Arc<MaterialRow>>> {
        Box::pin(async move {
            let generation = self.changes.settled().await;
            let key = (name, version);
            if let Some(row) = generation.and_then(|g| self.cache.get(&key, g)) {
                return Ok(Some(row));
            }
            let (tx, rx) = oneshot::channel();
            self.reads.submit(&self.url, (key.0.clone(), version.map(i64::from), tx));
            let row =
                rx.await.map_err(|_| KmsError::Store("postgresql: the key read stopped".into()))?;
            let row = row?.map(Arc::new);
            if let (Some(row), Some(g)) = (&row, generation) {
                self.cache.put(key, g, row);
            }
            Ok(row)
        })
    }

    fn add_version(
        &self,
        name: String,
        version: u32,
        created_ms: i64,
        material: Vec<u8>,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            changing_keys!(self, |tx| logic::insert_version(
                tx, &name, version, created_ms, &material
            ))
        })
    }

    fn change_state(
        &self,
        name: String,
        version: Option<u32>,
        change: StateChange,
        changed_ms: i64,
    ) -> StoreFuture<'_, u32> {
        Box::pin(async move {
            let changed: u32 = changing_keys!(self, |tx| logic::change_state(
                tx, &name, version, &change, changed_ms
            ))?;
            if change == StateChange::Destroy {
                // Remove the dead row versions that still hold the material.
                let mut lease = self.lease().await?;
                if let Err(error) = lease.client()?.batch_execute("VACUUM kms_key_versions").await {
                    tracing::warn!("VACUUM after destroy failed: {error}");
                }
            }
            Ok(changed)
        })
    }

    fn add_client(&self, client: ClientInfo) -> StoreFuture<'_, ()> {
        Box::pin(async move { in_transaction!(self, |tx| logic::insert_client(tx, &client)) })
    }

    fn client_by_fingerprint(&self, fingerprint: String) -> StoreFuture<'_, Option<ClientInfo>> {
        Box::pin(async move {
            on_connection!(self, |tx| logic::client_by_fingerprint(tx, &fingerprint))
        })
    }

    fn revoke_client(
        &self,
        name: String,
        reason: String,
        revoked_ms: i64,
    ) -> StoreFuture<'_, ClientInfo> {
        Box::pin(async move {
            in_transaction!(self, |tx| logic::revoke_client(tx, &name, &reason, revoked_ms))
        })
    }

    fn set_client_labels(&self, name: String, labels: Labels) -> StoreFuture<'_, ClientInfo> {
        Box::pin(
            async move { in_transaction!(self, |tx| logic::set_client_labels(tx, &name, &labels)) },
        )
    }

    fn client_page(
        &self,
        after: String,
        filter: ClientFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ClientInfo>> {
        Box::pin(async move {
            on_connection!(self, |tx| logic::client_page(tx, &after, &filter, limit))
        })
    }

    fn append_audit(
        &self,
        drafts: Vec<AuditDraft>,
        root: Option<Arc<RootKey>>,
    ) -> StoreFuture<'_, Vec<u64>> {
        Box::pin(async move {
            let entries = self.append_audit_entries(drafts, root).await?;
            Ok(entries.into_iter().map(|e| e.seq).collect())
        })
    }

    fn append_audit_entries(
        &self,
        drafts: Vec<AuditDraft>,
        root: Option<Arc<RootKey>>,
    ) -> StoreFuture<'_, Vec<ExportedEntry>> {
        Box::pin(async move { self.audit.append(&self.url, &drafts, root.as_deref()).await })
    }

    fn audit_appends_in_flight(&self) -> usize {
        // One batch committing while the next is already queued behind it
        // on the connection (postgres_audit).
        2
    }

    fn audit_chain_page(&self, after_seq: u64, limit: u32) -> StoreFuture<'_, ChainPage> {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            let page = audit_chain_copy(lease.client()?, after_seq, limit).await;
            if page.is_err() {
                // A COPY cut off midway leaves the connection mid-protocol.
                lease.discard();
            }
            page
        })
    }

    fn audit_list(
        &self,
        after_seq: u64,
        filter: AuditFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<AuditEntry>> {
        Box::pin(async move {
            let after = to_i64(after_seq);
            let mut lease = self.lease().await?;
            let (client, prepared) = lease.parts()?;
            let mut out = Vec::new();
            match filter.driver() {
                AuditDriver::Sequence => {
                    out = logic::audit_scan(
                        &Pg::new(&*client, prepared),
                        after,
                        &filter,
                        None,
                        limit,
                    )
                    .await?;
                }
                AuditDriver::Rare(column, index, condition) => {
                    let rare = Some((column, index, condition));
                    out = logic::audit_scan(
                        &Pg::new(&*client, prepared),
                        after,
                        &filter,
                        rare,
                        limit,
                    )
                    .await?;
                }
                AuditDriver::Refs(kind, value) => {
                    let tx = client
                        .build_transaction()
                        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                        .read_only(true)
                        .start()
                        .await?;
                    let done: i64 = Pg::new(&tx, prepared)
                        .scalar(&sql::AUDIT_REFS_DONE, &[])
                        .await?
                        .unwrap_or(0);
                    if after < done {
                        let first = Pg::new(&tx, prepared)
                            .scalar(&sql::AUDIT_FIRST_AFTER, &[&after])
                            .await?
                            .flatten();
                        let (mut seg, last) = rules::segments_to_probe(first, done);
                        // Segments probed per round trip: one, then
                        // doubling, so a key with many entries is answered
                        // from the first segment and a rare one in a few
                        // round trips. Each segment yields at most the
                        // rows still wanted, so a round costs at most
                        // (segments x wanted) rows.
                        let mut span = 1i64;
                        let kind = i32::try_from(kind).unwrap_or(0);
                        while seg <= last && out.len() < limit as usize {
                            let want = limit - u32::try_from(out.len()).unwrap_or(limit);
                            let to = (seg + span - 1).min(last);
                            let rows = tx
                                .query(
                                    &format!(
                                        "SELECT {AUDIT_LIST_COLUMNS}
                                         FROM generate_series($9::BIGINT, $10::BIGINT) g(segment)
                                         CROSS JOIN LATERAL (
                                             SELECT {AUDIT_LIST_COLUMNS}
                                             FROM kms_audit_refs r JOIN kms_audit a ON a.seq = r.seq
                                             WHERE r.segment = g.segment AND r.kind = $11
                                               AND r.value = $12 AND r.seq > $1 AND r.seq <= $13
                                               AND {AUDIT_LIST_FILTERS}
                                             ORDER BY r.seq LIMIT $8) a
                                         ORDER BY a.seq LIMIT $8"
                                    ),
                                    &[
                                        &after,
                                        &filter.since_ms,
                                        &filter.until_ms,
                                        &filter.client,
                                        &filter.key,
                                        &filter.operation,
                                        &filter.outcome,
                                        &i64::from(want),
                                        &seg,
                                        &to,
                                        &kind,
                                        &value,
                                        &done,
                                    ],
                                )
                                .await?;
                            for r in &rows {
                                out.push(rows::audit_entry(r)?);
                            }
                            seg = to + 1;
                            span = (span * 2).min(64);
                        }
                    }
                    if out.len() < limit as usize {
                        let want = limit - u32::try_from(out.len()).unwrap_or(limit);
                        let from = after.max(done);
                        out.extend(
                            logic::audit_scan(&Pg::new(&tx, prepared), from, &filter, None, want)
                                .await?,
                        );
                    }
                    tx.commit().await?;
                }
            }
            Ok(out)
        })
    }

    fn index_audit(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            let (client, prepared) = lease.parts()?;
            let mut tx = client.transaction().await?;
            // The mark's row lock makes servers take turns.
            let done: i64 = tx
                .query_opt("SELECT seq FROM kms_audit_refs_done WHERE id = 1 FOR UPDATE", &[])
                .await?
                .map(|r| r.try_get(0))
                .transpose()?
                .unwrap_or(0);
            let done = to_u64(done, "audit reference mark")?;
            let head: i64 =
                Pg::new(&tx, prepared).scalar(&sql::AUDIT_HEAD_SEQ, &[]).await?.unwrap_or(0);
            let Some(end) = segment_to_index(done, to_u64(head, "audit sequence number")?) else {
                return Ok(0);
            };
            // One transaction: PostgreSQL's writers do not wait for each
            // other's unrelated rows, so the audit appends go on meanwhile.
            // The segment's rows sorted in memory (about 16 MB for
            // 131,072 short names; the default 4 MB spills to disk).
            tx.batch_execute("SET LOCAL work_mem = '32MB'").await?;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                [&to_i64(done), &to_i64(end), &to_i64(AUDIT_REFS_SEGMENT)];
            // A plain insert: the mark moves in the same transaction as
            // the rows, so none after it exists, and `ON CONFLICT` would
            // double the run's cost (speculative insertion: a second
            // B-tree descent and WAL record per row; 1.4 s against 0.77 s
            // for a segment at full size). Should rows after the mark be
            // there all the same (a store restored by hand), the insert
            // is tried again skipping them.
            let plain = tx.savepoint("plain_refs").await?;
            match plain
                .execute(&format!("INSERT INTO kms_audit_refs {SEGMENT_REFS}"), &params)
                .await
            {
                Ok(_) => plain.commit().await?,
                Err(error) if error.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    plain.rollback().await?;
                    tx.execute(
                        &format!(
                            "INSERT INTO kms_audit_refs {SEGMENT_REFS} ON CONFLICT DO NOTHING"
                        ),
                        &params,
                    )
                    .await?;
                }
                Err(error) => return Err(error.into()),
            }
            tx.execute(
                "INSERT INTO kms_audit_refs_done (id, seq) VALUES (1, $1)
                 ON CONFLICT (id) DO UPDATE SET seq = excluded.seq",
                &[&to_i64(end)],
            )
            .await?;
            tx.commit().await?;
            Ok(end - done)
        })
    }

    fn audit_anchor(&self) -> StoreFuture<'_, Option<Mark>> {
        Box::pin(async move { on_connection!(self, |tx| logic::audit_anchor(tx)) })
    }

    fn last_audit_checkpoint(&self) -> StoreFuture<'_, Option<Mark>> {
        Box::pin(async move { on_connection!(self, |tx| logic::last_audit_checkpoint(tx)) })
    }

    fn server_checkin(&self, server: ServerPresence, forget_before_ms: i64) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            on_connection!(self, |tx| logic::server_checkin(tx, &server, forget_before_ms))
        })
    }

    fn servers_seen(&self, since_ms: i64) -> StoreFuture<'_, Vec<ServerPresence>> {
        Box::pin(async move { on_connection!(self, |tx| logic::servers_seen(tx, since_ms)) })
    }

    fn add_audit_checkpoint(&self, mark: Mark) -> StoreFuture<'_, ()> {
        Box::pin(async move { on_connection!(self, |tx| logic::add_audit_checkpoint(tx, &mark)) })
    }

    fn audit_seq_at(&self, until_ms: i64) -> StoreFuture<'_, Option<u64>> {
        Box::pin(async move { on_connection!(self, |tx| logic::audit_seq_at(tx, until_ms)) })
    }

    fn audit_hash(&self, seq: u64) -> StoreFuture<'_, Option<String>> {
        Box::pin(async move { on_connection!(self, |tx| logic::audit_hash(tx, seq)) })
    }

    fn record_audit_export(
        &self,
        after_seq: u64,
        until_seq: u64,
        until_hash: String,
        client: String,
        time_ms: i64,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            on_connection!(self, |tx| logic::record_audit_export(
                tx,
                after_seq,
                until_seq,
                &until_hash,
                &client,
                time_ms
            ))
        })
    }

    fn audit_export_covers(&self, after_seq: u64, until_seq: u64) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            on_connection!(self, |tx| logic::audit_export_covers(tx, after_seq, until_seq))
        })
    }

    fn settle_after_bulk_load(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut lease = self.lease().await?;
            // The tables a bulk load fills (the database may hold others).
            lease
                .client()?
                .batch_execute(
                    "VACUUM (ANALYZE) kms_keys, kms_key_versions, kms_key_selectors, kms_clients,
                         kms_client_labels, kms_audit, kms_audit_refs",
                )
                .await?;
            Ok(())
        })
    }

    fn prune_audit(&self, expected_anchor_seq: u64, anchor: Mark) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            in_transaction!(self, |tx| logic::prune_audit(tx, expected_anchor_seq, &anchor))
        })
    }

    fn audit_page(
        &self,
        after_seq: u64,
        since_ms: Option<i64>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<AuditEntry>> {
        Box::pin(async move {
            on_connection!(self, |tx| logic::audit_page(tx, after_seq, since_ms, limit))
        })
    }

    fn kmip_create_key(
        &self,
        key: KeyInfo,
        material: Vec<u8>,
        object: KmipObject,
        attributes: Vec<KmipAttributeRow>,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            changing_keys!(self, |tx| logic::kmip_create_key(
                tx,
                &key,
                &material,
                &object,
                &attributes
            ))
        })
    }

    fn kmip_create_keys(&self, keys: Vec<NewKmipKey>) -> StoreFuture<'_, ()> {
        Box::pin(async move { changing_keys!(self, |tx| logic::kmip_create_keys(tx, &keys)) })
    }

    fn kmip_add_version(
        &self,
        object: KmipObject,
        created_ms: i64,
        material: Vec<u8>,
        attributes: Vec<KmipAttributeRow>,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            changing_keys!(self, |tx| logic::kmip_add_version(
                tx,
                &object,
                created_ms,
                &material,
                &attributes
            ))
        })
    }

    fn kmip_apply(&self, changes: KmipChanges) -> StoreFuture<'_, ()> {
        Box::pin(async move { changing_keys!(self, |tx| logic::kmip_apply(tx, &changes)) })
    }

    fn kmip_put_object(&self, object: KmipObject, inherit: Option<u32>) -> StoreFuture<'_, ()> {
        Box::pin(
            async move { changing_keys!(self, |tx| logic::kmip_put_object(tx, &object, inherit)) },
        )
    }

    fn kmip_key_state(&self, key: String) -> StoreFuture<'_, Option<KmipKeyState>> {
        Box::pin(async move { on_connection!(self, |tx| logic::kmip_key_state(tx, &key)) })
    }

    fn kmip_restore(&self, key: String, earlier: Option<KmipKeyState>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            changing_keys!(self, |tx| logic::kmip_restore(tx, &key, earlier.as_ref()))
        })
    }

    fn kmip_object(&self, key: String, version: u32) -> StoreFuture<'_, Option<KmipObject>> {
        Box::pin(async move { on_connection!(self, |tx| logic::kmip_object(tx, &key, version)) })
    }

    fn kmip_view(
        &self,
        key: String,
        version: u32,
        with_attributes: bool,
    ) -> StoreFuture<'_, Option<Arc<KmipView>>> {
        Box::pin(async move {
            let generation = self.changes.settled().await;
            let id = (key, version, with_attributes);
            if let Some(view) = generation.and_then(|g| self.cache.get_view(&id, g)) {
                return Ok(Some(view));
            }
            let view: Option<KmipView> =
                on_connection!(self, |tx| logic::kmip_view(tx, &id.0, version, with_attributes))?;
            let view = view.map(Arc::new);
            if let (Some(view), Some(g)) = (&view, generation) {
                self.cache.put_view(id, g, view);
            }
            Ok(view)
        })
    }

    fn kmip_objects_of(&self, names: Vec<String>) -> StoreFuture<'_, Vec<KmipObject>> {
        Box::pin(async move { on_connection!(self, |tx| logic::kmip_objects_of(tx, &names)) })
    }

    fn kmip_objects(&self) -> StoreFuture<'_, Vec<KmipObject>> {
        Box::pin(async move { on_connection!(self, |tx| logic::kmip_objects(tx)) })
    }

    fn kmip_attributes(
        &self,
        key: String,
        version: Option<u32>,
    ) -> StoreFuture<'_, Vec<KmipAttributeRow>> {
        Box::pin(
            async move { on_connection!(self, |tx| logic::kmip_attributes(tx, &key, version)) },
        )
    }

    fn kmip_set_attribute(
        &self,
        key: String,
        version: u32,
        name: String,
        values: Vec<String>,
        inherit: Option<u32>,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            changing_keys!(self, |tx| logic::kmip_set_attribute(
                tx, &key, version, &name, values, inherit
            ))
        })
    }

    fn kmip_find_page(
        &self,
        name: String,
        value: String,
        after: String,
        limit: u32,
    ) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move {
            on_connection!(self, |tx| logic::kmip_find_page(tx, &name, &value, &after, limit))
        })
    }
}

/// A page of the audit chain read with binary COPY (see
/// [`copy_binary`](super::copy_binary) for why). Text columns are taken
/// as the bytes PostgreSQL sent, not checked for UTF-8: the walk only
/// hashes them (see `canonical_into`).
async fn audit_chain_copy(client: &Client, after_seq: u64, limit: u32) -> Result<ChainPage> {
    // COPY takes no parameters: both numbers are integers formatted here.
    let sql = format!(
        concat!(
            "COPY (SELECT ",
            audit_columns!(),
            " FROM kms_audit WHERE seq > {} ORDER BY seq LIMIT {}) TO STDOUT (FORMAT binary)"
        ),
        to_i64(after_seq),
        limit
    );
    let stream = client.copy_out(sql.as_str()).await?;
    let mut stream = std::pin::pin!(stream);
    let mut reader = CopyReader::new(AUDIT_CHAIN_COLUMNS.len());
    let mut page = ChainPage::with_capacity(limit as usize);
    fn int8(field: Option<&[u8]>, i: usize) -> Result<Option<i64>> {
        field
            .map(|bytes| {
                <[u8; 8]>::try_from(bytes).map(i64::from_be_bytes).map_err(|_| {
                    KmsError::Corrupt(format!(
                        "the {} of a stored audit entry is not an int8",
                        AUDIT_CHAIN_COLUMNS[i]
                    ))
                })
            })
            .transpose()
    }
    fn required<T>(field: Option<T>, i: usize) -> Result<T> {
        field.ok_or_else(|| {
            KmsError::Corrupt(format!(
                "the {} of a stored audit entry is NULL",
                AUDIT_CHAIN_COLUMNS[i]
            ))
        })
    }
    while let Some(chunk) =
        std::future::poll_fn(|cx| futures_core::Stream::poll_next(stream.as_mut(), cx)).await
    {
        reader.feed(&chunk?, |f| {
            let version = int8(f[5], 5)?;
            if let Some(v) = version {
                to_u32(v, "key version")?;
            }
            page.push(
                to_u64(required(int8(f[0], 0)?, 0)?, "audit sequence number")?,
                required(int8(f[1], 1)?, 1)?,
                required(f[2], 2)?,
                required(f[3], 3)?,
                f[4],
                version,
                required(f[6], 6)?,
                required(f[7], 7)?,
                required(f[8], 8)?,
                f[9],
            );
            Ok(())
        })?;
    }
    reader.finish()?;
    Ok(page)
}
