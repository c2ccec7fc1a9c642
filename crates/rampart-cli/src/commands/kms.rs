//! `rampart kms ...`: the key management server and its clients.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use rampart_crypto::SecretBytes;
use rampart_kms::client::{AuditQuery, ClientError, ClientQuery, KeyQuery, KmsClient, Page};
use rampart_kms::deployment::{self, files, InitOptions, InitSeal};
use rampart_kms::model::{format_time, parse_time, KeyInfo, Labels};
use rampart_kms::server::{AuditOptions, Limits, Server, ServerOptions, SinkOptions};
use rampart_kms::{Bundle, KmsError};

use crate::duration::parse_duration;
pub(crate) use crate::errors::map_client;
use crate::passphrase::Source;
use crate::UsageError;

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
    /// Load the KMIP front end instead of the REST API: Get of the key and
    /// AES-256-GCM Encrypt of 64 bytes over kept-open mTLS connections.
    #[arg(long)]
    pub kmip: bool,
    /// With --kmip: a server's KMIP address (repeatable; default: each
    /// endpoint host of the bundle on port 5696).
    #[arg(long = "kmip-address", value_name = "HOST:PORT", requires = "kmip")]
    pub kmip_addresses: Vec<String>,
    /// With --kmip: the TLS version offered (`1.2`, `1.3`, or `negotiated`:
    /// both, the server picks).
    #[arg(long, default_value = "negotiated", value_name = "VERSION", requires = "kmip")]
    pub tls: String,
    /// With --kmip: the operations to run (comma-separated: `get`,
    /// `encrypt`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "get,encrypt",
        value_name = "OP",
        requires = "kmip"
    )]
    pub operations: Vec<String>,
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
    #[arg(long = "kms", value_name = "BUNDLE")]
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
    /// Create a key.
    Create {
        /// The key name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Who may wrap/unwrap/export: client:NAME or label:KEY=VALUE (repeatable).
        #[arg(long, value_name = "SELECTOR")]
        allow: Vec<String>,
        /// Allow `key export` of the raw material.
        #[arg(long)]
        exportable: bool,
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
        #[arg(long, value_name = "STATE", value_parser = ["active", "revoked", "destroyed"])]
        state: Option<String>,
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
    #[arg(long, value_name = "OUTCOME", value_parser = ["ok", "denied", "invalid", "unavailable", "error"])]
    pub outcome: Option<String>,
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

/// Walks a list page by page, handing each item to `emit` as its page
/// arrives: one page in memory at a time, whatever the list's length. A
/// reader that stops reading (`| head`) ends the walk quietly.
async fn walk<T, F, Fut>(
    paging: &ListArgs,
    mut fetch: F,
    mut emit: impl FnMut(&mut dyn Write, &T) -> std::io::Result<()>,
) -> anyhow::Result<()>
where
    F: FnMut(u32, Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Page<T>, ClientError>>,
{
    let mut out = std::io::stdout().lock();
    let mut printed = 0u64;
    let mut cursor = None;
    loop {
        let want = match paging.limit {
            Some(total) => {
                u32::try_from(total.saturating_sub(printed).min(u64::from(paging.page_size)))
                    .unwrap_or(paging.page_size)
            }
            None => paging.page_size,
        };
        if want == 0 {
            return Ok(());
        }
        let page = fetch(want, cursor.take()).await.map_err(map_client)?;
        // A reader that went away (`| head`) ends the command quietly in main.
        page.items.iter().try_for_each(|item| emit(&mut out, item)).and_then(|()| out.flush())?;
        printed += page.items.len() as u64;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}

fn json_line(out: &mut dyn Write, value: &impl serde::Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("rampart-kms")
        .build()
        .context("cannot start the I/O runtime")
}

/// (Also for the client crate's errors: bundles, names.)
fn map_kms(error: impl Into<KmsError>) -> anyhow::Error {
    let error = error.into();
    match error {
        KmsError::Config(_)
        | KmsError::InvalidRequest(_)
        | KmsError::Conflict(_)
        | KmsError::UnsealFailed(_) => UsageError(error.to_string()).into(),
        other => anyhow::Error::new(other),
    }
}

/// A listener's error, naming the flag that sets its address.
fn naming_flag(error: KmsError, flag: &str) -> KmsError {
    match error {
        KmsError::Config(message) => KmsError::Config(format!("{message} (change it with {flag})")),
        other => other,
    }
}

/// The client bundle's path: `--kms BUNDLE`, else `$RAMPART_KMS`, else none.
pub(crate) fn bundle_path(args: &ClientArgs) -> Option<PathBuf> {
    args.bundle.clone().or_else(|| std::env::var_os("RAMPART_KMS").map(PathBuf::from))
}

/// Writes `bytes` to a new or truncated file created with `mode` (the
/// mode is set before any byte is written, so a key is never readable by
/// others, even briefly).
fn write_file_mode(path: &std::path::Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    file.write_all(bytes)?;
    file.sync_all()
}

pub(crate) fn load_bundle(args: &ClientArgs) -> anyhow::Result<Bundle> {
    let path = bundle_path(args).ok_or_else(|| {
        UsageError("no client bundle: give --kms BUNDLE or set RAMPART_KMS".into())
    })?;
    Bundle::read(&path).map_err(map_kms)
}

pub(crate) fn connect(args: &ClientArgs) -> anyhow::Result<KmsClient> {
    KmsClient::new(&load_bundle(args)?).map_err(map_client)
}

pub fn run(command: &KmsCommand) -> anyhow::Result<()> {
    match command {
        KmsCommand::Init(args) => init(args),
        KmsCommand::Serve(args) => serve(args),
        KmsCommand::Unseal(args) => unseal(args),
        KmsCommand::Status(args) => {
            let client = connect(args)?;
            let status = runtime()?.block_on(client.seal_status()).map_err(map_client)?;
            outln!("{}", serde_json::to_string_pretty(&status)?)?;
            Ok(())
        }
        KmsCommand::Client(command) => client_command(command),
        KmsCommand::Key(command) => key_command(command),
        KmsCommand::Audit(args) => audit(args),
        KmsCommand::Bench(args) => bench(args),
        KmsCommand::Populate(args) => populate(args),
        KmsCommand::ConsoleLogin(args) => console_login(args),
        KmsCommand::ConsoleSessions(command) => console_sessions(command),
    }
}

fn console_login(args: &ClientArgs) -> anyhow::Result<()> {
    let bundle = load_bundle(args)?;
    let kms = KmsClient::new(&bundle).map_err(map_client)?;
    let code = runtime()?.block_on(kms.console_login_code()).map_err(map_client)?;
    let url = match code.url {
        Some(url) => url,
        None => {
            let endpoint = bundle.endpoints().map_err(map_kms)?;
            format!("{}{}", endpoint[0].url(), code.path)
        }
    };
    outln!("{url}")?;
    eprintln!(
        "rampart: open this link in a browser before {} (it works once); the session is audited as {}",
        format_time(code.expires_ms),
        bundle.name
    );
    Ok(())
}

fn console_sessions(command: &ConsoleSessionsCommand) -> anyhow::Result<()> {
    match command {
        ConsoleSessionsCommand::List { paging, json, client } => {
            let kms = connect(client)?;
            if !*json {
                outln!(
                    "{:<16} {:<24} {:<22} {:<25} {:<25}",
                    "ID",
                    "ADMIN",
                    "FROM",
                    "SIGNED IN",
                    "LAST REQUEST"
                )?;
            }
            let fetch = |limit: u32, cursor: Option<String>| {
                let kms = &kms;
                async move { kms.console_session_page(Some(limit), cursor.as_deref()).await }
            };
            runtime()?.block_on(walk(paging, fetch, |out, s: &serde_json::Value| {
                if *json {
                    return json_line(out, s);
                }
                let time = |field: &str| format_time(s[field].as_i64().unwrap_or_default());
                writeln!(
                    out,
                    "{:<16} {:<24} {:<22} {:<25} {:<25}",
                    s["id"].as_str().unwrap_or_default(),
                    s["admin"].as_str().unwrap_or_default(),
                    s["peer"].as_str().unwrap_or_default(),
                    time("created_ms"),
                    time("last_ms")
                )
            }))
        }
        ConsoleSessionsCommand::End { id, client } => {
            let kms = connect(client)?;
            runtime()?.block_on(kms.end_console_session(id)).map_err(map_client)?;
            outln!("console session {id} ended")?;
            Ok(())
        }
    }
}

fn init(args: &InitArgs) -> anyhow::Result<()> {
    let seal = match (args.shares, args.threshold, &args.hsm_module) {
        (Some(shares), Some(threshold), _) => InitSeal::Shamir { shares, threshold },
        (_, _, Some(module)) => match (&args.hsm_token, &args.hsm_pin_file) {
            (Some(token), Some(pin_file)) => InitSeal::Hsm {
                module: module.clone(),
                token: token.clone(),
                pin_file: pin_file.clone(),
            },
            _ => {
                return Err(
                    UsageError("--hsm-module needs --hsm-token and --hsm-pin-file".into()).into()
                )
            }
        },
        _ => InitSeal::File(
            args.unseal_key_file.clone().unwrap_or_else(|| args.data_dir.join(files::UNSEAL_KEY)),
        ),
    };
    let opts = InitOptions {
        data_dir: args.data_dir.clone(),
        seal,
        sans: args.san.clone(),
        endpoints: args.endpoint.clone(),
        days: i64::from(args.days.clamp(1, 3650)),
    };
    let outcome = runtime()?.block_on(async {
        // The directory will hold private keys: owner only.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&args.data_dir)
            .with_context(|| format!("cannot create {}", args.data_dir.display()))?;
        let store = rampart_kms::store::open(args.store.as_deref(), &args.data_dir)
            .await
            .map_err(map_kms)?;
        deployment::init(&opts, store.as_ref()).await.map_err(map_kms)
    })?;
    eprintln!("rampart: admin bundle written to {}", outcome.admin_bundle.display());
    if let Some(path) = &outcome.unseal_key_file {
        eprintln!(
            "rampart: unseal key written to {} (mode 0600); servers unseal with it at start",
            path.display()
        );
    }
    if let Some(hsm) = &outcome.hsm {
        eprintln!(
            "rampart: root key generated in HSM token '{}' as '{}' (sensitive, never extractable); module and token recorded in {}",
            hsm.token,
            hsm.key_label,
            args.data_dir.join(files::HSM_CONFIG).display()
        );
        eprintln!(
            "rampart: servers unseal by logging in to the token: `kms serve --hsm-pin-file FILE`, or `rampart kms unseal`"
        );
    }
    if !outcome.shares.is_empty() {
        eprintln!(
            "rampart: the root key is split into {} shares; give each to a different person. They are shown only now:",
            outcome.shares.len()
        );
        let mut out = std::io::stdout().lock();
        for share in &outcome.shares {
            let text = share.to_hex();
            out.write_all(text.expose())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
    Ok(())
}

fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    // Two arenas hold the allocations of every thread: the blocking pool's
    // threads come and go, and each new arena kept what its threads freed.
    if !rampart_crypto::limit_malloc_arenas(2) {
        tracing::debug!("this C library does not limit its malloc arenas");
    }
    // Every request handles keys and plaintexts: lock the whole process
    // once rather than each secret (two system calls apiece).
    if !rampart_crypto::lock_all_memory() {
        tracing::warn!(
            "cannot lock the server's memory (RLIMIT_MEMLOCK); secrets are locked one by one"
        );
    }
    runtime()?.block_on(async {
        let store = rampart_kms::store::open(args.store.as_deref(), &args.data_dir)
            .await
            .map_err(map_kms)?;
        let opts = ServerOptions {
            data_dir: args.data_dir.clone(),
            unseal_key_file: args.unseal_key_file.clone(),
            hsm_pin_file: args.hsm_pin_file.clone().or_else(systemd_pin_credential),
            limits: Limits {
                max_connections: args.max_connections,
                handshake_timeout: args.handshake_timeout,
                idle_timeout: args.idle_timeout,
                rate: args.rate_limit,
                burst: args.rate_burst,
                max_header_bytes: usize::try_from(args.max_header_size).unwrap_or(usize::MAX),
                max_headers: args.max_headers,
            },
            audit: AuditOptions {
                checkpoint_entries: args.audit_checkpoint_entries,
                checkpoint_interval: args.audit_checkpoint_interval,
                sinks: SinkOptions {
                    file: args.audit_file.clone(),
                    file_max_bytes: args.audit_file_max_size,
                    file_fsync: args.audit_file_fsync,
                    syslog: args.audit_syslog.then(|| args.audit_syslog_socket.clone()),
                },
            },
        };
        if args.audit_checkpoint_interval.is_zero() {
            return Err(UsageError("--audit-checkpoint-interval must be more than 0".into()).into());
        }
        opts.limits.validate().map_err(|e| UsageError(format!("kms serve: {e}")))?;
        let server = Server::new(&opts, store).await.map_err(map_kms)?;
        // A busy address names the flag that moves it.
        let listener = rampart_kms::server::bind(&args.listen)
            .await
            .map_err(|e| map_kms(naming_flag(e, "--listen")))?;
        let address = listener.local_addr().context("cannot read the listening address")?;
        let kmip = match &args.kmip_listen {
            None => None,
            Some(spec) => Some(
                rampart_kms::server::bind(spec)
                    .await
                    .map_err(|e| map_kms(naming_flag(e, "--kmip-listen")))?,
            ),
        };
        let kmip_address = kmip
            .as_ref()
            .map(|l| l.local_addr().context("cannot read the KMIP listening address"))
            .transpose()?;
        {
            // The first line stays the REST URL (scripts read it); the
            // KMIP address follows when KMIP is on.
            let mut out = std::io::stdout().lock();
            writeln!(out, "https://{address}")?;
            if let Some(kmip) = kmip_address {
                writeln!(out, "kmip://{kmip}")?;
            }
            out.flush()?;
        }
        let state = if server.is_sealed() {
            "sealed: waiting for `rampart kms unseal`"
        } else {
            "unsealed"
        };
        let kmip_note = kmip_address.map(|a| format!(", KMIP on {a}")).unwrap_or_default();
        tracing::info!("key server on https://{address}{kmip_note} ({state})");
        crate::notify::ready(&format!("serving on https://{address}{kmip_note} ({state})"));
        if let Ok(mut hangups) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            let server = server.clone();
            tokio::spawn(async move {
                while hangups.recv().await.is_some() {
                    tracing::info!("SIGHUP: reopening the audit file");
                    server.reopen_audit_file();
                }
            });
        }
        match kmip {
            None => server.run(listener, shutdown_signal()).await.map_err(map_kms),
            Some(kmip) => {
                // One signal stops both front ends.
                let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
                let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
                    let _ = rx.wait_for(|s| *s).await;
                };
                let rest = server.run(listener, stopped(stop_rx.clone()));
                let kmip = server.run_kmip(kmip, stopped(stop_rx));
                let signal = async {
                    shutdown_signal().await;
                    let _ = stop_tx.send(true);
                };
                let (rest, kmip, ()) = tokio::join!(rest, kmip, signal);
                rest.and(kmip).map_err(map_kms)
            }
        }
    })
}

/// The PIN systemd hands the service (`LoadCredential=hsm-pin:...`).
fn systemd_pin_credential() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("CREDENTIALS_DIRECTORY")?).join("hsm-pin");
    path.is_file().then_some(path)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    tokio::select! {
        _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
        _ = async { match int.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
    }
}

fn unseal(args: &UnsealArgs) -> anyhow::Result<()> {
    let bundle = load_bundle(&args.client)?;
    let client = match &args.endpoint {
        Some(endpoint) => KmsClient::for_endpoint(&bundle, endpoint),
        None => KmsClient::new(&bundle),
    }
    .map_err(map_client)?;
    let runtime = runtime()?;
    let status = if let Some(path) = &args.hsm_pin_file {
        let pin = rampart_kms::hsm::read_pin_file(path).map_err(map_kms)?;
        runtime.block_on(client.unseal_pin(&pin)).map_err(map_client)?
    } else if let Some(text) = &args.share {
        let share = SecretBytes::from_slice(text.as_bytes());
        runtime.block_on(client.unseal(&share)).map_err(map_client)?
    } else {
        let status = runtime.block_on(client.seal_status()).map_err(map_client)?;
        if status["scheme"] == "hsm" {
            let pin = Source::new(None, "HSM token user PIN: ", false).read()?;
            runtime.block_on(client.unseal_pin(&pin)).map_err(map_client)?
        } else {
            let share = Source::new(None, "Unseal share: ", false).read()?;
            runtime.block_on(client.unseal(&share)).map_err(map_client)?
        }
    };
    if status["sealed"] == serde_json::Value::Bool(false) {
        outln!("unsealed")?;
    } else {
        outln!("sealed: {} of {} shares given", status["progress"], status["threshold"])?;
    }
    Ok(())
}

fn client_command(command: &ClientCommand) -> anyhow::Result<()> {
    match command {
        ClientCommand::Issue { name, labels, admin, out, days, client } => {
            let bundle = load_bundle(client)?;
            let labels = Labels::parse_list(labels).map_err(map_kms)?;
            let kms = KmsClient::new(&bundle).map_err(map_client)?;
            let issued = runtime()?
                .block_on(kms.issue_client(name, &labels, *admin, *days, bundle.endpoints.clone()))
                .map_err(map_client)?;
            issued.write(out).map_err(map_kms)?;
            eprintln!("rampart: bundle for {name} written to {}", out.display());
            Ok(())
        }
        ClientCommand::List { prefix, label, admin, revoked, paging, json, client } => {
            let kms = connect(client)?;
            if !*json {
                outln!(
                    "{:<24} {:<6} {:<32} {:<25} {:<8} FINGERPRINT",
                    "NAME",
                    "ADMIN",
                    "LABELS",
                    "EXPIRES",
                    "STATE"
                )?;
            }
            let query = ClientQuery {
                prefix: prefix.clone(),
                label: label.clone(),
                admin: *admin,
                revoked: *revoked,
                limit: None,
            };
            let fetch = |limit: u32, cursor: Option<String>| {
                let (kms, query) = (&kms, ClientQuery { limit: Some(limit), ..query.clone() });
                async move { kms.client_page(&query, cursor.as_deref()).await }
            };
            runtime()?.block_on(walk(paging, fetch, |out, c| {
                if *json {
                    return json_line(out, c);
                }
                let labels: Vec<String> =
                    c.labels.as_map().iter().map(|(k, v)| format!("{k}={v}")).collect();
                writeln!(
                    out,
                    "{:<24} {:<6} {:<32} {:<25} {:<8} {}",
                    c.name,
                    if c.admin { "yes" } else { "no" },
                    labels.join(","),
                    format_time(c.not_after_ms),
                    if c.revoked.is_some() { "revoked" } else { "active" },
                    &c.fingerprint[..c.fingerprint.len().min(16)]
                )
            }))
        }
        ClientCommand::Pem { out_dir, client } => {
            let bundle = load_bundle(client)?;
            std::fs::create_dir_all(out_dir)
                .with_context(|| format!("cannot create {}", out_dir.display()))?;
            let files: [(&str, &[u8], u32); 3] = [
                ("cert.pem", bundle.cert.as_bytes(), 0o644),
                ("key.pem", bundle.key.expose(), 0o600),
                ("ca.pem", bundle.ca_cert.as_bytes(), 0o644),
            ];
            for (name, bytes, mode) in files {
                let path = out_dir.join(name);
                write_file_mode(&path, bytes, mode)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            eprintln!(
                "rampart: {} written to {} (cert.pem, key.pem, ca.pem)",
                bundle.name,
                out_dir.display()
            );
            Ok(())
        }
        ClientCommand::Revoke { name, reason, client } => {
            let kms = connect(client)?;
            let revoked =
                runtime()?.block_on(kms.revoke_client(name, reason)).map_err(map_client)?;
            let when = revoked.revoked.as_ref().map_or(0, |r| r.revoked_ms);
            outln!("client {} revoked ({})", revoked.name, format_time(when))?;
            Ok(())
        }
        ClientCommand::Relabel { name, labels, client } => {
            let labels = Labels::parse_list(labels).map_err(map_kms)?;
            let kms = connect(client)?;
            let changed =
                runtime()?.block_on(kms.relabel_client(name, &labels)).map_err(map_client)?;
            let labels: Vec<String> =
                changed.labels.as_map().iter().map(|(k, v)| format!("{k}={v}")).collect();
            outln!("client {}: labels {}", changed.name, labels.join(","))?;
            Ok(())
        }
    }
}

fn print_key(key: &KeyInfo, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(key)?)?;
        return Ok(());
    }
    let allow: Vec<String> = key.allow.iter().map(ToString::to_string).collect();
    outln!("key:        {}", key.name)?;
    outln!("created:    {}", format_time(key.created_ms))?;
    outln!("exportable: {}", if key.exportable { "yes" } else { "no" })?;
    outln!("allow:      {}", if allow.is_empty() { "(nobody)".into() } else { allow.join(" ") })?;
    outln!("versions:")?;
    for v in &key.versions {
        let reason = v.state.reason().map(|r| format!(" ({r})")).unwrap_or_default();
        outln!(
            "  {:>4}  {:<9}{}  created {}",
            v.version,
            v.state.name(),
            reason,
            format_time(v.created_ms)
        )?;
    }
    Ok(())
}

