//! The clap arguments of `rampart kms ...`, converted once into the key
//! manager's typed settings by the commands in the parent module.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::duration::parse_duration;

/// `rampart kms` subcommands.
#[derive(Debug, Subcommand)]
pub enum KmsCommand {
    /// Create a deployment: root key, CA, server certificate, admin bundle.
    Init(InitArgs),
    /// Run a key server.
    Serve(ServeArgs),
    /// Give a sealed server one Shamir share, or its HSM token's PIN.
    Unseal(UnsealArgs),
    /// Show whether the server is sealed.
    Status(ClientArgs),
    /// Issue and list client bundles.
    #[command(subcommand)]
    Client(ClientCommand),
    /// Create, inspect and retire keys; wrap and unwrap data.
    #[command(subcommand)]
    Key(KeyCommand),
    /// List the audit log, or verify its hash chain.
    Audit(AuditArgs),
    /// Measure unwrap throughput and latency against a server.
    Bench(BenchArgs),
    /// Print a one-time link that signs this admin bundle's identity in to
    /// the web console (https://HOST:PORT/ui/): valid for 2 minutes, once.
    ConsoleLogin(ClientArgs),
    /// List or end web console sessions (kept in the server's memory: use
    /// a bundle whose first endpoint is the server in question).
    #[command(subcommand)]
    ConsoleSessions(ConsoleSessionsCommand),
    /// Fill a store at fleet scale (keys, clients, audit entries) without
    /// a server, written exactly as a server writes them, for benchmarks
    /// and sizing rehearsals.
    Populate(PopulateArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConsoleSessionsCommand {
    /// The open sessions, newest first, page by page as the server sends
    /// them.
    List {
        #[command(flatten)]
        paging: ListArgs,
        /// Print one JSON object per line instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// End a session: its browser is signed out at its next request.
    End {
        /// The session id (16 hex digits, as listed).
        #[arg(value_name = "ID")]
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

#[derive(Debug, Args)]
pub struct PopulateArgs {
    /// The deployment's data directory.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// `sqlite` (default: DIR/kms.db) or a postgres:// URL.
    #[arg(long, value_name = "STORE")]
    pub store: Option<String>,
    /// The unseal key file (default DIR/unseal.key).
    #[arg(long, value_name = "FILE")]
    pub unseal_key_file: Option<PathBuf>,
    /// Keys to create: PREFIX0000000, PREFIX0000001, ... (32-byte
    /// material, policy `label:role=host`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub keys: u64,
    /// Name prefix of the keys.
    #[arg(long, default_value = "key-", value_name = "PREFIX")]
    pub key_prefix: String,
    /// Clients to issue certificates to and register: PREFIX0000000, ...
    /// (label role=host, not admin, 365 days).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub clients: u64,
    /// Name prefix of the clients.
    #[arg(long, default_value = "host-", value_name = "PREFIX")]
    pub client_prefix: String,
    /// Audit entries to append to the chain (unwraps of the keys by the
    /// clients, one in a thousand denied, one millisecond apart up to now),
    /// hashed and MACed as the server does.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub audit: u64,
    /// Write the bundles of the first N clients into --bundle-dir (for
    /// `kms bench --bundles`).
    #[arg(long, default_value_t = 0, value_name = "N", requires = "bundle_dir")]
    pub bundles: u64,
    /// Where --bundles go (NAME.bundle; created if missing).
    #[arg(long, value_name = "DIR")]
    pub bundle_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A key this bundle may wrap and unwrap with; with --kmip, the KMIP
    /// Name of an AES-256 key (created over KMIP, Active, when no key has
    /// that name).
    #[arg(long, value_name = "NAME")]
    pub key: String,
    /// Load the KMIP front end instead of the REST API: the --operations
    /// (by default Get of the key and AES-256-GCM Encrypt of 64 bytes)
    /// over kept-open mTLS connections.
    #[arg(long)]
    pub kmip: bool,
    /// With --kmip: a server's KMIP address (repeatable; default: each
    /// endpoint host of the bundle on port 5696).
    #[arg(long = "kmip-address", value_name = "HOST:PORT", requires = "kmip")]
    pub kmip_addresses: Vec<String>,
    /// With --kmip: the TLS version offered (`1.2`, `1.3`, or `negotiated`:
    /// both, the server picks).
    #[arg(long, default_value = "negotiated", value_name = "VERSION", requires = "kmip")]
    pub tls: TlsArg,
    /// With --kmip: the operations to run, comma-separated: `get` and
    /// `encrypt` (AES-256-GCM of 64 bytes; `encrypt-4k`: of 4 KiB) of the
    /// key; `create-key-pair-rsa-2048` and
    /// `create-key-pair-ec-p256` (a new pair each time); `sign-ecdsa-p256`
    /// and `sign-rsa-2048-pss` (SHA-256, 64 bytes, by the pair NAME-ecdsa-p256
    /// or NAME-rsa-2048); `get-certificate` (of NAME-certificate). The pairs
    /// and the certificate are made before the runs when missing.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "get,encrypt",
        value_name = "OP",
        requires = "kmip"
    )]
    pub operations: Vec<KmipOperationArg>,
    /// Concurrent requests (comma-separated for several runs).
    #[arg(long, value_delimiter = ',', default_value = "1,16", value_name = "N")]
    pub concurrency: Vec<usize>,
    /// Seconds per run.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    pub seconds: f64,
    /// Unwrap under many keys: --key is then a name prefix and the keys
    /// are KEY0000000 to KEY(N-1), index padded to 7 digits (the names
    /// `kms populate` creates).
    #[arg(long, value_name = "N")]
    pub key_count: Option<u64>,
    /// With --key-count: how many of those keys, picked at random, get a
    /// secret wrapped under them before the runs; each request unwraps
    /// one of these secrets at random.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub sample: u64,
    /// Percent of requests that are heartbeats (POST /v1/heartbeat naming
    /// the key of the secret the host holds: host N holds secret N modulo
    /// the sample) instead of unwraps.
    #[arg(long, default_value_t = 0, value_name = "P")]
    pub heartbeat_percent: u32,
    /// Play many hosts: every DIR/*.bundle is a client identity with its
    /// own kept-alive connection; the concurrent tasks speak as these
    /// hosts in turn; the first of them wraps the secrets (no --kms
    /// needed).
    #[arg(long, value_name = "DIR")]
    pub bundles: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `kms bench --tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TlsArg {
    #[value(name = "1.2")]
    Tls12,
    #[value(name = "1.3")]
    Tls13,
    Negotiated,
}

/// `kms bench --operations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KmipOperationArg {
    Get,
    Encrypt,
    /// AES-256-GCM Encrypt of 4 KiB.
    #[value(name = "encrypt-4k")]
    Encrypt4k,
    #[value(name = "create-key-pair-rsa-2048")]
    CreateKeyPairRsa2048,
    #[value(name = "create-key-pair-ec-p256")]
    CreateKeyPairEcP256,
    #[value(name = "sign-ecdsa-p256")]
    SignEcdsaP256,
    #[value(name = "sign-rsa-2048-pss")]
    SignRsa2048Pss,
    GetCertificate,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The server's data directory (certificates, keys, the SQLite store).
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// `sqlite` (default: DIR/kms.db) or a postgres:// URL.
    #[arg(long, value_name = "STORE")]
    pub store: Option<String>,
    /// Split the root key into N Shamir shares (printed once, never stored).
    #[arg(
        long,
        value_name = "N",
        requires = "threshold",
        conflicts_with_all = ["unseal_key_file", "hsm_module"]
    )]
    pub shares: Option<u8>,
    /// Shares needed to unseal.
    #[arg(long, value_name = "K", requires = "shares")]
    pub threshold: Option<u8>,
    /// Write the root key here, mode 0600 (default DIR/unseal.key).
    #[arg(long, value_name = "FILE", conflicts_with = "hsm_module")]
    pub unseal_key_file: Option<PathBuf>,
    /// Generate the root key inside a PKCS#11 token instead, as a
    /// non-extractable AES-256 key: the token's module (shared library,
    /// e.g. /usr/lib/softhsm/libsofthsm2.so). Recorded in DIR/hsm.json.
    #[arg(long, value_name = "LIB", requires_all = ["hsm_token", "hsm_pin_file"])]
    pub hsm_module: Option<PathBuf>,
    /// The label of the token that generates and keeps the root key.
    #[arg(long, value_name = "LABEL", requires = "hsm_module")]
    pub hsm_token: Option<String>,
    /// A file whose first line is the token's user PIN.
    #[arg(long, value_name = "FILE", requires = "hsm_module")]
    pub hsm_pin_file: Option<PathBuf>,
    /// Extra DNS names or IP addresses for the server certificate (repeatable).
    #[arg(long, value_name = "NAME")]
    pub san: Vec<String>,
    /// Server endpoints written into bundles, HOST:PORT (repeatable; default 127.0.0.1:8443).
    #[arg(long, value_name = "HOST:PORT")]
    pub endpoint: Vec<String>,
    /// Validity of the server and admin certificates in days.
    #[arg(long, default_value_t = 825, value_name = "DAYS")]
    pub days: u32,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The server's data directory (certificates, keys, the SQLite store).
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8443", value_name = "HOST:PORT")]
    pub listen: String,
    /// Also serve KMIP (binary TTLV over TLS 1.2/1.3 with the same client
    /// certificates, policies and audit log as the REST API) on this
    /// address; 5696 is the standard KMIP port (`127.0.0.1:5696`). Off
    /// unless given.
    #[arg(long, value_name = "HOST:PORT")]
    pub kmip_listen: Option<String>,
    /// Answer the KMIP Interop operation (Begin, End, Reset of an interop
    /// test, audited), which the KMIP specification forbids on a
    /// production server: for interoperability test runs only. Off unless
    /// given.
    #[arg(long)]
    pub kmip_interop: bool,
    /// `sqlite` (default: DIR/kms.db) or a postgres:// URL.
    #[arg(long, value_name = "STORE")]
    pub store: Option<String>,
    /// The unseal key file (default DIR/unseal.key) for deployments without shares.
    #[arg(long, value_name = "FILE")]
    pub unseal_key_file: Option<PathBuf>,
    /// With the root key in an HSM: a file whose first line is the
    /// token's user PIN, to unseal at start (default: the systemd
    /// credential `hsm-pin` when present). Without it the server starts
    /// sealed until `rampart kms unseal` gives the PIN.
    #[arg(long, value_name = "FILE")]
    pub hsm_pin_file: Option<PathBuf>,
    /// TLS connections served at once; further ones are closed at once.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub max_connections: usize,
    /// Time from connecting to the end of the TLS handshake; a client that
    /// sends nothing or stalls mid-handshake is dropped.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "TIME")]
    pub handshake_timeout: std::time::Duration,
    /// Time a kept-alive connection may wait for its next request (and a
    /// request for its headers, and a response for its client to read it).
    #[arg(long, value_parser = parse_duration, default_value = "60s", value_name = "TIME")]
    pub idle_timeout: std::time::Duration,
    /// Average requests per second per client certificate; beyond it
    /// (after --rate-burst), HTTP 429 with Retry-After. 0: no limit.
    #[arg(long, default_value_t = 1000.0, value_name = "PER_SECOND")]
    pub rate_limit: f64,
    /// Requests a client certificate may make at once above --rate-limit.
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub rate_burst: u32,
    /// Largest request line and headers in bytes (HTTP 431 beyond).
    #[arg(long, value_parser = crate::size::parse_size, default_value = "16K", value_name = "SIZE")]
    pub max_header_size: u64,
    /// Most header fields in one request (HTTP 431 beyond).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_headers: usize,
    /// Verify the audit chain and write a MACed checkpoint of its head
    /// after this many new entries (0: only on --audit-checkpoint-interval).
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub audit_checkpoint_entries: u64,
    /// ... and at least this often while entries are appended.
    #[arg(long, value_parser = parse_duration, default_value = "5m", value_name = "TIME")]
    pub audit_checkpoint_interval: std::time::Duration,
    /// Also append every chained audit entry to FILE as a JSON line
    /// (reopened on SIGHUP, for logrotate).
    #[arg(long, value_name = "FILE")]
    pub audit_file: Option<PathBuf>,
    /// Rotate --audit-file (renamed FILE.SEQ after its last entry) before
    /// it grows past SIZE.
    #[arg(long, value_parser = crate::size::parse_size, value_name = "SIZE", requires = "audit_file")]
    pub audit_file_max_size: Option<u64>,
    /// fdatasync --audit-file after each batch of entries (the store holds
    /// them durably either way).
    #[arg(long, requires = "audit_file")]
    pub audit_file_fsync: bool,
    /// Also send every chained audit entry to syslog/journald (facility
    /// authpriv) through the local socket /dev/log.
    #[arg(long)]
    pub audit_syslog: bool,
    /// The syslog socket for --audit-syslog.
    #[arg(long, value_name = "PATH", default_value = rampart_kms::server::SYSLOG_SOCKET)]
    pub audit_syslog_socket: PathBuf,
}

#[derive(Debug, Args)]
pub struct ClientArgs {
    /// The client bundle (default: $RAMPART_KMS).
    #[arg(long = "kms", value_name = "BUNDLE", env = "RAMPART_KMS", hide_env = true)]
    pub bundle: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct UnsealArgs {
    /// The share (hex); without it, a prompt or one line of standard input
    /// (the token's PIN when the root key is in an HSM).
    #[arg(long, value_name = "SHARE", conflicts_with = "hsm_pin_file")]
    pub share: Option<String>,
    /// The HSM token's user PIN from this file's first line (deployments
    /// whose root key is in an HSM).
    #[arg(long, value_name = "FILE")]
    pub hsm_pin_file: Option<PathBuf>,
    /// Talk to this server only (each server of a deployment unseals separately).
    #[arg(long, value_name = "HOST:PORT")]
    pub endpoint: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Issue a bundle for a new client (needs an admin bundle).
    Issue {
        /// The client name (its certificate subject).
        #[arg(value_name = "NAME")]
        name: String,
        /// Labels, KEY=VALUE[,KEY=VALUE...].
        #[arg(long, value_name = "K=V,..", default_value = "")]
        labels: String,
        /// The new client may administer the server.
        #[arg(long)]
        admin: bool,
        /// Where to write the bundle (mode 0600).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Certificate validity in days.
        #[arg(long, value_name = "DAYS")]
        days: Option<u32>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List registered clients in name order, page by page as the
    /// server sends them.
    List {
        /// Only clients whose name starts with this.
        #[arg(long, value_name = "TEXT")]
        prefix: Option<String>,
        /// Only clients carrying this label.
        #[arg(long, value_name = "KEY=VALUE")]
        label: Option<String>,
        /// Only admin clients (true) or only the others (false).
        #[arg(long, value_name = "true|false")]
        admin: Option<bool>,
        /// Only revoked clients (true) or only the others (false).
        #[arg(long, value_name = "true|false")]
        revoked: Option<bool>,
        #[command(flatten)]
        paging: ListArgs,
        /// Print one JSON object per line instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Revoke a client: its certificate is refused at every later TLS
    /// handshake, request and heartbeat (hosts serving volumes with it
    /// close them); audited. Irreversible: issue a new bundle instead.
    Revoke {
        /// The client name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Why (recorded in the audit log).
        #[arg(long, value_name = "TEXT", default_value = "revoked by an administrator")]
        reason: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Write a bundle's certificate, private key and CA certificate as PEM
    /// files (cert.pem, key.pem mode 0600, ca.pem) for a KMIP client
    /// (vSphere, MySQL keyring_kmip, MongoDB, PyKMIP) or any TLS client.
    Pem {
        /// The directory to write the three files into (created if absent).
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Replace a client's labels (key policies select clients by label:
    /// relabelling moves a host in or out of keys' allow rules at once).
    Relabel {
        /// The client name.
        #[arg(value_name = "NAME")]
        name: String,
        /// The new labels, KEY=VALUE[,KEY=VALUE...] ("" for none).
        #[arg(long, value_name = "K=V,..")]
        labels: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create a key
    ///
    /// An AES-256 key (the default type), or with --type a signing key pair: NAME, the private
    /// key, and NAME.pub, its public key.
    Create {
        /// The key name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Who may use the key (wrap/unwrap/export, or sign/verify): client:NAME or label:KEY=VALUE (repeatable).
        #[arg(long, value_name = "SELECTOR")]
        allow: Vec<String>,
        /// Allow `key export` of the raw material (a private key's as PKCS#8).
        #[arg(long)]
        exportable: bool,
        /// The key type: aes-256 (wrap/unwrap), or a signing key pair.
        #[arg(long = "type", value_name = "TYPE", default_value = "aes-256")]
        key_type: KeyTypeArg,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List keys in name order, page by page as the server sends them.
    List {
        /// Only keys whose name starts with this.
        #[arg(long, value_name = "TEXT")]
        prefix: Option<String>,
        /// Only keys whose newest version is in this state.
        #[arg(long, value_name = "STATE")]
        state: Option<KeyStateArg>,
        /// Only keys whose policy holds this selector (client:NAME or label:KEY=VALUE).
        #[arg(long, value_name = "SELECTOR")]
        selector: Option<String>,
        #[command(flatten)]
        paging: ListArgs,
        /// Print one JSON object per line instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show a key and its versions.
    Show {
        /// The key name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Add a new version: new wraps use it, old versions still unwrap.
    Rotate {
        /// The key name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Revoke a key (or one version): no more wrap or unwrap.
    // Its `--version N` names a key version: no `--version` of the program here.
    #[command(disable_version_flag = true)]
    Revoke {
        /// The key name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Why (recorded in the audit log).
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Only this version.
        #[arg(long, value_name = "N")]
        version: Option<u32>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Erase a key's material (or one version's), irreversibly.
    // Its `--version N` names a key version: no `--version` of the program here.
    #[command(disable_version_flag = true)]
    Destroy {
        /// The key name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Only this version.
        #[arg(long, value_name = "N")]
        version: Option<u32>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Encrypt FILE (or standard input, at most 64 KiB) under the key; prints the ciphertext.
    Wrap {
        /// The key name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Read the input from FILE instead of standard input.
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        /// Context bound to the ciphertext; unwrap must give the same.
        #[arg(long, value_name = "TEXT", default_value = "")]
        context: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Decrypt a ciphertext (argument, --in FILE, or standard input) to standard output or --out.
    Unwrap {
        /// The ciphertext (`rampart:v1:...`); default: --in FILE or standard input.
        #[arg(value_name = "CIPHERTEXT")]
        ciphertext: Option<String>,
        /// Read the input from FILE instead of standard input.
        #[arg(long = "in", value_name = "FILE", conflicts_with = "ciphertext")]
        input: Option<PathBuf>,
        /// Context given at wrap time.
        #[arg(long, value_name = "TEXT", default_value = "")]
        context: String,
        /// Write the plaintext here (mode 0600) instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Sign standard input (or --in FILE) with a private key; prints the signature (base64).
    Sign {
        /// The private key's name.
        #[arg(value_name = "NAME")]
        name: String,
        /// The signature algorithm (default: ECDSA with the curve's hash, RSA-PSS with SHA-256, Ed25519).
        #[arg(long, value_name = "ALGORITHM")]
        algorithm: Option<SignatureAlgorithmArg>,
        /// The input is the message's digest (raw bytes, e.g. `openssl dgst -sha256 -binary`), not the message.
        #[arg(long)]
        digest: bool,
        /// Read the input from FILE instead of standard input (at most 128 KiB).
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        /// Write the signature's raw bytes instead of base64.
        #[arg(long, conflicts_with = "json")]
        raw: bool,
        /// Print the server's JSON answer (key, version, algorithm, signature).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Check a signature of standard input (or --in FILE); exits 1 when it does not verify.
    Verify {
        /// The public key's name, or its private key's (whose linked public key is used).
        #[arg(value_name = "NAME")]
        name: String,
        /// The signature: a file (raw bytes or base64), or base64 text.
        #[arg(long, value_name = "FILE|BASE64")]
        signature: String,
        /// The signature algorithm (default: as `key sign`).
        #[arg(long, value_name = "ALGORITHM")]
        algorithm: Option<SignatureAlgorithmArg>,
        /// The input is the message's digest (raw bytes), not the message.
        #[arg(long)]
        digest: bool,
        /// Read the input from FILE instead of standard input (at most 128 KiB).
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        /// Print the server's JSON answer (valid: true or false) instead of a line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Print the public key (PEM) of a key pair or a certificate.
    Public {
        /// The key's name (a private key, its public key, or a certificate).
        #[arg(value_name = "NAME")]
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Register an X.509 certificate (PEM or DER) as a key object of type certificate.
    ImportCertificate {
        /// The certificate's name (default: the server draws one, cert-HEX).
        #[arg(value_name = "NAME")]
        name: Option<String>,
        /// Read the certificate from FILE instead of standard input.
        #[arg(long = "in", value_name = "FILE")]
        input: Option<PathBuf>,
        /// Who may read it back besides admins: client:NAME or label:KEY=VALUE (repeatable).
        #[arg(long, value_name = "SELECTOR")]
        allow: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Print a registered certificate (PEM), or with --json its subject, issuer and expiry too.
    Certificate {
        /// The certificate's name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Print JSON instead of the PEM.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Write the raw material of an exportable key (hex) to standard output or --out.
    // Its `--version N` names a key version: no `--version` of the program here.
    #[command(disable_version_flag = true)]
    Export {
        /// The key name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Only this version.
        #[arg(long, value_name = "N")]
        version: Option<u32>,
        /// Write to FILE (mode 0600) instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[command(flatten)]
        client: ClientArgs,
    },
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub verify: Option<AuditCommand>,
    /// Only entries at or after this time (RFC 3339, or Unix seconds).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only entries before this time (RFC 3339, or Unix seconds).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only entries of this client (its name, or cert:FINGERPRINT-PREFIX).
    #[arg(long = "by", value_name = "CLIENT")]
    pub by: Option<String>,
    /// Only entries about this key.
    #[arg(long, value_name = "NAME")]
    pub key: Option<String>,
    /// Only entries of this operation (key.unwrap, client.issue...).
    #[arg(long, value_name = "OP")]
    pub operation: Option<String>,
    /// Only entries with this outcome.
    #[arg(long, value_name = "OUTCOME")]
    pub outcome: Option<OutcomeArg>,
    #[command(flatten)]
    pub paging: ListArgs,
    /// Print one JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain: detects edited, removed and reordered entries.
    /// By default the server walks the whole log from the anchor (or the
    /// first entry); --from-checkpoint only what follows the last
    /// checkpoint; --file checks an exported archive here, offline.
    Verify {
        /// Walk only the entries after the server's last checkpoint (the
        /// checkpoint's MAC is checked first; a tampered one fails).
        #[arg(long, conflicts_with = "file")]
        from_checkpoint: bool,
        /// Check an archive written by `audit export`, offline: hash links,
        /// sequence numbers and the range its header names (MACs too with
        /// --unseal-key-file).
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// With --file: the deployment's unseal key file, to check every
        /// entry's MAC as well (deployments unsealed with a key file).
        #[arg(long, value_name = "KEYFILE", requires = "file")]
        unseal_key_file: Option<PathBuf>,
        /// With --file: the hash the archive must start from (the head of
        /// the archive before it, or the anchor `verify` reported).
        #[arg(long, value_name = "HASH", requires = "file")]
        anchor: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Archive the entries from the anchor (the first entry not yet pruned)
    /// up to --until as JSON lines: a header with the anchor, then each
    /// entry with its link, hash and MAC. The export is recorded on the
    /// server once the file is safely written; `audit prune` needs one.
    Export {
        /// The last entry: a sequence number, or a time (RFC 3339) for the
        /// newest entry stamped at or before it.
        #[arg(long, value_name = "SEQ|TIME")]
        until: String,
        /// The archive to write (must not exist; written to FILE.partial,
        /// synced, then renamed).
        #[arg(short = 'o', long = "out", value_name = "FILE")]
        out: PathBuf,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Remove the entries up to --until from the store, keeping their last
    /// hash as the anchor the rest links to. Refused unless an export
    /// covers them and they verify.
    Prune {
        /// The last entry to remove.
        #[arg(long, value_name = "SEQ")]
        until: u64,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// `kms key create --type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeyTypeArg {
    /// An AES-256 key (wrap, unwrap, export).
    #[value(name = "aes-256")]
    Aes256,
    /// An RSA key pair of 2048 bits.
    #[value(name = "rsa-2048")]
    Rsa2048,
    /// An RSA key pair of 3072 bits.
    #[value(name = "rsa-3072")]
    Rsa3072,
    /// An RSA key pair of 4096 bits.
    #[value(name = "rsa-4096")]
    Rsa4096,
    /// An EC key pair on P-256.
    #[value(name = "ec-p256")]
    EcP256,
    /// An EC key pair on P-384.
    #[value(name = "ec-p384")]
    EcP384,
    /// An EC key pair on P-521.
    #[value(name = "ec-p521")]
    EcP521,
    /// An Ed25519 key pair.
    #[value(name = "ed25519")]
    Ed25519,
}

/// `kms key sign --algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SignatureAlgorithmArg {
    /// ECDSA with SHA-256.
    #[value(name = "ecdsa-sha256")]
    EcdsaSha256,
    /// ECDSA with SHA-384.
    #[value(name = "ecdsa-sha384")]
    EcdsaSha384,
    /// ECDSA with SHA-512.
    #[value(name = "ecdsa-sha512")]
    EcdsaSha512,
    /// RSASSA-PSS with SHA-256 (MGF1 SHA-256, salt of the hash's length).
    #[value(name = "rsa-pss-sha256")]
    RsaPssSha256,
    /// RSASSA-PSS with SHA-384.
    #[value(name = "rsa-pss-sha384")]
    RsaPssSha384,
    /// RSASSA-PSS with SHA-512.
    #[value(name = "rsa-pss-sha512")]
    RsaPssSha512,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    #[value(name = "rsa-pkcs1-sha256")]
    RsaPkcs1Sha256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    #[value(name = "rsa-pkcs1-sha384")]
    RsaPkcs1Sha384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    #[value(name = "rsa-pkcs1-sha512")]
    RsaPkcs1Sha512,
    /// Ed25519 (of the message only).
    #[value(name = "ed25519")]
    Ed25519,
}

/// `kms key list --state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeyStateArg {
    Active,
    Revoked,
    Destroyed,
}

/// `kms audit --outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutcomeArg {
    Ok,
    Denied,
    Invalid,
    Unavailable,
    Error,
}

/// How a list command pages through the server's list.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print at most N items (default: all of them).
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Items asked for per request.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub page_size: u32,
}
