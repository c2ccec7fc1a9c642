use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use rampart_luks::{HashAlg, LuksVersion, PbkdfKind, PbkdfRequest};

use crate::commands::kms::ClientArgs;
use crate::duration::parse_duration;
use crate::size::parse_size;

/// Rampart: hardware-accelerated encryption of data at rest, on standard
/// LUKS formats, with central key management.
#[derive(Debug, Parser)]
#[command(name = "rampart", version, about, long_about = None, propagate_version = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure KDF costs, cipher throughput and the DRBG on this machine
    /// (like `cryptsetup benchmark` and `openssl speed`).
    Bench(BenchArgs),
    /// Write cryptographically secure random bytes (AWS-LC's DRBG).
    Rand(RandArgs),
    /// Create a LUKS2 (default) or LUKS1 volume, like `cryptsetup luksFormat`.
    Format(FormatArgs),
    /// Show a volume's header, like `cryptsetup luksDump`.
    Dump(DumpArgs),
    /// Check a passphrase: exit 0 when it opens a keyslot, 2 when not.
    TestKey(TestKeyArgs),
    /// Add a passphrase in a new keyslot (authorised by an existing one).
    AddKey(AddKeyArgs),
    /// Replace a passphrase with a new one.
    ChangeKey(ChangeKeyArgs),
    /// Remove the keyslot that a passphrase opens.
    RemoveKey(RemoveKeyArgs),
    /// Wipe keyslot N.
    KillSlot(KillSlotArgs),
    /// Manage LUKS2 tokens (JSON metadata such as key-server references).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Back up or restore a volume's header.
    #[command(subcommand)]
    Header(HeaderCommand),
    /// Decrypt a volume (or a range of it) to a file or standard output.
    Export(ExportArgs),
    /// Encrypt a file or standard input into a volume.
    Import(ImportArgs),
    /// Rewrite a damaged LUKS2 header copy from the intact one.
    Repair(RepairArgs),
    /// Copy a volume under a new volume key, UUID and keyslots: the clone
    /// shares no secret with its source.
    Clone(CloneArgs),
    /// Fill a volume's data with zeros through its key (the ciphertext
    /// looks random), or with --header destroy its headers and keyslots so
    /// that it can never be opened again (a detached header is
    /// --header-file FILE here).
    Wipe(WipeArgs),
    /// Exit 0 when VOL holds a LUKS header (of --type, if given), 1 when
    /// not, like `cryptsetup isLuks`.
    IsLuks(IsLuksArgs),
    /// Print a volume's UUID, or set it with --uuid, like `cryptsetup luksUUID`.
    Uuid(UuidArgs),
    /// Serve the plaintext of volumes as block devices over NBD.
    Serve(ServeArgs),
    /// Bind a LUKS2 volume to a key-manager key: a keyslot with a random
    /// passphrase that the server wraps, kept in a `rampart-kms` token.
    ///
    /// An existing passphrase authorises the change. The new keyslot uses
    /// PBKDF2-SHA256 with 1000 iterations (its passphrase has 256 random
    /// bits) unless KDF options are given. Commands that open the volume
    /// then try the token first when given --kms BUNDLE or $RAMPART_KMS.
    Bind(BindArgs),
    /// Remove a key-manager binding: its token and its keyslot.
    Unbind(UnbindArgs),
    /// Re-wrap a binding under the newest version of its key.
    Rewrap(RewrapArgs),
    /// Re-encrypt a LUKS2 volume's data in place under a new volume key
    /// (and optionally a new cipher, key size or sector size), offline, on
    /// cryptsetup's reencryption format: `cryptsetup reencrypt
    /// --resume-only` finishes what Rampart started and the reverse.
    ///
    /// Without --new-key-file, every keyslot the passphrase opens is
    /// re-created under the new key with the same passphrase; the old
    /// keyslots are removed at the end. Interrupted (crash, kill, power
    /// loss) with resilience checksum or journal, it resumes where it
    /// stopped: `rampart reencrypt --resume-only VOL`.
    ///
    /// With --encrypt it turns a plain image into a LUKS2 volume in place
    /// (--reduce-device-size: the data shifts up behind the new header;
    /// --header FILE: a detached header; both: a detached header of SIZE
    /// bytes, the data encrypted in place backward); with --decrypt
    /// --header FILE it turns a volume back into plaintext (an attached
    /// header is exported to FILE and the data moved down to byte 0).
    ///
    /// A volume bound to the key manager (`rampart bind`) is rebound with
    /// --kms BUNDLE (or $RAMPART_KMS), after `rampart kms key rotate`: its
    /// tokens unlock it with no passphrase, and each binding gets a fresh
    /// secret wrapped by the newest version of its key, in a keyslot of the
    /// new volume key with a new token; the old keyslots and tokens are
    /// removed at the end. A passphrase keyslot is kept only when its
    /// passphrase is given (--key-file); without one, a volume that has
    /// passphrase keyslots is refused rather than left without them.
    Reencrypt(ReencryptArgs),
    /// Unlock through key-manager tokens only: check it, or print the
    /// keyslot passphrase for `cryptsetup open --key-file -`.
    ///
    /// Exit 0 when a token opens the volume, 2 when none may (1 when no key
    /// server answers). With
    /// --print-passphrase the passphrase goes to standard output exactly,
    /// without a newline, and never to a terminal:
    /// `rampart unlock VOL --print-passphrase | cryptsetup open --key-file - VOL NAME`.
    Unlock(UnlockArgs),
    /// Key management server: init, serve, unseal; clients, keys, audit.
    #[command(subcommand)]
    Kms(crate::commands::kms::KmsCommand),
    /// Encrypt a file or pipe (authenticated streaming: a Rampart header
    /// and a Tink AES-GCM-HKDF streaming body) to a passphrase, a raw key
    /// and/or a key-manager key.
    Encrypt(EncryptArgs),
    /// Decrypt a `rampart encrypt` file or pipe (all of it or a range), or
    /// an `openssl enc` file with --openssl.
    Decrypt(DecryptArgs),
    /// Write the manual pages, the bash, zsh and fish completions (for
    /// packagers) and the book's Markdown command reference.
    #[command(hide = true)]
    GenerateDocs(GenerateDocsArgs),
}

