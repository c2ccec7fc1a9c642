//! A KMIP managed object (one key version) and its KMIP state and
//! attributes as the key manager's model shows them.

use std::collections::BTreeMap;

use rampart_kmip::enums::{
    CryptographicAlgorithm, LinkType, ObjectType, RevocationReasonCode, State as KState,
};
use rampart_kmip::message::Attribute;
use rampart_kmip::object_parts::SplitKeyFields;
use rampart_kmip::payload::{is_custom_attribute, Link, Name};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Item, Value};
use rampart_kmip::KmipError;

use super::errors::R;
use crate::model::{check_name, KeyInfo, KeyState, KeyVersionInfo};
use crate::store::{KmipAttributeRow, KmipObject};

/// `NAME/VERSION`.
#[must_use]
pub fn unique_identifier(name: &str, version: u32) -> String {
    format!("{name}/{version}")
}

pub(super) fn seconds(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

/// A stored attribute value: hex of the value's TTLV (tagged Attribute
/// Value), so any type round-trips and equal values compare equal.
pub(crate) fn encode_value(name: &str, item: &Item) -> R<String> {
    let value = if name == "Name" {
        Name::parse(item)?.to_value(Tag::ATTRIBUTE_VALUE)
    } else if name == "Link" {
        Link::parse(item)?.to_value(Tag::ATTRIBUTE_VALUE)
    } else {
        Item::new(Tag::ATTRIBUTE_VALUE, item.value.clone())
    };
    Ok(hex::encode(value.encode()?))
}

pub(crate) fn decode_value(text: &str) -> Option<Item> {
    let bytes = hex::decode(text).ok()?;
    ttlv::decode(&bytes, &rampart_kmip::Limits::default()).ok()
}

/// Attributes a client sets and the store keeps as they were sent (with
/// the custom `x-`/`y-` ones); every other attribute is the server's.
/// Links are kept the same way: the server writes the Private and Public
/// Key Links of a key pair, a client may add its own (KMIP 1.4 §3.35).
pub(super) const STORED: [&str; 10] = [
    "Name",
    "Object Group",
    "Contact Information",
    "Application Specific Information",
    "Operation Policy Name",
    "Cryptographic Parameters",
    "Process Start Date",
    "Protect Stop Date",
    "Usage Limits",
    "Link",
];

/// Stored rows the server keeps for itself and never shows as
/// attributes (a Split Key's fields) begin with this; no attribute name
/// a client can send does.
pub(super) const INTERNAL_ROW: &str = "rampart:";

/// The stored row of a Split Key's fields (their TTLV, as a structure).
pub(super) const SPLIT_KEY_ROW: &str = "rampart:split-key";

/// Of those, the ones an object has at most one of.
pub(super) const SINGLE: [&str; 6] = [
    "Contact Information",
    "Operation Policy Name",
    "Cryptographic Parameters",
    "Process Start Date",
    "Protect Stop Date",
    "Usage Limits",
];

pub(super) fn is_stored(name: &str) -> bool {
    STORED.contains(&name) || is_custom_attribute(name)
}

pub(super) fn parse_uid(uid: &str) -> R<(String, u32)> {
    let not_found = || KmipError::ItemNotFound(format!("object {uid}"));
    let (name, version) = uid.rsplit_once('/').ok_or_else(not_found)?;
    check_name("key name", name).map_err(|_| not_found())?;
    let version: u32 = version.parse().ok().filter(|v| *v > 0).ok_or_else(not_found)?;
    Ok((name.to_owned(), version))
}

/// One KMIP object: a key version, with what KMIP adds to it.
pub(super) struct Obj {
    pub(super) key: KeyInfo,
    pub(super) version: KeyVersionInfo,
    pub(super) kmip: Option<KmipObject>,
    /// The version whose KMIP object and stored attributes this one shows:
    /// itself, or for a version a REST rotation added, the newest older
    /// one with a KMIP object.
    pub(super) source: Option<u32>,
    /// The stored attributes (of `source`).
    pub(super) stored: Vec<KmipAttributeRow>,
    /// The version's sealed material as read with the object (`Some(None)`
    /// once destroyed); `None` when it was not read with it.
    pub(super) sealed: Option<Option<std::sync::Arc<[u8]>>>,
}

impl Obj {
    /// The KMIP object a version made by the REST API gets once KMIP
    /// changes it: a 256-bit AES key with no owner, active from its
    /// creation.
    pub(super) fn rest_key_object(&self) -> KmipObject {
        KmipObject {
            key: self.key.name.clone(),
            version: self.version.version,
            object_type: ObjectType::SYMMETRIC_KEY.0,
            algorithm: Some(CryptographicAlgorithm::AES.0),
            length: Some(256),
            usage_mask: None,
            secret_type: None,
            owner: String::new(),
            activation_ms: Some(self.version.created_ms),
            deactivation_ms: None,
            compromise_occurrence_ms: None,
            compromised: false,
        }
    }

    pub(super) fn uid(&self) -> String {
        unique_identifier(&self.key.name, self.version.version)
    }

    pub(super) fn is_latest(&self) -> bool {
        self.key.latest().is_some_and(|v| v.version == self.version.version)
    }

    pub(super) fn object_type(&self) -> ObjectType {
        self.kmip.as_ref().map_or(ObjectType::SYMMETRIC_KEY, |k| ObjectType(k.object_type))
    }

    pub(super) fn owner(&self) -> Option<&str> {
        self.kmip.as_ref().map(|k| k.owner.as_str())
    }

    pub(super) fn usage_mask(&self) -> Option<i32> {
        self.kmip.as_ref().and_then(|k| k.usage_mask)
    }

    pub(super) fn compromised(&self) -> bool {
        self.kmip.as_ref().is_some_and(|k| k.compromised)
    }

    pub(super) fn activation_ms(&self) -> Option<i64> {
        match &self.kmip {
            Some(k) => k.activation_ms,
            // A REST key is active from its creation.
            None => Some(self.version.created_ms),
        }
    }

    pub(super) fn state(&self, now: i64) -> KState {
        match &self.version.state {
            KeyState::Destroyed if self.compromised() => KState::DESTROYED_COMPROMISED,
            KeyState::Destroyed => KState::DESTROYED,
            KeyState::Revoked { .. } if self.compromised() => KState::COMPROMISED,
            KeyState::Revoked { .. } => KState::DEACTIVATED,
            _ => {
                let deactivation = self.kmip.as_ref().and_then(|k| k.deactivation_ms);
                if self.activation_ms().is_none_or(|at| at > now) {
                    KState::PRE_ACTIVE
                } else if deactivation.is_some_and(|at| at <= now) {
                    KState::DEACTIVATED
                } else {
                    KState::ACTIVE
                }
            }
        }
    }

    /// The Process Start Date (KMIP 1.4 §3.25) or Protect Stop Date
    /// (§3.26) a client set, in Unix milliseconds.
    pub(super) fn stored_date_ms(&self, name: &str) -> Option<i64> {
        let value = self.stored_values(name).into_iter().next()?;
        value.as_date_time().ok().map(|s| s.saturating_mul(1000))
    }

    /// The stored values of attribute `name`, in order.
    pub(super) fn stored_values(&self, name: &str) -> Vec<Item> {
        self.stored
            .iter()
            .filter(|a| a.name == name)
            .filter_map(|a| decode_value(&a.value))
            .collect()
    }

    /// A Split Key's fields (parts, threshold, method...), kept beside its
    /// material when it was made or registered.
    pub(super) fn split_key_fields(&self) -> R<SplitKeyFields> {
        self.stored_values(SPLIT_KEY_ROW)
            .first()
            .map(|item| SplitKeyFields::parse(&ttlv::Fields::of(item)?))
            .transpose()?
            .ok_or_else(|| KmipError::GeneralFailure("a split key without its fields".into()))
    }

    /// The Name values: those stored for a key KMIP made or named; a key
    /// made by the REST API is named by its own name. Names belong to the
    /// newest version (Re-key moves them).
    pub(super) fn names(&self) -> Vec<Item> {
        if !self.is_latest() {
            return Vec::new();
        }
        if self.kmip.is_some() {
            return self.stored_values("Name");
        }
        vec![Name {
            value: self.key.name.clone(),
            name_type: rampart_kmip::enums::NameType::UNINTERPRETED_TEXT_STRING,
        }
        .to_value(Tag::ATTRIBUTE_VALUE)]
    }

    /// Every attribute of the object (KMIP 1.x shape), in a stable order.
    pub(super) fn attributes(&self, now: i64) -> Vec<Attribute> {
        let mut out = Vec::new();
        let mut add = |name: &str, value: Value| out.push(Attribute::new(name, value));
        add("Unique Identifier", Value::TextString(self.uid()));
        add("Object Type", Value::Enumeration(self.object_type().0));
        if self.object_type() == ObjectType::SYMMETRIC_KEY {
            let alg = self
                .kmip
                .as_ref()
                .and_then(|k| k.algorithm)
                .unwrap_or(CryptographicAlgorithm::AES.0);
            add("Cryptographic Algorithm", Value::Enumeration(alg));
            let len = self.kmip.as_ref().and_then(|k| k.length).unwrap_or(256);
            add("Cryptographic Length", Value::Integer(len));
        } else if let Some(k) = &self.kmip {
            // Asymmetric keys, split keys, and a certificate's public key.
            if let Some(alg) = k.algorithm {
                add("Cryptographic Algorithm", Value::Enumeration(alg));
            }
            if let Some(len) = k.length {
                add("Cryptographic Length", Value::Integer(len));
            }
        }
        if let Some(mask) = self.usage_mask() {
            add("Cryptographic Usage Mask", Value::Integer(mask));
        }
        // A Template (KMIP 1.4 §2.2.6) is no cryptographic object: no State.
        if self.object_type() != ObjectType::TEMPLATE {
            add("State", Value::Enumeration(self.state(now).0));
        }
        add("Initial Date", Value::DateTime(seconds(self.version.created_ms)));
        if let Some(at) = self.activation_ms() {
            add("Activation Date", Value::DateTime(seconds(at)));
        }
        let changed = self.version.changed_ms;
        let deactivation = match (&self.version.state, &self.kmip) {
            (KeyState::Revoked { .. } | KeyState::Destroyed, _) if !self.compromised() => changed,
            (_, Some(k)) => k.deactivation_ms,
            _ => None,
        };
        if let Some(at) = deactivation {
            add("Deactivation Date", Value::DateTime(seconds(at)));
        }
        if self.version.state == KeyState::Destroyed {
            if let Some(at) = changed {
                add("Destroy Date", Value::DateTime(seconds(at)));
            }
        }
        if self.compromised() {
            if let Some(at) = changed {
                add("Compromise Date", Value::DateTime(seconds(at)));
            }
            if let Some(at) = self.kmip.as_ref().and_then(|k| k.compromise_occurrence_ms) {
                add("Compromise Occurrence Date", Value::DateTime(seconds(at)));
            }
        }
        if let KeyState::Revoked { reason } = &self.version.state {
            let code = if self.compromised() {
                RevocationReasonCode::KEY_COMPROMISE
            } else {
                RevocationReasonCode::UNSPECIFIED
            };
            add(
                "Revocation Reason",
                Value::Structure(vec![
                    Item::enumeration(Tag::REVOCATION_REASON_CODE, code.0),
                    Item::text(Tag::REVOCATION_MESSAGE, reason.clone()),
                ]),
            );
        }
        let last = changed.unwrap_or(self.version.created_ms).max(self.version.created_ms);
        add("Last Change Date", Value::DateTime(seconds(last)));
        let v = self.version.version;
        let link = |link_type: LinkType, version: u32| {
            Value::Structure(vec![
                Item::enumeration(Tag::LINK_TYPE, link_type.0),
                Item::text(
                    Tag::LINKED_OBJECT_IDENTIFIER,
                    unique_identifier(&self.key.name, version),
                ),
            ])
        };
        if v > 1 && self.key.versions.iter().any(|x| x.version == v - 1) {
            out.push(Attribute::new("Link", link(LinkType::REPLACED_OBJECT, v - 1)));
        }
        if self.key.versions.iter().any(|x| x.version == v + 1) {
            out.push(Attribute::new("Link", link(LinkType::REPLACEMENT_OBJECT, v + 1)));
        }
        for value in self.names() {
            out.push(Attribute { name: "Name".into(), index: None, value: Some(value) });
        }
        let mut other: BTreeMap<&str, Vec<Item>> = BTreeMap::new();
        for row in
            self.stored.iter().filter(|a| a.name != "Name" && !a.name.starts_with(INTERNAL_ROW))
        {
            if let Some(item) = decode_value(&row.value) {
                other.entry(row.name.as_str()).or_default().push(item);
            }
        }
        for (name, values) in other {
            for value in values {
                out.push(Attribute { name: name.to_owned(), index: None, value: Some(value) });
            }
        }
        // Indices count each name's values from 0 (KMIP 1.x).
        let mut seen: BTreeMap<String, i32> = BTreeMap::new();
        for a in &mut out {
            let n = seen.entry(a.name.clone()).or_insert(0);
            a.index = Some(*n);
            *n += 1;
        }
        out
    }
}

/// A Link attribute's stored value: `link_type` to object `to`.
pub(super) fn link_value(link_type: LinkType, to: &str) -> R<String> {
    let value = Link { link_type, linked_object: to.to_owned() }.to_value(Tag::ATTRIBUTE_VALUE);
    encode_value("Link", &value)
}
