//! The attributes the server sets on an object with key material, and the
//! rules on the client-set attributes beyond those `object::STORED` keeps
//! as sent: who may set, modify and delete each (KMIP 1.4 §3, the rules
//! table of each attribute; KMIP 2.1 §4).
//!
//! Stored per object (rows of `kms_kmip_version_attributes`, written when
//! the object is made): Digest (§3.17, SHA-256 over the key material in
//! the format it was made or registered in), Random Number Generator
//! (§3.44, for what the server generated), Fresh (§3.34, cleared once the
//! material is served), Original Creation Date (§3.43), Sensitive, Always
//! Sensitive, Extractable and Never Extractable (§3.48–3.51). Computed on
//! reading: Lease Time (the server's lease policy), and in KMIP 2.x Key
//! Format Type, Short Unique Identifier and Protection Storage Mask.

use rampart_crypto::{digest, HashAlg};
use rampart_kmip::enums::{
    CryptographicAlgorithm, HashingAlgorithm, KeyFormatType, ObjectType, State as KState,
};
use rampart_kmip::message::{Attribute, ProtocolVersion};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};
use rampart_kmip::KmipError;

use super::errors::{kms, R};
use super::object::{decode_value, encode_value, Obj, SINGLE};
use super::session::Session;
use crate::model::KeyState;
use crate::store::KmipAttributeRow;

/// The lease a client gets on an object, in seconds (Lease Time, §3.20):
/// a client SHALL obtain a new lease (Obtain Lease) after it.
pub(super) const LEASE_SECONDS: u32 = 3600;

/// RNG Algorithm DRBG, DRBG Algorithm CTR-DRBG (KMIP 1.4 §9.1.3.2.44/45):
/// the key material comes from AWS-LC's RAND_bytes, an SP 800-90A
/// CTR-DRBG over AES-256.
const RNG_ALGORITHM_DRBG: u32 = 0x03;
const DRBG_ALGORITHM_CTR: u32 = 0x05;
const TAG_RNG_ALGORITHM: Tag = Tag(0x4200DA);
const TAG_DRBG_ALGORITHM: Tag = Tag(0x4200DB);
const TAG_HASHING_ALGORITHM: Tag = Tag(0x420038);
const TAG_DIGEST_VALUE: Tag = Tag(0x420035);

/// Protection Storage Mask Software (KMIP 2.1 §4.32): the material is kept
/// sealed by the key manager's software root key.
const PROTECTION_SOFTWARE: i32 = 0x01;

/// The client-settable attributes this module rules on.
#[derive(Clone, Copy)]
pub(super) struct Rule {
    pub(super) name: &'static str,
    /// More than one value permitted.
    pub(super) multiple: bool,
    /// Modifiable by client.
    pub(super) modifiable: bool,
    /// Deletable by client.
    pub(super) deletable: bool,
    /// Only on a Register (or an Add Attribute when absent), never on an
    /// object the server generated, which the server sets it for.
    pub(super) registered_only: bool,
}

const fn rule(name: &'static str, multiple: bool, modifiable: bool, deletable: bool) -> Rule {
    Rule { name, multiple, modifiable, deletable, registered_only: false }
}

/// KMIP 1.4 §3.40–3.51 and §3.21–3.23, 2.1 §4 (the "Modifiable by
/// client" and "Deletable by client" rows).
pub(super) const RULES: [Rule; 14] = [
    rule("Alternative Name", true, true, true),
    // KMIP 2.x (2.1 §4.38, §4.39, §4.45).
    rule("Protection Level", false, true, true),
    rule("Protection Period", false, true, true),
    rule("Quantum Safe", false, true, true),
    rule("Key Value Location", true, true, true),
    rule("Description", false, true, true),
    rule("Comment", false, true, true),
    rule("Process Start Date", false, true, false),
    rule("Protect Stop Date", false, true, false),
    rule("Sensitive", false, true, false),
    rule("Extractable", false, true, false),
    // Set once, then never updated nor deleted (§3.43).
    Rule { registered_only: true, ..rule("Original Creation Date", false, false, false) },
    // §3.44: set by the client only for what it generated and registers.
    Rule { registered_only: true, ..rule("Random Number Generator", false, false, false) },
    // §3.34: "Initially set by Client or Server".
    Rule { registered_only: true, ..rule("Fresh", false, false, false) },
];