/// `rampart generate-docs`: at least one of --out and --markdown.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = true)]
pub struct GenerateDocsArgs {
    /// Directory to write man/ and completions/ into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Directory to write the command reference into as Markdown, one
    /// page per manual page (the book's docs/src/commands); pages of
    /// commands that no longer exist are removed from it.
    #[arg(long, value_name = "DIR")]
    pub markdown: Option<PathBuf>,
}

/// A file's passphrase and raw key (`encrypt` and `decrypt`).
#[derive(Debug, clap::Args)]
pub struct FileKeyArgs {
    /// A passphrase, from FILE (exact bytes; `-` = standard input).
    /// Without any key option: a prompt.
    #[arg(long, short = 'd', value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// A raw 256-bit key: FILE holds exactly 32 bytes.
    #[arg(long, value_name = "FILE")]
    pub raw_key_file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct EncryptArgs {
    /// Input file, or `-` (default) for standard input.
    #[arg(value_name = "IN", default_value = "-")]
    pub input: PathBuf,
    /// Output file, or `-` (default) for standard output (never a terminal).
    #[arg(long, short = 'o', value_name = "OUT", default_value = "-")]
    pub output: PathBuf,
    #[command(flatten)]
    pub keys: FileKeyArgs,
    /// Encrypt to this key-manager key (a fresh data key per file, wrapped
    /// by the server), with the bundle of --kms or $RAMPART_KMS.
    #[arg(long = "key", value_name = "NAME")]
    pub kms_key: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
    /// Ciphertext segment size (K/M suffixes; 4K to 8M, default 1M).
    #[arg(long, value_parser = parse_size, default_value = "1M", value_name = "SIZE")]
    pub segment_size: u64,
    /// Argon2 cost for the passphrase (default: argon2id tuned like `format`).
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
    /// Print a JSON summary (to standard output when the ciphertext goes
    /// to a file, else to standard error).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct DecryptArgs {
    /// Input file, or `-` (default) for standard input.
    #[arg(value_name = "IN", default_value = "-")]
    pub input: PathBuf,
    /// Output file, or `-` (default) for standard output.
    #[arg(long, short = 'o', value_name = "OUT", default_value = "-")]
    pub output: PathBuf,
    #[command(flatten)]
    pub keys: FileKeyArgs,
    /// Unwrap key-manager stanzas with the bundle of --kms or $RAMPART_KMS.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Start at this plaintext byte offset (needs a seekable input; reads
    /// only the segments needed).
    #[arg(long, value_parser = parse_size, value_name = "BYTES")]
    pub offset: Option<u64>,
    /// Decrypt only this many bytes.
    #[arg(long, value_parser = parse_size, value_name = "BYTES")]
    pub length: Option<u64>,
    /// Read an `openssl enc` file made with this cipher: aes-128-cbc,
    /// aes-256-cbc, aes-128-ctr or aes-256-ctr (unauthenticated: a warning
    /// is printed).
    #[arg(long, value_name = "CIPHER")]
    pub openssl: Option<String>,
    /// With --openssl: the file was made with -pbkdf2.
    #[arg(long, requires = "openssl")]
    pub pbkdf2: bool,
    /// With --openssl: -iter N (implies --pbkdf2; default 10000).
    #[arg(long, value_name = "N", requires = "openssl")]
    pub iter: Option<u32>,
    /// With --openssl: -md NAME (md5, sha1, sha256, sha512; default sha256).
    #[arg(long, value_name = "NAME", requires = "openssl")]
    pub md: Option<String>,
    /// Print a JSON summary (to standard output when the plaintext goes to
    /// a file, else to standard error).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Volumes to export, each VOL or VOL=EXPORT_NAME; with one volume the
    /// default export (empty name) is that volume.
    #[arg(value_name = "VOL[=NAME]", required = true)]
    pub volumes: Vec<String>,
    /// A detached LUKS header (only with a single volume).
    #[arg(long, value_name = "FILE")]
    pub header: Option<PathBuf>,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub tokens: TokenArgs,
    #[command(flatten)]
    pub plain: PlainArgs,
    /// Plain volumes: where the data starts on the device, in 512-byte
    /// sectors (cryptsetup's --offset).
    #[arg(long = "offset", value_name = "SECTORS")]
    pub data_offset: Option<u64>,
    /// Serve each volume headerless under a random key made now, held only
    /// in this process's locked memory and never written anywhere: once
    /// the server stops, the data can never be read again (swap, scratch
    /// space). Defaults: --cipher aes-xts-plain64, --key-size 512,
    /// --sector-size 4096.
    #[arg(long, conflicts_with_all = ["key_file", "header", "token_only"])]
    pub one_time_key: bool,
    /// Volumes with integrity: write without dm-integrity's journal for
    /// this run (cryptsetup's --integrity-no-journal). Faster writes, but a
    /// sector being written when the host stops may fail its check after.
    #[arg(long)]
    pub integrity_no_journal: bool,
    /// TCP address to listen on (default 127.0.0.1:10809 unless only
    /// --socket is given); repeatable.
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Vec<String>,
    /// Unix socket to listen on; repeatable.
    #[arg(long, value_name = "PATH")]
    pub socket: Vec<PathBuf>,
    /// Refuse writes.
    #[arg(long)]
    pub read_only: bool,
    /// PEM server certificate chain for TLS.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates; clients must then present a certificate signed by one.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// TLS policy: required (the default with a certificate), on (offered
    /// to clients that ask), off.
    #[arg(long, value_enum, value_name = "MODE")]
    pub tls: Option<ServeTlsArg>,
    /// After each TLS handshake over TCP, hand the session's record
    /// encryption to the Linux kernel (kTLS): replies go from the server's
    /// buffers into the socket with no user-space TLS copy. Needs the
    /// kernel's `tls` module (else TLS stays in user space, logged once).
    /// The keys are installed once, so a client's TLS 1.3 key update, or
    /// 2^23 records of AES-256-GCM (128 GiB of replies), ends the connection.
    #[arg(long, requires = "tls_cert")]
    pub ktls: bool,
    /// Cap on request data held in memory at once (K/M/G suffixes).
    #[arg(long, value_parser = parse_size, default_value = "256M", value_name = "SIZE")]
    pub max_inflight: u64,
    /// Time a client has from connecting to the end of the handshake (TLS
    /// included); slower ones are disconnected. As QEMU's NBD server.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "TIME")]
    pub handshake_timeout: Duration,
    /// Close a connection that has no request in flight and sends nothing
    /// for TIME. 0 (the default): never; mounted filesystems and VMs
    /// legitimately idle for hours.
    #[arg(long, value_parser = parse_duration, default_value = "0", value_name = "TIME")]
    pub idle_timeout: Duration,
    /// Disconnect a client that, with requests in flight, reads none of its
    /// replies (or sends none of a started write's data) for TIME, releasing
    /// the memory its requests hold.
    #[arg(long, value_parser = parse_duration, default_value = "60s", value_name = "TIME")]
    pub stall_timeout: Duration,
    /// Connections served at once across all listeners, each on a thread
    /// of its own; further ones are closed at once and logged. 0: no
    /// limit. As QEMU's NBD server.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_connections: usize,
    /// Requests one connection may have in flight; further requests wait
    /// unread until one is answered (like nbdkit --threads, but a queue
    /// depth, not threads).
    #[arg(long, default_value_t = 256, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_requests: u32,
    /// Serve Prometheus metrics over plain HTTP at http://ADDR/metrics
    /// (per export: requests, bytes and errors by type, latency
    /// histograms, bytes in flight, connections; TLS handshakes).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
    /// For volumes unlocked through the key manager: check in this often;
    /// an export whose key the key manager no longer allows this host
    /// (key revoked, client revoked or relabelled out of the key's allow
    /// rule, certificate expired) is closed: writes flushed, clients
    /// disconnected, volume key wiped. 0: never check.
    #[arg(long, value_parser = parse_duration, default_value = "30s", value_name = "TIME")]
    pub heartbeat: Duration,
    /// How long exports keep serving while no key server answers the
    /// heartbeat; then they are closed as if revoked. An answer within
    /// the grace period resumes silently. 0: close at the first
    /// unanswered heartbeat.
    #[arg(long, value_parser = parse_duration, default_value = "1h", value_name = "TIME")]
    pub grace: Duration,
}

/// The volume: its data file or device and, when detached, its header file.
#[derive(Debug, clap::Args)]
pub struct VolumeArgs {
    /// The volume file or block device.
    #[arg(value_name = "VOL")]
    pub volume: PathBuf,
    /// A detached LUKS header file (the data device then holds only data).
    #[arg(long, value_name = "FILE")]
    pub header: Option<PathBuf>,
}

/// How the passphrase is given.
#[derive(Debug, clap::Args)]
pub struct KeyArgs {
    /// Read the passphrase from FILE: its exact bytes, no newline stripping
    /// (`-` = standard input). Without it: a prompt on a terminal, or one
    /// line of standard input.
    #[arg(long, short = 'd', value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Try only this keyslot.
    #[arg(long, short = 'S', value_name = "N")]
    pub key_slot: Option<usize>,
}

/// Headerless volumes: cryptsetup's plain mode, with its names, units and
/// defaults (`cryptsetup open --type plain`).
#[derive(Debug, clap::Args)]
pub struct PlainArgs {
    /// The volume's format: luks (the default; LUKS1 or LUKS2, as the
    /// header says) or plain (no header: the flags below say how the data
    /// is encrypted, as for `cryptsetup open --type plain`).
    #[arg(long = "type", value_enum, value_name = "TYPE")]
    pub volume_type: Option<VolumeTypeArg>,
    /// Plain volumes: the cipher (default aes-cbc-essiv:sha256, as
    /// cryptsetup's plain mode; also aes-xts-plain64, aes-xts-plain,
    /// aes-cbc-plain64, aes-cbc-plain).
    #[arg(long, value_name = "SPEC")]
    pub cipher: Option<String>,
    /// Plain volumes: the key size in bits (default 256, also for XTS,
    /// as cryptsetup's plain mode).
    #[arg(long, value_name = "BITS")]
    pub key_size: Option<usize>,
    /// Plain volumes: how a passphrase becomes the key, NAME[:BYTES]
    /// (default ripemd160; plain: no hashing; also sha1, sha224, sha256,
    /// sha384, sha512, sha3-256, sha3-384, sha3-512). Not applied to a
    /// --key-file other than `-`, which holds the key itself, as in
    /// cryptsetup.
    #[arg(long, value_name = "HASH")]
    pub hash: Option<String>,
    /// Plain volumes: skip this many bytes of the key file or standard
    /// input first.
    #[arg(long, value_name = "BYTES")]
    pub keyfile_offset: Option<u64>,
    /// Plain volumes: read exactly this many bytes of passphrase (ignored
    /// for a key file holding the key, which is read for the key size).
    #[arg(long, value_name = "BYTES")]
    pub keyfile_size: Option<u64>,
    /// Plain volumes: add this many 512-byte sectors to every IV
    /// (cryptsetup's --skip).
    #[arg(long, value_name = "SECTORS")]
    pub skip: Option<u64>,
    /// Plain volumes: the encryption sector size, 512 (default), 1024,
    /// 2048 or 4096 bytes.
    #[arg(long, value_name = "BYTES")]
    pub sector_size: Option<u32>,
    /// Plain volumes: count IVs in --sector-size sectors instead of
    /// 512-byte sectors.
    #[arg(long)]
    pub iv_large_sectors: bool,
}

/// `--type` of the commands that open a volume's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VolumeTypeArg {
    #[value(aliases = ["luks1", "luks2"])]
    Luks,
    Plain,
}