fn read_input(path: Option<&Path>, limit: u64) -> anyhow::Result<SecretBytes> {
    let mut bytes = Vec::new();
    match path {
        Some(path) if path != Path::new("-") => {
            std::fs::File::open(path)
                .with_context(|| format!("cannot open {}", path.display()))?
                .take(limit + 1)
                .read_to_end(&mut bytes)
                .with_context(|| format!("cannot read {}", path.display()))?;
        }
        _ => {
            std::io::stdin()
                .lock()
                .take(limit + 1)
                .read_to_end(&mut bytes)
                .context("cannot read standard input")?;
        }
    }
    let bytes = SecretBytes::new(bytes);
    if bytes.len() as u64 > limit {
        return Err(UsageError(format!("the input is larger than {limit} bytes")).into());
    }
    Ok(bytes)
}

fn write_output(out: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    match out {
        Some(path) => rampart_kms::bundle::write_private_file(path, bytes).map_err(map_kms),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(bytes)?;
            stdout.flush()?;
            Ok(())
        }
    }
}

fn key_command(command: &KeyCommand) -> anyhow::Result<()> {
    let rt = runtime()?;
    match command {
        KeyCommand::Create { name, allow, exportable, json, client } => {
            let kms = connect(client)?;
            let key = rt.block_on(kms.create_key(name, allow, *exportable)).map_err(map_client)?;
            print_key(&key, *json)
        }
        KeyCommand::List { prefix, state, selector, paging, json, client } => {
            let kms = connect(client)?;
            if !*json {
                outln!(
                    "{:<32} {:>7} {:<9} {:<10} ALLOW",
                    "NAME",
                    "VERSION",
                    "STATE",
                    "EXPORTABLE"
                )?;
            }
            let query = KeyQuery {
                prefix: prefix.clone(),
                state: state.clone(),
                selector: selector.clone(),
                limit: None,
            };
            let fetch = |limit: u32, cursor: Option<String>| {
                let (kms, query) = (&kms, KeyQuery { limit: Some(limit), ..query.clone() });
                async move { kms.key_page(&query, cursor.as_deref()).await }
            };
            rt.block_on(walk(paging, fetch, |out, key| {
                if *json {
                    return json_line(out, key);
                }
                let latest = key.latest();
                let allow: Vec<String> = key.allow.iter().map(ToString::to_string).collect();
                writeln!(
                    out,
                    "{:<32} {:>7} {:<9} {:<10} {}",
                    key.name,
                    latest.map_or(0, |v| v.version),
                    latest.map_or("-", |v| v.state.name()),
                    if key.exportable { "yes" } else { "no" },
                    allow.join(" ")
                )
            }))
        }
        KeyCommand::Show { name, json, client } => {
            let kms = connect(client)?;
            print_key(&rt.block_on(kms.get_key(name)).map_err(map_client)?, *json)
        }
        KeyCommand::Rotate { name, json, client } => {
            let kms = connect(client)?;
            print_key(&rt.block_on(kms.rotate_key(name)).map_err(map_client)?, *json)
        }
        KeyCommand::Revoke { name, reason, version, client } => {
            let kms = connect(client)?;
            print_key(
                &rt.block_on(kms.revoke_key(name, reason, *version)).map_err(map_client)?,
                false,
            )
        }
        KeyCommand::Destroy { name, version, client } => {
            let kms = connect(client)?;
            print_key(&rt.block_on(kms.destroy_key(name, *version)).map_err(map_client)?, false)
        }
        KeyCommand::Wrap { name, input, context, client } => {
            let kms = connect(client)?;
            let plaintext =
                read_input(input.as_deref(), rampart_kms::keys::MAX_WRAP_PLAINTEXT as u64)?;
            let ciphertext = rt
                .block_on(kms.wrap(name, plaintext.expose(), context.as_bytes()))
                .map_err(map_client)?;
            outln!("{ciphertext}")?;
            Ok(())
        }
        KeyCommand::Unwrap { ciphertext, input, context, out, client } => {
            let kms = connect(client)?;
            let text = match ciphertext {
                Some(text) => text.clone(),
                None => {
                    let raw = read_input(input.as_deref(), 1 << 20)?;
                    String::from_utf8(raw.expose().to_vec())
                        .map_err(|_| UsageError("the ciphertext is not text".into()))?
                }
            };
            let plaintext =
                rt.block_on(kms.unwrap(text.trim(), context.as_bytes())).map_err(map_client)?;
            write_output(out.as_deref(), plaintext.expose())
        }
        KeyCommand::Export { name, version, out, client } => {
            let kms = connect(client)?;
            let (_, material) = rt.block_on(kms.export_key(name, *version)).map_err(map_client)?;
            let mut text = SecretBytes::new(hex::encode(material.expose()).into_bytes());
            let mut line = SecretBytes::zeroed(text.len() + 1);
            line.expose_mut()[..text.len()].copy_from_slice(text.expose());
            line.expose_mut()[text.len()] = b'\n';
            text.expose_mut().fill(0);
            write_output(out.as_deref(), line.expose())
        }
    }
}

