//! Rows into the model, written once for both stores: each decoder reads
//! the columns of its statement in [`sql`](super::sql) through
//! [`Columns`], which a SQLite row and a PostgreSQL row both are.

use crate::audit::Mark;
use crate::error::Result;
use crate::model::{AuditEntry, ClientInfo, ClientRevocation, KeyInfo, KeyVersionInfo};

use super::{
    decode_labels, decode_policy, to_u32, to_u64, version_info, KmipAttributeRow, KmipObject,
    KmipUse, MaterialRow, ServerPresence, VersionRow,
};

/// A value both drivers read from a column.
pub(crate) trait Value:
    rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>
{
}

impl<T: rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>> Value for T {}

/// A result row of either store.
pub(crate) trait Columns {
    /// Column `i`.
    fn get<T: Value>(&self, i: usize) -> Result<T>;

    /// Column `i`, text, borrowed from the row (no copy).
    fn with_str<T>(&self, i: usize, f: impl FnOnce(&str) -> Result<T>) -> Result<T>;
}

impl Columns for rusqlite::Row<'_> {
    fn get<T: Value>(&self, i: usize) -> Result<T> {
        Ok(rusqlite::Row::get(self, i)?)
    }

    fn with_str<T>(&self, i: usize, f: impl FnOnce(&str) -> Result<T>) -> Result<T> {
        f(self.get_ref(i)?.as_str().map_err(rusqlite::Error::from)?)
    }
}

impl Columns for tokio_postgres::Row {
    fn get<T: Value>(&self, i: usize) -> Result<T> {
        Ok(self.try_get(i)?)
    }

    fn with_str<T>(&self, i: usize, f: impl FnOnce(&str) -> Result<T>) -> Result<T> {
        f(self.try_get(i)?)
    }
}

/// An entry of [`sql::audit_columns`](super::sql::audit_columns).
pub(crate) fn audit_entry(r: &impl Columns) -> Result<AuditEntry> {
    Ok(AuditEntry {
        seq: to_u64(r.get(0)?, "audit sequence number")?,
        time_ms: r.get(1)?,
        client: r.get(2)?,
        operation: r.get(3)?,
        key: r.get(4)?,
        version: r.get::<Option<i64>>(5)?.map(|v| to_u32(v, "key version")).transpose()?,
        outcome: r.get(6)?,
        detail: r.get(7)?,
        hash: hex::encode(r.get::<Vec<u8>>(8)?),
        mac: r.get::<Option<Vec<u8>>>(9)?.map(hex::encode),
    })
}

/// A client of [`sql::client_columns`](super::sql::client_columns).
pub(crate) fn client(r: &impl Columns) -> Result<ClientInfo> {
    Ok(ClientInfo {
        name: r.get(0)?,
        labels: r.with_str(1, decode_labels)?,
        admin: r.get(2)?,
        serial: r.get(3)?,
        fingerprint: r.get(4)?,
        created_ms: r.get(5)?,
        not_after_ms: r.get(6)?,
        revoked: match r.get::<Option<i64>>(7)? {
            Some(revoked_ms) => Some(ClientRevocation {
                revoked_ms,
                reason: r.get::<Option<String>>(8)?.unwrap_or_default(),
            }),
            None => None,
        },
    })
}

/// A key without its versions: name, exportable, policy, creation time.
pub(crate) fn key(r: &impl Columns) -> Result<KeyInfo> {
    Ok(KeyInfo {
        name: r.get(0)?,
        exportable: r.get(1)?,
        allow: r.with_str(2, decode_policy)?,
        created_ms: r.get(3)?,
        versions: Vec::new(),
    })
}

/// A version from its columns at `at`: number, state, reason, creation and
/// change times.
pub(crate) fn version(r: &impl Columns, at: usize) -> Result<KeyVersionInfo> {
    r.with_str(at + 1, |state| {
        version_info(r.get(at)?, state, r.get(at + 2)?, r.get(at + 3)?, r.get(at + 4)?)
    })
}