/// Unlocking through key-manager tokens (volumes bound with `rampart bind`).
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// Client bundle for volumes bound to a key manager (default:
    /// $RAMPART_KMS). Without one, tokens are skipped.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Unlock only through tokens; never fall back to a passphrase.
    #[arg(long)]
    pub token_only: bool,
}

#[derive(Debug, clap::Args)]
pub struct BindArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// The key-manager key that wraps the new keyslot's passphrase.
    #[arg(long = "key", value_name = "NAME")]
    pub key_name: String,
    #[command(flatten)]
    pub client: ClientArgs,
    /// An existing passphrase of the volume, from FILE (`-` = standard input).
    #[arg(long, short = 'd', value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Put the bound passphrase in this keyslot (default: the first free one).
    #[arg(long, short = 'S', value_name = "N")]
    pub key_slot: Option<usize>,
    /// Store the binding in this token id (default: the first free one).
    #[arg(long, value_name = "ID")]
    pub token_id: Option<usize>,
    /// The client bundle that cryptsetup's token plugin (and so
    /// systemd-cryptsetup at boot) unlocks this binding with, recorded in
    /// the token as an absolute path (default when absent:
    /// /etc/rampart/client.bundle).
    #[arg(long, value_name = "PATH")]
    pub token_bundle: Option<PathBuf>,
    /// KDF of the bound keyslot (default: pbkdf2 with 1000 iterations,
    /// since its passphrase is 256 random bits).
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
}

