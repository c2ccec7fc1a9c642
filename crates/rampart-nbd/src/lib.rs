//! A Network Block Device server for any [`BlockDevice`].
//!
//! The protocol lives here and nothing else: what is served is whatever
//! implements `rampart_volume::BlockDevice`, so encryption is one layer
//! below and this crate never sees a key. Every request is validated at the
//! edge (magic, flags, bounds, sizes) before it reaches a device; a bad
//! client gets an error or a disconnect and never affects another.
#![forbid(unsafe_code)]

mod buffers;
mod handshake;
mod ktls;
mod metrics;
mod metrics_http;
mod proto;
mod server;
mod tls;
mod transmission;

use std::sync::Arc;

pub use metrics_http::serve_metrics;
pub use rampart_volume::BlockDevice;
pub use server::{
    Bound, Limits, Server, ServerConfig, ServerHandle, Stats, TlsMode, DEFAULT_MAX_INFLIGHT,
};
pub use tls::tls_config;

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
