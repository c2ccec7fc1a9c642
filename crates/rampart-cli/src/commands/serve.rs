//! `rampart serve`: unlock volumes and export their plaintext over NBD.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use anyhow::Context;
use rampart_nbd::{Bound, Export, Limits, Server, ServerConfig, TlsMode};
use rampart_volume::{BlockDevice, VolumePaths};

use crate::cli::ServeArgs;
use crate::commands::control::{self, ServedVolume};
use crate::commands::copy::open_layers;
use crate::commands::heartbeat::{self, HeldVolume};
use crate::commands::keysource::KeySource;
use crate::commands::kms;
use crate::UsageError;

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let exports_wanted = parse_volumes(args)?;
    let tls_mode = match (args.tls.as_deref(), &args.tls_cert) {
        (None, None) | (Some("off"), _) => TlsMode::Off,
        (None, Some(_)) | (Some("required" | "require"), Some(_)) => TlsMode::Required,
        (Some("on"), Some(_)) => TlsMode::Optional,
        (Some("on" | "required" | "require"), None) => {
            return Err(UsageError("--tls needs --tls-cert and --tls-key".into()).into())
        }
        (Some(other), _) => {
            return Err(UsageError(format!(
                "unknown --tls '{other}' (expected required, on or off)"
            ))
            .into())
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
        (Some(cert), Some(key)) if tls_mode != TlsMode::Off => {
            Some(rampart_nbd::tls_config(cert, key, args.tls_client_ca.as_deref()).map_err(usage)?)
        }
        _ => None,
    };

    // Each volume opens with its own bound token if it has one; the
    // passphrase is asked for (once, shared) only when a volume needs it.
    let mut source = KeySource::new(&args.key, &args.tokens, "Enter passphrase: ");
    let mut exports = Vec::new();
    let mut held = Vec::new();
    // Removed on return: each volume's socket for online reencryption.
    let mut _control_sockets = Vec::new();
    for (path, name) in exports_wanted {
        let paths = VolumePaths::new(&path, args.header.as_deref());
        let opened = open_layers(&paths, &mut source, args.read_only)?;
        let served = Arc::new(ServedVolume::new(
            paths.clone(),
            opened.raw,
            opened.device,
            opened.reencrypting,
            args.read_only,
        ));
        match control::listen(&opened.uuid, Arc::clone(&served)) {
            Ok(socket) => _control_sockets.push(socket),
            Err(e) => {
                eprintln!("warning: {}: no online reencryption while served: {e:#}", path.display())
            }
        }
        let device = served.device();
        if let Some(token) = source.unlocked_by() {
            let version = Arc::new(AtomicU32::new(token.key_version));
            served.follow_binding(&token.key, Arc::clone(&version));
            held.push(HeldVolume { export: name.clone(), key: token.key.clone(), version });
        }
        exports.push(Export {
            description: format!("{} (LUKS, {} bytes)", path.display(), device.len()),
            name,
            device,
            read_only: args.read_only,
        });
    }
    drop(source);
    // Volumes unlocked by the key manager keep asking it whether they may
    // stay unlocked.
    let checker = if held.is_empty() || args.heartbeat.is_zero() {
        None
    } else {
        let bundle = kms::load_bundle(&args.tokens.client)?;
        Some(heartbeat::Checker::new(&bundle, held, args.heartbeat, args.grace)?)
    };

    let config = ServerConfig {
        exports,
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
    let names: Vec<String> = config.exports.iter().map(|e| e.name.clone()).collect();
    let server = Server::new(config).map_err(usage)?;
    let handle = server.handle();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("rampart-serve")
        .build()
        .context("cannot start the I/O runtime")?;
    runtime.block_on(async {
        let mut listeners = Vec::new();
        for path in &args.socket {
            listeners.push(Bound::unix(path).map_err(usage)?);
        }
        let mut tcp = args.listen.clone();
        if tcp.is_empty() && args.socket.is_empty() {
            tcp.push("127.0.0.1:10809".to_owned());
        }
        for address in &tcp {
            listeners.push(Bound::tcp(address).await.map_err(usage)?);
        }
        // Aborted on return: the scrape endpoint lives as long as serving.
        let _metrics = match &args.metrics_listen {
            Some(address) => {
                let listener = tokio::net::TcpListener::bind(address).await.map_err(|e| {
                    UsageError(format!("cannot listen on {address} (--metrics-listen): {e}"))
                })?;
                let task = tokio::spawn(rampart_nbd::serve_metrics(listener, handle.clone()));
                Some(AbortOnDrop(task))
            }
            None => None,
        };
        {
            let mut out = std::io::stdout().lock();
            for listener in &listeners {
                for name in &names {
                    writeln!(out, "{}", listener.uri(tls_mode == TlsMode::Required, name))?;
                }
            }
            out.flush()?;
        }
        // The checker says why when it closed the last export; without
        // one, the sender is kept here so that the channel never closes.
        let (emptied_tx, mut emptied) = tokio::sync::oneshot::channel::<String>();
        let mut _unused_sender = None;
        let _checking = match checker {
            Some(checker) => {
                Some(AbortOnDrop(tokio::spawn(checker.run(handle.clone(), emptied_tx))))
            }
            None => {
                _unused_sender = Some(emptied_tx);
                None
            }
        };
        let mut all_closed = None;
        let shutdown = async {
            tokio::select! {
                () = shutdown_signal() => {}
                reason = &mut emptied => {
                    if let Ok(reason) = reason {
                        all_closed = Some(reason);
                    }
                }
            }
        };
        crate::notify::ready(&format!("serving {} export(s)", names.len()));
        server.run(listeners, shutdown).await.context("flushing the volumes on exit")?;
        match all_closed {
            Some(reason) => Err(anyhow::anyhow!("every export was closed: {reason}")),
            None => Ok(()),
        }
    })
}

/// Aborts a background task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    tokio::select! {
        _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
        _ = async { match int.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
    }
}

fn parse_volumes(args: &ServeArgs) -> anyhow::Result<Vec<(PathBuf, String)>> {
    if args.header.is_some() && args.volumes.len() > 1 {
        return Err(UsageError("--header can be used with a single volume only".into()).into());
    }
    let single = args.volumes.len() == 1;
    let mut exports: Vec<(PathBuf, String)> = Vec::new();
    for spec in &args.volumes {
        let (path, name) = match spec.split_once('=') {
            Some((path, name)) => (PathBuf::from(path), name.to_owned()),
            None if single => (PathBuf::from(spec), String::new()),
            None => {
                let name = PathBuf::from(spec)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| spec.clone());
                (PathBuf::from(spec), name)
            }
        };
        if exports.iter().any(|(_, n)| *n == name) {
            return Err(UsageError(format!("export name '{name}' is used twice")).into());
        }
        exports.push((path, name));
    }
    Ok(exports)
}

/// A setup error the user must fix (exit 2), with its whole cause chain.
fn usage(error: rampart_nbd::NbdError) -> UsageError {
    UsageError(format!("{:#}", anyhow::Error::from(error)))
}