#[derive(Debug, clap::Args)]
pub struct UnbindArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// The binding's token (needed when the volume has several).
    #[arg(long, value_name = "ID")]
    pub token_id: Option<usize>,
}

#[derive(Debug, clap::Args)]
pub struct RewrapArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Only this binding's token (default: every binding).
    #[arg(long, value_name = "ID")]
    pub token_id: Option<usize>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct UnlockArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Write the bound keyslot's passphrase to standard output (exact
    /// bytes, no newline; refused on a terminal).
    #[arg(long)]
    pub print_passphrase: bool,
    /// Only this token.
    #[arg(long, value_name = "ID")]
    pub token_id: Option<usize>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// Key-derivation settings for new keyslots (cryptsetup's names).
#[derive(Debug, clap::Args)]
pub struct PbkdfArgs {
    /// Key derivation function (default: argon2id; LUKS1: pbkdf2).
    #[arg(long, value_enum, value_name = "NAME")]
    pub pbkdf: Option<PbkdfArg>,
    /// Hash for pbkdf2 (and for LUKS1 and the AF splitter; default sha256).
    #[arg(long, value_enum, value_name = "HASH")]
    pub hash: Option<HashArg>,
    /// Target unlock time in milliseconds for the KDF cost search.
    #[arg(long, short = 'i', value_name = "MS", conflicts_with = "pbkdf_force_iterations")]
    pub iter_time: Option<u32>,
    /// Fixed PBKDF2 iterations or Argon2 time cost; skips the cost search.
    #[arg(long, value_name = "N")]
    pub pbkdf_force_iterations: Option<u32>,
    /// Argon2 memory cost in KiB (maximum for the search).
    #[arg(long, value_name = "KIB")]
    pub pbkdf_memory: Option<u32>,
    /// Argon2 lanes (threads).
    #[arg(long, value_name = "N")]
    pub pbkdf_parallel: Option<u32>,
}