fn print_report(report: &rampart_kms::audit::VerifyReport, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(report)?)?;
    } else if report.ok {
        outln!(
            "audit log intact: {} entries after {} {} (entry {}), head #{} {} ({} without MAC{})",
            report.entries,
            report.start,
            report.start_hash,
            report.start_seq,
            report.head_seq,
            report.head_hash,
            report.unauthenticated,
            if report.macs_checked { "" } else { "; MACs not checked" }
        )?;
    }
    if !report.ok {
        let problem = report.problem.clone().unwrap_or_default();
        return Err(anyhow::anyhow!(
            "audit log verification FAILED at entry {}: {problem}",
            report.first_bad_seq.unwrap_or_default()
        ));
    }
    Ok(())
}

fn audit(args: &AuditArgs) -> anyhow::Result<()> {
    let rt = runtime()?;
    match &args.verify {
        Some(AuditCommand::Verify {
            from_checkpoint,
            file,
            unseal_key_file,
            anchor,
            json,
            client,
        }) => {
            if let Some(path) = file {
                let root = unseal_key_file
                    .as_deref()
                    .map(|p| {
                        rampart_kms::deployment::read_unseal_key(p)
                            .and_then(|k| rampart_kms::keys::RootKey::new(&k))
                    })
                    .transpose()
                    .map_err(map_kms)?;
                let input = std::fs::File::open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                let report = rampart_kms::audit::verify_export(
                    std::io::BufReader::new(input),
                    root.as_ref(),
                    anchor.as_deref(),
                )
                .with_context(|| format!("cannot read {}", path.display()))?;
                return print_report(&report, *json);
            }
            let kms = connect(client)?;
            let report = if *from_checkpoint {
                rt.block_on(kms.audit_verify_from_checkpoint())
            } else {
                rt.block_on(kms.audit_verify())
            }
            .map_err(map_client)?;
            return print_report(&report, *json);
        }
        Some(AuditCommand::Export { until, out, client }) => {
            return audit_export(&rt, until, out, client);
        }
        Some(AuditCommand::Prune { until, client }) => {
            let kms = connect(client)?;
            let pruned = rt.block_on(kms.audit_prune(*until)).map_err(map_client)?;
            outln!(
                "removed {} entries; the log now starts after entry {} (anchor {})",
                pruned.removed,
                pruned.anchor.seq,
                pruned.anchor.hash
            )?;
            return Ok(());
        }
        None => {}
    }
    let kms = connect(&args.client)?;
    let query = AuditQuery {
        since_ms: args.since.as_deref().map(parse_time).transpose().map_err(map_kms)?,
        until_ms: args.until.as_deref().map(parse_time).transpose().map_err(map_kms)?,
        client: args.by.clone(),
        key: args.key.clone(),
        operation: args.operation.clone(),
        outcome: args.outcome.clone(),
        limit: None,
    };
    let fetch = |limit: u32, cursor: Option<String>| {
        let (kms, query) = (&kms, AuditQuery { limit: Some(limit), ..query.clone() });
        async move { kms.audit_list_page(&query, cursor.as_deref()).await }
    };
    rt.block_on(walk(&args.paging, fetch, |out, e| {
        if args.json {
            return json_line(out, e);
        }
        let key = match (&e.key, e.version) {
            (Some(k), Some(v)) => format!("{k}#{v}"),
            (Some(k), None) => k.clone(),
            _ => "-".into(),
        };
        writeln!(
            out,
            "{:>6} {} {:<16} {:<20} {:<24} {:<8} {}",
            e.seq,
            format_time(e.time_ms),
            e.client,
            e.operation,
            key,
            e.outcome,
            e.detail
        )
    }))
}

