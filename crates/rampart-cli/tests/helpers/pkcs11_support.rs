#![allow(clippy::unwrap_used)]
//! What the PKCS#11 module's tests share: this build's
//! `librampart_pkcs11.so`, and a key manager with KMIP, a client bundle
//! and the module's configuration naming them ([`Pkcs11Setup`]).

use std::path::{Path, PathBuf};

use super::kms_support::{free_port, issue_client, ok, rampart_bin, ServerProcess, TempDir};

/// A turn at loading SoftHSM2 in this test process: one library state per
/// process, configured by `SOFTHSM2_CONF` when initialized.
pub fn softhsm_turn() -> std::sync::MutexGuard<'static, ()> {
    static LOADED: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOADED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The user PIN the test configurations set.
pub const PIN: &str = "1234";

/// This build's module (cargo names it `librampart_pkcs11.so`).
pub fn built_module() -> PathBuf {
    let bin_dir = Path::new(rampart_bin()).parent().unwrap().to_owned();
    ["", "deps"]
        .iter()
        .map(|sub| bin_dir.join(sub).join("librampart_pkcs11.so"))
        .filter(|path| path.is_file())
        .max_by_key(|path| std::fs::metadata(path).unwrap().modified().unwrap())
        .unwrap_or_else(|| {
            panic!(
                "the PKCS#11 module is not built in {bin_dir:?}: `cargo build --release \
                 --workspace` (scripts/test) builds it"
            )
        })
}

/// A key manager (SQLite, or PostgreSQL at `store`) with its KMIP front
/// end, one client bundle and the module's configuration file.
#[derive(Debug)]
pub struct Pkcs11Setup {
    pub dir: TempDir,
    pub server: ServerProcess,
    /// The administrator's bundle.
    pub admin: String,
    /// The client bundle the module's slot uses.
    pub bundle: String,
    /// The module's configuration file (`RAMPART_PKCS11_CONFIG`).
    pub config: PathBuf,
    pub module: PathBuf,
}

impl Pkcs11Setup {
    /// With a PIN ([`PIN`]) the token requires login.
    pub fn start(store: Option<&str>) -> Self {
        Self::start_servers(store, 1).0
    }

    /// Two key managers on one PostgreSQL database, the slot configured
    /// with both KMIP addresses (this setup's server first), and the
    /// second server.
    pub fn start_two_servers(store: &str) -> (Self, ServerProcess) {
        let (setup, mut more) = Self::start_servers(Some(store), 2);
        (setup, more.pop().unwrap())
    }

    fn start_servers(store: Option<&str>, count: usize) -> (Self, Vec<ServerProcess>) {
        let dir = TempDir::new("pkcs11");
        let data = dir.path().join("kms");
        let ports: Vec<u16> = (0..count).map(|_| free_port()).collect();
        let endpoints: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let data_str = data.to_str().unwrap().to_owned();
        let mut init = vec!["kms", "init", "--data-dir", &data_str];
        for endpoint in &endpoints {
            init.extend(["--endpoint", endpoint]);
        }
        if let Some(store) = store {
            init.extend(["--store", store]);
        }
        ok(&init);
        let mut servers: Vec<ServerProcess> = ports
            .iter()
            .map(|port| ServerProcess::start_kmip(&data, *port, free_port(), store))
            .collect();
        let admin = data.join("admin.bundle").to_str().unwrap().to_owned();
        let bundle = dir.path().join("app.bundle").to_str().unwrap().to_owned();
        issue_client(&admin, "app", "team=pkcs11", &bundle);
        let config = dir.path().join("pkcs11.conf");
        let kmip: Vec<&str> = servers.iter().map(|s| s.kmip.as_deref().unwrap()).collect();
        std::fs::write(
            &config,
            format!(
                "[slot]\nlabel = rampart\nbundle = {bundle}\nkmip = {}\npin = {PIN}\n",
                kmip.join(" ")
            ),
        )
        .unwrap();
        let server = servers.remove(0);
        (Self { dir, server, admin, bundle, config, module: built_module() }, servers)
    }

    /// `pkcs11-tool` with the module and this configuration.
    pub fn pkcs11_tool(&self) -> std::process::Command {
        let mut command = std::process::Command::new(super::common::tool("pkcs11-tool"));
        command.env("RAMPART_PKCS11_CONFIG", &self.config).arg("--module").arg(&self.module);
        command
    }
}