impl PbkdfArgs {
    /// The request as the LUKS crate takes it.
    pub fn request(&self) -> PbkdfRequest {
        PbkdfRequest {
            kind: self.pbkdf.map(|kind| match kind {
                PbkdfArg::Argon2id => PbkdfKind::Argon2id,
                PbkdfArg::Argon2i => PbkdfKind::Argon2i,
                PbkdfArg::Pbkdf2 => PbkdfKind::Pbkdf2,
            }),
            hash: self.hash.map(HashAlg::from),
            iter_time_ms: self.iter_time,
            forced_iterations: self.pbkdf_force_iterations,
            memory_kib: self.pbkdf_memory,
            parallel: self.pbkdf_parallel,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct FormatArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Create VOL with this size (bytes; K/M/G/T suffixes) when it does not exist.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub size: Option<u64>,
    /// On-disk format.
    #[arg(long = "type", value_enum, value_name = "TYPE", default_value = "luks2")]
    pub luks_type: LuksTypeArg,
    /// Data cipher: aes-xts-plain64, aes-cbc-essiv:sha256 or aes-cbc-plain64;
    /// aes-gcm-random with --integrity aead.
    #[arg(long, short = 'c', default_value = "aes-xts-plain64", value_name = "SPEC")]
    pub cipher: String,
    /// The cipher's key size in bits (512 or 256 for XTS; 256 or 128 for CBC
    /// and GCM); an --integrity HMAC key is added to it in the volume key.
    #[arg(long, short = 's', value_name = "BITS")]
    pub key_size: Option<usize>,
    /// Authenticated encryption (LUKS2): every sector gets a tag in
    /// dm-integrity's layout, and one that does not verify reads as an I/O
    /// error. hmac-sha256 and hmac-sha512 go with aes-xts-plain64, aead with
    /// --cipher aes-gcm-random.
    #[arg(long, value_enum, value_name = "ALG")]
    pub integrity: Option<IntegrityArg>,
    /// With --integrity: record in the header that the volume is written
    /// without dm-integrity's journal (the persistent flag no-journal, which
    /// cryptsetup honours too). Faster writes, but a sector being written
    /// when the host stops may fail its check after.
    #[arg(long, requires = "integrity")]
    pub integrity_no_journal: bool,
    /// With --integrity: do not seal zeros into every sector now (fast on a
    /// large device); sectors never written since fail their check when
    /// read, as with cryptsetup's --integrity-no-wipe.
    #[arg(long, requires = "integrity")]
    pub integrity_no_wipe: bool,
    /// Encryption sector size in bytes (LUKS2: 512 to 4096, default 4096).
    #[arg(long, value_name = "BYTES")]
    pub sector_size: Option<u32>,
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
    /// Volume label (LUKS2).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Subsystem label (LUKS2).
    #[arg(long, value_name = "TEXT")]
    pub subsystem: Option<String>,
    /// The volume UUID (default: random).
    #[arg(long, value_name = "UUID")]
    pub uuid: Option<String>,
    /// LUKS2 metadata size per copy: 16K, 32K, 64K, 128K, 256K, 512K, 1M, 2M or 4M.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub luks2_metadata_size: Option<u64>,
    /// LUKS2 keyslots area size.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub luks2_keyslots_size: Option<u64>,
    /// Data offset in 512-byte sectors.
    #[arg(long, value_name = "SECTORS")]
    pub offset: Option<u64>,
    /// Read the new passphrase from FILE (exact bytes; `-` = standard input).
    #[arg(long, short = 'd', value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Do not ask before overwriting an existing LUKS header.
    #[arg(long, short = 'q')]
    pub batch_mode: bool,
    /// Fill the new volume's data area with zeros through its key, so that
    /// it reads as zeros and nothing of the old contents remains (like
    /// dm-crypt zero-filling a new mapping).
    #[arg(long)]
    pub wipe: bool,
    /// Bind the new volume to this key-manager key (as `rampart bind`),
    /// with the client bundle of --kms or $RAMPART_KMS.
    #[arg(long = "key", value_name = "NAME")]
    pub kms_key: Option<String>,
    /// The client bundle for --key.
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct ReencryptArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub tokens: TokenArgs,
    /// The passphrase of the one new keyslot, from FILE (exact bytes; `-` =
    /// standard input). Default: each keyslot the passphrase opens is
    /// re-created under the new key with that same passphrase.
    #[arg(long, value_name = "FILE")]
    pub new_key_file: Option<PathBuf>,
    /// New data cipher: aes-xts-plain64, aes-cbc-essiv:sha256 or
    /// aes-cbc-plain64 (default: the current one).
    #[arg(long, short = 'c', value_name = "SPEC")]
    pub cipher: Option<String>,
    /// New volume key size in bits (default: the current one).
    #[arg(long, short = 's', value_name = "BITS")]
    pub key_size: Option<usize>,
    /// New encryption sector size: 512, 1024, 2048 or 4096 (default: the
    /// current one).
    #[arg(long, value_name = "BYTES")]
    pub sector_size: Option<u32>,
    /// How an interrupted hotzone is repaired: checksum (default; a hash
    /// per block in the header), journal (a copy of the hotzone; slower)
    /// or none (an interruption other than a clean stop loses data).
    /// Encryption with --reduce-device-size always uses datashift. With
    /// --resume-only, another of checksum, journal and none replaces the
    /// recorded one (as cryptsetup 2.6 allows; a data shift keeps its own).
    #[arg(long, value_enum, value_name = "MODE")]
    pub resilience: Option<ResilienceArg>,
    /// The checksum resilience hash: sha256 (default), sha1 or sha512.
    #[arg(long, value_enum, ignore_case = true, value_name = "HASH")]
    pub resilience_hash: Option<HashArg>,
    /// The largest hotzone (bytes; K/M/G suffixes), the data re-encrypted
    /// between two header updates (default 64M; journal: at most its area).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub hotzone_size: Option<u64>,
    /// Only resume a reencryption already in progress (recovering an
    /// interrupted hotzone first); start none.
    #[arg(long)]
    pub resume_only: bool,
    /// Only write the reencryption metadata (new keyslots, reencrypt
    /// keyslot); move no data (with --decrypt of an attached header: only
    /// the header's export and the copy of the first data-offset bytes
    /// over it). Then `rampart serve` serves the volume and `--resume-only`
    /// hands the run to the server (online encryption, as cryptsetup's).
    #[arg(long, conflicts_with = "resume_only")]
    pub init_only: bool,
    /// Encrypt a plaintext disk image in place (mode encrypt): with
    /// --reduce-device-size the data moves up to make room for the LUKS2
    /// header at its start; with --header FILE the header is written to
    /// FILE (detached) and the data stays where it is. The passphrase of
    /// keyslot 0 comes from --new-key-file, else --key-file, else a prompt.
    #[arg(long, conflicts_with_all = ["decrypt", "resume_only"])]
    pub encrypt: bool,
    /// Decrypt a LUKS2 volume's data back to plaintext in place (mode
    /// decrypt), with --header FILE as cryptsetup 2.6: a volume with a
    /// detached header FILE is decrypted where it is; a volume whose
    /// header is attached has it exported to FILE (which must not exist)
    /// and the data moved down over it while it is decrypted, so the
    /// plaintext starts at byte 0 (resilience checksum). All keyslots are
    /// removed at the end.
    #[arg(long, conflicts_with_all = ["encrypt", "resume_only"])]
    pub decrypt: bool,
    /// With --encrypt: the bytes given up at the end of the device (K/M/G
    /// suffixes; a multiple of twice the sector size): the data moves up
    /// by half of it and the LUKS2 header takes the first half, as
    /// cryptsetup's --reduce-device-size. The last SIZE bytes of the
    /// device must hold nothing of value (shrink the filesystem first).
    /// With --header FILE too (as cryptsetup): the header file is SIZE
    /// bytes (1 MiB to 128 MiB + 32 KiB, a multiple of 4096), the data
    /// stays whole where it is and is encrypted backward in SIZE hotzones.
    #[arg(long, value_parser = parse_size, value_name = "SIZE", requires = "encrypt")]
    pub reduce_device_size: Option<u64>,
    /// KDF of the new keyslots (default: argon2id, as `format`).
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
    /// Print progress as JSON lines on standard output, and a summary.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// `reencrypt --resilience`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ResilienceArg {
    Checksum,
    Journal,
    None,
    Datashift,
}

/// `serve --tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeTlsArg {
    #[value(alias = "require")]
    Required,
    On,
    Off,
}

/// `--hash`, `reencrypt --resilience-hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HashArg {
    Sha1,
    Sha256,
    Sha512,
}