/// A row of [`sql::VERSION_ROWS`](super::sql::VERSION_ROWS).
pub(crate) fn version_row(r: &impl Columns) -> Result<VersionRow> {
    Ok(VersionRow {
        version: to_u32(r.get(0)?, "key version")?,
        state: r.get(1)?,
        reason: r.get(2)?,
        changed_ms: r.get(3)?,
        material: r.get(4)?,
    })
}

/// A row of a key page (the key's columns, then one version's at 4), added
/// to the page: rows come by key, then version, so a key's rows follow
/// each other.
pub(crate) fn push_key_page_row(keys: &mut Vec<KeyInfo>, r: &impl Columns) -> Result<()> {
    let version = version(r, 4)?;
    if let Some(last) = keys.last_mut() {
        if r.with_str(0, |name| Ok(last.name == name))? {
            last.versions.push(version);
            return Ok(());
        }
    }
    let mut key = key(r)?;
    key.versions.push(version);
    keys.push(key);
    Ok(())
}

/// A [`MaterialRow`] of [`sql::key_material`](super::sql::key_material)
/// from column `at` on.
pub(crate) fn material_row(r: &impl Columns, at: usize) -> Result<MaterialRow> {
    Ok(MaterialRow {
        allow: r.with_str(at, decode_policy)?,
        exportable: r.get(at + 1)?,
        version: version(r, at + 2)?,
        material: r.get(at + 7)?,
        kmip: match r.get::<Option<i64>>(at + 8)? {
            Some(object_type) => Some(KmipUse {
                object_type: to_u32(object_type, "KMIP object type")?,
                activation_ms: r.get(at + 9)?,
                deactivation_ms: r.get(at + 10)?,
                algorithm: r.get::<Option<i64>>(at + 11)?.and_then(|v| u32::try_from(v).ok()),
                length: r.get::<Option<i64>>(at + 12)?.and_then(|v| i32::try_from(v).ok()),
            }),
            None => None,
        },
    })
}

/// A KMIP object of [`sql::kmip_object_columns`](super::sql). Numbers out
/// of range read as absent (0 for the version and type).
pub(crate) fn kmip_object(r: &impl Columns) -> Result<KmipObject> {
    let u = |i: usize| -> Result<Option<u32>> {
        Ok(r.get::<Option<i64>>(i)?.and_then(|v| u32::try_from(v).ok()))
    };
    let int = |i: usize| -> Result<Option<i32>> {
        Ok(r.get::<Option<i64>>(i)?.and_then(|v| i32::try_from(v).ok()))
    };
    Ok(KmipObject {
        key: r.get(0)?,
        version: u(1)?.unwrap_or(0),
        object_type: u(2)?.unwrap_or(0),
        algorithm: u(3)?,
        length: int(4)?,
        usage_mask: int(5)?,
        secret_type: u(6)?,
        owner: r.get(7)?,
        activation_ms: r.get(8)?,
        deactivation_ms: r.get(9)?,
        compromise_occurrence_ms: r.get(10)?,
        compromised: r.get::<i64>(11)? != 0,
    })
}

/// A KMIP attribute value: version, name, position, value.
pub(crate) fn kmip_attribute(r: &impl Columns) -> Result<KmipAttributeRow> {
    Ok(KmipAttributeRow {
        version: to_u32(r.get(0)?, "KMIP attribute version")?,
        name: r.get(1)?,
        position: to_u32(r.get(2)?, "KMIP attribute position")?,
        value: r.get(3)?,
    })
}

/// An audit mark (anchor or checkpoint): seq, hash, time, MAC.
pub(crate) fn mark(r: &impl Columns) -> Result<Mark> {
    Ok(Mark {
        seq: to_u64(r.get(0)?, "audit mark sequence number")?,
        hash: r.get(1)?,
        time_ms: r.get(2)?,
        mac: r.get(3)?,
    })
}

/// A server of [`sql::SERVERS_SEEN`](super::sql::SERVERS_SEEN).
pub(crate) fn server(r: &impl Columns) -> Result<ServerPresence> {
    Ok(ServerPresence {
        id: r.get(0)?,
        host: r.get(1)?,
        address: r.get(2)?,
        version: r.get(3)?,
        started_ms: r.get(4)?,
        seen_ms: r.get(5)?,
    })
}
