//! Audit records: the entry every front end (REST, console, KMIP, the TLS
//! handshake) writes for a request, stamped now.

use crate::model::{now_ms, AuditDraft};

/// The audit entry of `operation` by `client` on `key` (and `version`),
/// stamped now.
pub(crate) fn entry(
    client: String,
    operation: &str,
    key: Option<String>,
    version: Option<u32>,
    outcome: &str,
    detail: String,
) -> AuditDraft {
    AuditDraft {
        time_ms: now_ms(),
        client,
        operation: operation.to_owned(),
        key,
        version,
        outcome: outcome.to_owned(),
        detail,
    }
}

/// The audit entry of `operation` refused to a peer not yet identified
/// (client `-`).
pub(crate) fn refused_peer(operation: &str, detail: String) -> AuditDraft {
    entry("-".into(), operation, None, None, "denied", detail)
}