impl From<HashArg> for HashAlg {
    fn from(hash: HashArg) -> Self {
        match hash {
            HashArg::Sha1 => Self::Sha1,
            HashArg::Sha256 => Self::Sha256,
            HashArg::Sha512 => Self::Sha512,
        }
    }
}

/// `--pbkdf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PbkdfArg {
    Argon2id,
    Argon2i,
    Pbkdf2,
}

/// `format --integrity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IntegrityArg {
    HmacSha256,
    HmacSha512,
    Aead,
}

impl From<IntegrityArg> for rampart_luks::IntegrityKind {
    fn from(arg: IntegrityArg) -> Self {
        match arg {
            IntegrityArg::HmacSha256 => Self::HmacSha256,
            IntegrityArg::HmacSha512 => Self::HmacSha512,
            IntegrityArg::Aead => Self::Aead,
        }
    }
}

/// `format --type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LuksTypeArg {
    Luks2,
    #[value(alias = "luks")]
    Luks1,
}

impl From<LuksTypeArg> for LuksVersion {
    fn from(version: LuksTypeArg) -> Self {
        match version {
            LuksTypeArg::Luks2 => Self::Luks2,
            LuksTypeArg::Luks1 => Self::Luks1,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Print the parsed metadata as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also print the volume key (needs a passphrase or a bound token).
    #[arg(long)]
    pub dump_volume_key: bool,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub tokens: TokenArgs,
}

#[derive(Debug, clap::Args)]
pub struct TestKeyArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub tokens: TokenArgs,
}

#[derive(Debug, clap::Args)]
pub struct AddKeyArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    #[command(flatten)]
    pub key: KeyArgs,
    /// Read the new passphrase from FILE (`-` = standard input).
    #[arg(long, value_name = "FILE")]
    pub new_key_file: Option<PathBuf>,
    /// Put the new passphrase in this keyslot.
    #[arg(long, value_name = "N")]
    pub new_key_slot: Option<usize>,
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
}

#[derive(Debug, clap::Args)]
pub struct ChangeKeyArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    #[command(flatten)]
    pub key: KeyArgs,
    /// Read the new passphrase from FILE (`-` = standard input).
    #[arg(long, value_name = "FILE")]
    pub new_key_file: Option<PathBuf>,
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
}

#[derive(Debug, clap::Args)]
pub struct RemoveKeyArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    #[command(flatten)]
    pub key: KeyArgs,
    /// Allow removing the last keyslot (the data becomes unrecoverable).
    #[arg(long, short = 'q')]
    pub batch_mode: bool,
}

