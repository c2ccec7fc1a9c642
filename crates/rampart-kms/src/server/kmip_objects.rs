//! KMIP managed objects over the key manager's own model: a KMIP object is
//! one version of a key-manager key, its Unique Identifier `NAME/VERSION`.
//! Create and Register make ordinary keys (listed by `rampart kms key
//! list`, allowed to the creating client with `client:NAME`, exportable);
//! Re-key adds a version, linked to the one it replaces by Replaced and
//! Replacement Object Links; Revoke and Destroy change the version's state
//! in the same store the REST API reads. What KMIP adds to a version
//! (object type, algorithm, length, usage mask, owner, Activation and
//! Deactivation Dates, compromise) lives in `kms_kmip_objects`; the
//! attributes a client sets (Name, Object Group, custom `x-` attributes,
//! which KMIP 2.x calls Vendor Attributes...) live per object (key
//! version) in `kms_kmip_version_attributes`, whose values are indexed for
//! Locate. Re-key gives the new object a copy of the old one's and moves
//! the Names to it (KMIP 1.4 §4.4); a version added by a REST rotation
//! shows its predecessor's until a change gives it its own.
//!
//! States follow KMIP 1.4 §3.22: a version whose Activation Date is unset
//! or in the future is Pre-Active, one past its Deactivation Date (or
//! revoked) Deactivated, one revoked for a compromise Compromised, a
//! destroyed one Destroyed. The REST API enforces the same dates (see
//! `api::kmip_use_allowed`).
//!
//! Access is the REST API's: a client sees (Get Attributes, Locate) the
//! keys whose allow rule matches it, or every key when it is an admin;
//! uses a key (Get, Encrypt, Decrypt, MAC, wrapping) only when the rule
//! matches it; and changes a key's life cycle or attributes when it is an
//! admin or the client that created the key over KMIP.

use std::collections::BTreeMap;

use rampart_crypto::{
    fill_random, hmac, kw_wrap, kwp_wrap, random_secret, Cbc, CbcIv, Ctr, Gcm, HashAlg,
    SecretBytes, GCM_NONCE_LEN, GCM_TAG_LEN,
};
use rampart_kmip::enums::{
    usage_mask, BlockCipherMode, CryptographicAlgorithm, KeyFormatType, LinkType, ObjectType,
    Operation, PaddingMethod, RevocationReasonCode, SecretDataType, State as KState,
    WrappingMethod,
};
use rampart_kmip::message::{Attribute, ProtocolVersion};
use rampart_kmip::payload::{
    attribute_name_of, attribute_reference, attribute_tag_of, is_custom_attribute,
    vendor_attribute_item, AttributeChangeRequest, AttributeSet, CreateRequest, CryptoRequest,
    GetRequest, KeyBlock, LocateRequest, ManagedObject, Name, ObjectRequest, ReKeyRequest,
    RegisterRequest, RevokeRequest,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Fields, Item, Value};
use rampart_kmip::KmipError;

use super::State;
use crate::error::KmsError;
use crate::model::{
    check_name, now_ms, ClientInfo, KeyInfo, KeyState, KeyVersionInfo, Selector, MAX_REASON,
};
use crate::store::{KeyFilter, KmipAttributeRow, KmipObject, StateChange, MAX_PAGE};

type R<T> = Result<T, KmipError>;

/// Largest Secret Data registered.
const MAX_SECRET: usize = 64 * 1024;
/// Largest Encrypt/Decrypt/MAC input.
const MAX_DATA: usize = 512 * 1024;

/// Attributes a client sets and the store keeps as they were sent (with
/// the custom `x-`/`y-` ones); every other attribute is the server's.
const STORED: [&str; 6] = [
    "Name",
    "Object Group",
    "Contact Information",
    "Application Specific Information",
    "Operation Policy Name",
    "Cryptographic Parameters",
];

/// Of those, the ones an object has at most one of.
const SINGLE: [&str; 3] =
    ["Contact Information", "Operation Policy Name", "Cryptographic Parameters"];

fn is_stored(name: &str) -> bool {
    STORED.contains(&name) || is_custom_attribute(name)
}

fn kms(error: KmsError) -> KmipError {
    match error {
        KmsError::NotFound(m) => KmipError::ItemNotFound(m),
        KmsError::Forbidden(m) => KmipError::PermissionDenied(m),
        KmsError::Conflict(m) => KmipError::ObjectAlreadyExists(m),
        KmsError::InvalidRequest(m) => KmipError::InvalidField(m),
        e @ (KmsError::KeyRevoked { .. } | KmsError::KeyDestroyed { .. }) => {
            KmipError::IllegalOperation(e.to_string())
        }
        KmsError::Sealed => KmipError::GeneralFailure("the key manager is sealed".into()),
        other => KmipError::GeneralFailure(other.to_string()),
    }
}

fn crypto(error: rampart_crypto::CryptoError) -> KmipError {
    KmipError::CryptographicFailure(error.to_string())
}

/// `NAME/VERSION`.
#[must_use]
pub fn unique_identifier(name: &str, version: u32) -> String {
    format!("{name}/{version}")
}

fn parse_uid(uid: &str) -> R<(String, u32)> {
    let not_found = || KmipError::ItemNotFound(format!("object {uid}"));
    let (name, version) = uid.rsplit_once('/').ok_or_else(not_found)?;
    check_name("key name", name).map_err(|_| not_found())?;
    let version: u32 = version.parse().ok().filter(|v| *v > 0).ok_or_else(not_found)?;
    Ok((name.to_owned(), version))
}

