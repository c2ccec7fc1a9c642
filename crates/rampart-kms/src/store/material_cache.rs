//! The rows the data path reads (a key's policy and one version with its
//! sealed material; what a KMIP operation reads of its object), kept in
//! memory between the store's writes.
//!
//! Why: in WAL mode SQLite discards a reader's whole page cache whenever
//! another connection has committed, and the audit writer commits a group
//! every millisecond or so under load. Every unwrap therefore walked its
//! key's B-trees from the root again through `pread`, and at a million
//! keys those page reads were a large share of every request's time
//! (`scripts/bench-kms-fleet`; BENCHMARKS.md, "Key manager: fleet scale").
//!
//! Coherence: an entry is good only for the generation it was read in,
//! and every write of the store that is not to the audit log alone moves
//! the generation on after its commit and drops every entry. A read takes
//! the generation before it queries, so a row read before a commit is
//! tagged with a generation that the commit's move makes stale; a hit is
//! a row no write has happened since. On SQLite the one process that
//! owns the store (`kms serve`) makes every write; a PostgreSQL store
//! also hears the other servers' writes, and reads the cache only once
//! every write committed before the request has been heard
//! ([`postgres_changes`](super::postgres_changes)).
//!
//! The material is sealed under the root key, as in the database file
//! and SQLite's own page cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::hash::Hash;

use super::{KmipView, MaterialRow};

/// Most entries kept: a few hundred bytes each, so about 11 MiB at most.
/// A key in use has one or two (the version a ciphertext names for
/// unwraps, and for wraps its newest version: one shared row until a
/// rotation). Rows are handed out shared, not copied, per request.
const MAX_ROWS: usize = 32_768;

/// A key name and the version asked for (`None`: the newest).
type RowKey = (String, Option<u32>);

/// A KMIP object's key name, version, and whether its attributes were read.
pub(crate) type ViewKey = (String, u32, bool);

type Rows<K, V> = HashMap<K, (u64, Arc<V>)>;

/// Two halves, each at most `MAX_ROWS / 2`: rows go into `recent`; when
/// it is full it becomes `older` (the previous `older` is dropped), and a
/// row found in `older` moves back to `recent`. A row in use every half
/// a cache's worth of reads therefore stays, however many other keys are
/// read once (a fleet's keys in use change over the day): an LRU's
/// outcome at a hash map's cost, where emptying the whole cache when
/// full would make every key in use miss at once.
struct Halves<K, V> {
    recent: Rows<K, V>,
    older: Rows<K, V>,
}

