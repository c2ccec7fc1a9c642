//! Key operations: create, read, rotate, revoke, destroy, and the key
//! version (with its material) a data operation may use.

use rampart_kmip::enums::ObjectType;
use std::sync::Arc;

use rampart_crypto::{random_secret, SecretBytes};

use super::access::{self, KeyUse};
use super::check_reason;
use crate::error::{KmsError, Result};
use crate::keys::{RootKey, KEY_BYTES};
use crate::model::{
    check_name, now_ms, parse_policy, ClientInfo, KeyInfo, KeyState, KeyVersionInfo, Selector,
};
use crate::server::state::State;
use crate::store::{MaterialRow, StateChange};

/// Key `name`, or a not-found error.
pub(crate) async fn get_key(state: &State, name: &str) -> Result<KeyInfo> {
    state
        .store
        .get_key(name.to_owned())
        .await?
        .ok_or_else(|| KmsError::NotFound(format!("key {name}")))
}

/// Creates key `name` with version 1 under the allow rules `allow`.
pub(crate) async fn create_key(
    state: &State,
    name: String,
    allow: &[String],
    exportable: bool,
) -> Result<KeyInfo> {
    check_name("key name", &name)?;
    let allow = parse_policy(allow)?;
    let root = state.require_root()?;
    let now = now_ms();
    let material = random_secret(KEY_BYTES)?;
    let sealed = root.seal_material(&name, 1, &material)?;
    let key = new_key(name, exportable, allow, now);
    state.store.create_key(key.clone(), sealed).await?;
    Ok(key)
}

/// A new key made at `at_ms`: its one version, 1, active.
pub(crate) fn new_key(name: String, exportable: bool, allow: Vec<Selector>, at_ms: i64) -> KeyInfo {
    KeyInfo {
        name,
        exportable,
        allow,
        created_ms: at_ms,
        versions: vec![KeyVersionInfo {
            version: 1,
            state: KeyState::Active,
            created_ms: at_ms,
            changed_ms: None,
        }],
    }
}

/// Adds a version to key `name`; `version` is set to the version tried.
pub(crate) async fn rotate_key(
    state: &State,
    name: &str,
    version: &mut Option<u32>,
) -> Result<KeyInfo> {
    let root = state.require_root()?;
    // A rotation adds an AES-256 version: a key pair, a certificate or
    // another KMIP object is re-keyed over KMIP, if at all.
    if let Some(object) = state.store.kmip_object(name.to_owned(), u32::MAX).await? {
        let object_type = ObjectType(object.object_type);
        if object_type != ObjectType::SYMMETRIC_KEY {
            return Err(KmsError::invalid(format!(
                "key {name} is a {}: only symmetric keys rotate over REST",
                type_name(object_type)
            )));
        }
    }
    for _ in 0..5 {
        let key = get_key(state, name).await?;
        let next = key.latest().map_or(1, |v| v.version + 1);
        *version = Some(next);
        let material = random_secret(KEY_BYTES)?;
        let sealed = root.seal_material(name, next, &material)?;
        match state.store.add_version(name.to_owned(), next, now_ms(), sealed).await {
            Ok(()) => return get_key(state, name).await,
            Err(KmsError::Conflict(_)) => continue,
            Err(error) => return Err(error),
        }
    }
    Err(KmsError::Conflict(format!("key {name} is being rotated concurrently; try again")))
}

/// Revokes one or all versions of key `name`.
pub(crate) async fn revoke_key(
    state: &State,
    name: &str,
    version: Option<u32>,
    reason: String,
) -> Result<KeyInfo> {
    check_reason(&reason)?;
    change_versions(state, name, version, StateChange::Revoke { reason }, now_ms()).await?;
    get_key(state, name).await
}

/// Destroys the material of one or all versions of key `name`.
pub(crate) async fn destroy_key(
    state: &State,
    name: &str,
    version: Option<u32>,
) -> Result<KeyInfo> {
    change_versions(state, name, version, StateChange::Destroy, now_ms()).await?;
    get_key(state, name).await
}

/// Revokes or destroys one version (or, `None`, all versions) of key
/// `name` at `at_ms`: what a REST or KMIP Revoke and Destroy store. How
/// many versions changed.
pub(crate) async fn change_versions(
    state: &State,
    name: &str,
    version: Option<u32>,
    change: StateChange,
    at_ms: i64,
) -> Result<u32> {
    state.store.change_state(name.to_owned(), version, change, at_ms).await
}

/// The version of key `name` that `client` may use for `key_use`, with
/// its material: the client must match the policy (checked first, so a
/// refused client learns nothing of the key's state), the version must be
/// active and within its KMIP dates, and export needs an exportable key.
/// `version` names the version asked for (`None`: the newest) and is set
/// to the one found, `key_known` once the key is found: both even when
/// the use is then refused, for the audit entry.
pub(crate) async fn usable(
    state: &State,
    client: &ClientInfo,
    root: &RootKey,
    name: &str,
    version: &mut Option<u32>,
    key_use: KeyUse,
    key_known: &mut bool,
) -> Result<(Arc<MaterialRow>, SecretBytes)> {
    let row = state.store.key_material(name.to_owned(), *version).await?.ok_or_else(|| {
        KmsError::NotFound(match *version {
            Some(v) => format!("key {name} version {v}"),
            None => format!("key {name}"),
        })
    })?;
    *version = Some(row.version.version);
    *key_known = true;
    access::require_use(client, name, &row.allow)?;
    if key_use == KeyUse::Export && !row.exportable {
        return Err(KmsError::Forbidden(format!("key {name} is not exportable")));
    }
    let v = row.version.version;
    if let Some(kmip) = &row.kmip {
        access::check_kmip_dates(kmip, name, v, key_use)?;
    }
    match (&row.version.state, &row.material) {
        (KeyState::Active, Some(blob)) => {
            let material = root.open_material(name, v, blob)?;
            // `check_kmip_dates` refused every KMIP object that is not an
            // AES-256 key; a REST key is one by construction.
            if key_use != KeyUse::Export && material.len() != KEY_BYTES {
                return Err(KmsError::InvalidRequest(format!(
                    "key {name} version {v} is not an AES-256 key: wrap and unwrap use \
                     AES-256 keys only"
                )));
            }
            Ok((row, material))
        }
        (KeyState::Revoked { .. }, _) => {
            Err(KmsError::KeyRevoked { name: name.to_owned(), version: v })
        }
        _ => Err(KmsError::KeyDestroyed { name: name.to_owned(), version: v }),
    }
}

/// The REST name of a KMIP object type.
pub(crate) fn type_name(object_type: ObjectType) -> &'static str {
    match object_type {
        ObjectType::SYMMETRIC_KEY => "symmetric-key",
        ObjectType::PRIVATE_KEY => "private-key",
        ObjectType::PUBLIC_KEY => "public-key",
        ObjectType::CERTIFICATE => "certificate",
        ObjectType::SECRET_DATA => "secret-data",
        ObjectType::OPAQUE_OBJECT => "opaque-object",
        ObjectType::SPLIT_KEY => "split-key",
        ObjectType::PGP_KEY => "pgp-key",
        _ => "other",
    }
}

/// The REST type name of an object type number (`None`: a REST key).
pub(crate) fn type_name_of(object_type: Option<u32>) -> &'static str {
    type_name(object_type.map_or(ObjectType::SYMMETRIC_KEY, ObjectType))
}