fn seconds(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

/// A stored attribute value: hex of the value's TTLV (tagged Attribute
/// Value), so any type round-trips and equal values compare equal.
fn encode_value(name: &str, item: &Item) -> R<String> {
    let value = if name == "Name" {
        Name::parse(item)?.to_value(Tag::ATTRIBUTE_VALUE)
    } else {
        Item::new(Tag::ATTRIBUTE_VALUE, item.value.clone())
    };
    Ok(hex::encode(value.encode()?))
}

fn decode_value(text: &str) -> Option<Item> {
    let bytes = hex::decode(text).ok()?;
    ttlv::decode(&bytes, &rampart_kmip::Limits::default()).ok()
}

/// One KMIP object: a key version, with what KMIP adds to it.
struct Obj {
    key: KeyInfo,
    version: KeyVersionInfo,
    kmip: Option<KmipObject>,
    /// The version whose KMIP object and stored attributes this one shows:
    /// itself, or for a version a REST rotation added, the newest older
    /// one with a KMIP object.
    source: Option<u32>,
    /// The stored attributes (of `source`).
    stored: Vec<KmipAttributeRow>,
}

impl Obj {
    fn uid(&self) -> String {
        unique_identifier(&self.key.name, self.version.version)
    }

    fn is_latest(&self) -> bool {
        self.key.latest().is_some_and(|v| v.version == self.version.version)
    }

    fn object_type(&self) -> ObjectType {
        self.kmip.as_ref().map_or(ObjectType::SYMMETRIC_KEY, |k| ObjectType(k.object_type))
    }

    fn owner(&self) -> Option<&str> {
        self.kmip.as_ref().map(|k| k.owner.as_str())
    }

    fn usage_mask(&self) -> Option<i32> {
        self.kmip.as_ref().and_then(|k| k.usage_mask)
    }

    fn compromised(&self) -> bool {
        self.kmip.as_ref().is_some_and(|k| k.compromised)
    }

    fn activation_ms(&self) -> Option<i64> {
        match &self.kmip {
            Some(k) => k.activation_ms,
            // A REST key is active from its creation.
            None => Some(self.version.created_ms),
        }
    }

    fn state(&self, now: i64) -> KState {
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

    /// The stored values of attribute `name`, in order.
    fn stored_values(&self, name: &str) -> Vec<Item> {
        self.stored
            .iter()
            .filter(|a| a.name == name)
            .filter_map(|a| decode_value(&a.value))
            .collect()
    }

    /// The Name values: those stored for a key KMIP made or named; a key
    /// made by the REST API is named by its own name. Names belong to the
    /// newest version (Re-key moves them).
    fn names(&self) -> Vec<Item> {
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
    fn attributes(&self, now: i64) -> Vec<Attribute> {
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
        }
        if let Some(mask) = self.usage_mask() {
            add("Cryptographic Usage Mask", Value::Integer(mask));
        }
        add("State", Value::Enumeration(self.state(now).0));
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
        for row in self.stored.iter().filter(|a| a.name != "Name") {
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

/// One client's KMIP session over one batch: whom it acts for, and what
/// the audit entry of the current batch item names.
pub(super) struct Session<'a> {
    pub state: &'a State,
    pub client: &'a ClientInfo,
    pub version: ProtocolVersion,
    /// The ID Placeholder: the object the previous batch item named.
    pub placeholder: Option<String>,
    /// The key and version the current batch item touched, for its audit entry.
    pub touched: Option<(String, Option<u32>)>,
}

impl Session<'_> {
    fn uid(&self, given: Option<&String>) -> R<String> {
        given.cloned().or_else(|| self.placeholder.clone()).ok_or_else(|| {
            KmipError::MissingData("Unique Identifier (and no ID Placeholder)".into())
        })
    }

    /// The object `uid`, without its stored attributes (what every
    /// operation but the attribute ones and Re-key needs: one store read
    /// fewer on Get, Encrypt, Decrypt and MAC).
    async fn load(&mut self, uid: &str) -> R<Obj> {
        self.load_object(uid, false).await
    }

    /// The object `uid` with its stored attributes.
    async fn load_with_attributes(&mut self, uid: &str) -> R<Obj> {
        self.load_object(uid, true).await
    }

    async fn load_object(&mut self, uid: &str, with_attributes: bool) -> R<Obj> {
        let (name, version) = parse_uid(uid)?;
        self.touched = Some((name.clone(), Some(version)));
        let key = self
            .state
            .store
            .get_key(name.clone())
            .await
            .map_err(kms)?
            .ok_or_else(|| KmipError::ItemNotFound(format!("object {uid}")))?;
        let version_info = key
            .versions
            .iter()
            .find(|v| v.version == version)
            .cloned()
            .ok_or_else(|| KmipError::ItemNotFound(format!("object {uid}")))?;
        let mut kmip = self.state.store.kmip_object(name.clone(), version).await.map_err(kms)?;
        let source = kmip.as_ref().map(|k| k.version);
        if let Some(k) = kmip.as_mut() {
            inherit_object(k, &version_info);
        }
        let stored = match source {
            Some(v) if with_attributes => {
                self.state.store.kmip_attributes(name, Some(v)).await.map_err(kms)?
            }
            _ => Vec::new(),
        };
        Ok(Obj { key, version: version_info, kmip, source, stored })
    }

    fn visible(&self, obj: &Obj) -> bool {
        self.client.admin || obj.key.allows(self.client)
    }

    fn require_visible(&self, obj: &Obj) -> R<()> {
        if self.visible(obj) {
            return Ok(());
        }
        Err(KmipError::PermissionDenied(format!(
            "client {} is not allowed to use key {}",
            self.client.name, obj.key.name
        )))
    }

    fn require_use(&self, obj: &Obj) -> R<()> {
        if obj.key.allows(self.client) {
            return Ok(());
        }
        Err(KmipError::PermissionDenied(format!(
            "client {} is not allowed to use key {}",
            self.client.name, obj.key.name
        )))
    }

    fn require_manage(&self, obj: &Obj) -> R<()> {
        self.require_visible(obj)?;
        if self.client.admin || obj.owner() == Some(self.client.name.as_str()) {
            return Ok(());
        }
        Err(KmipError::PermissionDenied(format!(
            "client {} may use key {} but not change it (an admin or the client that created \
             it over KMIP may)",
            self.client.name, obj.key.name
        )))
    }

    /// Stores `obj`'s KMIP object; a version that showed an older one's
    /// attributes (a REST rotation added it) keeps a copy of them.
    async fn put_object(&self, obj: &Obj, kmip: KmipObject) -> R<()> {
        let inherit = obj.source.filter(|s| *s != kmip.version);
        self.state.store.kmip_put_object(kmip, inherit).await.map_err(kms)
    }

    /// The key version's material (policy and destruction checked by the
    /// store read and here).
    async fn material(&self, obj: &Obj) -> R<SecretBytes> {
        let root = self.state.require_root().map_err(kms)?;
        let row = self
            .state
            .store
            .key_material(obj.key.name.clone(), Some(obj.version.version))
            .await
            .map_err(kms)?
            .ok_or_else(|| KmipError::ItemNotFound(format!("object {}", obj.uid())))?;
        let blob = row.material.as_deref().ok_or_else(|| {
            KmipError::IllegalOperation(format!("object {} is destroyed", obj.uid()))
        })?;
        root.open_material(&obj.key.name, obj.version.version, blob).map_err(kms)
    }

    /// Runs one batch item.
    pub(super) async fn run(&mut self, operation: Operation, payload: &Item) -> R<Vec<Item>> {
        let result = match operation {
            Operation::CREATE => self.create(&CreateRequest::parse(payload)?).await,
            Operation::REGISTER => self.register(RegisterRequest::parse(payload)?).await,
            Operation::GET => {
                let encoding = encoding_option(payload)?;
                self.get(&GetRequest::parse(payload)?, encoding).await
            }
            Operation::GET_ATTRIBUTES => self.get_attributes(&ObjectRequest::parse(payload)?).await,
            Operation::GET_ATTRIBUTE_LIST => {
                self.get_attribute_list(&ObjectRequest::parse(payload)?).await
            }
            Operation::ADD_ATTRIBUTE => {
                self.change_attribute(Change::Add, &AttributeChangeRequest::parse(payload)?).await
            }
            Operation::MODIFY_ATTRIBUTE => {
                self.change_attribute(Change::Modify, &AttributeChangeRequest::parse(payload)?)
                    .await
            }
            Operation::DELETE_ATTRIBUTE => {
                self.change_attribute(Change::Delete, &AttributeChangeRequest::parse(payload)?)
                    .await
            }
            Operation::LOCATE => self.locate(&LocateRequest::parse(payload)?).await,
            Operation::ACTIVATE => self.activate(&ObjectRequest::parse(payload)?).await,
            Operation::REVOKE => self.revoke(&RevokeRequest::parse(payload)?).await,
            Operation::DESTROY => self.destroy(&ObjectRequest::parse(payload)?).await,
            Operation::RE_KEY => self.rekey(&ReKeyRequest::parse(payload)?).await,
            Operation::CHECK => self.check(payload).await,
            Operation::ENCRYPT => self.encrypt(&CryptoRequest::parse(payload)?, true).await,
            Operation::DECRYPT => self.encrypt(&CryptoRequest::parse(payload)?, false).await,
            Operation::MAC => self.mac(&CryptoRequest::parse(payload)?).await,
            other => Err(KmipError::OperationNotSupported(other)),
        }?;
        // The object named by a successful item is the next one's ID
        // Placeholder.
        if let Some(uid) = result.iter().find(|i| i.tag == Tag::UNIQUE_IDENTIFIER) {
            if let Ok(uid) = uid.as_text() {
                self.placeholder = Some(uid.to_owned());
            }
        }
        Ok(result)
    }

    // ---- Create, Register ------------------------------------------------

    /// Splits a template into the object's fields and its stored attributes.
    async fn template(&self, attrs: &AttributeSet, object_type: ObjectType) -> R<NewObject> {
        let now = now_ms();
        let mut new = NewObject::default();
        for a in &attrs.0 {
            let value = a
                .value
                .as_ref()
                .ok_or_else(|| KmipError::MissingData(format!("{} value", a.name)))?;
            match a.name.as_str() {
                "Cryptographic Algorithm" => new.algorithm = Some(value.as_enum()?),
                "Cryptographic Length" => new.length = Some(value.as_int()?),
                "Cryptographic Usage Mask" => new.usage_mask = Some(value.as_int()?),
                "Activation Date" => new.activation_ms = Some(value.as_date_time()? * 1000),
                "Deactivation Date" => new.deactivation_ms = Some(value.as_date_time()? * 1000),
                "Object Type" if value.as_enum()? == object_type.0 => {}
                name if is_stored(name) => {
                    if name == "Name" {
                        new.names.push(Name::parse(value)?);
                    }
                    new.stored.push((name.to_owned(), encode_value(name, value)?));
                }
                name if attribute_tag_of(name).is_some() => {
                    return Err(KmipError::InvalidField(format!(
                        "attribute {name} is set by the server, not by the client"
                    )));
                }
                name => {
                    return Err(KmipError::FeatureNotSupported(format!("attribute {name}")));
                }
            }
        }
        for single in SINGLE {
            if new.stored.iter().filter(|(n, _)| n == single).count() > 1 {
                return Err(KmipError::InvalidField(format!("attribute {single} given twice")));
            }
        }
        if let (Some(a), Some(d)) = (new.activation_ms, new.deactivation_ms) {
            if d < a {
                return Err(KmipError::InvalidField(
                    "the Deactivation Date is before the Activation Date".into(),
                ));
            }
        }
        let _ = now;
        Ok(new)
    }

    /// The model name of a new key: its KMIP Name when that is a valid,
    /// free key name, else `kmip-` and random hex. A Name the client can
    /// already see on another object is refused (names are unique in the
    /// client's scope).
    async fn key_name_for(&self, names: &[Name]) -> R<String> {
        for name in names {
            self.refuse_stored_name(name, None).await?;
        }
        if let Some(first) = names.first() {
            if check_name("key name", &first.value).is_ok() {
                match self.state.store.get_key(first.value.clone()).await.map_err(kms)? {
                    None => return Ok(first.value.clone()),
                    // A REST key is named by its own name.
                    Some(info)
                        if (self.client.admin || info.allows(self.client))
                            && self
                                .state
                                .store
                                .kmip_object(first.value.clone(), u32::MAX)
                                .await
                                .map_err(kms)?
                                .is_none() =>
                    {
                        return Err(KmipError::ObjectAlreadyExists(format!(
                            "an object named {} exists",
                            first.value
                        )));
                    }
                    Some(_) => {}
                }
            }
        }
        let mut random = [0u8; 8];
        fill_random(&mut random).map_err(crypto)?;
        Ok(format!("kmip-{}", hex::encode(random)))
    }

    async fn store_new(
        &mut self,
        object_type: ObjectType,
        new: NewObject,
        material: &SecretBytes,
    ) -> R<String> {
        let root = self.state.require_root().map_err(kms)?;
        let name = self.key_name_for(&new.names).await?;
        self.touched = Some((name.clone(), Some(1)));
        let now = now_ms();
        let sealed = root.seal_material(&name, 1, material).map_err(kms)?;
        let key = KeyInfo {
            name: name.clone(),
            exportable: true,
            allow: vec![Selector::Client(self.client.name.clone())],
            created_ms: now,
            versions: vec![KeyVersionInfo {
                version: 1,
                state: KeyState::Active,
                created_ms: now,
                changed_ms: None,
            }],
        };
        let object = KmipObject {
            key: name.clone(),
            version: 1,
            object_type: object_type.0,
            algorithm: new.algorithm,
            length: new.length,
            usage_mask: new.usage_mask,
            secret_type: new.secret_type,
            owner: self.client.name.clone(),
            // Pre-Active until activated, unless the template dates it.
            activation_ms: new.activation_ms,
            deactivation_ms: new.deactivation_ms,
            compromise_occurrence_ms: None,
            compromised: false,
        };
        let mut positions: BTreeMap<String, u32> = BTreeMap::new();
        let rows = new
            .stored
            .into_iter()
            .map(|(attr, value)| {
                let p = positions.entry(attr.clone()).or_insert(0);
                *p += 1;
                KmipAttributeRow { version: 1, name: attr, position: *p - 1, value }
            })
            .collect();
        self.state.store.kmip_create_key(key, sealed, object, rows).await.map_err(kms)?;
        Ok(unique_identifier(&name, 1))
    }

    async fn create(&mut self, request: &CreateRequest) -> R<Vec<Item>> {
        if request.object_type != ObjectType::SYMMETRIC_KEY {
            return Err(KmipError::FeatureNotSupported(format!(
                "creating {} objects (Create makes Symmetric Keys)",
                request.object_type
            )));
        }
        let mut new = self.template(&request.attributes, request.object_type).await?;
        let algorithm = CryptographicAlgorithm(new.algorithm.ok_or_else(|| {
            KmipError::MissingData("the Cryptographic Algorithm attribute".into())
        })?);
        let length = new
            .length
            .ok_or_else(|| KmipError::MissingData("the Cryptographic Length attribute".into()))?;
        check_algorithm(algorithm, length)?;
        new.usage_mask.get_or_insert(if algorithm == CryptographicAlgorithm::AES {
            usage_mask::ENCRYPT
                | usage_mask::DECRYPT
                | usage_mask::WRAP_KEY
                | usage_mask::UNWRAP_KEY
        } else {
            usage_mask::MAC_GENERATE | usage_mask::MAC_VERIFY
        });
        let material = random_secret(usize::try_from(length / 8).unwrap_or(32)).map_err(crypto)?;
        let uid = self.store_new(request.object_type, new, &material).await?;
        Ok(vec![
            Item::enumeration(Tag::OBJECT_TYPE, request.object_type.0),
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
        ])
    }

    async fn register(&mut self, request: RegisterRequest) -> R<Vec<Item>> {
        let object_type = request.object.object_type();
        let mut new = self.template(&request.attributes, object_type).await?;
        let block = request.object.key_block();
        if block.wrapping.is_some() {
            return Err(KmipError::FeatureNotSupported("registering wrapped key material".into()));
        }
        let material = SecretBytes::from_slice(block.material.as_slice());
        match &request.object {
            ManagedObject::SymmetricKey(block) => {
                if ![KeyFormatType::RAW, KeyFormatType::TRANSPARENT_SYMMETRIC_KEY]
                    .contains(&block.format)
                {
                    return Err(KmipError::KeyFormatTypeNotSupported(block.format.0));
                }
                let algorithm = block
                    .algorithm
                    .map(|a| a.0)
                    .or(new.algorithm)
                    .map(CryptographicAlgorithm)
                    .ok_or_else(|| {
                        KmipError::MissingData("the key's Cryptographic Algorithm".into())
                    })?;
                let bits = i32::try_from(material.len() * 8).unwrap_or(i32::MAX);
                if block.length.or(new.length).is_some_and(|l| l != bits) {
                    return Err(KmipError::InvalidField(format!(
                        "the Cryptographic Length does not match the {bits}-bit key"
                    )));
                }
                check_algorithm(algorithm, bits)?;
                new.algorithm = Some(algorithm.0);
                new.length = Some(bits);
            }
            ManagedObject::SecretData { data_type, .. } => {
                if material.is_empty() || material.len() > MAX_SECRET {
                    return Err(KmipError::InvalidField(format!(
                        "Secret Data must be 1 to {MAX_SECRET} bytes"
                    )));
                }
                new.secret_type = Some(data_type.0);
                new.algorithm = None;
                new.length = None;
            }
        }
        let uid = self.store_new(object_type, new, &material).await?;
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }

    // ---- Get, attributes -------------------------------------------------

    async fn get(&mut self, request: &GetRequest, encoding: u32) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_use(&obj)?;
        if !obj.key.exportable {
            return Err(KmipError::NotExtractable(format!(
                "key {} is not exportable",
                obj.key.name
            )));
        }
        let object_type = obj.object_type();
        let default_format = if object_type == ObjectType::SECRET_DATA {
            KeyFormatType::OPAQUE
        } else {
            KeyFormatType::RAW
        };
        let format = request.key_format_type.unwrap_or(default_format);
        if format != default_format {
            return Err(KmipError::KeyFormatTypeNotSupported(format.0));
        }
        if matches!(obj.state(now_ms()), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::IllegalOperation(format!("object {uid} is destroyed")));
        }
        let material = self.material(&obj).await?;
        let (algorithm, length) = match object_type {
            ObjectType::SYMMETRIC_KEY => (
                Some(CryptographicAlgorithm(
                    obj.kmip
                        .as_ref()
                        .and_then(|k| k.algorithm)
                        .unwrap_or(CryptographicAlgorithm::AES.0),
                )),
                Some(i32::try_from(material.len() * 8).unwrap_or(i32::MAX)),
            ),
            _ => (None, None),
        };
        let block = KeyBlock {
            format,
            material: material.expose().into(),
            algorithm,
            length,
            wrapping: None,
        };
        if let Some(spec) = &request.wrapping {
            if spec.method != WrappingMethod::ENCRYPT {
                return Err(KmipError::FeatureNotSupported(format!(
                    "Wrapping Method {}",
                    spec.method
                )));
            }
            let mode = spec
                .parameters
                .as_ref()
                .and_then(|p| p.block_cipher_mode)
                .unwrap_or(BlockCipherMode::NIST_KEY_WRAP);
            let wrapper = self.load(&spec.encryption_key).await?;
            self.touched = Some((obj.key.name.clone(), Some(obj.version.version)));
            self.require_use(&wrapper)?;
            if wrapper.object_type() != ObjectType::SYMMETRIC_KEY
                || wrapper.state(now_ms()) != KState::ACTIVE
            {
                return Err(KmipError::IllegalOperation(format!(
                    "wrapping key {} is not an active symmetric key",
                    spec.encryption_key
                )));
            }
            if wrapper.usage_mask().is_some_and(|m| m & usage_mask::WRAP_KEY == 0) {
                return Err(KmipError::PermissionDenied(format!(
                    "key {} may not wrap keys (Cryptographic Usage Mask)",
                    spec.encryption_key
                )));
            }
            let kek = self.material(&wrapper).await?;
            // KMIP 1.4 §2.1.3: with TTLV Encoding (the default) the Key
            // Value structure's TTLV is wrapped and sent as a Byte String;
            // with No Encoding the Key Material alone is wrapped and stays
            // inside the Key Value structure.
            let plain = if encoding == ENCODING_TTLV {
                SecretBytes::new(
                    Item::structure(
                        Tag::KEY_VALUE,
                        vec![Item::bytes(Tag::KEY_MATERIAL, material.expose())],
                    )
                    .encode()?,
                )
            } else {
                SecretBytes::from_slice(material.expose())
            };
            let wrapped = match mode {
                BlockCipherMode::NIST_KEY_WRAP => kw_wrap(kek.expose(), plain.expose()),
                BlockCipherMode::AES_KEY_WRAP_PADDING => kwp_wrap(kek.expose(), plain.expose()),
                other => {
                    return Err(KmipError::FeatureNotSupported(format!(
                        "key wrapping with Block Cipher Mode {other}"
                    )))
                }
            }
            .map_err(crypto)?;
            let mut items = vec![Item::enumeration(Tag::KEY_FORMAT_TYPE, format.0)];
            if encoding == ENCODING_TTLV {
                items.push(Item::bytes(Tag::KEY_VALUE, &wrapped));
            } else {
                items.push(Item::structure(
                    Tag::KEY_VALUE,
                    vec![Item::bytes(Tag::KEY_MATERIAL, &wrapped)],
                ));
            }
            if let Some(a) = algorithm {
                items.push(Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, a.0));
            }
            if let Some(l) = length {
                items.push(Item::int(Tag::CRYPTOGRAPHIC_LENGTH, l));
            }
            items.push(Item::structure(
                Tag::KEY_WRAPPING_DATA,
                vec![
                    Item::enumeration(Tag::WRAPPING_METHOD, WrappingMethod::ENCRYPT.0),
                    Item::structure(
                        Tag::ENCRYPTION_KEY_INFORMATION,
                        vec![
                            Item::text(Tag::UNIQUE_IDENTIFIER, spec.encryption_key.clone()),
                            Item::structure(
                                Tag::CRYPTOGRAPHIC_PARAMETERS,
                                vec![Item::enumeration(Tag::BLOCK_CIPHER_MODE, mode.0)],
                            ),
                        ],
                    ),
                    Item::enumeration(TAG_ENCODING_OPTION, encoding),
                ],
            ));
            let block = Item::structure(Tag::KEY_BLOCK, items);
            let object = match object_type {
                ObjectType::SECRET_DATA => Item::structure(
                    Tag::SECRET_DATA,
                    vec![
                        Item::enumeration(
                            Tag::SECRET_DATA_TYPE,
                            obj.kmip
                                .as_ref()
                                .and_then(|k| k.secret_type)
                                .unwrap_or(SecretDataType::PASSWORD.0),
                        ),
                        block,
                    ],
                ),
                _ => Item::structure(Tag::SYMMETRIC_KEY, vec![block]),
            };
            return Ok(vec![
                Item::enumeration(Tag::OBJECT_TYPE, object_type.0),
                Item::text(Tag::UNIQUE_IDENTIFIER, uid),
                object,
            ]);
        }
        let object = match object_type {
            ObjectType::SECRET_DATA => ManagedObject::SecretData {
                data_type: SecretDataType(
                    obj.kmip
                        .as_ref()
                        .and_then(|k| k.secret_type)
                        .unwrap_or(SecretDataType::PASSWORD.0),
                ),
                block,
            },
            _ => ManagedObject::SymmetricKey(block),
        };
        Ok(vec![
            Item::enumeration(Tag::OBJECT_TYPE, object_type.0),
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            object.to_item(),
        ])
    }

    fn attribute_items(&self, attrs: Vec<Attribute>) -> Vec<Item> {
        if self.version >= ProtocolVersion::V2_0 {
            // KMIP 2.x: one Attributes structure of tagged values, custom
            // attributes as Vendor Attributes.
            let items = attrs
                .into_iter()
                .filter_map(|a| {
                    let value = a.value?;
                    match attribute_tag_of(&a.name) {
                        Some(tag) => Some(Item::new(tag, value.value)),
                        None => vendor_attribute_item(&a.name, &value),
                    }
                })
                .collect();
            return vec![Item::structure(Tag::ATTRIBUTES, items)];
        }
        attrs.iter().map(Attribute::to_item).collect()
    }

    async fn get_attributes(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load_with_attributes(&uid).await?;
        self.require_visible(&obj)?;
        let mut attrs = obj.attributes(now_ms());
        if !request.attribute_names.is_empty() {
            attrs.retain(|a| request.attribute_names.contains(&a.name));
        }
        let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
        out.extend(self.attribute_items(attrs));
        Ok(out)
    }

    async fn get_attribute_list(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load_with_attributes(&uid).await?;
        self.require_visible(&obj)?;
        let mut names: Vec<String> = Vec::new();
        for a in obj.attributes(now_ms()) {
            if !names.contains(&a.name) {
                names.push(a.name);
            }
        }
        let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
        for name in names {
            if self.version >= ProtocolVersion::V2_0 {
                out.extend(attribute_reference(&name));
            } else {
                out.push(Item::text(Tag::ATTRIBUTE_NAME, name));
            }
        }
        Ok(out)
    }

    async fn change_attribute(
        &mut self,
        change: Change,
        request: &AttributeChangeRequest,
    ) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let mut obj = self.load_with_attributes(&uid).await?;
        self.require_manage(&obj)?;
        let now = now_ms();
        let name = request.attribute.name.clone();
        let index = request.attribute.index.unwrap_or(0);
        let value = request.attribute.value.clone();
        let need_value =
            || value.clone().ok_or_else(|| KmipError::MissingData(format!("the value of {name}")));
        if matches!(obj.state(now), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::IllegalOperation(format!("object {uid} is destroyed")));
        }
        let result_value: Option<Item>;
        let result_index: i32;
        match name.as_str() {
            "Activation Date" | "Deactivation Date" => {
                if change == Change::Delete {
                    return Err(KmipError::InvalidField(format!("{name} cannot be deleted")));
                }
                let at = need_value()?.as_date_time()? * 1000;
                let pre_active = obj.state(now) == KState::PRE_ACTIVE;
                let mut kmip = obj.kmip.clone().ok_or_else(|| {
                    KmipError::InvalidField(format!(
                        "{name} of a key made by the REST API is its creation and revocation"
                    ))
                })?;
                if name == "Activation Date" {
                    if !pre_active {
                        return Err(KmipError::IllegalOperation(format!(
                            "the Activation Date of {uid} can change only while it is Pre-Active"
                        )));
                    }
                    if change == Change::Add && kmip.activation_ms.is_some() {
                        return Err(KmipError::IllegalOperation(format!("{uid} has {name}")));
                    }
                    kmip.activation_ms = Some(at);
                } else {
                    if obj.state(now) == KState::DEACTIVATED || obj.compromised() {
                        return Err(KmipError::IllegalOperation(format!(
                            "{uid} is already deactivated"
                        )));
                    }
                    if change == Change::Add && kmip.deactivation_ms.is_some() {
                        return Err(KmipError::IllegalOperation(format!("{uid} has {name}")));
                    }
                    kmip.deactivation_ms = Some(at);
                }
                self.put_object(&obj, kmip).await?;
                result_value = value.clone();
                result_index = 0;
            }
            n if is_stored(n) => {
                let mut values: Vec<String> =
                    obj.stored.iter().filter(|a| a.name == name).map(|a| a.value.clone()).collect();
                if name == "Name" && values.is_empty() && obj.kmip.is_none() {
                    // A REST key's implicit Name becomes a stored one.
                    values =
                        obj.names().iter().map(|v| encode_value("Name", v)).collect::<R<_>>()?;
                }
                if name == "Name" && !obj.is_latest() {
                    return Err(KmipError::IllegalOperation(
                        "a replaced key version has no Name (Re-key moved it)".into(),
                    ));
                }
                // KMIP 2.x names the value to change or delete.
                let position = match &request.current {
                    Some(current) => {
                        let enc = encode_value(&name, current)?;
                        i32::try_from(values.iter().position(|v| *v == enc).ok_or_else(|| {
                            KmipError::ItemNotFound(format!("that value of {name}"))
                        })?)
                        .unwrap_or(i32::MAX)
                    }
                    None if change == Change::Delete
                        && request.attribute.value.is_some()
                        && request.attribute.index.is_none() =>
                    {
                        let enc = encode_value(&name, &need_value()?)?;
                        i32::try_from(values.iter().position(|v| *v == enc).ok_or_else(|| {
                            KmipError::ItemNotFound(format!("that value of {name}"))
                        })?)
                        .unwrap_or(i32::MAX)
                    }
                    None => index,
                };
                let slot = usize::try_from(position).ok().filter(|p| *p < values.len());
                match change {
                    Change::Add => {
                        if SINGLE.contains(&name.as_str()) && !values.is_empty() {
                            return Err(KmipError::IllegalOperation(format!(
                                "{uid} already has {name} (use Modify Attribute)"
                            )));
                        }
                        let v = need_value()?;
                        if name == "Name" {
                            let n = Name::parse(&v)?;
                            self.check_name_free(&obj, &n).await?;
                        }
                        values.push(encode_value(&name, &v)?);
                        result_index = i32::try_from(values.len() - 1).unwrap_or(i32::MAX);
                        result_value = Some(v);
                    }
                    Change::Modify => {
                        let slot = slot.ok_or(KmipError::IndexOutOfBounds(position))?;
                        let v = need_value()?;
                        if name == "Name" {
                            let n = Name::parse(&v)?;
                            self.check_name_free(&obj, &n).await?;
                        }
                        values[slot] = encode_value(&name, &v)?;
                        result_index = position;
                        result_value = Some(v);
                    }
                    Change::Delete => {
                        let slot = slot.ok_or(KmipError::IndexOutOfBounds(position))?;
                        let old = values.remove(slot);
                        result_index = position;
                        result_value = decode_value(&old);
                    }
                }
                let version = obj.version.version;
                // A version showing an older one's attributes (a REST
                // rotation added it) gets its own copy, then its object.
                let inherit = obj.source.filter(|s| *s != version);
                self.state
                    .store
                    .kmip_set_attribute(
                        obj.key.name.clone(),
                        version,
                        name.clone(),
                        values,
                        inherit,
                    )
                    .await
                    .map_err(kms)?;
                if inherit.is_some() {
                    if let Some(kmip) = obj.kmip.clone() {
                        self.state.store.kmip_put_object(kmip, None).await.map_err(kms)?;
                    }
                }
                if obj.kmip.is_none() {
                    // A REST key gets a KMIP object once it has KMIP attributes.
                    let kmip = KmipObject {
                        key: obj.key.name.clone(),
                        version: obj.version.version,
                        object_type: ObjectType::SYMMETRIC_KEY.0,
                        algorithm: Some(CryptographicAlgorithm::AES.0),
                        length: Some(256),
                        usage_mask: None,
                        secret_type: None,
                        owner: String::new(),
                        activation_ms: Some(obj.version.created_ms),
                        deactivation_ms: None,
                        compromise_occurrence_ms: None,
                        compromised: false,
                    };
                    self.state.store.kmip_put_object(kmip.clone(), None).await.map_err(kms)?;
                    obj.kmip = Some(kmip);
                }
            }
            n if attribute_tag_of(n).is_some() => {
                return Err(KmipError::InvalidField(format!(
                    "attribute {n} is set by the server, not by the client"
                )));
            }
            n => return Err(KmipError::FeatureNotSupported(format!("attribute {n}"))),
        }
        let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
        if self.version < ProtocolVersion::V2_0 {
            let attribute = Attribute { name, index: Some(result_index), value: result_value };
            out.push(attribute.to_item());
        }
        Ok(out)
    }

    /// Refuses a Name stored on a key other than `except` that the client
    /// sees (names are unique in the client's scope). The keys holding it
    /// are read a page at a time: another client's objects may share it.
    async fn refuse_stored_name(&self, name: &Name, except: Option<&str>) -> R<()> {
        let value = encode_value("Name", &name.to_value(Tag::ATTRIBUTE_VALUE))?;
        let store = &self.state.store;
        let mut holders = Holders::new("Name", value);
        while let Some(page) = holders.next_page(store.as_ref()).await? {
            for key in &page {
                if Some(key.as_str()) == except {
                    continue;
                }
                if let Some(info) = store.get_key(key.clone()).await.map_err(kms)? {
                    if self.client.admin || info.allows(self.client) {
                        return Err(KmipError::ObjectAlreadyExists(format!(
                            "an object named {} exists",
                            name.value
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Refuses a Name another object the client sees already has.
    async fn check_name_free(&self, obj: &Obj, name: &Name) -> R<()> {
        self.refuse_stored_name(name, Some(&obj.key.name)).await?;
        // A REST key the client sees is named by its own name.
        if name.value != obj.key.name && check_name("key name", &name.value).is_ok() {
            let store = &self.state.store;
            if let Some(info) = store.get_key(name.value.clone()).await.map_err(kms)? {
                if (self.client.admin || info.allows(self.client))
                    && store.kmip_object(name.value.clone(), u32::MAX).await.map_err(kms)?.is_none()
                {
                    return Err(KmipError::ObjectAlreadyExists(format!(
                        "an object named {} exists",
                        name.value
                    )));
                }
            }
        }
        Ok(())
    }

    // ---- Locate ----------------------------------------------------------

    async fn locate(&mut self, request: &LocateRequest) -> R<Vec<Item>> {
        let now = now_ms();
        let store = &self.state.store;
        let mut stored = Vec::new();
        for a in &request.attributes.0 {
            if !is_stored(&a.name) {
                continue;
            }
            let value = a
                .value
                .as_ref()
                .ok_or_else(|| KmipError::MissingData(format!("the value of {}", a.name)))?;
            stored.push((a.name.as_str(), value));
        }
        let by_name = stored.iter().any(|(name, _)| *name == "Name");
        let offset = usize::try_from(request.offset_items.unwrap_or(0).max(0)).unwrap_or(0);
        let max = request
            .maximum_items
            .filter(|m| *m > 0)
            .and_then(|m| usize::try_from(m).ok())
            .unwrap_or(usize::MAX)
            .min(LOCATE_MAX);
        // Keys are visited one store page at a time, in key order, and
        // only the answer's window (Offset Items, Maximum Items) is kept,
        // so memory stays bounded whatever the store holds; the matches
        // before and after the window are only counted (Located Items).
        // Located Items (KMIP 1.3 on) counts every match; an older client
        // gets none, so its walk ends once the window is full.
        let count_all = self.version >= ProtocolVersion::V1_3;
        let mut hits = Hits { offset, max, count_all, total: 0, page: Vec::new() };
        // A stored criterion narrows the walk to the keys its index
        // holds: a Name when one is given (few keys share a Name), else
        // the first. Every criterion is still tested on each object.
        let driver = stored.iter().find(|(name, _)| *name == "Name").or(stored.first());
        match driver {
            Some(&(attribute, value)) => {
                let encoded = encode_value(attribute, value)?;
                // A key without stored Names is named by its own name; it
                // holds no stored attribute, so the index does not list it:
                // it is visited in its place in key order.
                let mut own = None;
                if attribute == "Name" {
                    let n = Name::parse(value)?;
                    if check_name("key name", &n.value).is_ok()
                        && store
                            .kmip_object(n.value.clone(), u32::MAX)
                            .await
                            .map_err(kms)?
                            .is_none()
                    {
                        own = Some(n.value);
                    }
                }
                let mut holders = Holders::new(attribute, encoded);
                while !hits.complete() {
                    let Some(page) = holders.next_page(store.as_ref()).await? else { break };
                    for name in &page {
                        if let Some(o) = own.take_if(|o| o.as_str() <= name.as_str()) {
                            if o != *name {
                                self.locate_key(o, request, by_name, now, &mut hits).await?;
                            }
                        }
                        self.locate_key(name.clone(), request, by_name, now, &mut hits).await?;
                    }
                }
                if let Some(o) = own {
                    self.locate_key(o, request, by_name, now, &mut hits).await?;
                }
            }
            None => {
                let mut after = String::new();
                loop {
                    let page = store
                        .key_page(after.clone(), KeyFilter::default(), LOCATE_PAGE)
                        .await
                        .map_err(kms)?;
                    let full = page.len() >= LOCATE_PAGE as usize;
                    if let Some(last) = page.last() {
                        after = last.name.clone();
                    }
                    for key in &page {
                        self.locate_in(key, request, by_name, now, &mut hits).await?;
                    }
                    if !full || hits.complete() {
                        break;
                    }
                }
            }
        }
        let mut out = Vec::new();
        if self.version >= ProtocolVersion::V1_3 {
            out.push(Item::int(Tag::LOCATED_ITEMS, i32::try_from(hits.total).unwrap_or(i32::MAX)));
        }
        if hits.page.len() == 1 {
            self.placeholder = Some(hits.page[0].clone());
        }
        out.extend(hits.page.into_iter().map(|uid| Item::text(Tag::UNIQUE_IDENTIFIER, uid)));
        Ok(out)
    }

    /// [`Self::locate_in`] of the key named `name`, if it exists.
    async fn locate_key(
        &self,
        name: String,
        request: &LocateRequest,
        by_name: bool,
        now: i64,
        hits: &mut Hits,
    ) -> R<()> {
        if hits.complete() {
            return Ok(());
        }
        match self.state.store.get_key(name).await.map_err(kms)? {
            Some(key) => self.locate_in(&key, request, by_name, now, hits).await,
            None => Ok(()),
        }
    }

    /// Locate's test of every version of `key` the client may see.
    async fn locate_in(
        &self,
        key: &KeyInfo,
        request: &LocateRequest,
        by_name: bool,
        now: i64,
        hits: &mut Hits,
    ) -> R<()> {
        if hits.complete() || !(self.client.admin || key.allows(self.client)) {
            return Ok(());
        }
        let store = &self.state.store;
        // A key made over REST has no KMIP object (nor stored attributes).
        let has_kmip = store.kmip_object(key.name.clone(), u32::MAX).await.map_err(kms)?.is_some();
        let stored = if has_kmip {
            store.kmip_attributes(key.name.clone(), None).await.map_err(kms)?
        } else {
            Vec::new()
        };
        for version in key.versions.iter().rev() {
            let mut kmip = if has_kmip {
                store.kmip_object(key.name.clone(), version.version).await.map_err(kms)?
            } else {
                None
            };
            let source = kmip.as_ref().map(|k| k.version);
            if let Some(k) = kmip.as_mut() {
                inherit_object(k, version);
            }
            let obj = Obj {
                key: key.clone(),
                version: version.clone(),
                kmip,
                source,
                stored: stored.iter().filter(|a| Some(a.version) == source).cloned().collect(),
            };
            if by_name && !obj.is_latest() {
                continue;
            }
            if matches_criteria(&obj, &request.attributes, now)? {
                hits.total += 1;
                if hits.total > hits.offset && hits.page.len() < hits.max {
                    hits.page.push(obj.uid());
                }
            }
        }
        Ok(())
    }

    // ---- Life cycle ------------------------------------------------------

    async fn activate(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_manage(&obj)?;
        if obj.state(now_ms()) != KState::PRE_ACTIVE {
            return Err(KmipError::IllegalOperation(format!(
                "object {uid} is {}, not Pre-Active",
                obj.state(now_ms())
            )));
        }
        let mut kmip = obj.kmip.clone().ok_or_else(|| {
            KmipError::GeneralFailure("a Pre-Active object without a KMIP record".into())
        })?;
        kmip.activation_ms = Some(now_ms());
        self.put_object(&obj, kmip).await?;
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }

    async fn revoke(&mut self, request: &RevokeRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_manage(&obj)?;
        let now = now_ms();
        let compromise = matches!(
            request.reason,
            RevocationReasonCode::KEY_COMPROMISE | RevocationReasonCode::CA_COMPROMISE
        );
        match obj.state(now) {
            KState::DESTROYED | KState::DESTROYED_COMPROMISED => {
                return Err(KmipError::IllegalOperation(format!("object {uid} is destroyed")));
            }
            KState::COMPROMISED => {
                return Err(KmipError::IllegalOperation(format!(
                    "object {uid} is already compromised"
                )));
            }
            _ => {}
        }
        if compromise {
            let mut kmip = obj.kmip.clone().unwrap_or_else(|| KmipObject {
                key: obj.key.name.clone(),
                version: obj.version.version,
                object_type: ObjectType::SYMMETRIC_KEY.0,
                algorithm: Some(CryptographicAlgorithm::AES.0),
                length: Some(256),
                usage_mask: None,
                secret_type: None,
                owner: String::new(),
                activation_ms: Some(obj.version.created_ms),
                deactivation_ms: None,
                compromise_occurrence_ms: None,
                compromised: false,
            });
            kmip.compromised = true;
            kmip.compromise_occurrence_ms =
                Some(request.compromise_occurrence_date.map_or(now, |s| s * 1000));
            self.put_object(&obj, kmip).await?;
        } else if obj.state(now) == KState::DEACTIVATED
            && matches!(obj.version.state, KeyState::Revoked { .. })
        {
            return Err(KmipError::IllegalOperation(format!("object {uid} is already revoked")));
        }
        if obj.version.state == KeyState::Active {
            let mut reason = format!("KMIP Revoke ({})", request.reason);
            if let Some(message) = &request.message {
                let clean: String =
                    message.chars().filter(|c| !c.is_control()).take(MAX_REASON / 2).collect();
                reason.push_str(": ");
                reason.push_str(&clean);
            }
            self.state
                .store
                .change_state(
                    obj.key.name.clone(),
                    Some(obj.version.version),
                    StateChange::Revoke { reason },
                    now,
                )
                .await
                .map_err(kms)?;
        }
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }

    async fn destroy(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_manage(&obj)?;
        match obj.state(now_ms()) {
            KState::ACTIVE => {
                return Err(KmipError::IllegalOperation(format!(
                    "object {uid} is Active: revoke it before destroying it"
                )));
            }
            KState::DESTROYED | KState::DESTROYED_COMPROMISED => {
                return Err(KmipError::IllegalOperation(format!(
                    "object {uid} is already destroyed"
                )));
            }
            _ => {}
        }
        self.state
            .store
            .change_state(
                obj.key.name.clone(),
                Some(obj.version.version),
                StateChange::Destroy,
                now_ms(),
            )
            .await
            .map_err(kms)?;
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }

    async fn rekey(&mut self, request: &ReKeyRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load_with_attributes(&uid).await?;
        self.require_manage(&obj)?;
        if obj.object_type() != ObjectType::SYMMETRIC_KEY {
            return Err(KmipError::IllegalOperation(format!("object {uid} is not a key")));
        }
        if !obj.is_latest() {
            return Err(KmipError::IllegalOperation(format!(
                "object {uid} was already replaced; re-key its newest version"
            )));
        }
        if matches!(
            obj.state(now_ms()),
            KState::DESTROYED | KState::DESTROYED_COMPROMISED | KState::COMPROMISED
        ) {
            return Err(KmipError::IllegalOperation(format!(
                "object {uid} is {}",
                obj.state(now_ms())
            )));
        }
        if !request.attributes.0.is_empty() {
            return Err(KmipError::FeatureNotSupported(
                "attributes in Re-key (the new key takes the old one's)".into(),
            ));
        }
        // KMIP 1.4 §4.4: the new key keeps the old one's client-set
        // attributes (Object Group, Contact Information, Application
        // Specific Information, Cryptographic Parameters, custom ones...)
        // and takes its Names away from it.
        let version = obj.version.version + 1;
        let attributes = obj
            .stored
            .iter()
            .map(|a| KmipAttributeRow { version, ..a.clone() })
            .collect::<Vec<_>>();
        let root = self.state.require_root().map_err(kms)?;
        let old = self.material(&obj).await?;
        let material = random_secret(old.len()).map_err(crypto)?;
        drop(old);
        let now = now_ms();
        let template = obj.kmip.clone();
        let object = KmipObject {
            key: obj.key.name.clone(),
            version,
            object_type: ObjectType::SYMMETRIC_KEY.0,
            algorithm: template
                .as_ref()
                .and_then(|k| k.algorithm)
                .or(Some(CryptographicAlgorithm::AES.0)),
            length: Some(i32::try_from(material.len() * 8).unwrap_or(i32::MAX)),
            usage_mask: template.as_ref().and_then(|k| k.usage_mask),
            secret_type: None,
            owner: template.map_or_else(|| self.client.name.clone(), |k| k.owner),
            activation_ms: Some(now + i64::from(request.offset.unwrap_or(0)) * 1000),
            deactivation_ms: None,
            compromise_occurrence_ms: None,
            compromised: false,
        };
        let sealed = root.seal_material(&obj.key.name, version, &material).map_err(kms)?;
        self.state.store.kmip_add_version(object, now, sealed, attributes).await.map_err(kms)?;
        self.touched = Some((obj.key.name.clone(), Some(version)));
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, unique_identifier(&obj.key.name, version))])
    }

    async fn check(&mut self, payload: &Item) -> R<Vec<Item>> {
        let f = Fields::of(payload)?;
        let given = f.optional(Tag::UNIQUE_IDENTIFIER)?.map(|i| i.as_text().map(str::to_owned));
        let uid = self.uid(given.transpose()?.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_visible(&obj)?;
        if matches!(obj.state(now_ms()), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::IllegalOperation(format!("object {uid} is destroyed")));
        }
        if let Some(mask) = f.optional(Tag::CRYPTOGRAPHIC_USAGE_MASK)? {
            let asked = mask.as_int()?;
            if obj.usage_mask().is_some_and(|m| m & asked != asked) {
                return Err(KmipError::IllegalOperation(format!(
                    "object {uid} does not allow usage mask 0x{asked:X}"
                )));
            }
        }
        if f.optional(Tag::USAGE_LIMITS_COUNT)?.is_some() {
            return Err(KmipError::FeatureNotSupported("Usage Limits".into()));
        }
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }

    // ---- Cryptographic operations ---------------------------------------

    async fn usable_key(&mut self, uid: &str, bit: i32, protect: bool) -> R<(Obj, SecretBytes)> {
        let obj = self.load(uid).await?;
        self.require_use(&obj)?;
        if obj.object_type() != ObjectType::SYMMETRIC_KEY {
            return Err(KmipError::IllegalOperation(format!("object {uid} is not a key")));
        }
        if obj.usage_mask().is_some_and(|m| m & bit == 0) {
            return Err(KmipError::PermissionDenied(format!(
                "the Cryptographic Usage Mask of {uid} does not allow this operation"
            )));
        }
        let state = obj.state(now_ms());
        let ok = state == KState::ACTIVE || (!protect && state == KState::DEACTIVATED);
        if !ok || !matches!(obj.version.state, KeyState::Active) {
            return Err(KmipError::IllegalOperation(format!(
                "object {uid} is {state}: it cannot be used for this operation"
            )));
        }
        let material = self.material(&obj).await?;
        Ok((obj, material))
    }

    async fn encrypt(&mut self, request: &CryptoRequest, encrypt: bool) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let bit = if encrypt { usage_mask::ENCRYPT } else { usage_mask::DECRYPT };
        let (obj, key) = self.usable_key(&uid, bit, encrypt).await?;
        if obj
            .kmip
            .as_ref()
            .and_then(|k| k.algorithm)
            .is_some_and(|a| a != CryptographicAlgorithm::AES.0)
        {
            return Err(KmipError::IllegalOperation(format!("object {uid} is not an AES key")));
        }
        if request.data.len() > MAX_DATA {
            return Err(KmipError::InvalidField(format!("Data is larger than {MAX_DATA} bytes")));
        }
        let params = request.parameters.clone().unwrap_or_default();
        if params.cryptographic_algorithm.is_some_and(|a| a != CryptographicAlgorithm::AES) {
            return Err(KmipError::FeatureNotSupported(
                "Encrypt and Decrypt with algorithms other than AES".into(),
            ));
        }
        let mode = params.block_cipher_mode.ok_or_else(|| {
            KmipError::MissingData("Cryptographic Parameters with a Block Cipher Mode".into())
        })?;
        let given_iv = request.iv_counter_nonce.clone();
        let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
        let mut data = SecretBytes::from_slice(request.data.as_slice());
        match mode {
            BlockCipherMode::GCM => {
                let tag_len = params.tag_length.unwrap_or(16);
                if usize::try_from(tag_len).ok() != Some(GCM_TAG_LEN) {
                    return Err(KmipError::FeatureNotSupported(format!(
                        "GCM tags of {tag_len} bytes (16 only)"
                    )));
                }
                if params.iv_length.is_some_and(|l| l != 96) {
                    return Err(KmipError::FeatureNotSupported(
                        "GCM IVs other than 96 bits".into(),
                    ));
                }
                let gcm = Gcm::new(key.expose()).map_err(crypto)?;
                let aad = request.aad.clone().unwrap_or_default();
                let nonce = iv_or_random::<GCM_NONCE_LEN>(given_iv.as_deref(), encrypt)?;
                if encrypt {
                    let tag = gcm.seal(&nonce, &aad, data.expose_mut()).map_err(crypto)?;
                    out.push(Item::bytes(Tag::DATA, data.expose()));
                    if given_iv.is_none() {
                        out.push(Item::bytes(Tag::IV_COUNTER_NONCE, &nonce));
                    }
                    out.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_TAG, &tag));
                } else {
                    let tag: [u8; GCM_TAG_LEN] = request
                        .tag
                        .as_deref()
                        .and_then(|t| t.try_into().ok())
                        .ok_or_else(|| {
                            KmipError::MissingData("a 16-byte Authenticated Encryption Tag".into())
                        })?;
                    gcm.open(&nonce, &aad, data.expose_mut(), &tag).map_err(|_| {
                        KmipError::CryptographicFailure(
                            "the data or its additional data does not authenticate".into(),
                        )
                    })?;
                    out.push(Item::bytes(Tag::DATA, data.expose()));
                }
            }
            BlockCipherMode::CBC => {
                let padding = params.padding_method.unwrap_or(PaddingMethod::PKCS5);
                if ![PaddingMethod::PKCS5, PaddingMethod::NONE].contains(&padding) {
                    return Err(KmipError::FeatureNotSupported(format!(
                        "CBC with Padding Method {padding}"
                    )));
                }
                let iv = iv_or_random::<16>(given_iv.as_deref(), encrypt)?;
                let mut cbc = Cbc::new(key.expose(), CbcIv::Plain64).map_err(crypto)?;
                if encrypt {
                    let mut buf = data.expose().to_vec();
                    if padding == PaddingMethod::PKCS5 {
                        let pad = 16 - buf.len() % 16;
                        buf.resize(buf.len() + pad, u8::try_from(pad).unwrap_or(16));
                    }
                    let mut buf = SecretBytes::new(buf);
                    cbc.encrypt_with_iv(&iv, buf.expose_mut()).map_err(crypto)?;
                    out.push(Item::bytes(Tag::DATA, buf.expose()));
                    if given_iv.is_none() {
                        out.push(Item::bytes(Tag::IV_COUNTER_NONCE, &iv));
                    }
                } else {
                    cbc.decrypt_with_iv(&iv, data.expose_mut()).map_err(crypto)?;
                    let plain = data.expose();
                    let len = if padding == PaddingMethod::PKCS5 {
                        let pad = usize::from(*plain.last().unwrap_or(&0));
                        let good = (1..=16).contains(&pad)
                            && pad <= plain.len()
                            && plain[plain.len() - pad..].iter().all(|&b| usize::from(b) == pad);
                        if !good {
                            return Err(KmipError::CryptographicFailure(
                                "bad PKCS5 padding".into(),
                            ));
                        }
                        plain.len() - pad
                    } else {
                        plain.len()
                    };
                    out.push(Item::bytes(Tag::DATA, &plain[..len]));
                }
            }
            BlockCipherMode::CTR => {
                let iv = iv_or_random::<16>(given_iv.as_deref(), encrypt)?;
                let mut ctr = Ctr::new(key.expose()).map_err(crypto)?;
                ctr.apply(&iv, data.expose_mut()).map_err(crypto)?;
                out.push(Item::bytes(Tag::DATA, data.expose()));
                if encrypt && given_iv.is_none() {
                    out.push(Item::bytes(Tag::IV_COUNTER_NONCE, &iv));
                }
            }
            other => {
                return Err(KmipError::FeatureNotSupported(format!(
                    "Block Cipher Mode {other} (GCM, CBC and CTR are served)"
                )))
            }
        }
        Ok(out)
    }

    async fn mac(&mut self, request: &CryptoRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let (obj, key) = self.usable_key(&uid, usage_mask::MAC_GENERATE, true).await?;
        let algorithm = request
            .parameters
            .as_ref()
            .and_then(|p| p.cryptographic_algorithm)
            .or_else(|| {
                obj.kmip
                    .as_ref()
                    .and_then(|k| k.algorithm)
                    .map(CryptographicAlgorithm)
                    .filter(|a| *a == CryptographicAlgorithm::HMAC_SHA256)
            })
            .ok_or_else(|| {
                KmipError::MissingData("Cryptographic Parameters naming HMAC-SHA256".into())
            })?;
        if algorithm != CryptographicAlgorithm::HMAC_SHA256 {
            return Err(KmipError::FeatureNotSupported(format!(
                "MAC with {algorithm} (HMAC-SHA256 is served)"
            )));
        }
        if request.data.len() > MAX_DATA {
            return Err(KmipError::InvalidField(format!("Data is larger than {MAX_DATA} bytes")));
        }
        let mac = hmac(HashAlg::Sha256, key.expose(), request.data.as_slice());
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid), Item::bytes(Tag::MAC_DATA, mac.expose())])
    }
}