impl<K, V> Default for Halves<K, V> {
    fn default() -> Self {
        Self { recent: HashMap::new(), older: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone, V> Halves<K, V> {
    /// The entry for `key` read in `generation`, moved back to `recent`
    /// when found in `older`.
    fn get(&mut self, key: &K, generation: u64) -> Option<Arc<V>> {
        if let Some((read_in, row)) = self.recent.get(key) {
            return (*read_in == generation).then(|| Arc::clone(row));
        }
        let (read_in, row) = self.older.remove(key)?;
        if read_in != generation {
            return None;
        }
        let found = Arc::clone(&row);
        self.insert(key.clone(), (read_in, row));
        Some(found)
    }

    fn insert(&mut self, key: K, entry: (u64, Arc<V>)) {
        if self.recent.len() >= MAX_ROWS / 2 && !self.recent.contains_key(&key) {
            self.older = std::mem::take(&mut self.recent);
        }
        self.recent.insert(key, entry);
    }

    fn clear(&mut self) {
        self.recent.clear();
        self.older.clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.recent.len() + self.older.len()
    }
}

#[derive(Default)]
pub(crate) struct MaterialCache {
    generation: AtomicU64,
    rows: Mutex<Halves<RowKey, MaterialRow>>,
    views: Mutex<Halves<ViewKey, KmipView>>,
}

impl MaterialCache {
    /// The generation to read in: take it before querying the store.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The row read for `key` in `generation`, when no write has happened
    /// since.
    pub(crate) fn get(&self, key: &RowKey, generation: u64) -> Option<Arc<MaterialRow>> {
        self.rows.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key, generation)
    }

    /// The KMIP view read for `key` in `generation`, when no write has
    /// happened since.
    pub(crate) fn get_view(&self, key: &ViewKey, generation: u64) -> Option<Arc<KmipView>> {
        self.views.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key, generation)
    }

    /// Keeps `view`, read for `key` in `generation`, as [`Self::put`]
    /// keeps a row.
    pub(crate) fn put_view(&self, key: ViewKey, generation: u64, view: &Arc<KmipView>) {
        let mut views = self.views.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if generation != self.generation() {
            return;
        }
        views.insert(key, (generation, Arc::clone(view)));
    }

    /// Keeps `row`, read for `key` in `generation`, unless a write has
    /// happened since (checked under the lock [`Self::invalidate`] clears
    /// with, so no row read before a write outlives it). A row read as a
    /// key's newest version is also the row of that version by number.
    pub(crate) fn put(&self, key: RowKey, generation: u64, row: &Arc<MaterialRow>) {
        let mut rows = self.rows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if generation != self.generation() {
            return;
        }
        if key.1.is_none() {
            rows.insert((key.0.clone(), Some(row.version.version)), (generation, Arc::clone(row)));
        }
        rows.insert(key, (generation, Arc::clone(row)));
    }

    /// Called after every committed (or failed) write that may change a
    /// key: every row kept so far is stale, and dropped, so that a
    /// destroyed version's sealed material does not stay in memory.
    pub(crate) fn invalidate(&self) {
        // Both locks held, so no view or row read before the write is put
        // after the generation moved on (`put` checks it under its lock).
        let mut rows = self.rows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut views = self.views.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.generation.fetch_add(1, Ordering::AcqRel);
        rows.clear();
        views.clear();
    }
}

impl std::fmt::Debug for MaterialCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the rows: they hold sealed key material.
        f.debug_struct("MaterialCache").field("generation", &self.generation()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{KeyState, KeyVersionInfo};

    fn row(version: u32) -> Arc<MaterialRow> {
        Arc::new(MaterialRow {
            allow: Vec::new(),
            exportable: false,
            version: KeyVersionInfo {
                version,
                state: KeyState::Active,
                created_ms: 0,
                changed_ms: None,
            },
            material: Some(vec![7; 40]),
            kmip: None,
        })
    }

    #[test]
    fn a_row_is_good_until_the_next_write() {
        let cache = MaterialCache::default();
        let key = ("k".to_owned(), None);
        let g = cache.generation();
        cache.put(key.clone(), g, &row(1));
        assert_eq!(cache.get(&key, cache.generation()).map(|r| r.version.version), Some(1));
        cache.invalidate();
        assert!(cache.get(&key, cache.generation()).is_none());
    }

    #[test]
    fn a_row_read_before_a_write_committed_is_never_served_after_it() {
        let cache = MaterialCache::default();
        let key = ("k".to_owned(), Some(1));
        // A reader takes the generation, a write commits and moves it on,
        // then the reader keeps what it read (perhaps the old row).
        let g = cache.generation();
        cache.invalidate();
        cache.put(key.clone(), g, &row(1));
        assert!(cache.get(&key, cache.generation()).is_none());
        assert!(cache.get(&key, g).is_none(), "not kept at all");
    }

    #[test]
    fn a_kmip_view_is_good_until_the_next_write() {
        let cache = MaterialCache::default();
        let view = Arc::new(KmipView {
            key: crate::model::KeyInfo {
                name: "k".into(),
                exportable: false,
                allow: Vec::new(),
                created_ms: 0,
                versions: Vec::new(),
            },
            object: None,
            attributes: Vec::new(),
            material: None,
        });
        let key = ("k".to_owned(), 1, true);
        let g = cache.generation();
        cache.put_view(key.clone(), g, &view);
        assert!(cache.get_view(&key, g).is_some());
        assert!(cache.get_view(&("k".to_owned(), 1, false), g).is_none());
        cache.invalidate();
        assert!(cache.get_view(&key, cache.generation()).is_none());
        // Read before the write, kept after it: never served.
        cache.put_view(key.clone(), g, &view);
        assert!(cache.get_view(&key, cache.generation()).is_none());
    }

    #[test]
    fn a_write_drops_every_row() {
        let cache = MaterialCache::default();
        let g = cache.generation();
        cache.put(("k".to_owned(), None), g, &row(1));
        cache.invalidate();
        assert!(cache.get(&("k".to_owned(), None), g).is_none());
        assert_eq!(cache.rows.lock().unwrap().len(), 0);
    }

    #[test]
    fn the_newest_version_is_also_kept_by_its_number() {
        let cache = MaterialCache::default();
        let g = cache.generation();
        cache.put(("k".to_owned(), None), g, &row(3));
        assert_eq!(cache.get(&("k".to_owned(), Some(3)), g).map(|r| r.version.version), Some(3));
        assert!(cache.get(&("k".to_owned(), Some(2)), g).is_none());
    }

    #[test]
    fn rows_in_use_stay_while_rows_read_once_pass_through() {
        let cache = MaterialCache::default();
        let g = cache.generation();
        let hot: Vec<RowKey> = (0..1000).map(|i| (format!("hot{i}"), Some(1))).collect();
        for key in &hot {
            cache.put(key.clone(), g, &row(1));
        }
        // Ten cache's worth of keys read once, the keys in use read
        // between them.
        for i in 0..10 * MAX_ROWS {
            cache.put((format!("once{i}"), Some(1)), g, &row(1));
            if i % 1000 == 0 {
                for key in &hot {
                    assert!(cache.get(key, g).is_some(), "{key:?} dropped at {i}");
                }
            }
            assert!(cache.rows.lock().unwrap().len() <= MAX_ROWS);
        }
        assert!(cache.get(&("once0".to_owned(), Some(1)), g).is_none());
        assert!(format!("{cache:?}").contains("generation"));
    }
}
