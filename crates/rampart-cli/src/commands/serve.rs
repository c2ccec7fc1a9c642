//! `rampart serve`: unlock volumes and export their plaintext over NBD.

use std::io::Write;
use std::path::Path;

use rampart_crypto::SecretBytes;
use rampart_kms::binding::BoundToken;
use rampart_luks::{Luks, MetadataIo};
use rampart_nbd::{Limits, ServerConfig, TlsMode};
use rampart_serve::chain;
use rampart_serve::heartbeat::Checker;
use rampart_serve::open::{OpenError, VolumeKeys};
use rampart_serve::serve::{self, Listeners, OpenedExports, Volumes};

use crate::cli::{ServeArgs, ServeTlsArg};
use crate::commands::header::warn;
use crate::commands::keysource::KeySource;
use crate::commands::kms;
use crate::commands::plain::{self, Headerless};
use crate::errors::{nbd_error, serve_error};
use crate::UsageError;

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let mut volumes =
        Volumes::parse(&args.volumes, args.header.clone(), args.read_only).map_err(serve_error)?;
    volumes.integrity_no_journal = args.integrity_no_journal;
    let tls_mode = match (args.tls, &args.tls_cert) {
        (None, None) | (Some(ServeTlsArg::Off), _) => TlsMode::Off,
        (None | Some(ServeTlsArg::Required), Some(_)) => TlsMode::Required,
        (Some(ServeTlsArg::On), Some(_)) => TlsMode::Optional,
        (Some(ServeTlsArg::On | ServeTlsArg::Required), None) => {
            return Err(UsageError("--tls needs --tls-cert and --tls-key".into()).into())
        }
    };
    for (flag, time) in
        [("--handshake-timeout", args.handshake_timeout), ("--stall-timeout", args.stall_timeout)]
    {
        if time.is_zero() {
            return Err(UsageError(format!("{flag} must be longer than zero")).into());
        }
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) if tls_mode != TlsMode::Off => Some(
            rampart_nbd::tls_config(cert, key, args.tls_client_ca.as_deref()).map_err(nbd_error)?,
        ),
        _ => None,
    };

    let headerless = Headerless::from_args(
        &args.plain,
        ("--offset", args.data_offset),
        &args.key,
        &args.tokens,
        args.header.as_deref(),
        args.one_time_key,
    )?;
    let opened = match &headerless {
        Some(headerless) => open_headerless(&volumes, headerless)?,
        None => open_luks(args, &volumes)?,
    };
    // Volumes unlocked by the key manager keep asking it whether they may
    // stay unlocked.
    let checker = match opened.heartbeat_volumes(args.heartbeat) {
        Some(held) => {
            let bundle = kms::load_bundle(&args.tokens.client)?;
            Some(Checker::connect(&bundle, held, args.heartbeat, args.grace).map_err(serve_error)?)
        }
        None => None,
    };
    let config = ServerConfig {
        exports: Vec::new(),
        tls,
        tls_mode,
        kernel_tls: args.ktls,
        max_inflight_bytes: usize::try_from(args.max_inflight).unwrap_or(usize::MAX),
        limits: Limits {
            handshake_timeout: args.handshake_timeout,
            idle_timeout: (!args.idle_timeout.is_zero()).then_some(args.idle_timeout),
            stall_timeout: args.stall_timeout,
            max_connections: args.max_connections,
            max_requests: args.max_requests as usize,
            ..Limits::default()
        },
    };
    let listeners = Listeners {
        unix: args.socket.clone(),
        tcp: args.listen.clone(),
        metrics: args.metrics_listen.clone(),
    };
    let exports = volumes.volumes.len();
    serve::run(opened, config, &listeners, checker, |uris| {
        let mut out = std::io::stdout().lock();
        for uri in uris {
            writeln!(out, "{uri}")?;
        }
        out.flush()?;
        crate::notify::ready(&format!("serving {exports} export(s)"));
        Ok(())
    })
    .map_err(serve_error)
}

/// Each volume opens with its own bound token if it has one; the
/// passphrase is asked for (once, shared) only when a volume needs it.
fn open_luks(args: &ServeArgs, volumes: &Volumes) -> anyhow::Result<OpenedExports> {
    let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ");
    serve::open_exports(volumes, &mut source, &mut warn, &mut |path, e| {
        eprintln!("warning: {}: no online reencryption while served: {}", path.display(), chain(e))
    })
    .map_err(open_error)
}

/// Headerless volumes: a one-time key is made for each volume as it
/// opens; a plain volume's key is read once and serves every volume.
fn open_headerless(volumes: &Volumes, headerless: &Headerless) -> anyhow::Result<OpenedExports> {
    // A one-time key must never reach a disk, also as the cipher state
    // derived from it: nothing of the server is swapped out (the volume's
    // mapped page cache excepted, which holds only ciphertext).
    if matches!(headerless.key, plain::HeaderlessKey::OneTime) && !rampart_crypto::lock_all_memory()
    {
        eprintln!(
            "rampart: warning: cannot lock the server's memory (RLIMIT_MEMLOCK is limited): \
             the cipher state of the one-time key could be swapped out; run with \
             LimitMEMLOCK=infinity, as the packaged unit does"
        );
    }
    let shared = match headerless.key {
        plain::HeaderlessKey::OneTime => None,
        _ => Some(headerless.volume_key()?),
    };
    serve::open_headerless_exports(volumes, &headerless.layout, headerless.kind(), &mut |_| {
        match &shared {
            Some(key) => Ok(key.clone()),
            None => headerless.volume_key(),
        }
    })
    .map_err(open_error)
}

fn open_error(error: OpenError<anyhow::Error>) -> anyhow::Error {
    match error {
        OpenError::Key(e) => e,
        OpenError::Volume(e) => serve_error(e),
    }
}

impl VolumeKeys for KeySource<'_> {
    type Error = anyhow::Error;

    fn unlock(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
    ) -> anyhow::Result<(usize, SecretBytes)> {
        KeySource::unlock(self, luks, header, what)
    }

    fn unlock_reencrypting(
        &mut self,
        luks: &Luks,
        header: &dyn MetadataIo,
        what: &Path,
    ) -> anyhow::Result<(SecretBytes, SecretBytes)> {
        KeySource::unlock_reencrypting(self, luks, header, what)
    }

    fn unlocked_by(&self) -> Option<&BoundToken> {
        KeySource::unlocked_by(self)
    }
}