/// Encoding Option (KMIP 1.4 §9.1.3.2.32).
const TAG_ENCODING_OPTION: Tag = Tag(0x42_00A3);
const ENCODING_NONE: u32 = 0x01;
const ENCODING_TTLV: u32 = 0x02;

/// The Encoding Option of a Get's Key Wrapping Specification (TTLV
/// Encoding when absent, as the specification says).
fn encoding_option(payload: &Item) -> R<u32> {
    let f = Fields::of(payload)?;
    let Some(spec) = f.optional(Tag::KEY_WRAPPING_SPECIFICATION)? else {
        return Ok(ENCODING_TTLV);
    };
    match Fields::of(spec)?.optional(TAG_ENCODING_OPTION)?.map(Item::as_enum).transpose()? {
        None | Some(ENCODING_TTLV) => Ok(ENCODING_TTLV),
        Some(ENCODING_NONE) => Ok(ENCODING_NONE),
        Some(other) => Err(KmipError::FeatureNotSupported(format!("Encoding Option {other}"))),
    }
}

/// The IV, nonce or counter a request gave (exactly `N` bytes), or for
/// an encryption without one a random one (KMIP 1.4 §4.29: the server
/// generates it and returns it).
fn iv_or_random<const N: usize>(given: Option<&[u8]>, encrypt: bool) -> R<[u8; N]> {
    match given {
        Some(iv) => iv.try_into().map_err(|_| {
            KmipError::InvalidField(format!(
                "the IV/Counter/Nonce must be {N} bytes, not {}",
                iv.len()
            ))
        }),
        None if encrypt => {
            let mut iv = [0u8; N];
            fill_random(&mut iv).map_err(crypto)?;
            Ok(iv)
        }
        None => Err(KmipError::MissingData("the IV/Counter/Nonce".into())),
    }
}

