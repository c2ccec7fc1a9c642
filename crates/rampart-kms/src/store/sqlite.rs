//! The SQLite store: one file in WAL mode, written by one connection and
//! read by a few more, every call on the blocking thread pool. The WAL is
//! copied back into the database file by a thread of its own
//! ([`Checkpointer`]), never by a commit.
//!
//! Crypto-shredding: `secure_delete` is on, so SQLite zeroes the pages and
//! cells it frees, and the WAL is checkpointed and truncated after a
//! destroy so the old material survives in no page of either file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{
    params, params_from_iter, Connection, OpenFlags, OptionalExtension, ParamsFromIter, ToSql,
    TransactionBehavior,
};

use super::backend::{ready, Param, Params, Tx};
use super::logic::{self, to_i64};
use super::material_cache::MaterialCache;
use super::rows;
use super::rules;
use super::schema::{
    base_schema, check_version, migrations_after, BASE_SCHEMA_VERSION, SQLITE_AUDIT_NO_DELETE,
};
use super::sql::Dialect;
use super::sql::{self, audit_columns, key_material, Sql, AUDIT_LIST_COLUMNS, AUDIT_LIST_FILTERS};
use super::{
    segment_to_index, to_u32, to_u64, AuditDriver, AuditFilter, ClientFilter, KeyFilter,
    KmipAttributeRow, KmipChanges, KmipKeyState, KmipObject, KmipView, MaterialRow, NewKmipKey,
    ServerPresence, StateChange, Store, StoreFuture, AUDIT_CHAIN_COLUMNS, AUDIT_REFS_SEGMENT,
    REF_CLIENT, REF_KEY,
};
use crate::audit::{seal_entry, ChainPage, ExportedEntry, Mark, GENESIS};
use crate::error::{KmsError, Result};
use crate::keys::RootKey;
use crate::model::{AuditDraft, AuditEntry, ClientInfo, KeyInfo, Labels};

const READERS: usize = 3;
/// Reference rows per transaction when a segment is indexed: small
/// enough that the writer, which every audited request waits for, is
/// held only a couple of milliseconds at a time.
const INDEX_CHUNK_ROWS: usize = 2048;
/// Page cache of the writer and of each reader, in KiB (as the negative
/// `cache_size` SQLite takes): bounded, so the server's memory does not
/// grow with the store (56 MiB at most in all).
const WRITER_CACHE_KIB: i64 = -32 * 1024;
const READER_CACHE_KIB: i64 = -8 * 1024;
/// Page cache of the audit indexer's reader, which reads a segment of
/// the log once, in order: a cache the size of the readers' would only
/// fill with pages never read again.
const INDEX_READER_CACHE_KIB: i64 = -1024;
/// How often the [`Checkpointer`] copies committed WAL frames into the
/// database file: at a fleet's write rate about as many pages as SQLite's
/// own automatic checkpoint would take (1,000), so the WAL stays a few MiB.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(200);
/// WAL pages past which the writer checkpoints at its commit after all.
/// A passive checkpoint on another connection can copy the WAL, but only
/// the writer restarts it from its beginning, and only when a checkpoint
/// has copied every frame before it starts its next transaction: a writer
/// that never pauses (`kms populate`, a fleet's sustained audit traffic)
/// appends frames during each of the [`Checkpointer`]'s runs, and its WAL
/// grew without bound (31 GB in three minutes of populating). At this
/// size the writer's own checkpoint, which no write can overtake, lets
/// the next transaction restart the WAL: one pause per 64 MiB written,
/// none at all where the writes leave gaps.
const WAL_RESTART_PAGES: i64 = 16 * 1024;
/// The WAL file is truncated to this size whenever it restarts.
const WAL_SIZE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;
/// How long a destroy keeps trying to truncate the WAL ([`truncate_wal`]).
const TRUNCATE_PATIENCE: Duration = Duration::from_secs(10);

/// Appends `drafts` after the newest entry (or the anchor, when pruning
/// removed every entry; or the genesis hash) in one transaction.
fn append(
    conn: &mut Connection,
    drafts: &[AuditDraft],
    root: Option<&RootKey>,
) -> Result<Vec<ExportedEntry>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let last: Option<(i64, Vec<u8>)> = tx
        .query_row("SELECT seq, hash FROM kms_audit ORDER BY seq DESC LIMIT 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let (mut seq, mut prev) = match last {
        Some((seq, hash)) => (to_u64(seq, "audit sequence number")?, hash),
        None => match ready(logic::audit_anchor(&Lite(&tx)))? {
            Some(anchor) => (anchor.seq, anchor.hash_bytes()?),
            None => (0, GENESIS.to_vec()),
        },
    };
    let mut out = Vec::with_capacity(drafts.len());
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO kms_audit (seq, time_ms, client, operation, key_name, key_version,
                 outcome, detail, prev_hash, hash, mac)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        for draft in drafts {
            seq += 1;
            let row = seal_entry(&prev, seq, draft, root);
            insert.execute(params![
                to_i64(seq),
                draft.time_ms,
                draft.client,
                draft.operation,
                draft.key,
                draft.version,
                draft.outcome,
                draft.detail,
                row.prev_hash,
                row.hash,
                row.mac
            ])?;
            out.push(ExportedEntry::sealed(draft, &row));
            prev = row.hash;
        }
    }
    tx.commit()?;
    Ok(out)
}

