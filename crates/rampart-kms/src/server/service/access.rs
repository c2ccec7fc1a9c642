//! Who may do what with a key: the checks the REST API, the web console
//! and KMIP share, with the error texts every front end reports.

use crate::error::{KmsError, Result};
use crate::model::{now_ms, ClientInfo, Selector};
use rampart_kmip::enums::{CryptographicAlgorithm, ObjectType};

use crate::store::KmipUse;

/// How a data operation uses a key version (the REST operations that
/// reveal or apply key material).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyUse {
    Wrap,
    Unwrap,
    Export,
}

/// Refuses `operation` to a client without an admin certificate.
pub(crate) fn require_admin(client: &ClientInfo, operation: &str) -> Result<()> {
    if client.admin {
        return Ok(());
    }
    Err(KmsError::Forbidden(format!("{operation} needs an admin certificate")))
}

/// Whether a key's allow rules let `client` use it.
pub(crate) fn may_use(client: &ClientInfo, allow: &[Selector]) -> bool {
    allow.iter().any(|s| s.matches(client))
}

fn not_allowed(client: &ClientInfo, key: &str) -> KmsError {
    KmsError::Forbidden(format!("client {} is not allowed to use key {key}", client.name))
}

/// Refuses `client` the use of key `key` unless its allow rules match it.
pub(crate) fn require_use(client: &ClientInfo, key: &str, allow: &[Selector]) -> Result<()> {
    if may_use(client, allow) {
        return Ok(());
    }
    Err(not_allowed(client, key))
}

/// Whether `client` may see key `key` (its attributes, in a list): an
/// admin sees every key, any other client the keys it may use.
pub(crate) fn may_see(client: &ClientInfo, allow: &[Selector]) -> bool {
    client.admin || may_use(client, allow)
}

/// Refuses `client` the sight of key `key` (see [`may_see`]).
pub(crate) fn require_visible(client: &ClientInfo, key: &str, allow: &[Selector]) -> Result<()> {
    if may_see(client, allow) {
        return Ok(());
    }
    Err(not_allowed(client, key))
}

/// Refuses `client` a change of key `key`'s life cycle or attributes
/// unless it sees the key and is an admin or the key's `owner` (the
/// client that created it over KMIP).
pub(crate) fn require_manage(
    client: &ClientInfo,
    key: &str,
    allow: &[Selector],
    owner: Option<&str>,
) -> Result<()> {
    require_visible(client, key, allow)?;
    if client.admin || owner == Some(client.name.as_str()) {
        return Ok(());
    }
    Err(KmsError::Forbidden(format!(
        "client {} may use key {key} but not change it (an admin or the client that created \
         it over KMIP may)",
        client.name
    )))
}