fn check_algorithm(algorithm: CryptographicAlgorithm, bits: i32) -> R<()> {
    match algorithm {
        CryptographicAlgorithm::AES if [128, 192, 256].contains(&bits) => Ok(()),
        CryptographicAlgorithm::AES => {
            Err(KmipError::InvalidField(format!("AES keys are 128, 192 or 256 bits, not {bits}")))
        }
        CryptographicAlgorithm::HMAC_SHA256 if (128..=512).contains(&bits) && bits % 8 == 0 => {
            Ok(())
        }
        CryptographicAlgorithm::HMAC_SHA256 => Err(KmipError::InvalidField(format!(
            "HMAC-SHA256 keys are 128 to 512 bits, not {bits}"
        ))),
        other => Err(KmipError::FeatureNotSupported(format!(
            "Cryptographic Algorithm {other} (AES and HMAC-SHA256 keys are served)"
        ))),
    }
}

/// A version added by a REST rotation shows the KMIP object of the newest
/// older version that has one: its type and owner, active from its own
/// creation.
fn inherit_object(object: &mut KmipObject, version: &KeyVersionInfo) {
    if object.version != version.version {
        object.version = version.version;
        object.activation_ms = Some(version.created_ms);
        object.deactivation_ms = None;
        object.compromise_occurrence_ms = None;
        object.compromised = false;
    }
}

