//! `kms serve`: one key server's life, from opening its store to its
//! shutdown signal: memory locked, the REST (and KMIP) listeners bound,
//! SIGHUP reopening the audit file, SIGTERM or SIGINT stopping both front
//! ends at once.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::AdminError;
use crate::error::KmsError;
use crate::server::{Server, ServerOptions};

/// What `kms serve` runs.
#[derive(Debug, Clone)]
pub struct ServeSettings {
    pub server: ServerOptions,
    /// `sqlite` (default: `DIR/kms.db`), a `.db` path or a postgres:// URL.
    pub store: Option<String>,
    /// The REST API's address.
    pub listen: String,
    /// The KMIP front end's address, when it is on.
    pub kmip_listen: Option<String>,
}

/// Where a started server listens, once it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listening {
    pub rest: SocketAddr,
    pub kmip: Option<SocketAddr>,
    /// Waiting for shares or a PIN (`kms unseal`).
    pub sealed: bool,
}

/// The PIN file systemd hands the service (`LoadCredential=hsm-pin:...`),
/// when there is one.
#[must_use]
pub fn systemd_pin_credential() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("CREDENTIALS_DIRECTORY")?).join("hsm-pin");
    path.is_file().then_some(path)
}

/// Sets up the process for a server, before its runtime starts any
/// thread: few malloc arenas, and all of its memory locked.
pub fn prepare_process() {
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
}

/// Runs a key server until SIGTERM or SIGINT (after
/// [`prepare_process`]). Without a PIN file, an HSM deployment's PIN
/// comes from the systemd credential `hsm-pin` when present. `ready` is told where the server listens once both listeners
/// are bound, before the first connection is served.
pub async fn serve(
    mut settings: ServeSettings,
    ready: impl FnOnce(&Listening) -> std::io::Result<()>,
) -> Result<(), AdminError> {
    let store = crate::store::open(settings.store.as_deref(), &settings.server.data_dir).await?;
    if settings.server.hsm_pin_file.is_none() {
        settings.server.hsm_pin_file = systemd_pin_credential();
    }
    let opts = &settings.server;
    if opts.audit.checkpoint_interval.is_zero() {
        return Err(AdminError::Usage("--audit-checkpoint-interval must be more than 0".into()));
    }
    opts.limits.validate().map_err(|e| AdminError::Usage(format!("kms serve: {e}")))?;
    let server = Server::new(opts, store).await?;
    // A busy address names the flag that moves it.
    let listener =
        crate::server::bind(&settings.listen).await.map_err(|e| naming_flag(e, "--listen"))?;
    let kmip = match &settings.kmip_listen {
        None => None,
        Some(spec) => {
            Some(crate::server::bind(spec).await.map_err(|e| naming_flag(e, "--kmip-listen"))?)
        }
    };
    let address = |listener: &tokio::net::TcpListener, what: &str| {
        listener.local_addr().map_err(|e| AdminError::Io(format!("cannot read the {what}: {e}")))
    };
    let listening = Listening {
        rest: address(&listener, "listening address")?,
        kmip: kmip.as_ref().map(|l| address(l, "KMIP listening address")).transpose()?,
        sealed: server.is_sealed(),
    };
    ready(&listening).map_err(AdminError::Output)?;
    if let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
    {
        let server = server.clone();
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: reopening the audit file");
                server.reopen_audit_file();
            }
        });
    }
    let Some(kmip) = kmip else {
        return Ok(server.run(listener, shutdown_signal()).await?);
    };
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
    Ok(rest.and(kmip)?)
}

/// A listener's error, naming the flag that sets its address.
fn naming_flag(error: KmsError, flag: &str) -> KmsError {
    match error {
        KmsError::Config(message) => KmsError::Config(format!("{message} (change it with {flag})")),
        other => other,
    }
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
