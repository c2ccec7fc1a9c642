//! Create, Activate, Revoke, Destroy, Re-key and Check.

use std::collections::BTreeMap;

use rampart_crypto::{fill_random, random_secret, SecretBytes};
use rampart_kmip::enums::{
    CryptographicAlgorithm, KeyFormatType, ObjectType, RevocationReasonCode, State as KState,
};
use rampart_kmip::payload::{
    attribute_tag_of, AttributeSet, CreateRequest, Name, ObjectRequest, ReKeyRequest, RevokeRequest,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item};
use rampart_kmip::KmipError;

use super::crypto::{check_algorithm, default_usage_mask, set_des_parity};
use super::errors::{crypto, kms, R};
use super::key_formats::{digest_input, generated_format};
use super::object::{decode_value, encode_value, unique_identifier, Obj, SINGLE};
use super::server_attributes::{self as server, client_sets};
use super::session::Session;
use crate::model::{check_name, now_ms, ClientInfo, KeyState, Selector, MAX_REASON};
use crate::server::service::{access, keys};
use crate::server::state::State;
use crate::store::{KmipAttributeRow, KmipObject, NewKmipKey, NewKmipVersion, StateChange};

/// Largest Secret Data registered.
pub(super) const MAX_SECRET: usize = 64 * 1024;