#[derive(Debug, clap::Args)]
pub struct KillSlotArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// The keyslot to wipe.
    #[arg(value_name = "N")]
    pub slot: usize,
    /// A passphrase of another keyslot, proving the right to change the volume.
    #[arg(long, short = 'd', value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Wipe without a passphrase, even the last keyslot.
    #[arg(long, short = 'q')]
    pub batch_mode: bool,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Add a token from a JSON file (`-` = standard input), like `cryptsetup
    /// token import` (`token add` is an alias).
    #[command(alias = "add")]
    Import {
        #[command(flatten)]
        volume: VolumeArgs,
        /// The token JSON.
        #[arg(long, value_name = "FILE")]
        json_file: PathBuf,
        /// Use this token id (default: the first free one).
        #[arg(long, value_name = "ID")]
        token_id: Option<usize>,
    },
    /// Print a token's JSON exactly as stored, like `cryptsetup token export`.
    Export {
        #[command(flatten)]
        volume: VolumeArgs,
        /// The token to print.
        #[arg(long, value_name = "ID")]
        token_id: usize,
    },
    /// Remove a token.
    Remove {
        #[command(flatten)]
        volume: VolumeArgs,
        /// The token to remove.
        #[arg(long, value_name = "ID")]
        token_id: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum HeaderCommand {
    /// Copy the header (binary headers, metadata and keyslot areas) to FILE.
    Backup {
        #[command(flatten)]
        volume: VolumeArgs,
        /// The backup file to create.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Write a header backup back onto the volume.
    Restore {
        #[command(flatten)]
        volume: VolumeArgs,
        /// The backup file made by `header backup` or `cryptsetup luksHeaderBackup`.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Do not ask before replacing a different header.
        #[arg(long, short = 'q')]
        batch_mode: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Output file, or `-` for standard output.
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// Start at this plaintext byte offset.
    #[arg(long, value_parser = parse_size, default_value = "0", value_name = "BYTES")]
    pub offset: u64,
    /// Export only this many bytes.
    #[arg(long, value_parser = parse_size, value_name = "BYTES")]
    pub length: Option<u64>,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub tokens: TokenArgs,
    #[command(flatten)]
    pub plain: PlainArgs,
    /// Plain volumes: where the data starts on the device, in 512-byte
    /// sectors (cryptsetup's --offset; --offset here is a plaintext
    /// position).
    #[arg(long, value_name = "SECTORS")]
    pub data_offset: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub struct CloneArgs {
    /// The source volume (SRC); --header names its detached header.
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Where the clone goes: a new file, a block device, or `-` for
    /// standard output. The clone always carries its header.
    #[arg(value_name = "DST")]
    pub target: PathBuf,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub tokens: TokenArgs,
    /// The clone's passphrase, from FILE (exact bytes; `-` = standard
    /// input). Default: the passphrase that opened SRC.
    #[arg(long, value_name = "FILE")]
    pub new_key_file: Option<PathBuf>,
    /// Bind the clone to this key-manager key (a fresh binding, with the
    /// bundle of --kms or $RAMPART_KMS); without --new-key-file the clone
    /// then has no passphrase at all.
    #[arg(long = "key", value_name = "NAME")]
    pub kms_key: Option<String>,
    #[command(flatten)]
    pub pbkdf: PbkdfArgs,
    /// Overwrite DST when it is a non-empty file, without asking.
    #[arg(long, short = 'q')]
    pub batch_mode: bool,
}

#[derive(Debug, clap::Args)]
pub struct WipeArgs {
    /// The volume file or block device.
    #[arg(value_name = "VOL")]
    pub volume: PathBuf,
    /// Destroy both headers and every keyslot with random bytes instead
    /// (cryptsetup's luksErase, and the header area overwritten): the data
    /// can never be decrypted again. Needs no passphrase.
    #[arg(long = "header")]
    pub header: bool,
    /// A detached LUKS header file (here `--header` is the flag above).
    #[arg(long, value_name = "FILE")]
    pub header_file: Option<PathBuf>,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub tokens: TokenArgs,
    /// Do not ask before wiping.
    #[arg(long, short = 'q')]
    pub batch_mode: bool,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Input file, or `-` for standard input.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// Write at this plaintext byte offset.
    #[arg(long, value_parser = parse_size, default_value = "0", value_name = "BYTES")]
    pub offset: u64,
    #[command(flatten)]
    pub key: KeyArgs,
    #[command(flatten)]
    pub tokens: TokenArgs,
    #[command(flatten)]
    pub plain: PlainArgs,
    /// Plain volumes: where the data starts on the device, in 512-byte
    /// sectors (cryptsetup's --offset; --offset here is a plaintext
    /// position).
    #[arg(long, value_name = "SECTORS")]
    pub data_offset: Option<u64>,
    /// Volumes with integrity: write without dm-integrity's journal
    /// (cryptsetup's --integrity-no-journal).
    #[arg(long)]
    pub integrity_no_journal: bool,
}

#[derive(Debug, clap::Args)]
pub struct IsLuksArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Succeed only for this version: luks1 or luks2.
    #[arg(long = "type", value_name = "TYPE")]
    pub luks_type: Option<String>,
    /// Say why VOL is not LUKS (on standard error).
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

#[derive(Debug, clap::Args)]
pub struct UuidArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
    /// Set this UUID instead of printing it (key-manager bindings of the
    /// volume then stop working: unbind and bind again).
    #[arg(long, value_name = "UUID")]
    pub uuid: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct RepairArgs {
    #[command(flatten)]
    pub volume: VolumeArgs,
}

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Only these cipher families (aes-cbc, aes-xts, aes-gcm); repeatable or
    /// comma-separated. Skips the KDF and DRBG rows.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub cipher: Vec<String>,
    /// Bytes per call, as `openssl speed -bytes` (512, 4096, 16384, 65536...).
    #[arg(long, default_value = "4096", value_parser = parse_usize_size, value_name = "BYTES")]
    pub size: usize,
    /// Sector size within each call for XTS and CBC (512 to 4096; default:
    /// the call size, at most 4096).
    #[arg(long, value_parser = parse_usize_size, value_name = "BYTES")]
    pub sector: Option<usize>,
    /// Bytes of data each thread's calls walk through, one call's worth at
    /// a time, in place (default: the call size, so the data stays in the
    /// CPU's caches). A span larger than the caches, such as 1G, measures
    /// data read from memory, as a server reading a large volume does.
    #[arg(long, value_parser = parse_usize_size, value_name = "BYTES")]
    pub span: Option<usize>,
    /// Worker threads; 0 means one per core, throughput summed.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub threads: usize,
    /// Seconds to measure each direction of each cipher.
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    pub seconds: f64,
    /// Target unlock time in milliseconds for the Argon2 cost search.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub iter_time: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Run AES-XTS on this path instead of the fastest this CPU has:
    /// vaes512-byte-shift (the default with AVX-512), vaes512 (tweaks by
    /// bit shifts), vaes256, aes-ni or aws-lc.
    #[arg(long, value_name = "PATH")]
    pub xts_path: Option<String>,
    /// Also measure the AES instruction ceiling: the AES instructions on
    /// the CPU's widest vectors (VAES 512 or 256-bit, else AES-NI),
    /// registers only, no memory traffic.
    #[arg(long)]
    pub ceiling: bool,
    /// Also report MiB per CPU-second of the measuring threads
    /// (CLOCK_THREAD_CPUTIME_ID): nearly independent of other processes'
    /// load, unlike the wall-clock figures.
    #[arg(long)]
    pub cpu_time: bool,
}

#[derive(Debug, clap::Args)]
pub struct RandArgs {
    /// How many bytes (suffixes K, M, G, T are powers of 1024).
    #[arg(value_parser = parse_size, value_name = "BYTES")]
    pub bytes: u64,
    /// Write to this file instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

fn parse_usize_size(text: &str) -> Result<usize, String> {
    let size = parse_size(text)?;
    usize::try_from(size).map_err(|_| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Args;

    fn missing_help(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path} <{id}>"));
            }
        }
        for sub in command.get_subcommands() {
            let name = sub.get_name();
            if name == "help" {
                continue;
            }
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                missing.push(format!("{path} {name}"));
            }
            missing_help(sub, &format!("{path} {name}"), missing);
        }
    }

    /// Argument ids used twice in one command (such as a `--version N`
    /// beside the program's propagated `--version`): clap's own check of
    /// this runs only in debug builds, and CI tests release builds.
    fn duplicate_ids(command: &clap::Command, path: &str, found: &mut Vec<String>) {
        let mut seen = std::collections::HashSet::new();
        for arg in command.get_arguments() {
            if !seen.insert(arg.get_id().as_str()) {
                found.push(format!("{path} <{}>", arg.get_id()));
            }
        }
        for sub in command.get_subcommands() {
            duplicate_ids(sub, &format!("{path} {}", sub.get_name()), found);
        }
    }

    #[test]
    fn every_command_and_flag_has_help_text() {
        let command = Args::command();
        command.clone().debug_assert();
        let mut missing = Vec::new();
        missing_help(&command, "rampart", &mut missing);
        assert!(missing.is_empty(), "without help text: {missing:#?}");
        let mut built = command;
        built.build();
        let mut duplicates = Vec::new();
        duplicate_ids(&built, "rampart", &mut duplicates);
        assert!(duplicates.is_empty(), "argument ids used twice: {duplicates:#?}");
    }

    #[test]
    fn kms_bench_kmip_takes_its_operations_by_name() {
        use clap::Parser;

        use crate::commands::kms::{KmipOperationArg as Op, KmsCommand};

        let parse = |ops: &str| {
            let args = ["rampart", "kms", "bench", "--kmip", "--key", "k", "--operations", ops];
            match Args::try_parse_from(args).map(|a| a.command) {
                Ok(super::Command::Kms(KmsCommand::Bench(bench))) => Ok(bench.operations),
                Ok(other) => panic!("not kms bench: {other:?}"),
                Err(e) => Err(e.kind()),
            }
        };
        assert_eq!(
            parse(
                "get,encrypt,create-key-pair-rsa-2048,create-key-pair-ec-p256,sign-ecdsa-p256,\
                 sign-rsa-2048-pss,get-certificate"
            ),
            Ok(vec![
                Op::Get,
                Op::Encrypt,
                Op::CreateKeyPairRsa2048,
                Op::CreateKeyPairEcP256,
                Op::SignEcdsaP256,
                Op::SignRsa2048Pss,
                Op::GetCertificate,
            ])
        );
        assert_eq!(parse("sign"), Err(clap::error::ErrorKind::InvalidValue));
    }
}