/// The reference rows of the entries after the indexed mark up to the end
/// of their segment ([`segment_to_index`]), sorted as the table's key
/// is, their names in one buffer (two rows an entry, a segment at most).
/// The store keeps one and refills it segment after segment (a few MiB)
/// rather than leaving the allocator a fresh block of that size to keep
/// each time.
#[derive(Default)]
struct SegmentRefs {
    done: u64,
    end: u64,
    segment: i64,
    names: Vec<u8>,
    rows: Vec<SegmentRef>,
}

struct SegmentRef {
    kind: i64,
    name: std::ops::Range<usize>,
    seq: i64,
}

impl SegmentRefs {
    /// Refills the rows; false when no segment after the mark is
    /// complete yet.
    fn read(&mut self, conn: &Connection) -> Result<bool> {
        // One snapshot for the mark, the head and the entries.
        let tx = conn.unchecked_transaction()?;
        let done: i64 = ready(Lite(&tx).scalar(&sql::AUDIT_REFS_DONE, &[]))?.unwrap_or(0);
        let head: i64 = ready(Lite(&tx).scalar(&sql::AUDIT_HEAD_SEQ, &[]))?.unwrap_or(0);
        let done = to_u64(done, "audit reference mark")?;
        let Some(end) = segment_to_index(done, to_u64(head, "audit sequence number")?) else {
            return Ok(false);
        };
        let refs = self;
        refs.done = done;
        refs.end = end;
        refs.segment = to_i64(end / AUDIT_REFS_SEGMENT);
        refs.names.clear();
        refs.rows.clear();
        let mut stmt = tx.prepare_cached(
            "SELECT seq, client, key_name FROM kms_audit WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
        )?;
        let mut rows = stmt.query(params![to_i64(done), to_i64(end)])?;
        while let Some(r) = rows.next()? {
            let seq: i64 = r.get(0)?;
            // The names as stored, bytes for bytes (the table compares
            // them so: BINARY collation).
            for (kind, column) in [(REF_CLIENT, 1), (REF_KEY, 2)] {
                match r.get_ref(column)? {
                    ValueRef::Text(name) => {
                        let at = refs.names.len();
                        refs.names.extend_from_slice(name);
                        refs.rows.push(SegmentRef { kind, name: at..refs.names.len(), seq });
                    }
                    ValueRef::Null if kind == REF_KEY => {}
                    other => {
                        return Err(KmsError::Corrupt(format!(
                            "audit entry {seq} has a {} that is {}, not text",
                            if kind == REF_KEY { "key name" } else { "client" },
                            other.data_type()
                        )))
                    }
                }
            }
        }
        drop(rows);
        drop(stmt);
        tx.commit()?;
        let names = &refs.names;
        refs.rows.sort_unstable_by(|a, b| {
            (a.kind, &names[a.name.clone()], a.seq).cmp(&(b.kind, &names[b.name.clone()], b.seq))
        });
        Ok(true)
    }

    /// Inserts up to `count` rows from `first`; rows already there (a run
    /// cut short, or another one) are left as they are.
    fn insert(&self, conn: &Connection, first: usize, count: usize) -> Result<()> {
        let mut stmt = conn.prepare_cached(
            "INSERT OR IGNORE INTO kms_audit_refs (segment, kind, value, seq) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let last = first.saturating_add(count).min(self.rows.len());
        for row in self.rows.get(first..last).unwrap_or_default() {
            let name = rusqlite::types::ToSqlOutput::Borrowed(ValueRef::Text(
                &self.names[row.name.clone()],
            ));
            stmt.execute(params![self.segment, row.kind, name, row.seq])?;
        }
        Ok(())
    }
}

/// The SQLite store.
#[derive(Clone)]
pub struct SqliteStore {
    path: PathBuf,
    writer: Arc<Mutex<Connection>>,
    readers: Arc<Vec<Mutex<Connection>>>,
    next_reader: Arc<AtomicUsize>,
    material_cache: Arc<MaterialCache>,
    _checkpointer: Arc<Checkpointer>,
    /// The audit indexer's reader and rows ([`Store::index_audit`]), and
    /// its turn: one run at a time refills and writes the rows.
    index: Arc<Mutex<(Connection, SegmentRefs)>>,
    index_turn: Arc<tokio::sync::Mutex<()>>,
}

/// Copies committed WAL frames into the database file every
/// [`CHECKPOINT_INTERVAL`], on its own thread and connection, as passive
/// checkpoints (they wait for nobody and nobody waits for them).
///
/// SQLite's automatic checkpoint runs inside the commit that fills the WAL
/// to 1,000 pages, and a checkpoint syncs the WAL and the database file:
/// two fsyncs, during which the writer, and every request whose audit
/// entry waits on it, stood still (the key manager's p99 under load;
/// BENCHMARKS.md, "Key manager: fleet scale"). Durability is unchanged:
/// commits never synced (synchronous=NORMAL), and a checkpoint is
/// crash-safe wherever it runs.
struct Checkpointer {
    /// Dropped to stop the thread.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    fn start(path: &Path) -> Result<Self> {
        let conn = Connection::open(path)?;
        configure(&conn)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sqlite-checkpoint".to_owned())
            .spawn(move || {
                let mut last_error = String::new();
                loop {
                    let stopping = stopped.recv_timeout(CHECKPOINT_INTERVAL)
                        == Err(mpsc::RecvTimeoutError::Disconnected);
                    // A busy checkpoint (another one running) is no error:
                    // the pragma reports it in its row.
                    match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                        Ok(()) => last_error.clear(),
                        Err(e) => {
                            let e = e.to_string();
                            if e != last_error {
                                tracing::warn!("WAL checkpoint failed: {e}");
                                last_error = e;
                            }
                        }
                    }
                    if stopping {
                        return;
                    }
                }
            })
            .map_err(|e| KmsError::Store(format!("cannot start the WAL checkpointer: {e}")))?;
        Ok(Self { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // The thread only ever finishes its last checkpoint.
            let _ = thread.join();
        }
    }
}