/// `audit export`: written to FILE.partial, synced, renamed into place
/// (the directory synced too), and only then recorded on the server, so a
/// prune can never rely on an archive that a crash left half-written.
fn audit_export(
    rt: &tokio::runtime::Runtime,
    until: &str,
    out: &Path,
    client: &ClientArgs,
) -> anyhow::Result<()> {
    use rampart_kms::client::AuditUntil;
    let until = if !until.is_empty() && until.bytes().all(|b| b.is_ascii_digit()) {
        AuditUntil::Seq(
            until.parse().map_err(|_| UsageError(format!("--until {until} is out of range")))?,
        )
    } else {
        AuditUntil::TimeMs(parse_time(until).map_err(map_kms)?)
    };
    if out.exists() {
        return Err(UsageError(format!(
            "{} exists: an archive is never overwritten; choose another name",
            out.display()
        ))
        .into());
    }
    let kms = connect(client)?;
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let mut writer = std::io::BufWriter::new(file);
    let summary = match rt.block_on(kms.audit_export(until, &mut writer)) {
        Ok(summary) => summary,
        Err(error) => {
            drop(writer);
            let _ = std::fs::remove_file(&partial);
            return Err(map_client(error));
        }
    };
    let file =
        writer.into_inner().map_err(|e| e.into_error()).context("cannot write the export")?;
    file.sync_all().with_context(|| format!("cannot sync {}", partial.display()))?;
    drop(file);
    std::fs::rename(&partial, out)
        .with_context(|| format!("cannot rename {} to {}", partial.display(), out.display()))?;
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))?;
    rt.block_on(kms.audit_exported(summary.anchor_seq, summary.until_seq, &summary.until_hash))
        .map_err(map_client)?;
    eprintln!(
        "rampart: exported entries {} to {} ({} entries, anchor {}) to {}",
        summary.anchor_seq + 1,
        summary.until_seq,
        summary.entries,
        summary.anchor_hash,
        out.display()
    );
    Ok(())
}