pub(super) fn rule_of(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.name == name)
}

/// Attributes the server sets that describe this object's material, so a
/// copy of another version's (Re-key, a REST rotation) would be false.
pub(super) const OBJECT_BOUND: [&str; 4] =
    ["Digest", "Random Number Generator", "Fresh", "Original Creation Date"];

/// The Digest attribute value (§3.17) of `material` in `format`: over
/// the bytes of a Byte String Key Material, over the TTLV of a structure.
pub(super) fn digest_value(format: KeyFormatType, material: &[u8]) -> R<Item> {
    let over = if format == KeyFormatType::TRANSPARENT_SYMMETRIC_KEY {
        // Transparent Symmetric Key material is a structure holding Key.
        Item::structure(Tag::KEY_MATERIAL, vec![Item::bytes(Tag::KEY, material)]).encode()?
    } else {
        material.to_vec()
    };
    let value = digest(HashAlg::Sha256, &over);
    Ok(Item::structure(
        Tag::ATTRIBUTE_VALUE,
        vec![
            Item::enumeration(TAG_HASHING_ALGORITHM, HashingAlgorithm::SHA256.0),
            Item::bytes(TAG_DIGEST_VALUE, value.expose()),
            Item::enumeration(Tag::KEY_FORMAT_TYPE, format.0),
        ],
    ))
}

/// The RNG Parameters of what the server generates.
pub(super) fn rng_value() -> Item {
    Item::structure(
        Tag::ATTRIBUTE_VALUE,
        vec![
            Item::enumeration(TAG_RNG_ALGORITHM, RNG_ALGORITHM_DRBG),
            Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::AES.0),
            Item::int(Tag::CRYPTOGRAPHIC_LENGTH, 256),
            Item::enumeration(TAG_DRBG_ALGORITHM, DRBG_ALGORITHM_CTR),
        ],
    )
}

fn value(v: Value) -> Item {
    Item::new(Tag::ATTRIBUTE_VALUE, v)
}

fn row(name: &str, item: &Item) -> R<(String, String)> {
    Ok((name.to_owned(), encode_value(name, item)?))
}

/// Checks the client-set attributes of a new object against [`RULES`]:
/// `generated` when the server makes the material (Create, Re-key).
/// Refuses to make an object Quantum Safe (2.1 §4.45) that is not: a key
/// of fewer than 256 bits (Grover's search halves a symmetric key's
/// strength) or any public-key pair, which Shor's algorithm breaks. The
/// profiles' QS-M-2 answers this General Failure.
pub(super) fn check_quantum_safe(
    stored: &[(String, String)],
    object_type: ObjectType,
    length: Option<i32>,
) -> R<()> {
    let asked = stored
        .iter()
        .filter(|(n, _)| n == "Quantum Safe")
        .filter_map(|(_, v)| decode_value(v)?.as_bool().ok())
        .any(|b| b);
    let safe = match object_type {
        ObjectType::SYMMETRIC_KEY => length.is_some_and(|l| l >= 256),
        ObjectType::PRIVATE_KEY | ObjectType::PUBLIC_KEY | ObjectType::CERTIFICATE => false,
        _ => true,
    };
    if asked && !safe {
        return Err(KmipError::GeneralFailure(format!(
            "a {object_type} of {} bits is not quantum safe",
            length.unwrap_or(0)
        )));
    }
    Ok(())
}

/// Whether a client-set attribute `name` takes one value (a new one
/// replaces the old one's).
pub(crate) fn single_valued(name: &str) -> bool {
    SINGLE.contains(&name) || RULES.iter().any(|r| r.name == name && !r.multiple)
}

pub(super) fn check_template(stored: &[(String, String)], generated: bool) -> R<()> {
    for r in RULES {
        let n = stored.iter().filter(|(name, _)| name == r.name).count();
        if n > 1 && !r.multiple {
            return Err(KmipError::InvalidField(format!("attribute {} given twice", r.name)));
        }
        if n > 0 && generated && r.registered_only {
            return Err(KmipError::InvalidField(format!(
                "attribute {} is set by the server on an object it generates",
                r.name
            )));
        }
    }
    Ok(())
}

