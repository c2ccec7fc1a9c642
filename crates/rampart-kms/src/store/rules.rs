//! The rules both stores apply, written once: what is not found, what
//! conflicts, which statement a state change runs, which audit segments a
//! filtered list probes. Each store brings the rows; the verdicts are here.

use crate::audit::Mark;
use crate::error::{KmsError, Result};
use crate::model::ClientInfo;

use super::sql::{self, Sql};
use super::{StateChange, AUDIT_REFS_SEGMENT};

/// A state change that names no stored version of the key is not found.
pub(crate) fn check_versions_found(found: i64, name: &str, version: Option<u32>) -> Result<()> {
    if found > 0 {
        return Ok(());
    }
    Err(KmsError::NotFound(match version {
        Some(v) => format!("key {name} version {v}"),
        None => format!("key {name}"),
    }))
}

impl StateChange {
    /// The UPDATE that makes the change: revoking turns active versions
    /// revoked with the reason ($3) at $4; destroying drops the material
    /// of every version not destroyed yet, at $3.
    pub(crate) fn statement(&self) -> &'static Sql {
        match self {
            StateChange::Revoke { .. } => &sql::VERSIONS_REVOKE,
            StateChange::Destroy => &sql::VERSIONS_DESTROY,
        }
    }
}

/// Key `name` is not stored.
pub(crate) fn key_not_found(name: &str) -> KmsError {
    KmsError::NotFound(format!("key {name}"))
}

/// A new version must follow the key's newest: another one in between is
/// a concurrent rotation.
pub(crate) fn check_next_version(name: &str, newest: i64, version: u32) -> Result<()> {
    if newest + 1 != i64::from(version) {
        return Err(KmsError::Conflict(format!("key {name} was rotated concurrently")));
    }
    Ok(())
}

/// A store is initialised once.
pub(crate) fn check_not_initialised(initialised: bool) -> Result<()> {
    if initialised {
        return Err(KmsError::Conflict("this store is already initialised".into()));
    }
    Ok(())
}

/// The client a change named, or not found.
pub(crate) fn found_client(name: &str, client: Option<ClientInfo>) -> Result<ClientInfo> {
    client.ok_or_else(|| KmsError::NotFound(format!("client {name}")))
}

/// A name taken (a key's, a client's or its certificate's) is a conflict.
pub(crate) fn key_taken(name: &str) -> String {
    format!("key {name}")
}

/// See [`key_taken`].
pub(crate) fn client_taken(name: &str) -> String {
    format!("client {name} (or its certificate)")
}

/// A prune goes ahead only from the anchor it expects (`current`: the
/// stored one's sequence number, 0 for none), up to an entry whose stored
/// hash is still the anchor's.
pub(crate) fn check_prune(
    current: i64,
    expected_anchor_seq: u64,
    stored_hash: Option<Vec<u8>>,
    anchor: &Mark,
) -> Result<()> {
    if u64::try_from(current).ok() != Some(expected_anchor_seq) {
        return Err(KmsError::Conflict("the audit log was pruned concurrently; try again".into()));
    }
    if stored_hash.map(hex::encode).as_deref() != Some(anchor.hash.as_str()) {
        return Err(KmsError::Conflict(format!(
            "audit entry {} changed while it was being pruned",
            anchor.seq
        )));
    }
    Ok(())
}

/// The segment of `kms_audit_refs` sequence number `seq` is in.
pub(crate) fn segment_of(seq: i64) -> i64 {
    seq / i64::try_from(AUDIT_REFS_SEGMENT).unwrap_or(i64::MAX)
}

/// The segments a filtered audit list probes, first to last, when the
/// references are indexed up to `done`: from the one holding the first
/// entry still stored after the cursor (`first`; segments before a
/// prune's anchor hold nothing).
pub(crate) fn segments_to_probe(first: Option<i64>, done: i64) -> (i64, i64) {
    (segment_of(first.unwrap_or(done)), segment_of(done))
}