impl Session<'_> {
    // ---- Create, Register ------------------------------------------------

    /// Splits a template into the object's fields and its stored
    /// attributes, once the Templates it names have given theirs.
    pub(super) async fn template(
        &mut self,
        attrs: &AttributeSet,
        object_type: ObjectType,
    ) -> R<NewObject> {
        let attributes = self.with_templates(attrs).await?;
        let mut new = NewObject::default();
        for a in &attributes {
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
                // The certificate's own, which Register checks it against.
                "Certificate Type" if object_type == ObjectType::CERTIFICATE => {
                    new.certificate_type = Some(value.as_enum()?);
                }
                name if client_sets(name) => {
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
        Ok(new)
    }

    /// The model name of a new key: its KMIP Name when that is a valid,
    /// free key name, else `kmip-` and random hex. A Name the client can
    /// already see on another object is refused (names are unique in the
    /// client's scope).
    pub(super) async fn key_name_for(&self, names: &[Name]) -> R<String> {
        for name in names {
            self.refuse_stored_name(name, None).await?;
        }
        if let Some(first) = names.first() {
            if check_name("key name", &first.value).is_ok() {
                match self.state.store.get_key(first.value.clone()).await.map_err(kms)? {
                    None => return Ok(first.value.clone()),
                    // A REST key is named by its own name.
                    Some(info)
                        if access::may_see(self.client, &info.allow)
                            && self
                                .state
                                .store
                                .kmip_object(first.value.clone(), u32::MAX)
                                .await
                                .map_err(kms)?
                                .is_none() =>
                    {
                        return Err(KmipError::NonUniqueName(format!(
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

    pub(super) async fn store_new(
        &mut self,
        object_type: ObjectType,
        new: NewObject,
        material: &SecretBytes,
    ) -> R<String> {
        let name = self.key_name_for(&new.names).await?;
        self.touched = Some((name.clone(), Some(1)));
        let key = self.new_key(&name, object_type, new, material)?;
        let NewKmipKey { key, material, object, attributes } = key;
        self.state.store.kmip_create_key(key, material, object, attributes).await.map_err(kms)?;
        self.made(&name);
        Ok(unique_identifier(&name, 1))
    }

    /// A new key `name` holding one KMIP object, its material sealed, for
    /// the store to create: allowed to this client, exportable unless its
    /// Extractable attribute is False (what KMIP Create and Register make).
    pub(super) fn new_key(
        &self,
        name: &str,
        object_type: ObjectType,
        new: NewObject,
        material: &SecretBytes,
    ) -> R<NewKmipKey> {
        let allow = vec![Selector::Client(self.client.name.clone())];
        let exportable = new.extractable();
        new_kmip_key(self.state, self.client, name, object_type, new, material, allow, exportable)
    }

    pub(super) async fn create(&mut self, request: &CreateRequest) -> R<Vec<Item>> {
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
        let bytes = check_algorithm(algorithm, length)?;
        new.usage_mask.get_or_insert(default_usage_mask(algorithm));
        let mut material = random_secret(bytes).map_err(crypto)?;
        if algorithm == CryptographicAlgorithm::TRIPLE_DES {
            set_des_parity(material.expose_mut());
        }
        let uid = self.store_new(request.object_type, new, &material).await?;
        Ok(vec![
            Item::enumeration(Tag::OBJECT_TYPE, request.object_type.0),
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
        ])
    }

    // ---- Life cycle ------------------------------------------------------

    pub(super) async fn activate(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
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

    pub(super) async fn revoke(&mut self, request: &RevokeRequest) -> R<Vec<Item>> {
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
                return Err(KmipError::ObjectDestroyed(format!("object {uid}")));
            }
            KState::COMPROMISED => {
                return Err(KmipError::IllegalOperation(format!(
                    "object {uid} is already compromised"
                )));
            }
            _ => {}
        }
        if compromise {
            let mut kmip = obj.kmip.clone().unwrap_or_else(|| obj.rest_key_object());
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
            let change = StateChange::Revoke { reason };
            keys::change_versions(
                self.state,
                &obj.key.name,
                Some(obj.version.version),
                change,
                now,
            )
            .await
            .map_err(kms)?;
        }
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }

    pub(super) async fn destroy(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_manage(&obj)?;
        match obj.state(now_ms()) {
            KState::ACTIVE => {
                return Err(KmipError::WrongKeyLifecycleState(format!(
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
        let version = Some(obj.version.version);
        keys::change_versions(self.state, &obj.key.name, version, StateChange::Destroy, now_ms())
            .await
            .map_err(kms)?;
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }

    pub(super) async fn rekey(&mut self, request: &ReKeyRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load_with_attributes(&uid).await?;
        self.require_manage(&obj)?;
        if obj.object_type() != ObjectType::SYMMETRIC_KEY {
            return Err(KmipError::IllegalOperation(format!("object {uid} is not a key")));
        }
        replaceable(&obj, &uid, "re-key")?;
        // §4.4: the request's attributes (and its Templates') are the new
        // key's, over those it takes from the old one.
        let given = if request.attributes.is_empty() {
            None
        } else {
            Some(self.template(&request.attributes, ObjectType::SYMMETRIC_KEY).await?)
        };
        // KMIP 1.4 §4.4: the new key keeps the old one's client-set
        // attributes (Object Group, Contact Information, Application
        // Specific Information, Cryptographic Parameters, custom ones...)
        // and takes its Names away from it.
        let version = obj.version.version + 1;
        // What describes the old material (Digest, Fresh...) is not copied;
        // the new material's is added below.
        let mut attributes = obj
            .stored
            .iter()
            .filter(|a| carried(&a.name))
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
            length: template
                .as_ref()
                .and_then(|k| k.length)
                .or_else(|| Some(i32::try_from(material.len() * 8).unwrap_or(i32::MAX))),
            usage_mask: template.as_ref().and_then(|k| k.usage_mask),
            secret_type: None,
            owner: template.map_or_else(|| self.client.name.clone(), |k| k.owner),
            activation_ms: Some(now + i64::from(request.offset.unwrap_or(0)) * 1000),
            deactivation_ms: None,
            compromise_occurrence_ms: None,
            compromised: false,
        };
        let mut object = object;
        if let Some(given) = given {
            self.rekey_attributes(
                &obj,
                given,
                &mut object,
                request.offset.is_some(),
                &mut attributes,
            )
            .await?;
        }
        let kept: Vec<(String, String)> =
            attributes.iter().map(|a| (a.name.clone(), a.value.clone())).collect();
        let rows = server::initial_rows(&kept, KeyFormatType::RAW, material.expose(), true, now)?;
        for (name, value) in rows {
            attributes.push(KmipAttributeRow { version, name, position: 0, value });
        }
        let sealed = root.seal_material(&obj.key.name, version, &material).map_err(kms)?;
        self.state.store.kmip_add_version(object, now, sealed, attributes).await.map_err(kms)?;
        self.touched = Some((obj.key.name.clone(), Some(version)));
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, unique_identifier(&obj.key.name, version))])
    }

    /// Gives the new key of a Re-key the attributes its request gives:
    /// the algorithm and length stay the old key's (§4.4), the usage mask
    /// and dates (unless an Offset dates the activation) are replaced, a
    /// single-instance stored attribute replaces the old key's value, a
    /// multi-instance one (a Name, an Object Group...) is added.
    async fn rekey_attributes(
        &self,
        obj: &Obj,
        given: NewObject,
        object: &mut KmipObject,
        offset: bool,
        attributes: &mut Vec<KmipAttributeRow>,
    ) -> R<()> {
        for (asked, kept, what) in [
            (given.algorithm.map(i64::from), object.algorithm.map(i64::from), "Algorithm"),
            (given.length.map(i64::from), object.length.map(i64::from), "Length"),
        ] {
            if asked.is_some() && asked != kept {
                return Err(KmipError::InvalidField(format!(
                    "Re-key keeps the key's Cryptographic {what}"
                )));
            }
        }
        if given.usage_mask.is_some() {
            object.usage_mask = given.usage_mask;
        }
        if let Some(at) = given.activation_ms.filter(|_| !offset) {
            object.activation_ms = Some(at);
        }
        if given.deactivation_ms.is_some() {
            object.deactivation_ms = given.deactivation_ms;
        }
        for name in &given.names {
            self.refuse_stored_name(name, Some(&obj.key.name)).await?;
        }
        server::check_template(&given.stored, true)?;
        for (name, value) in given.stored {
            if SINGLE.contains(&name.as_str())
                || server::rule_of(&name).is_some_and(|r| !r.multiple)
            {
                attributes.retain(|a| a.name != name);
            }
            let position = attributes
                .iter()
                .filter(|a| a.name == name)
                .map(|a| a.position + 1)
                .max()
                .unwrap_or(0);
            attributes.push(KmipAttributeRow { version: object.version, name, position, value });
        }
        if let (Some(a), Some(d)) = (object.activation_ms, object.deactivation_ms) {
            if d < a {
                return Err(KmipError::InvalidField(
                    "the Deactivation Date is before the Activation Date".into(),
                ));
            }
        }
        Ok(())
    }

    pub(super) async fn check(&mut self, payload: &Item) -> R<Vec<Item>> {
        let f = Fields::of(payload)?;
        let given = f.optional(Tag::UNIQUE_IDENTIFIER)?.map(|i| i.as_text().map(str::to_owned));
        let uid = self.uid(given.transpose()?.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_visible(&obj)?;
        if matches!(obj.state(now_ms()), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::ObjectDestroyed(format!("object {uid}")));
        }
        if let Some(mask) = f.optional(Tag::CRYPTOGRAPHIC_USAGE_MASK)? {
            let asked = mask.as_int()?;
            if obj.usage_mask().is_some_and(|m| m & asked != asked) {
                // The Result Reasons Check SHALL return: Permission Denied
                // in KMIP 1.x (1.4 §11.11), Incompatible Cryptographic
                // Usage Mask from 2.0 (2.1 §6.1.7.1).
                let why = format!("object {uid} does not allow usage mask 0x{asked:X}");
                return Err(KmipError::IncompatibleCryptographicUsageMask(why));
            }
        }
        if f.optional(Tag::USAGE_LIMITS_COUNT)?.is_some() {
            return Err(KmipError::FeatureNotSupported("Usage Limits".into()));
        }
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }
}

/// A new key `name` holding one KMIP object made by `client`, its
/// material sealed, with the attributes the server sets on every object
/// (Digest, Fresh, ...), for the store to create: what KMIP Create,
/// Register and Create Key Pair and the REST API's key pairs and
/// certificates store.
#[allow(clippy::too_many_arguments)]
pub(crate) fn new_kmip_key(
    state: &State,
    client: &ClientInfo,
    name: &str,
    object_type: ObjectType,
    mut new: NewObject,
    material: &SecretBytes,
    allow: Vec<Selector>,
    exportable: bool,
) -> R<NewKmipKey> {
    let root = state.require_root().map_err(kms)?;
    let name = name.to_owned();
    let now = now_ms();
    // What the server sets on every object with key material (Digest,
    // Fresh, ...): the material was drawn here unless registered.
    let format =
        new.registered_format.unwrap_or_else(|| generated_format(object_type, new.algorithm));
    let generated = new.registered_format.is_none();
    server::check_template(&new.stored, generated)?;
    server::check_quantum_safe(&new.stored, object_type, new.length)?;
    // A Template holds attributes, not key material: nothing describes it.
    if object_type != ObjectType::TEMPLATE {
        let digested = digest_input(object_type, format, material)?;
        let extra = server::initial_rows(&new.stored, format, digested.expose(), generated, now)?;
        new.stored.extend(extra);
    }
    let sealed = root.seal_material(&name, 1, material).map_err(kms)?;
    let key = keys::new_key(name.clone(), exportable, allow, now);
    let object = KmipObject {
        key: name.clone(),
        version: 1,
        object_type: object_type.0,
        algorithm: new.algorithm,
        length: new.length,
        usage_mask: new.usage_mask,
        secret_type: new.secret_type,
        owner: client.name.clone(),
        // Pre-Active until activated, unless the template dates it.
        activation_ms: new.activation_ms,
        deactivation_ms: new.deactivation_ms,
        compromise_occurrence_ms: None,
        compromised: false,
    };
    Ok(NewKmipKey { key, material: sealed, object, attributes: numbered(1, new.stored) })
}

/// Whether a replacement (Re-key, Re-key Key Pair, Re-certify) carries
/// over the replaced object's attribute `name`: what describes the old
/// material (Digest, Fresh...) is the new material's to set again.
fn carried(name: &str) -> bool {
    !server::OBJECT_BOUND.contains(&name)
        && !matches!(name, "Always Sensitive" | "Never Extractable")
}

/// The attributes a replacement carries over from the object it replaces
/// (see [`carried`]), in their stored order.
pub(crate) fn carried_rows(old: &[KmipAttributeRow]) -> Vec<(String, String)> {
    old.iter().filter(|a| carried(&a.name)).map(|a| (a.name.clone(), a.value.clone())).collect()
}

/// A new version `object.version` of key `object.key` holding `object`,
/// the `kept` attributes with those the server sets on every new
/// material (Digest, Fresh...), its material sealed: what Re-key Key Pair
/// and Re-certify add. `registered` is the form of material the key
/// manager did not draw (a certificate), `None` for generated keys.
pub(crate) fn new_kmip_version(
    state: &State,
    object: KmipObject,
    mut kept: Vec<(String, String)>,
    material: &SecretBytes,
    registered: Option<KeyFormatType>,
    now: i64,
) -> R<NewKmipVersion> {
    let root = state.require_root().map_err(kms)?;
    let object_type = ObjectType(object.object_type);
    let format = registered.unwrap_or_else(|| generated_format(object_type, object.algorithm));
    let generated = registered.is_none();
    server::check_template(&kept, generated)?;
    server::check_quantum_safe(&kept, object_type, object.length)?;
    let digested = digest_input(object_type, format, material)?;
    let extra = server::initial_rows(&kept, format, digested.expose(), generated, now)?;
    kept.extend(extra);
    let sealed = root.seal_material(&object.key, object.version, material).map_err(kms)?;
    let version = object.version;
    Ok(NewKmipVersion {
        object,
        created_ms: now,
        material: sealed,
        attributes: numbered(version, kept),
    })
}

/// Stored rows of version `version`, each name's values numbered from 0.
fn numbered(version: u32, rows: Vec<(String, String)>) -> Vec<KmipAttributeRow> {
    let mut positions: BTreeMap<String, u32> = BTreeMap::new();
    rows.into_iter()
        .map(|(attr, value)| {
            let p = positions.entry(attr.clone()).or_insert(0);
            *p += 1;
            KmipAttributeRow { version, name: attr, position: *p - 1, value }
        })
        .collect()
}

/// A new object's fields from its template.
#[derive(Default, Clone)]
pub(crate) struct NewObject {
    pub(crate) algorithm: Option<u32>,
    pub(crate) length: Option<i32>,
    pub(crate) usage_mask: Option<i32>,
    pub(crate) secret_type: Option<u32>,
    pub(crate) activation_ms: Option<i64>,
    pub(crate) deactivation_ms: Option<i64>,
    pub(crate) names: Vec<Name>,
    /// (attribute name, encoded value), in order.
    pub(crate) stored: Vec<(String, String)>,
    /// The Key Format Type of registered material (`None`: the server
    /// generates it).
    pub(crate) registered_format: Option<KeyFormatType>,
    /// The Certificate Type a Register's attributes name.
    pub(crate) certificate_type: Option<u32>,
}

impl NewObject {
    /// Whether the new object's material may be exported: its Extractable
    /// attribute (KMIP 1.4 §3.48: True unless the request says False), so
    /// that a key made not extractable is refused by every front end, the
    /// REST API's export included.
    pub(crate) fn extractable(&self) -> bool {
        self.stored
            .iter()
            .find(|(name, _)| name == "Extractable")
            .and_then(|(_, value)| decode_value(value))
            .and_then(|item| item.as_bool().ok())
            .unwrap_or(true)
    }
}

/// Refuses to replace `obj` (Re-key, Re-key Key Pair, Re-certify) when it
/// is not its key's newest version, or is destroyed or compromised
/// (KMIP 1.4 §4.4, §4.5, §4.8: Illegal Operation).
pub(super) fn replaceable(obj: &Obj, uid: &str, verb: &str) -> R<()> {
    if !obj.is_latest() {
        return Err(KmipError::IllegalOperation(format!(
            "object {uid} was already replaced; {verb} its newest version"
        )));
    }
    let state = obj.state(now_ms());
    if matches!(state, KState::DESTROYED | KState::DESTROYED_COMPROMISED | KState::COMPROMISED) {
        return Err(KmipError::IllegalOperation(format!("object {uid} is {state}")));
    }
    Ok(())
}
