//! What every connection of a server shares: the export table, the limits,
//! the in-flight budget and request buffers, the counters, and how TLS is
//! offered. Built once from a [`ServerConfig`], checked as it is built.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Semaphore};

use crate::buffers::BufferPool;
use crate::config::{Limits, ServerConfig, TlsMode};
use crate::connection::{BoxStream, TlsUpgrade};
use crate::metrics::{ExportMetrics, ServerMetrics, Stats};
use crate::proto::{MAX_REQUEST, MAX_STRING};
use crate::{Export, NbdError};

/// Unit of the in-flight memory budget.
pub(crate) const PERMIT_BYTES: usize = 4096;

/// An export as the server holds it: its metrics outlive it, and closing
/// it takes the device out.
pub(crate) struct ExportSlot {
    pub(crate) name: String,
    pub(crate) metrics: Arc<ExportMetrics>,
    /// `None` once closed: new connections no longer find it.
    export: RwLock<Option<Export>>,
    /// Set to true when the export is closed: its connections stop.
    closing: watch::Sender<bool>,
}

impl ExportSlot {
    fn get(&self) -> Option<Export> {
        self.export.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Takes the export out for good and tells its connections to stop;
    /// `None` when it was closed already.
    pub(crate) fn close(&self) -> Option<Export> {
        let export = self.export.write().unwrap_or_else(PoisonError::into_inner).take()?;
        self.metrics.mark_closed();
        let _ = self.closing.send(true);
        Some(export)
    }
}

/// An open export found by name, with what its connections need.
pub(crate) struct Opened {
    pub(crate) export: Export,
    pub(crate) metrics: Arc<ExportMetrics>,
    /// Becomes true when the export is closed.
    pub(crate) closing: watch::Receiver<bool>,
}

/// What option haggling hands to the transmission phase.
pub(crate) struct Negotiated {
    pub(crate) stream: BoxStream,
    pub(crate) opened: Opened,
    pub(crate) structured: bool,
    pub(crate) base_allocation: bool,
}

pub(crate) struct ServerState {
    pub(crate) exports: Vec<ExportSlot>,
    pub(crate) metrics: ServerMetrics,
    /// `None`: the server has no certificate.
    pub(crate) tls: Option<TlsUpgrade>,
    pub(crate) tls_mode: TlsMode,
    pub(crate) inflight: Arc<Semaphore>,
    pub(crate) inflight_permits: u32,
    pub(crate) pool: BufferPool,
    pub(crate) stats: Arc<Stats>,
    pub(crate) limits: Limits,
    /// One permit per connection being served (`None`: no limit).
    pub(crate) connections: Option<Arc<Semaphore>>,
    /// When a refusal was last logged, to keep a flood from flooding the log.
    refusal_logged: Mutex<Option<Instant>>,
}

impl ServerState {
    pub(crate) fn new(config: ServerConfig) -> Result<Self, NbdError> {
        if config.exports.is_empty() {
            return Err(NbdError::Config("no exports".into()));
        }
        for (i, export) in config.exports.iter().enumerate() {
            if config.exports[..i].iter().any(|e| e.name == export.name) {
                return Err(NbdError::Config(format!(
                    "export name '{}' is used twice",
                    export.name
                )));
            }
            if export.name.len() > MAX_STRING || export.name.contains('\0') {
                return Err(NbdError::Config(
                    "export names must be at most 4096 bytes without NUL".into(),
                ));
            }
        }
        if config.limits.max_requests == 0 {
            return Err(NbdError::Config("at most 0 requests per connection".into()));
        }
        let zero = Duration::ZERO;
        if config.limits.handshake_timeout == zero
            || config.limits.stall_timeout == zero
            || config.limits.idle_timeout == Some(zero)
        {
            return Err(NbdError::Config("timeouts must be longer than zero".into()));
        }
        if config.tls_mode != TlsMode::Off && config.tls.is_none() {
            return Err(NbdError::Config("TLS requested without a certificate and key".into()));
        }
        let permits =
            (config.max_inflight_bytes / PERMIT_BYTES).max(MAX_REQUEST as usize / PERMIT_BYTES);
        let permits = u32::try_from(permits).unwrap_or(u32::MAX >> 4);
        Ok(Self {
            exports: config
                .exports
                .into_iter()
                .map(|export| ExportSlot {
                    name: export.name.clone(),
                    metrics: Arc::new(ExportMetrics::default()),
                    export: RwLock::new(Some(export)),
                    closing: watch::channel(false).0,
                })
                .collect(),
            metrics: ServerMetrics::default(),
            tls: config.tls.map(|tls| TlsUpgrade::new(tls, config.kernel_tls)),
            tls_mode: config.tls_mode,
            inflight: Arc::new(Semaphore::new(permits as usize)),
            inflight_permits: permits,
            // Idle buffers beyond half the in-flight budget are returned
            // to the allocator, so the budget still bounds memory.
            pool: BufferPool::new(permits as usize * PERMIT_BYTES / 2),
            stats: Arc::new(Stats::default()),
            connections: (config.limits.max_connections > 0).then(|| {
                Arc::new(Semaphore::new(config.limits.max_connections.min(Semaphore::MAX_PERMITS)))
            }),
            limits: config.limits,
            refusal_logged: Mutex::new(None),
        })
    }

    /// The open export named `name`.
    pub(crate) fn export(&self, name: &str) -> Option<Opened> {
        let slot = self.slot(name)?;
        Some(Opened {
            export: slot.get()?,
            metrics: Arc::clone(&slot.metrics),
            closing: slot.closing.subscribe(),
        })
    }

    /// The export named `name`, open or closed.
    pub(crate) fn slot(&self, name: &str) -> Option<&ExportSlot> {
        self.exports.iter().find(|e| e.name == name)
    }

    /// Every open export, in configuration order.
    pub(crate) fn open_exports(&self) -> Vec<Export> {
        self.exports.iter().filter_map(ExportSlot::get).collect()
    }

    /// Counts a connection refused over `max_connections`; logs the first
    /// of each second, with how many were refused in all.
    pub(crate) fn refused(&self, peer: &str) {
        let total = self.stats.refused_connections.fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let mut logged = self.refusal_logged.lock().unwrap_or_else(PoisonError::into_inner);
        if logged.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1)) {
            *logged = Some(now);
            tracing::warn!(
                %peer,
                "refused a connection: {} are open (--max-connections); {total} refused so far",
                self.limits.max_connections
            );
        }
    }
}