/// The rows the server adds to a new object's client-set ones: `format`
/// the material's Key Format Type as made or registered, `generated`
/// whether the server drew it, `now_ms` its Initial Date.
pub(super) fn initial_rows(
    stored: &[(String, String)],
    format: KeyFormatType,
    material: &[u8],
    generated: bool,
    now_ms: i64,
) -> R<Vec<(String, String)>> {
    let has = |name: &str| stored.iter().any(|(n, _)| n == name);
    let given_bool = |name: &str| {
        stored
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| decode_value(v))
            .and_then(|i| i.as_bool().ok())
    };
    let mut out = vec![row("Digest", &digest_value(format, material)?)?];
    if generated {
        out.push(row("Random Number Generator", &rng_value())?);
        // §3.43: the same as the Initial Date.
        out.push(row("Original Creation Date", &value(Value::DateTime(now_ms.div_euclid(1000))))?);
    }
    if !has("Fresh") {
        out.push(row("Fresh", &value(Value::Boolean(true)))?);
    }
    let sensitive = given_bool("Sensitive").unwrap_or(false);
    if !has("Sensitive") {
        out.push(row("Sensitive", &value(Value::Boolean(false)))?);
    }
    out.push(row("Always Sensitive", &value(Value::Boolean(sensitive)))?);
    let extractable = given_bool("Extractable").unwrap_or(true);
    if !has("Extractable") {
        out.push(row("Extractable", &value(Value::Boolean(true)))?);
    }
    out.push(row("Never Extractable", &value(Value::Boolean(!extractable)))?);
    Ok(out)
}

