//! The PostgreSQL cluster the key manager's tests run on.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-test-cluster")
}

/// A PostgreSQL cluster: `$RAMPART_TEST_PG_URL` when set (`scripts/test`
/// starts one), else (not under CI, where its absence fails the test) a
/// throwaway one from `scripts/pg-test-cluster`, stopped on drop.
#[derive(Debug)]
pub struct PgCluster {
    pub url: String,
    owned: bool,
}

impl PgCluster {
    #[must_use]
    pub fn get() -> Self {
        if let Ok(url) = std::env::var("RAMPART_TEST_PG_URL") {
            return Self { url, owned: false };
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "RAMPART_TEST_PG_URL is not set: under CI, scripts/test starts the PostgreSQL cluster"
        );
        let out = Command::new(script()).stderr(Stdio::inherit()).output().unwrap();
        assert!(out.status.success(), "scripts/pg-test-cluster failed");
        Self { url: String::from_utf8(out.stdout).unwrap().trim().to_owned(), owned: true }
    }

    /// A fresh database in the cluster whose name starts with `kms_{tag}`;
    /// returns its URL.
    #[must_use]
    pub fn database(&self, tag: &str) -> String {
        let name = format!("kms_{tag}_{}", unique_suffix());
        psql(&self.url, &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("CREATE DATABASE failed: {e}"));
        let (base, _) = self.url.rsplit_once('/').unwrap();
        format!("{base}/{name}")
    }

    /// A fast restart: every client connection is cut.
    pub fn restart(&self) {
        let out = Command::new(script()).args(["restart", &self.url]).output().unwrap();
        assert!(out.status.success(), "restart failed: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.owned {
            let _ = Command::new(script()).args(["stop", &self.url]).output();
        }
    }
}

/// Twelve random hex digits, so databases of test binaries sharing one
/// cluster never meet.
fn unique_suffix() -> String {
    use std::io::Read;
    let mut random = [0u8; 6];
    std::fs::File::open("/dev/urandom").unwrap().read_exact(&mut random).unwrap();
    random.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs SQL with psql; the unaligned output, or the error.
pub fn psql(url: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([url, "-qtA", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