/// Unwraps 32-byte secrets (a volume passphrase's size) in a loop at each
/// concurrency over kept-alive mTLS connections, under one key or a
/// random sample of many, optionally mixed with heartbeats and spread
/// over many host identities; reports requests per second and latency
/// percentiles. With `--kmip`, Get and AES-GCM Encrypt over KMIP instead.
fn bench(args: &BenchArgs) -> anyhow::Result<()> {
    if args.concurrency.iter().any(|&c| c == 0 || c > 4096)
        || !(0.1..=3600.0).contains(&args.seconds)
        || args.heartbeat_percent > 100
        || !(1..=1_000_000).contains(&args.sample)
    {
        return Err(UsageError(
            "--concurrency must be 1 to 4096, --seconds 0.1 to 3600, --heartbeat-percent 0 \
             to 100 and --sample 1 to 1000000"
                .into(),
        )
        .into());
    }
    if args.kmip {
        return bench_kmip(args);
    }
    let rt = runtime()?;
    let keys: Vec<String> = match args.key_count {
        None => vec![args.key.clone()],
        Some(0) => return Err(UsageError("--key-count must be at least 1".into()).into()),
        Some(n) => {
            let seed = rampart_crypto::random_secret(8)?;
            let mut x = u64::from_le_bytes(seed.expose().try_into().unwrap_or([7; 8])) | 1;
            (0..args.sample.min(n))
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    format!("{}{:07}", args.key, x % n)
                })
                .collect()
        }
    };
    let hosts: Vec<KmsClient> = match &args.bundles {
        None => vec![connect(&args.client)?],
        Some(dir) => {
            let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
                .with_context(|| format!("cannot read {}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "bundle"))
                .collect();
            paths.sort();
            if paths.is_empty() {
                return Err(UsageError(format!("{} holds no .bundle file", dir.display())).into());
            }
            paths
                .iter()
                .map(|p| {
                    let bundle = Bundle::read(p).map_err(map_kms)?;
                    KmsClient::new(&bundle).map_err(map_client)
                })
                .collect::<anyhow::Result<_>>()?
        }
    };
    // The first host wraps: keys allow their hosts, not necessarily the
    // admin.
    let work =
        rt.block_on(rampart_kms::load::Workload::wrap(&hosts[0], keys, 32)).map_err(map_client)?;
    let mut rows = Vec::new();
    for &concurrency in &args.concurrency {
        let plan = rampart_kms::load::LoadPlan {
            concurrency,
            duration: std::time::Duration::from_secs_f64(args.seconds),
            heartbeat_percent: args.heartbeat_percent,
        };
        let report =
            rt.block_on(rampart_kms::load::run(&hosts, &work, &plan)).map_err(map_client)?;
        rows.push(serde_json::json!({
            "concurrency": concurrency,
            "hosts": report.hosts,
            "keys": work.len(),
            "operations": report.unwraps + report.heartbeats,
            "unwraps": report.unwraps,
            "heartbeats": report.heartbeats,
            "ops_per_second": report.per_second(),
            "p50_ms": report.p50_ms,
            "p99_ms": report.p99_ms,
        }));
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "operation": "unwrap", "runs": rows })
            )?
        )?;
    } else {
        outln!("{:>11} {:>12} {:>10} {:>10}", "concurrency", "requests/s", "p50 ms", "p99 ms")?;
        for row in rows {
            outln!(
                "{:>11} {:>12.0} {:>10.3} {:>10.3}",
                row["concurrency"],
                row["ops_per_second"].as_f64().unwrap_or(0.0),
                row["p50_ms"].as_f64().unwrap_or(0.0),
                row["p99_ms"].as_f64().unwrap_or(0.0)
            )?;
        }
    }
    Ok(())
}