/// Pushes every committed change out of the WAL and truncates it, so that
/// destroyed material survives in no page of either file. A TRUNCATE
/// checkpoint waits for readers (the busy timeout) but not for another
/// checkpoint (the [`Checkpointer`]'s): then it reports itself busy in its
/// row instead of failing, and is tried again, for at most
/// [`TRUNCATE_PATIENCE`] in all.
fn truncate_wal(conn: &Connection) -> Result<()> {
    let deadline = std::time::Instant::now() + TRUNCATE_PATIENCE;
    loop {
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        if busy == 0 {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(KmsError::Store(format!(
                "the change is committed, but the WAL stayed busy for {} s and was not \
                 truncated: old key material may remain in it until a later checkpoint",
                TRUNCATE_PATIENCE.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).finish_non_exhaustive()
    }
}

/// A read-only connection with a page cache of `cache_kib` (as the
/// negative `cache_size` SQLite takes).
fn open_reader(path: &Path, cache_kib: i64) -> Result<Connection> {
    let reader = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    configure(&reader)?;
    reader.pragma_update(None, "cache_size", cache_kib)?;
    Ok(reader)
}

fn configure(conn: &Connection) -> Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    Ok(())
}

impl SqliteStore {
    /// Opens (creating when absent) the database file, in WAL mode, with
    /// the schema of this build.
    pub fn open(path: &Path) -> Result<Self> {
        let writer = Connection::open(path)
            .map_err(|e| KmsError::Store(format!("cannot open {}: {e}", path.display())))?;
        configure(&writer)?;
        let mode: String =
            writer.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(KmsError::Store(format!("{} cannot use WAL mode", path.display())));
        }
        // WAL with synchronous=NORMAL: commits are atomic and survive a
        // crash of the process; only a power loss can lose the last ones.
        writer.pragma_update(None, "synchronous", "NORMAL")?;
        // Checkpoints are the Checkpointer's, off the write path, unless
        // the WAL grows past WAL_RESTART_PAGES.
        writer.pragma_update(None, "wal_autocheckpoint", WAL_RESTART_PAGES)?;
        writer.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT_BYTES)?;
        // The reference indexer inserts each batch's (client, key) rows
        // at their names' places in the current segment of
        // `kms_audit_refs`: with a fleet's keys and hosts those are pages
        // all over it, which SQLite's default 2 MiB cache keeps rereading.
        writer.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
        Self::migrate(&writer, path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        let readers = (0..READERS)
            .map(|_| open_reader(path, READER_CACHE_KIB).map(Mutex::new))
            .collect::<Result<Vec<_>>>()?;
        let index_reader = open_reader(path, INDEX_READER_CACHE_KIB)?;
        let checkpointer = Checkpointer::start(path)?;
        Ok(Self {
            path: path.to_owned(),
            writer: Arc::new(Mutex::new(writer)),
            readers: Arc::new(readers),
            next_reader: Arc::new(AtomicUsize::new(0)),
            material_cache: Arc::new(MaterialCache::default()),
            _checkpointer: Arc::new(checkpointer),
            index: Arc::new(Mutex::new((index_reader, SegmentRefs::default()))),
            index_turn: Arc::default(),
        })
    }

    fn migrate(conn: &Connection, path: &Path) -> Result<()> {
        let has_schema: bool = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'kms_schema'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !has_schema {
            conn.execute_batch(&format!(
                "BEGIN IMMEDIATE; {} INSERT INTO kms_schema VALUES ({BASE_SCHEMA_VERSION}); COMMIT;",
                base_schema(Dialect::Sqlite)
            ))?;
        }
        let version: i64 =
            conn.query_row("SELECT max(version) FROM kms_schema", [], |r| r.get(0))?;
        check_version(version, &path.display().to_string())?;
        for step in migrations_after(version) {
            let [shared, own] = step.statements(Dialect::Sqlite);
            conn.execute_batch(&format!(
                "BEGIN IMMEDIATE; {shared} {own} INSERT INTO kms_schema VALUES ({}); COMMIT;",
                step.to
            ))?;
        }
        Ok(())
    }

    /// The database file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A write that may change keys: the rows the data path kept are
    /// stale once it is done ([`MaterialCache`]). Writes to the audit log
    /// alone go through [`Self::write_log`].
    fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let cache = Arc::clone(&self.material_cache);
        self.write_log(move |conn| {
            let result = f(conn);
            cache.invalidate();
            result
        })
    }

    /// A write to the audit log, its checkpoints, exports and filter
    /// references, or the server list: tables the data path's rows do not
    /// come from.
    fn write_log<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let writer = Arc::clone(&self.writer);
        Box::pin(async move {
            // A WAL commit without fsync (synchronous=NORMAL) takes tens of
            // microseconds: run it here when the writer is free, as reads
            // are; a busy writer is waited for on the blocking pool.
            if let Ok(mut conn) = writer.try_lock() {
                return f(&mut conn);
            }
            tokio::task::spawn_blocking(move || {
                let mut conn = writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                f(&mut conn)
            })
            .await
            .map_err(|e| KmsError::Store(format!("store task failed: {e}")))?
        })
    }

    /// A write to the audit log that may take milliseconds (an audit group
    /// of hundreds of entries): always on the blocking pool, so it never
    /// holds up the requests queued on a runtime thread behind it.
    fn write_log_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let writer = Arc::clone(&self.writer);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut conn = writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                f(&mut conn)
            })
            .await
            .map_err(|e| KmsError::Store(format!("store task failed: {e}")))?
        })
    }

    /// A read on a free reader, in place; scans (pages of lists and of the
    /// audit log) too: sent to the blocking pool, they raised the server's
    /// peak memory, since each of its threads keeps a malloc arena of the
    /// pages it freed.
    fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let readers = Arc::clone(&self.readers);
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            // A point query on a free reader takes microseconds: run it here
            // rather than pay two thread hand-offs to the blocking pool.
            // Only when every reader is busy does the wait move there.
            for i in 0..readers.len() {
                if let Ok(conn) = readers[(start + i) % readers.len()].try_lock() {
                    return f(&conn);
                }
            }
            tokio::task::spawn_blocking(move || {
                let conn = readers[start % readers.len()]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                f(&conn)
            })
            .await
            .map_err(|e| KmsError::Store(format!("store task failed: {e}")))?
        })
    }
}