/// The KMIP dates and object type of a key version bound its REST use as
/// they bound its KMIP use: nothing before its Activation Date (KMIP
/// Pre-Active), no new wrap from its Deactivation Date on (unwrapping
/// stays allowed, as KMIP lets a Deactivated key decrypt). The REST API
/// wraps with AES-256 keys only: any other object (a symmetric key of
/// another algorithm or length, Secret Data, a private key...) is refused
/// for wrapping; every object but a split key is exported.
pub(crate) fn check_kmip_dates(
    kmip: &KmipUse,
    name: &str,
    version: u32,
    key_use: KeyUse,
) -> Result<()> {
    let now = now_ms();
    let object_type = ObjectType(kmip.object_type);
    let aes_256 = object_type == ObjectType::SYMMETRIC_KEY
        && kmip.algorithm.is_none_or(|a| a == CryptographicAlgorithm::AES.0)
        && kmip.length.is_none_or(|l| l == 256);
    // Split key parts are KMIP's alone (the REST API has no form for
    // their fields); every other object exports in its stored form
    // (a private key as PKCS#8, a public key as SubjectPublicKeyInfo).
    if key_use == KeyUse::Export && object_type == ObjectType::SPLIT_KEY {
        return Err(KmsError::Forbidden(format!(
            "key {name} version {version} is a KMIP {object_type}: the REST API does not \
             export split keys (use KMIP Get)"
        )));
    }
    if key_use != KeyUse::Export && !aes_256 {
        let what = if object_type == ObjectType::SYMMETRIC_KEY {
            let algorithm = kmip
                .algorithm
                .map_or_else(|| "unknown".to_owned(), |a| CryptographicAlgorithm(a).to_string());
            let length = kmip.length.map_or_else(|| "?".to_owned(), |l| l.to_string());
            format!("a KMIP {algorithm} {length}-bit symmetric key")
        } else {
            format!("a KMIP {object_type}")
        };
        return Err(KmsError::Forbidden(format!(
            "key {name} version {version} is {what}, not an AES-256 key: the REST API wraps \
             with AES-256 keys only"
        )));
    }
    if kmip.activation_ms.is_none_or(|at| at > now) {
        return Err(KmsError::Forbidden(format!(
            "key {name} version {version} is not active yet (KMIP Pre-Active)"
        )));
    }
    if key_use == KeyUse::Wrap && kmip.deactivation_ms.is_some_and(|at| at <= now) {
        return Err(KmsError::Forbidden(format!(
            "key {name} version {version} is deactivated (KMIP): it unwraps but no longer wraps"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Labels;

    fn client(name: &str, admin: bool, labels: &[(&str, &str)]) -> ClientInfo {
        let labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        ClientInfo {
            name: name.into(),
            labels: Labels::new(labels).unwrap(),
            admin,
            serial: "01".into(),
            fingerprint: "ab".repeat(32),
            created_ms: 0,
            not_after_ms: i64::MAX,
            revoked: None,
        }
    }

    fn rules(texts: &[&str]) -> Vec<Selector> {
        texts.iter().map(|t| Selector::parse(t).unwrap()).collect()
    }

    #[test]
    fn use_needs_a_matching_rule_even_for_an_admin() {
        let allow = rules(&["client:web", "label:region=eu"]);
        assert!(require_use(&client("web", false, &[]), "k", &allow).is_ok());
        assert!(require_use(&client("db", false, &[("region", "eu")]), "k", &allow).is_ok());
        let error = require_use(&client("root", true, &[]), "k", &allow).unwrap_err();
        assert_eq!(error.status(), 403);
        assert_eq!(
            error.to_string(),
            KmsError::Forbidden("client root is not allowed to use key k".into()).to_string()
        );
    }

    #[test]
    fn admins_see_every_key_others_only_those_they_may_use() {
        let allow = rules(&["client:web"]);
        assert!(require_visible(&client("root", true, &[]), "k", &allow).is_ok());
        assert!(require_visible(&client("web", false, &[]), "k", &allow).is_ok());
        let error = require_visible(&client("db", false, &[]), "k", &allow).unwrap_err();
        assert!(error.to_string().contains("client db is not allowed to use key k"), "{error}");
    }

    #[test]
    fn changes_need_an_admin_or_the_owner() {
        let allow = rules(&["client:web", "client:app"]);
        assert!(require_manage(&client("root", true, &[]), "k", &allow, None).is_ok());
        assert!(require_manage(&client("app", false, &[]), "k", &allow, Some("app")).is_ok());
        let error =
            require_manage(&client("web", false, &[]), "k", &allow, Some("app")).unwrap_err();
        assert!(error.to_string().contains("may use key k but not change it"), "{error}");
        let error = require_manage(&client("db", false, &[]), "k", &allow, Some("db")).unwrap_err();
        assert!(error.to_string().contains("not allowed to use key k"), "{error}");
    }

    #[test]
    fn admin_operations_name_the_operation() {
        assert!(require_admin(&client("root", true, &[]), "key.list").is_ok());
        let error = require_admin(&client("web", false, &[]), "key.list").unwrap_err();
        assert!(error.to_string().contains("key.list needs an admin certificate"), "{error}");
    }

    #[test]
    fn kmip_dates_bound_rest_use() {
        let now = now_ms();
        let key = KmipUse {
            object_type: 2,
            activation_ms: Some(now - 1000),
            deactivation_ms: None,
            algorithm: Some(3),
            length: Some(256),
        };
        for key_use in [KeyUse::Wrap, KeyUse::Unwrap, KeyUse::Export] {
            assert!(check_kmip_dates(&key, "k", 1, key_use).is_ok());
        }
        let pre_active = KmipUse { activation_ms: None, ..key };
        let error = check_kmip_dates(&pre_active, "k", 1, KeyUse::Unwrap).unwrap_err();
        assert!(error.to_string().contains("k version 1 is not active yet (KMIP Pre-Active)"));
        let later = KmipUse { activation_ms: Some(now + 60_000), ..key };
        assert!(check_kmip_dates(&later, "k", 1, KeyUse::Export).is_err());
        let deactivated = KmipUse { deactivation_ms: Some(now - 1), ..key };
        let error = check_kmip_dates(&deactivated, "k", 2, KeyUse::Wrap).unwrap_err();
        assert!(error.to_string().contains("it unwraps but no longer wraps"), "{error}");
        assert!(check_kmip_dates(&deactivated, "k", 2, KeyUse::Unwrap).is_ok());
        let secret = KmipUse { object_type: 7, ..key };
        assert!(check_kmip_dates(&secret, "k", 1, KeyUse::Export).is_ok());
        let error = check_kmip_dates(&secret, "k", 1, KeyUse::Wrap).unwrap_err();
        assert!(error.to_string().contains("is a KMIP Secret Data, not an AES-256"), "{error}");
        let private = KmipUse { object_type: 4, algorithm: Some(4), length: Some(2048), ..key };
        for key_use in [KeyUse::Wrap, KeyUse::Unwrap] {
            let error = check_kmip_dates(&private, "k", 1, key_use).unwrap_err();
            assert!(error.to_string().contains("is a KMIP Private Key"), "{error}");
        }
        assert!(check_kmip_dates(&private, "k", 1, KeyUse::Export).is_ok());
        let split = KmipUse { object_type: 5, ..key };
        let error = check_kmip_dates(&split, "k", 1, KeyUse::Export).unwrap_err();
        assert!(error.to_string().contains("does not export split keys"), "{error}");
        let hmac = KmipUse { algorithm: Some(9), length: Some(256), ..key };
        let error = check_kmip_dates(&hmac, "k", 1, KeyUse::Wrap).unwrap_err();
        assert!(error.to_string().contains("HMAC-SHA256 256-bit symmetric key"), "{error}");
        assert!(check_kmip_dates(&hmac, "k", 1, KeyUse::Export).is_ok());
    }
}
