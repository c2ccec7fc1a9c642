//! Scratch directories.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A unique, fresh directory under the system temp dir, removed on drop
/// (scratch volumes are large, so even when the test fails; set
/// `RAMPART_KEEP_TEST_DIRS=1` to keep them for inspection).
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new directory whose name starts with `tag`.
    #[must_use]
    pub fn new(tag: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        // Short names: Unix socket paths are limited to 107 bytes.
        let path =
            std::env::temp_dir().join(format!("rp-{tag}-{}-{n}-{nanos}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    #[must_use]
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path of `name` in the directory.
    #[must_use]
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `bytes` to a new file `name` and returns its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A sparse file of `size` bytes.
    pub fn sparse(&self, name: &str, size: u64) -> PathBuf {
        let path = self.join(name);
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(size).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("RAMPART_KEEP_TEST_DIRS").is_some() {
            eprintln!("kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