impl SqliteStore {
    /// A primary-key lookup (the per-request reads of the data path): run
    /// in place on a free reader, as it takes microseconds and, in WAL
    /// mode, never waits for the writer; on the blocking pool only when
    /// every reader is busy.
    fn read_point<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let start = self.next_reader.load(Ordering::Relaxed);
        for i in 0..self.readers.len() {
            if let Ok(conn) = self.readers[(start + i) % self.readers.len()].try_lock() {
                let result = f(&conn);
                return Box::pin(std::future::ready(result));
            }
        }
        self.read(f)
    }
}

/// A key's policy and one version (`None`: the newest) with its sealed
/// material and KMIP dates, in one query.
static KEY_MATERIAL_ONE: Sql = Sql::new(concat!(
    "SELECT ",
    key_material!(),
    " WHERE k.name = $1 AND ($2::BIGINT IS NULL OR v.version = $2)
     ORDER BY v.version DESC LIMIT 1"
));

/// A SQLite connection, or a transaction on it, as the store logic's [`Tx`].
struct Lite<'c>(&'c Connection);

/// A statement's parameters as rusqlite binds them.
fn bind<'p>(params: &'p Params<'_>) -> ParamsFromIter<impl Iterator<Item = &'p dyn ToSql>> {
    params_from_iter(params.iter().map(|p| p.sqlite()))
}

impl Tx for Lite<'_> {
    type Row<'r> = rusqlite::Row<'r>;
    const DIALECT: Dialect = Dialect::Sqlite;

    async fn rows<T>(
        &self,
        text: &str,
        params: &Params<'_>,
        mut decode: impl FnMut(&Self::Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.0.prepare_cached(text)?;
        let mut rows = stmt.query(bind(params))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(decode(r)?);
        }
        Ok(out)
    }

    async fn execute(&self, text: &str, params: &Params<'_>) -> Result<u64> {
        Ok(self.0.prepare_cached(text)?.execute(bind(params))? as u64)
    }

    async fn insert(
        &self,
        sql: &'static Sql,
        params: &Params<'_>,
        what: impl FnOnce() -> String,
    ) -> Result<u64> {
        let changed = self.0.prepare_cached(sql.sqlite())?.execute(bind(params));
        Ok(changed.map_err(conflict_on_constraint(what))? as u64)
    }

    async fn shred_material(&self, name: &str, version: Option<i64>) -> Result<()> {
        // Overwritten in place first, so secure_delete zeroes the freed
        // cell when the material is dropped.
        self.0.execute(
            "UPDATE kms_key_versions SET material = zeroblob(length(material))
             WHERE name = ?1 AND (?2 IS NULL OR version = ?2) AND material IS NOT NULL",
            params![name, version],
        )?;
        Ok(())
    }

    async fn lock_audit_head(&self) -> Result<()> {
        // The IMMEDIATE transaction holds the only writer already.
        Ok(())
    }

    async fn lift_audit_guard(&self) -> Result<bool> {
        // Dropped and created again before the commit, so no other
        // connection ever sees the table unguarded.
        self.0.execute_batch("DROP TRIGGER IF EXISTS kms_audit_no_delete;")?;
        Ok(true)
    }

    async fn restore_audit_guard(&self, lifted: bool) -> Result<()> {
        if lifted {
            self.0.execute_batch(SQLITE_AUDIT_NO_DELETE)?;
        }
        Ok(())
    }
}

/// A constraint violation as a conflict over `what`.
fn conflict_on_constraint(
    what: impl FnOnce() -> String,
) -> impl FnOnce(rusqlite::Error) -> KmsError {
    move |error| match error {
        rusqlite::Error::SqliteFailure(e, _)
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            KmsError::Conflict(what())
        }
        other => other.into(),
    }
}