/// Keys read per store query while Locate (or a Name check) walks keys.
const LOCATE_PAGE: u32 = 1000;

/// The names of the keys holding one stored attribute value, walked a
/// store page ([`LOCATE_PAGE`]) at a time in key order: another client's
/// objects, or most of a fleet's, may share the value.
struct Holders {
    attribute: String,
    value: String,
    after: String,
    done: bool,
}

impl Holders {
    fn new(attribute: &str, value: String) -> Self {
        Self { attribute: attribute.to_owned(), value, after: String::new(), done: false }
    }

    /// The next page, or `None` past the last.
    async fn next_page(&mut self, store: &dyn crate::store::Store) -> R<Option<Vec<String>>> {
        if self.done {
            return Ok(None);
        }
        let page = store
            .kmip_find_page(
                self.attribute.clone(),
                self.value.clone(),
                std::mem::take(&mut self.after),
                LOCATE_PAGE,
            )
            .await
            .map_err(kms)?;
        match page.last() {
            Some(last) if page.len() >= LOCATE_PAGE as usize => self.after = last.clone(),
            _ => self.done = true,
        }
        Ok((!page.is_empty()).then_some(page))
    }
}

/// Most identifiers one Locate answers (fewer when Maximum Items asks), as
/// a page of the REST lists: a store of a million keys does not become one
/// response of tens of megabytes. Located Items (KMIP 1.3 and later) still
/// counts every match, and Offset Items walks on.
const LOCATE_MAX: usize = MAX_PAGE as usize;