/// Fills a store at fleet scale through `rampart_kms::bulk`.
fn populate(args: &PopulateArgs) -> anyhow::Result<()> {
    // Millions of short-lived secrets (material, hashes, MACs): locking
    // each on its own would cost more than making it (as in `serve`).
    let _ = rampart_crypto::lock_all_memory();
    let rt = runtime()?;
    let path =
        args.unseal_key_file.clone().unwrap_or_else(|| args.data_dir.join(files::UNSEAL_KEY));
    let root = deployment::read_unseal_key(&path)
        .and_then(|k| rampart_kms::keys::RootKey::new(&k))
        .map_err(map_kms)?;
    let endpoints = if args.bundles > 0 {
        let admin = Bundle::read(&args.data_dir.join(files::ADMIN_BUNDLE)).map_err(map_kms)?;
        admin.endpoints
    } else {
        Vec::new()
    };
    if let Some(dir) = &args.bundle_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let plan = rampart_kms::bulk::BulkPlan {
        keys: args.keys,
        key_prefix: args.key_prefix.clone(),
        clients: args.clients,
        client_prefix: args.client_prefix.clone(),
        audit: args.audit,
    };
    let start = std::time::Instant::now();
    let report = rt.block_on(async {
        let store = rampart_kms::store::open(args.store.as_deref(), &args.data_dir).await?;
        let out = args.bundle_dir.as_deref().map(|dir| rampart_kms::bulk::BundleOut {
            dir,
            count: args.bundles,
            endpoints: endpoints.clone(),
        });
        let progress = |phase: &'static str, done: u64| {
            eprint!("\r{phase}: {done} ({:.0} s)   ", start.elapsed().as_secs_f64());
        };
        rampart_kms::bulk::populate(store, std::sync::Arc::new(root), &plan, out, &progress).await
    });
    eprintln!();
    let report = report.map_err(map_kms)?;
    outln!(
        "{} keys, {} clients ({} bundles), {} audit entries in {:.1} s",
        report.keys,
        report.clients,
        report.bundles,
        report.audit,
        start.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// `kms bench --kmip`: for each operation and concurrency, workers on
/// kept-open KMIP connections (see [`rampart_kms::bench::kmip`]).
fn bench_kmip(args: &BenchArgs) -> anyhow::Result<()> {
    use rampart_kms::bench::KmipOperation;
    use rampart_kms::kmip_client::{KmipClient, TlsVersions};
    let bundle = load_bundle(&args.client)?;
    let tls = match args.tls.as_str() {
        "negotiated" => TlsVersions::Negotiated,
        "1.2" => TlsVersions::Tls12,
        "1.3" => TlsVersions::Tls13,
        other => {
            return Err(UsageError(format!("--tls '{other}' is not 1.2, 1.3 or negotiated")).into())
        }
    };
    let mut operations = Vec::new();
    for op in &args.operations {
        operations.push(match op.as_str() {
            "get" => KmipOperation::Get,
            "encrypt" => KmipOperation::EncryptGcm,
            other => {
                return Err(
                    UsageError(format!("--operations: '{other}' is not get or encrypt")).into()
                )
            }
        });
    }
    let addresses = if args.kmip_addresses.is_empty() {
        let mut addresses = Vec::new();
        for endpoint in bundle.endpoints().map_err(map_kms)? {
            let host = if endpoint.host.contains(':') {
                format!("[{}]", endpoint.host)
            } else {
                endpoint.host.clone()
            };
            addresses.push(format!("{host}:{}", rampart_kms::server::kmip::DEFAULT_KMIP_PORT));
        }
        addresses
    } else {
        args.kmip_addresses.clone()
    };
    let rt = runtime()?;
    let mut client = KmipClient::new(&bundle, &addresses, tls).map_err(|e| anyhow::anyhow!(e))?;
    let uid = rt.block_on(async {
        let found = client.locate_name(&args.key).await?;
        match found.into_iter().next() {
            Some(uid) => Ok(uid),
            None => client.create_aes(256, Some(&args.key)).await,
        }
    });
    let uid = uid.map_err(|e| anyhow::anyhow!(e))?;
    let duration = std::time::Duration::from_secs_f64(args.seconds);
    let mut reports = Vec::new();
    for op in operations {
        let mut runs = Vec::new();
        for &concurrency in &args.concurrency {
            let run = rt
                .block_on(rampart_kms::bench::kmip(&client, &uid, op, concurrency, duration))
                .map_err(|e| anyhow::anyhow!(e))?;
            runs.push(run);
        }
        reports.push((op, runs));
    }
    if args.json {
        let value: Vec<serde_json::Value> = reports
            .iter()
            .map(|(op, runs)| serde_json::json!({ "operation": op.name(), "runs": runs }))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&serde_json::json!({ "kmip": value }))?)?;
    } else {
        outln!(
            "{:>20} {:>11} {:>10} {:>10} {:>10} {:>8}",
            "operation",
            "concurrency",
            "ops/s",
            "p50 ms",
            "p99 ms",
            "tls"
        )?;
        for (op, runs) in &reports {
            for run in runs {
                outln!(
                    "{:>20} {:>11} {:>10.0} {:>10.3} {:>10.3} {:>8}",
                    op.name(),
                    run.concurrency,
                    run.ops_per_second,
                    run.p50_ms,
                    run.p99_ms,
                    run.tls.as_deref().unwrap_or("-")
                )?;
            }
        }
    }
    Ok(())
}
