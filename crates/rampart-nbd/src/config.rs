//! What a server is asked to do: its exports, TLS and the limits each
//! client is held to.

use std::sync::Arc;
use std::time::Duration;

use crate::Export;

/// Whether connections may, must or cannot upgrade to TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS: `NBD_OPT_STARTTLS` is refused.
    Off,
    /// TLS offered; plain-text clients are served too.
    Optional,
    /// Every option but STARTTLS and ABORT is refused until TLS is up.
    Required,
}

/// Everything a server needs.
pub struct ServerConfig {
    pub exports: Vec<Export>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub tls_mode: TlsMode,
    /// Hand each TLS session over TCP to the kernel after its handshake
    /// (Linux kTLS), where the kernel has the `tls` module; user-space TLS
    /// elsewhere. See the `ktls` module for what the kernel cannot do.
    pub kernel_tls: bool,
    /// Cap on request payload bytes held in memory at once, across all
    /// connections; requests beyond it wait.
    pub max_inflight_bytes: usize,
    pub limits: Limits,
}

impl ServerConfig {
    /// Plain-text serving of `exports` with the default budget and limits.
    #[must_use]
    pub fn new(exports: Vec<Export>) -> Self {
        Self {
            exports,
            tls: None,
            tls_mode: TlsMode::Off,
            kernel_tls: false,
            max_inflight_bytes: DEFAULT_MAX_INFLIGHT,
            limits: Limits::default(),
        }
    }
}

/// Default of [`ServerConfig::max_inflight_bytes`].
pub const DEFAULT_MAX_INFLIGHT: usize = 256 << 20;

/// What one client may hold of the server, so that a hostile or broken
/// one is cut off instead of starving the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Time from connecting to the end of option haggling (TLS included).
    /// QEMU's NBD server allows 10 s since CVE-2024-7409.
    pub handshake_timeout: Duration,
    /// A connection in transmission with no request in flight that sends
    /// nothing for this long is closed. `None` (the default): never, as
    /// nbdkit and qemu-nbd do; mounted filesystems idle for hours.
    pub idle_timeout: Option<Duration>,
    /// A client with requests in flight that accepts no reply byte, or
    /// sends no byte of a started request's payload, for this long is
    /// disconnected; what its requests hold (buffers, the in-flight
    /// budget) is released.
    pub stall_timeout: Duration,
    /// Connections served at once across every listener; further ones are
    /// closed at once. 0: no limit.
    pub max_connections: usize,
    /// Requests one connection may have in flight; the server reads no
    /// further request from it until one is answered (TCP back-pressure,
    /// not an error). At least 1.
    pub max_requests: usize,
    /// On shutdown, how long connections may take to finish what is in
    /// flight before they are dropped.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: None,
            stall_timeout: Duration::from_secs(60),
            // QEMU's default since CVE-2024-7409.
            max_connections: 100,
            max_requests: 256,
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("exports", &self.exports)
            .field("tls_mode", &self.tls_mode)
            .field("kernel_tls", &self.kernel_tls)
            .field("max_inflight_bytes", &self.max_inflight_bytes)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}