/// Locate's answer window and its count of every match.
struct Hits {
    offset: usize,
    max: usize,
    /// Whether every match is counted (for Located Items), or the walk
    /// may end once the window is full.
    count_all: bool,
    total: usize,
    page: Vec<String>,
}

impl Hits {
    /// Whether no further match can change the answer.
    fn complete(&self) -> bool {
        !self.count_all && self.page.len() >= self.max
    }
}

/// Whether an object has every attribute value a Locate asks for.
fn matches_criteria(obj: &Obj, criteria: &AttributeSet, now: i64) -> R<bool> {
    let attrs = obj.attributes(now);
    for c in &criteria.0 {
        let Some(want) = &c.value else { continue };
        let want = encode_value(&c.name, want)?;
        let has = attrs
            .iter()
            .filter(|a| a.name == c.name)
            .filter_map(|a| a.value.as_ref())
            .any(|v| encode_value(&c.name, v).is_ok_and(|e| e == want));
        if !has {
            if attribute_name_of(attribute_tag_of(&c.name).unwrap_or(Tag(0))).is_none()
                && !is_custom_attribute(&c.name)
            {
                return Err(KmipError::FeatureNotSupported(format!(
                    "Locate by attribute {}",
                    c.name
                )));
            }
            return Ok(false);
        }
    }
    Ok(true)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Add,
    Modify,
    Delete,
}

/// A new object's fields from its template.
#[derive(Default)]
struct NewObject {
    algorithm: Option<u32>,
    length: Option<i32>,
    usage_mask: Option<i32>,
    secret_type: Option<u32>,
    activation_ms: Option<i64>,
    deactivation_ms: Option<i64>,
    names: Vec<Name>,
    /// (attribute name, encoded value), in order.
    stored: Vec<(String, String)>,
}