/// Refuses a change the rules of `name` forbid the client (KMIP 1.4 §3,
/// 2.1 §4), before it is made; `existing` how many values it has.
pub(super) fn check_change(
    change: Change,
    name: &str,
    existing: usize,
    obj: &Obj,
    now: i64,
) -> R<()> {
    let Some(r) = rule_of(name) else { return Ok(()) };
    match change {
        Change::Add if existing > 0 && !r.multiple => {
            Err(KmipError::AttributeSingleValued(format!("{name} of {}", obj.uid())))
        }
        Change::Add if r.registered_only && name != "Original Creation Date" => {
            Err(KmipError::IllegalOperation(format!("{name} is set by the server")))
        }
        Change::Modify if !r.modifiable => {
            Err(KmipError::IllegalOperation(format!("{name} cannot be modified by a client")))
        }
        Change::Delete if !r.deletable => {
            Err(KmipError::IllegalOperation(format!("{name} cannot be deleted by a client")))
        }
        Change::Modify if matches!(name, "Process Start Date" | "Protect Stop Date") => {
            // Modifiable only while Pre-Active or Active and before the
            // date is reached (§3.25, §3.26).
            let state = obj.state(now);
            let reached = obj
                .stored_values(name)
                .first()
                .and_then(|v| v.as_date_time().ok())
                .is_some_and(|at| at * 1000 <= now);
            if !matches!(state, KState::PRE_ACTIVE | KState::ACTIVE) || reached {
                return Err(KmipError::IllegalOperation(format!(
                    "{name} of {} can no longer change",
                    obj.uid()
                )));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The rows a change of Sensitive or Extractable sets besides: Always
/// Sensitive turns False once Sensitive is False, Never Extractable once
/// Extractable is True (§3.49, §3.51).
pub(super) fn follow_on(name: &str, new_value: Option<&Item>) -> Option<(&'static str, Item)> {
    let v = new_value?.as_bool().ok()?;
    match name {
        "Sensitive" if !v => Some(("Always Sensitive", value(Value::Boolean(false)))),
        "Extractable" if v => Some(("Never Extractable", value(Value::Boolean(false)))),
        _ => None,
    }
}

/// The Key Format Type of an object's stored material, which its Digest
/// is of: a private key is kept as PKCS#8, a public key and a
/// certificate as X.509 DER.
pub(super) fn default_format(object_type: ObjectType) -> KeyFormatType {
    match object_type {
        ObjectType::SECRET_DATA | ObjectType::OPAQUE_OBJECT => KeyFormatType::OPAQUE,
        ObjectType::PRIVATE_KEY => KeyFormatType::PKCS8,
        ObjectType::PUBLIC_KEY | ObjectType::CERTIFICATE => KeyFormatType::X509,
        _ => KeyFormatType::RAW,
    }
}

/// Whether attribute `name` exists in protocol `version` (those KMIP 2.0
/// added are not shown to a 1.x client).
pub(super) fn in_version(name: &str, version: ProtocolVersion) -> bool {
    version >= ProtocolVersion::V2_0
        || !(matches!(
            name,
            "Key Format Type" | "Short Unique Identifier" | "Protection Storage Mask"
        ) || matches!(name, "Protection Level" | "Protection Period" | "Quantum Safe")
            || name.starts_with("Certificate Subject ")
            || name.starts_with("Certificate Issuer "))
}

/// The attributes computed on reading, appended to `obj`'s, and the
/// object-bound rows an inherited (other version's) set must not show.
pub(super) fn complete(obj: &Obj, attrs: &mut Vec<Attribute>, version: ProtocolVersion) {
    let own = obj.source == Some(obj.version.version);
    if !own {
        attrs.retain(|a| !OBJECT_BOUND.contains(&a.name.as_str()));
    }
    if obj.version.state == KeyState::Destroyed {
        // Nothing is served from a destroyed object; no lease on it.
    } else {
        attrs.push(Attribute::new("Lease Time", Value::Interval(LEASE_SECONDS)));
    }
    if !obj.key.exportable {
        for a in attrs.iter_mut().filter(|a| a.name == "Extractable") {
            a.value = Some(value(Value::Boolean(false)));
        }
    }
    if version >= ProtocolVersion::V2_0 {
        // 2.1 §4.27: the format the object was registered or made in, as
        // its Digest names it; only an object with a Key Block has one.
        let digested = attrs.iter().filter(|a| a.name == "Digest").find_map(|a| {
            let f = rampart_kmip::ttlv::Fields::of(a.value.as_ref()?).ok()?;
            Some(KeyFormatType(f.optional(Tag::KEY_FORMAT_TYPE).ok()??.as_enum().ok()?))
        });
        if !matches!(
            obj.object_type(),
            ObjectType::CERTIFICATE | ObjectType::OPAQUE_OBJECT | ObjectType::TEMPLATE
        ) {
            let format = digested.unwrap_or(default_format(obj.object_type()));
            attrs.push(Attribute::new("Key Format Type", Value::Enumeration(format.0)));
        }
        // 2.1 §4.56: the SHA-256 hash of the Unique Identifier.
        let short = digest(HashAlg::Sha256, obj.uid().as_bytes()).expose().to_vec();
        attrs.push(Attribute::new(
            "Short Unique Identifier",
            Value::ByteString(rampart_kmip::ttlv::Bytes::new(short)),
        ));
        attrs.push(Attribute::new("Protection Storage Mask", Value::Integer(PROTECTION_SOFTWARE)));
    }
    attrs.retain(|a| in_version(&a.name, version));
}

/// Add, Modify or Delete Attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Add,
    Modify,
    Delete,
}

/// Whether a client may set attribute `name` (at creation, or by Add
/// Attribute where its rule allows).
pub(super) fn client_sets(name: &str) -> bool {
    super::object::is_stored(name) || rule_of(name).is_some()
}

impl Session<'_> {
    /// Gives a version without its own Digest (made by the REST API, added
    /// by a REST rotation, or made before the server kept digests) the
    /// attributes bound to its material, from the material, once: they are
    /// stored, so later reads decrypt nothing. A REST key gets its KMIP
    /// object then, its implicit Name becoming a stored one.
    pub(super) async fn ensure_own_rows(&mut self, obj: &mut Obj) -> R<()> {
        let v = obj.version.version;
        let own = obj.source == Some(v);
        // A Template has no key material to describe.
        if own && obj.stored.iter().any(|a| a.name == "Digest")
            || obj.version.state == KeyState::Destroyed
            || obj.object_type() == ObjectType::TEMPLATE
        {
            return Ok(());
        }
        let material = self.material(obj).await?;
        let format = default_format(obj.object_type());
        let digest = encode_value("Digest", &digest_value(format, material.expose())?)?;
        drop(material);
        if obj.kmip.is_none() && !obj.is_latest() {
            // An older version of a key KMIP never touched: storing would
            // give the key its first KMIP object here, and its newest
            // version (which shows the newest older object's attributes)
            // would lose its implicit Name. Shown, not stored.
            let row =
                KmipAttributeRow { version: v, name: "Digest".into(), position: 0, value: digest };
            obj.stored.push(row);
            obj.source = Some(v);
            return Ok(());
        }
        let store = &self.state.store;
        let key = obj.key.name.clone();
        let inherit = obj.source.filter(|s| *s != v);
        let names = if obj.kmip.is_none() {
            obj.names().iter().map(|n| encode_value("Name", n)).collect::<R<Vec<_>>>()?
        } else {
            Vec::new()
        };
        store
            .kmip_set_attribute(key.clone(), v, "Digest".into(), vec![digest], inherit)
            .await
            .map_err(kms)?;
        if inherit.is_some() {
            // The copy is of another version's rows: those describing that
            // version's material are not this one's.
            for name in OBJECT_BOUND.iter().filter(|n| **n != "Digest") {
                store
                    .kmip_set_attribute(key.clone(), v, (*name).to_owned(), Vec::new(), None)
                    .await
                    .map_err(kms)?;
            }
        }
        if !names.is_empty() {
            store
                .kmip_set_attribute(key.clone(), v, "Name".into(), names, None)
                .await
                .map_err(kms)?;
        }
        let kmip = obj.kmip.clone().unwrap_or_else(|| obj.rest_key_object());
        if inherit.is_some() || obj.kmip.is_none() {
            store.kmip_put_object(kmip.clone(), None).await.map_err(kms)?;
        }
        obj.kmip = Some(kmip);
        obj.source = Some(v);
        obj.stored = store.kmip_attributes(key, Some(v)).await.map_err(kms)?;
        Ok(())
    }

    /// Refuses serving `obj`'s material that its Extractable (§3.50) or,
    /// unwrapped, its Sensitive (§3.48) attribute forbids, and answers the
    /// Key Format Type it was registered in (its Digest's); once served
    /// (`served`), its Fresh attribute (§3.34) turns False.
    pub(super) async fn check_serve(
        &self,
        obj: &Obj,
        wrapped: bool,
        served: bool,
    ) -> R<Option<KeyFormatType>> {
        let Some(source) = obj.source else { return Ok(None) };
        let store = &self.state.store;
        let rows = store.kmip_attributes(obj.key.name.clone(), Some(source)).await.map_err(kms)?;
        let flag = |name: &str| {
            rows.iter()
                .find(|a| a.name == name)
                .and_then(|a| decode_value(&a.value))
                .and_then(|i| i.as_bool().ok())
        };
        if !served {
            if flag("Extractable") == Some(false) {
                return Err(KmipError::NotExtractable(format!(
                    "object {} is not Extractable",
                    obj.uid()
                )));
            }
            if !wrapped && flag("Sensitive") == Some(true) {
                return Err(KmipError::Sensitive(format!(
                    "object {} is Sensitive: it is served wrapped only",
                    obj.uid()
                )));
            }
            let format = rows
                .iter()
                .filter(|a| source == obj.version.version && a.name == "Digest")
                .filter_map(|a| decode_value(&a.value))
                .find_map(|d| {
                    let f = rampart_kmip::ttlv::Fields::of(&d).ok()?;
                    Some(KeyFormatType(f.optional(Tag::KEY_FORMAT_TYPE).ok()??.as_enum().ok()?))
                });
            return Ok(format);
        }
        if source == obj.version.version && flag("Fresh") == Some(true) {
            let no = encode_value("Fresh", &value(Value::Boolean(false)))?;
            store
                .kmip_set_attribute(obj.key.name.clone(), source, "Fresh".into(), vec![no], None)
                .await
                .map_err(kms)?;
        }
        Ok(None)
    }
}