/// Runs `f` in an IMMEDIATE transaction (the writer taken at its start,
/// never upgraded from a read) and commits what it did.
fn immediate<T>(conn: &mut Connection, f: impl FnOnce(&Lite<'_>) -> Result<T>) -> Result<T> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let value = f(&Lite(&tx))?;
    tx.commit()?;
    Ok(value)
}

impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn get_meta(&self, name: &'static str) -> StoreFuture<'_, Option<Vec<u8>>> {
        self.read(move |conn| ready(logic::get_meta(&Lite(conn), name)))
    }

    fn initialize(
        &self,
        entries: Vec<(&'static str, Vec<u8>)>,
        admin: ClientInfo,
    ) -> StoreFuture<'_, ()> {
        self.write(move |conn| immediate(conn, |tx| ready(logic::initialize(tx, &entries, &admin))))
    }

    fn create_key(&self, key: KeyInfo, material: Vec<u8>) -> StoreFuture<'_, ()> {
        self.write(move |conn| immediate(conn, |tx| ready(logic::insert_key(tx, &key, &material))))
    }

    fn key_page(
        &self,
        after: String,
        filter: KeyFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<KeyInfo>> {
        self.read(move |conn| ready(logic::key_page(&Lite(conn), &after, &filter, limit)))
    }

    fn get_key(&self, name: String) -> StoreFuture<'_, Option<KeyInfo>> {
        self.read(move |conn| ready(logic::load_key(&Lite(conn), &name)))
    }

    fn key_material(
        &self,
        name: String,
        version: Option<u32>,
    ) -> StoreFuture<'_, Option<Arc<MaterialRow>>> {
        let generation = self.material_cache.generation();
        let key = (name, version);
        if let Some(row) = self.material_cache.get(&key, generation) {
            return Box::pin(std::future::ready(Ok(Some(row))));
        }
        let cache = Arc::clone(&self.material_cache);
        self.read_point(move |conn| {
            let params: [&dyn Param; 2] = [&key.0, &key.1.map(i64::from)];
            let row =
                ready(Lite(conn).one(&KEY_MATERIAL_ONE, &params, |r| rows::material_row(r, 0)))?
                    .map(Arc::new);
            if let Some(row) = &row {
                cache.put(key, generation, row);
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
        self.write(move |conn| {
            immediate(conn, |tx| {
                ready(logic::insert_version(tx, &name, version, created_ms, &material))
            })
        })
    }

    fn change_state(
        &self,
        name: String,
        version: Option<u32>,
        change: StateChange,
        changed_ms: i64,
    ) -> StoreFuture<'_, u32> {
        self.write(move |conn| {
            let changed = immediate(conn, |tx| {
                ready(logic::change_state(tx, &name, version, &change, changed_ms))
            })?;
            if change == StateChange::Destroy {
                truncate_wal(conn)?;
            }
            Ok(changed)
        })
    }

    fn add_client(&self, client: ClientInfo) -> StoreFuture<'_, ()> {
        self.write(move |conn| immediate(conn, |tx| ready(logic::insert_client(tx, &client))))
    }

    fn client_by_fingerprint(&self, fingerprint: String) -> StoreFuture<'_, Option<ClientInfo>> {
        self.read_point(move |conn| ready(logic::client_by_fingerprint(&Lite(conn), &fingerprint)))
    }

    fn revoke_client(
        &self,
        name: String,
        reason: String,
        revoked_ms: i64,
    ) -> StoreFuture<'_, ClientInfo> {
        self.write(move |conn| {
            immediate(conn, |tx| ready(logic::revoke_client(tx, &name, &reason, revoked_ms)))
        })
    }

    fn set_client_labels(&self, name: String, labels: Labels) -> StoreFuture<'_, ClientInfo> {
        self.write(move |conn| {
            immediate(conn, |tx| ready(logic::set_client_labels(tx, &name, &labels)))
        })
    }

    fn client_page(
        &self,
        after: String,
        filter: ClientFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<ClientInfo>> {
        self.read(move |conn| ready(logic::client_page(&Lite(conn), &after, &filter, limit)))
    }

    fn append_audit(
        &self,
        drafts: Vec<AuditDraft>,
        root: Option<Arc<RootKey>>,
    ) -> StoreFuture<'_, Vec<u64>> {
        self.write_log(move |conn| {
            Ok(append(conn, &drafts, root.as_deref())?.into_iter().map(|e| e.seq).collect())
        })
    }

    fn append_audit_entries(
        &self,
        drafts: Vec<AuditDraft>,
        root: Option<Arc<RootKey>>,
    ) -> StoreFuture<'_, Vec<ExportedEntry>> {
        self.write_log_blocking(move |conn| append(conn, &drafts, root.as_deref()))
    }

    fn audit_anchor(&self) -> StoreFuture<'_, Option<Mark>> {
        self.read(|conn| ready(logic::audit_anchor(&Lite(conn))))
    }

    fn last_audit_checkpoint(&self) -> StoreFuture<'_, Option<Mark>> {
        self.read(|conn| ready(logic::last_audit_checkpoint(&Lite(conn))))
    }

    fn server_checkin(&self, server: ServerPresence, forget_before_ms: i64) -> StoreFuture<'_, ()> {
        self.write_log(move |conn| {
            ready(logic::server_checkin(&Lite(conn), &server, forget_before_ms))
        })
    }

    fn servers_seen(&self, since_ms: i64) -> StoreFuture<'_, Vec<ServerPresence>> {
        self.read(move |conn| ready(logic::servers_seen(&Lite(conn), since_ms)))
    }

    fn add_audit_checkpoint(&self, mark: Mark) -> StoreFuture<'_, ()> {
        self.write_log(move |conn| ready(logic::add_audit_checkpoint(&Lite(conn), &mark)))
    }

    fn audit_seq_at(&self, until_ms: i64) -> StoreFuture<'_, Option<u64>> {
        self.read(move |conn| ready(logic::audit_seq_at(&Lite(conn), until_ms)))
    }

    fn audit_hash(&self, seq: u64) -> StoreFuture<'_, Option<String>> {
        self.read(move |conn| ready(logic::audit_hash(&Lite(conn), seq)))
    }

    fn record_audit_export(
        &self,
        after_seq: u64,
        until_seq: u64,
        until_hash: String,
        client: String,
        time_ms: i64,
    ) -> StoreFuture<'_, ()> {
        self.write_log(move |conn| {
            let tx = Lite(conn);
            ready(logic::record_audit_export(
                &tx,
                after_seq,
                until_seq,
                &until_hash,
                &client,
                time_ms,
            ))
        })
    }

    fn audit_export_covers(&self, after_seq: u64, until_seq: u64) -> StoreFuture<'_, bool> {
        self.read(move |conn| ready(logic::audit_export_covers(&Lite(conn), after_seq, until_seq)))
    }

    fn settle_after_bulk_load(&self) -> StoreFuture<'_, ()> {
        // SQLite keeps no dead row versions or hint bits to catch up on,
        // and its WAL is checkpointed by the Checkpointer.
        Box::pin(async { Ok(()) })
    }

    fn prune_audit(&self, expected_anchor_seq: u64, anchor: Mark) -> StoreFuture<'_, u64> {
        self.write_log(move |conn| {
            immediate(conn, |tx| ready(logic::prune_audit(tx, expected_anchor_seq, &anchor)))
        })
    }

    fn audit_list(
        &self,
        after_seq: u64,
        filter: AuditFilter,
        limit: u32,
    ) -> StoreFuture<'_, Vec<AuditEntry>> {
        self.read(move |conn| {
            let after = to_i64(after_seq);
            let mut out = Vec::new();
            match filter.driver() {
                AuditDriver::Sequence => {
                    out = ready(logic::audit_scan(&Lite(conn), after, &filter, None, limit))?;
                }
                AuditDriver::Rare(column, index, condition) => {
                    let rare = Some((column, index, condition));
                    out = ready(logic::audit_scan(&Lite(conn), after, &filter, rare, limit))?;
                }
                AuditDriver::Refs(kind, value) => {
                    // One snapshot: the mark and the references below it
                    // agree, and the scan after it sees the same log.
                    let tx = conn.unchecked_transaction()?;
                    let done: i64 =
                        ready(Lite(&tx).scalar(&sql::AUDIT_REFS_DONE, &[]))?.unwrap_or(0);
                    if after < done {
                        let first =
                            ready(Lite(&tx).scalar(&sql::AUDIT_FIRST_AFTER, &[&after]))?.flatten();
                        let mut stmt = tx.prepare_cached(&Dialect::Sqlite.spell(&format!(
                            "SELECT {AUDIT_LIST_COLUMNS}
                             FROM kms_audit_refs r JOIN kms_audit a ON a.seq = r.seq
                             WHERE r.segment = $10 AND r.kind = $11 AND r.value = $12
                               AND r.seq > $1 AND r.seq <= $9 AND {AUDIT_LIST_FILTERS}
                             ORDER BY r.seq LIMIT $8"
                        )))?;
                        let (mut seg, last) = rules::segments_to_probe(first, done);
                        while seg <= last && out.len() < limit as usize {
                            let want = limit - u32::try_from(out.len()).unwrap_or(limit);
                            let mut rows = stmt.query(params![
                                after,
                                filter.since_ms,
                                filter.until_ms,
                                filter.client,
                                filter.key,
                                filter.operation,
                                filter.outcome,
                                want,
                                done,
                                seg,
                                kind,
                                value
                            ])?;
                            while let Some(r) = rows.next()? {
                                out.push(rows::audit_entry(r)?);
                            }
                            seg += 1;
                        }
                    }
                    if out.len() < limit as usize {
                        let want = limit - u32::try_from(out.len()).unwrap_or(limit);
                        let from = after.max(done);
                        out.extend(ready(logic::audit_scan(
                            &Lite(&tx),
                            from,
                            &filter,
                            None,
                            want,
                        ))?);
                    }
                    tx.commit()?;
                }
            }
            Ok(out)
        })
    }

    fn index_audit(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let _turn = self.index_turn.lock().await;
            // Read and sorted on the indexer's own reader, off the runtime
            // threads: tens of milliseconds for a whole segment, with the
            // writer free and the requests' readers' caches left alone.
            let index = Arc::clone(&self.index);
            let found = tokio::task::spawn_blocking(move || {
                let mut index = index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let (conn, rows) = &mut *index;
                Ok::<_, KmsError>(rows.read(conn)?.then_some((
                    rows.done,
                    rows.end,
                    rows.rows.len(),
                )))
            })
            .await
            .map_err(|e| KmsError::Store(format!("store task failed: {e}")))??;
            let Some((done, end, count)) = found else { return Ok(0) };
            let chunks = count.div_ceil(INDEX_CHUNK_ROWS).max(1);
            for chunk in 0..chunks {
                let index = Arc::clone(&self.index);
                self.write_log_blocking(move |conn| {
                    let index = index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let rows = &index.1;
                    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    rows.insert(&tx, chunk * INDEX_CHUNK_ROWS, INDEX_CHUNK_ROWS)?;
                    if chunk + 1 == chunks {
                        // Never moved back: another run may have gone on.
                        tx.execute(
                            "INSERT INTO kms_audit_refs_done (id, seq) VALUES (1, ?1)
                             ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq)",
                            [to_i64(end)],
                        )?;
                    }
                    tx.commit()?;
                    Ok(())
                })
                .await?;
            }
            Ok(end - done)
        })
    }

    fn audit_chain_page(&self, after_seq: u64, limit: u32) -> StoreFuture<'_, ChainPage> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(concat!(
                "SELECT ",
                audit_columns!(),
                " FROM kms_audit WHERE seq > ?1 ORDER BY seq LIMIT ?2"
            ))?;
            let mut rows = stmt.query(params![to_i64(after_seq), limit])?;
            let mut page = ChainPage::with_capacity(limit as usize);
            // Borrowed column values: no allocation per entry, and text
            // taken as the bytes stored (see `canonical_into`).
            while let Some(r) = rows.next()? {
                let text = |i: usize| -> Result<Option<&[u8]>> {
                    match r.get_ref(i)? {
                        ValueRef::Text(bytes) => Ok(Some(bytes)),
                        ValueRef::Null => Ok(None),
                        other => Err(KmsError::Corrupt(format!(
                            "the {} of a stored audit entry is {}, not text",
                            AUDIT_CHAIN_COLUMNS[i],
                            other.data_type()
                        ))),
                    }
                };
                let required = |i: usize| {
                    text(i)?.ok_or_else(|| {
                        KmsError::Corrupt(format!(
                            "the {} of a stored audit entry is NULL",
                            AUDIT_CHAIN_COLUMNS[i]
                        ))
                    })
                };
                let version: Option<i64> = r.get(5)?;
                if let Some(v) = version {
                    to_u32(v, "key version")?;
                }
                page.push(
                    to_u64(r.get(0)?, "audit sequence number")?,
                    r.get(1)?,
                    required(2)?,
                    required(3)?,
                    text(4)?,
                    version,
                    required(6)?,
                    required(7)?,
                    r.get_ref(8)?
                        .as_blob()
                        .map_err(|e| KmsError::Corrupt(format!("stored audit hash: {e}")))?,
                    r.get_ref(9)?
                        .as_blob_or_null()
                        .map_err(|e| KmsError::Corrupt(format!("stored audit MAC: {e}")))?,
                );
            }
            Ok(page)
        })
    }

    fn audit_page(
        &self,
        after_seq: u64,
        since_ms: Option<i64>,
        limit: u32,
    ) -> StoreFuture<'_, Vec<AuditEntry>> {
        self.read(move |conn| ready(logic::audit_page(&Lite(conn), after_seq, since_ms, limit)))
    }

    fn kmip_create_key(
        &self,
        key: KeyInfo,
        material: Vec<u8>,
        object: KmipObject,
        attributes: Vec<KmipAttributeRow>,
    ) -> StoreFuture<'_, ()> {
        self.write(move |conn| {
            immediate(conn, |tx| {
                ready(logic::kmip_create_key(tx, &key, &material, &object, &attributes))
            })
        })
    }

    fn kmip_create_keys(&self, keys: Vec<NewKmipKey>) -> StoreFuture<'_, ()> {
        self.write(move |conn| immediate(conn, |tx| ready(logic::kmip_create_keys(tx, &keys))))
    }

    fn kmip_add_version(
        &self,
        object: KmipObject,
        created_ms: i64,
        material: Vec<u8>,
        attributes: Vec<KmipAttributeRow>,
    ) -> StoreFuture<'_, ()> {
        self.write(move |conn| {
            immediate(conn, |tx| {
                ready(logic::kmip_add_version(tx, &object, created_ms, &material, &attributes))
            })
        })
    }

    fn kmip_apply(&self, changes: KmipChanges) -> StoreFuture<'_, ()> {
        self.write(move |conn| immediate(conn, |tx| ready(logic::kmip_apply(tx, &changes))))
    }

    fn kmip_put_object(&self, object: KmipObject, inherit: Option<u32>) -> StoreFuture<'_, ()> {
        self.write(move |conn| {
            immediate(conn, |tx| ready(logic::kmip_put_object(tx, &object, inherit)))
        })
    }

    fn kmip_key_state(&self, key: String) -> StoreFuture<'_, Option<KmipKeyState>> {
        self.read(move |conn| ready(logic::kmip_key_state(&Lite(conn), &key)))
    }

    fn kmip_restore(&self, key: String, earlier: Option<KmipKeyState>) -> StoreFuture<'_, ()> {
        self.write(move |conn| {
            immediate(conn, |tx| ready(logic::kmip_restore(tx, &key, earlier.as_ref())))
        })
    }

    fn kmip_object(&self, key: String, version: u32) -> StoreFuture<'_, Option<KmipObject>> {
        self.read_point(move |conn| ready(logic::kmip_object(&Lite(conn), &key, version)))
    }

    fn kmip_objects_of(&self, names: Vec<String>) -> StoreFuture<'_, Vec<KmipObject>> {
        self.read(move |conn| ready(logic::kmip_objects_of(&Lite(conn), &names)))
    }

    fn kmip_view(
        &self,
        key: String,
        version: u32,
        with_attributes: bool,
    ) -> StoreFuture<'_, Option<Arc<KmipView>>> {
        let generation = self.material_cache.generation();
        let id = (key, version, with_attributes);
        if let Some(view) = self.material_cache.get_view(&id, generation) {
            return Box::pin(std::future::ready(Ok(Some(view))));
        }
        let cache = Arc::clone(&self.material_cache);
        self.read_point(move |conn| {
            let view = ready(logic::kmip_view(&Lite(conn), &id.0, id.1, id.2))?.map(Arc::new);
            if let Some(view) = &view {
                cache.put_view(id, generation, view);
            }
            Ok(view)
        })
    }

    fn kmip_objects(&self) -> StoreFuture<'_, Vec<KmipObject>> {
        self.read(|conn| ready(logic::kmip_objects(&Lite(conn))))
    }

    fn kmip_attributes(
        &self,
        key: String,
        version: Option<u32>,
    ) -> StoreFuture<'_, Vec<KmipAttributeRow>> {
        self.read_point(move |conn| ready(logic::kmip_attributes(&Lite(conn), &key, version)))
    }

    fn kmip_set_attribute(
        &self,
        key: String,
        version: u32,
        name: String,
        values: Vec<String>,
        inherit: Option<u32>,
    ) -> StoreFuture<'_, ()> {
        self.write(move |conn| {
            immediate(conn, |tx| {
                ready(logic::kmip_set_attribute(tx, &key, version, &name, values, inherit))
            })
        })
    }

    fn kmip_find_page(
        &self,
        name: String,
        value: String,
        after: String,
        limit: u32,
    ) -> StoreFuture<'_, Vec<String>> {
        self.read(move |conn| {
            ready(logic::kmip_find_page(&Lite(conn), &name, &value, &after, limit))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new directory, removed on drop.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new(what: &str) -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_nanos();
            let dir =
                std::env::temp_dir().join(format!("rampart-{what}-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("scratch directory");
            Self(dir)
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_leave_the_wal_checkpoint_to_the_checkpointer_thread() {
        let dir = Scratch::new("wal");
        let path = dir.0.join("kms.db");
        let store = SqliteStore::open(&path).expect("open");
        let auto: i64 = store
            .write_log(|conn| Ok(conn.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))?))
            .await
            .expect("pragma");
        assert_eq!(
            auto, WAL_RESTART_PAGES,
            "a commit that fills the WAL to SQLite's 1,000 pages must not checkpoint it"
        );

        // 16 MiB in 4 KiB rows, well past SQLite's own 1,000-page trigger.
        const ROWS: usize = 4096;
        store
            .write_log(|conn| Ok(conn.execute_batch("CREATE TABLE filler (b BLOB)")?))
            .await
            .expect("create");
        for _ in 0..ROWS / 256 {
            store
                .write_log(|conn| {
                    let tx = conn.transaction()?;
                    for _ in 0..256 {
                        tx.execute("INSERT INTO filler VALUES (randomblob(4096))", [])?;
                    }
                    tx.commit()?;
                    Ok(())
                })
                .await
                .expect("insert");
        }
        // Only a checkpoint moves the rows from the WAL into the file.
        let want = (ROWS * 4096) as u64;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let len = std::fs::metadata(&path).expect("database file").len();
            if len >= want {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the database file holds {len} bytes after 10 s: no checkpoint copied the WAL's {want}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(store);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_that_never_pauses_keeps_its_wal_bounded() {
        let dir = Scratch::new("wal-bound");
        let path = dir.0.join("kms.db");
        let wal = dir.0.join("kms.db-wal");
        let store = SqliteStore::open(&path).expect("open");
        // 320 MiB in back-to-back commits of 1 MiB on the writer, with no
        // gap in which the Checkpointer's passive checkpoints could catch
        // up (as `kms populate` writes): only the writer restarts its WAL.
        let largest = store
            .write_log(move |conn| {
                conn.execute_batch("CREATE TABLE filler (b BLOB)")?;
                let mut largest = 0;
                for _ in 0..320 {
                    let tx = conn.transaction()?;
                    for _ in 0..256 {
                        tx.execute("INSERT INTO filler VALUES (randomblob(4096))", [])?;
                    }
                    tx.commit()?;
                    largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
                }
                Ok(largest)
            })
            .await
            .expect("insert");
        // The writer's checkpoint finds the Checkpointer's running now and
        // then and is tried again at the next commit: some slack.
        let bound = 2 * WAL_SIZE_LIMIT_BYTES as u64;
        assert!(
            largest <= bound,
            "the WAL grew to {largest} bytes under a writer that never paused (bound {bound})"
        );
        drop(store);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn destroyed_material_is_in_neither_the_database_nor_the_wal() {
        let dir = Scratch::new("shred");
        let path = dir.0.join("kms.db");
        let store = SqliteStore::open(&path).expect("open");
        // Destroys racing passive checkpoints, as the Checkpointer's (every
        // 200 ms) do: here another connection's, back to back, so that a
        // TRUNCATE often finds the checkpoint lock taken and reports busy.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hammer = {
            let stop = Arc::clone(&stop);
            let conn = Connection::open(&path).expect("second connection");
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                        .expect("passive checkpoint");
                }
            })
        };
        for i in 0..20u8 {
            let material: Vec<u8> = (0..64u8).map(|b| b.wrapping_mul(7) ^ i ^ 0xa5).collect();
            let key = KeyInfo {
                name: format!("k{i}"),
                exportable: false,
                allow: Vec::new(),
                created_ms: 0,
                versions: Vec::new(),
            };
            store.create_key(key, material.clone()).await.expect("create");
            // Some WAL traffic of the kind a server writes meanwhile.
            store
                .write_log(|conn| {
                    Ok(conn.execute_batch(
                        "CREATE TABLE IF NOT EXISTS filler (b BLOB);
                         INSERT INTO filler VALUES (randomblob(65536))",
                    )?)
                })
                .await
                .expect("filler");
            store
                .change_state(format!("k{i}"), None, StateChange::Destroy, 1)
                .await
                .expect("destroy");
            for file in [path.clone(), dir.0.join("kms.db-wal")] {
                let bytes = std::fs::read(&file).unwrap_or_default();
                assert!(
                    !bytes.windows(material.len()).any(|w| w == material.as_slice()),
                    "key k{i}'s material is still in {}",
                    file.display()
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        hammer.join().expect("checkpoint thread");
    }
}
