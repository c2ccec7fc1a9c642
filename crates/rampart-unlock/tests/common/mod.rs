//! A key server started in-process on 127.0.0.1 (real TLS, a SQLite
//! store), its client bundles, and LUKS2 volumes in memory.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rampart_crypto::{HashAlg, SecretBytes};
use rampart_kms::client::KmsClient;
use rampart_kms::model::Labels;
use rampart_kms::testing::{TestDeployment, TestServer};
use rampart_luks::{FormatOptions, Luks, MemoryIo, PbkdfChoice};
use rampart_test_support::TempDir;
use rampart_unlock::{Error, Prompter};

/// The passphrase of every test volume's first keyslot.
pub const PASSPHRASE: &[u8] = b"correct horse";

/// A running key server with a key `vol` that the client `host` may use
/// and the client `stranger` may not.
pub struct KeyServer {
    // Dropped first: the server stops before its runtime and directory go.
    server: TestServer,
    runtime: tokio::runtime::Runtime,
    pub dir: TempDir,
}

impl KeyServer {
    pub fn start(tag: &str) -> Self {
        let dir = TempDir::new(tag);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let data_dir = dir.path().join("data");
        let server =
            runtime.block_on(TestServer::start(&data_dir, &TestDeployment::default(), |_| {}));
        let server = Self { server, runtime, dir };
        server.admin(|admin| async move {
            admin.create_key("vol", &["client:host".into()], false).await.unwrap();
        });
        server
    }

    /// Runs `call` with an admin client.
    pub fn admin<F: std::future::Future<Output = ()>>(&self, call: impl FnOnce(KmsClient) -> F) {
        let admin = KmsClient::new(&self.server.admin).unwrap();
        self.runtime.block_on(call(admin));
    }

    /// The bundle file of client `name`, issued on first use.
    pub fn bundle(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.bundle"));
        if path.exists() {
            return path;
        }
        let admin = KmsClient::new(&self.server.admin).unwrap();
        let endpoints = self.server.admin.endpoints.clone();
        let bundle = self
            .runtime
            .block_on(admin.issue_client(name, &Labels::default(), false, Some(7), endpoints))
            .unwrap();
        bundle.write(&path).unwrap();
        path
    }
}

/// The cheapest KDF: test volumes are not guarding anything.
pub fn fast_pbkdf() -> PbkdfChoice {
    rampart_test_support::fast_pbkdf2(HashAlg::Sha256)
}

/// A LUKS2 volume in memory whose keyslot 0 opens with [`PASSPHRASE`];
/// returns it with its volume key.
pub fn volume() -> (MemoryIo, Luks, SecretBytes) {
    volume_with_keyslots(1 << 20)
}

/// [`volume`] with a keyslots area of `size` bytes (room for more keyslots).
pub fn volume_with_keyslots(size: u64) -> (MemoryIo, Luks, SecretBytes) {
    let io = MemoryIo::new(usize::try_from(size).unwrap() + (3 << 20));
    let opts = FormatOptions {
        pbkdf: fast_pbkdf(),
        keyslots_size: Some(size),
        ..FormatOptions::default()
    };
    let (luks, key) = Luks::format(&io, &opts, PASSPHRASE).unwrap();
    (io, luks, key)
}

/// What a [`Prompter`] was asked, shared with the test that gave it away.
#[derive(Debug, Default)]
pub struct Asked {
    pub passphrases: usize,
    pub warnings: Vec<(PathBuf, String, bool)>,
}

/// A prompter that answers [`PASSPHRASE`] and records what it was asked.
#[derive(Debug, Clone, Default)]
pub struct Recorder(pub Rc<RefCell<Asked>>);

impl Prompter for Recorder {
    fn passphrase(&mut self) -> Result<SecretBytes, Error> {
        self.0.borrow_mut().passphrases += 1;
        Ok(SecretBytes::from_slice(PASSPHRASE))
    }

    fn token_failed(&mut self, volume: &Path, failure: Error) {
        let usage = failure.is_usage();
        self.0.borrow_mut().warnings.push((volume.to_owned(), failure.chain(), usage));
    }
}
