//! A slot's way to its key manager: the KMIP connections it keeps open
//! (one per request in flight, the idle ones kept for the next) and the
//! module's runtime that drives them. Each call takes an idle connection
//! or opens one, so concurrent threads never queue on one connection; a
//! broken connection fails over to the next address (`KmipClient`).

use std::sync::{Mutex, PoisonError};

use rampart_kmip::enums::Operation;
use rampart_kmip::message::ResponseBatchItem;
use rampart_kmip::ttlv::Item;
use rampart_kms_client::kmip::{KmipClient, KmipClientError};

/// Idle connections a slot keeps open.
const MAX_IDLE: usize = 32;

/// A slot's connections.
pub(crate) struct Connections {
    prototype: KmipClient,
    idle: Mutex<Vec<KmipClient>>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections").field("prototype", &self.prototype).finish_non_exhaustive()
    }
}

impl Connections {
    /// Connections made like `prototype` (opened when first needed).
    pub(crate) fn new(prototype: KmipClient) -> Self {
        Self { prototype, idle: Mutex::new(Vec::new()) }
    }
}

/// Where a KMIP request goes: a slot's connections, driven by the
/// module's runtime.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Remote<'a> {
    pub runtime: &'a tokio::runtime::Runtime,
    pub connections: &'a Connections,
}

impl Remote<'_> {
    /// Sends one KMIP request on a connection of its own for the call,
    /// kept open for the next one.
    pub(crate) fn call(
        self,
        batch: Vec<(Operation, Vec<Item>)>,
    ) -> Result<Vec<ResponseBatchItem>, KmipClientError> {
        let idle = &self.connections.idle;
        let taken = idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let mut client = taken.unwrap_or_else(|| self.connections.prototype.clone());
        let result = self.runtime.block_on(client.call(batch));
        if result.is_ok() {
            let mut idle = idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < MAX_IDLE {
                idle.push(client);
            }
        }
        result
    }
}
