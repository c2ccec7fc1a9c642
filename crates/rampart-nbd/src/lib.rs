//! A Network Block Device server for any [`BlockDevice`].
//!
//! The protocol lives here and nothing else: what is served is whatever
//! implements `rampart_volume::BlockDevice`, so encryption is one layer
//! below and this crate never sees a key. Every request is validated at the
//! edge (magic, flags, bounds, sizes) before it reaches a device; a bad
//! client gets an error or a disconnect and never affects another.
//!
//! # Layout
//!
//! Each module depends only on those listed before it:
//!
//! - [`proto`]: the NBD wire constants (doc/proto.md of
//!   NetworkBlockDevice/nbd), the one place they are spelled out.
//! - `buffers`: the pool of request buffers.
//! - `metrics`: the counters ([`Stats`], per export and per server) and
//!   their Prometheus text.
//! - `config`: what a server is asked to do ([`ServerConfig`], [`Limits`],
//!   [`TlsMode`]).
//! - `connection`: a client's byte stream whatever carries it, and its
//!   upgrade to TLS in rustls or the kernel ([`tls_config`] builds the
//!   rustls side).
//! - `state`: what all connections share: the export table, limits,
//!   in-flight budget, buffers and counters, and the hand-over from the
//!   handshake to the transmission phase.
//! - `handshake`: fixed newstyle option haggling.
//! - `transmission`: requests validated, run against the device and
//!   answered.
//! - `server`: listeners, the accept loop, a thread per connection,
//!   shutdown, and the [`ServerHandle`] that closes exports while serving;
//!   `metrics_http` serves the metrics over HTTP.
#![forbid(unsafe_code)]

mod buffers;
mod config;
mod connection;
mod handshake;
mod metrics;
mod metrics_http;
pub mod proto;
mod server;
mod state;
mod transmission;

use std::sync::Arc;

pub use config::{Limits, ServerConfig, TlsMode, DEFAULT_MAX_INFLIGHT};
pub use connection::tls_config;
pub use metrics::Stats;
pub use metrics_http::serve_metrics;
pub use rampart_volume::BlockDevice;
pub use server::{Bound, Server, ServerHandle};

/// One named export.
#[derive(Clone)]
pub struct Export {
    /// The name clients ask for; the empty name is the default export.
    pub name: String,
    /// Shown by `nbdinfo` and `NBD_OPT_LIST`.
    pub description: String,
    pub device: Arc<dyn BlockDevice>,
    pub read_only: bool,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("name", &self.name)
            .field("size", &self.device.len())
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// Errors setting up a server (serving errors are per connection and logged).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NbdError {
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("invalid configuration: {0}")]
    Config(String),
}
