//! KMIP 1.x Templates (KMIP 1.4 §2.2.6, deprecated since 1.3 but still
//! sent by 1.x clients): a named managed object holding client-settable
//! attributes, registered like any object (its own Name, Object Group...
//! in the Register's Template-Attribute) and named in the
//! Template-Attribute of Create, Create Key Pair, Register, Derive Key,
//! Re-key, Create Split Key and Join Split Key, whose request takes its
//! attributes (§2.1.8, §4: a later Template's single-instance attributes
//! override an earlier's, the request's own override every Template's,
//! multi-instance values are united).
//!
//! A Template's attributes are kept as its material, the TTLV of its
//! Template structure, sealed like any object's: Get gives the structure
//! back. It has no key material, so none of the attributes the server
//! sets on key material (Digest, Fresh, ...), and no state beyond
//! destroyed. KMIP 2.x has no Template object (2.1 §11.34 reserves its
//! Object Type): a 2.x client registering one is answered Invalid Object
//! Type.

use rampart_crypto::SecretBytes;
use rampart_kmip::enums::{ObjectType, State as KState};
use rampart_kmip::message::{Attribute, ProtocolVersion};
use rampart_kmip::payload::{attribute_tag_of, AttributeSet, ManagedObject, Name};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Fields, Item};
use rampart_kmip::KmipError;
use rampart_kmip::Limits;

use super::errors::{kms, R};
use super::lifecycle::NewObject;
use super::locate::Holders;
use super::object::{encode_value, is_stored, unique_identifier, SINGLE};
use super::server_attributes::{client_sets, rule_of};
use super::session::Session;
use crate::model::now_ms;
use crate::server::service::access;

/// Attributes a Template may hold besides the stored client-set ones:
/// those `Session::template` turns into an object's own fields.
const OBJECT_FIELDS: [&str; 7] = [
    "Cryptographic Algorithm",
    "Cryptographic Length",
    "Cryptographic Usage Mask",
    "Activation Date",
    "Deactivation Date",
    "Object Type",
    "Certificate Type",
];

/// Whether an object may have more than one value of attribute `name`
/// (KMIP 1.4 §3: Name, Object Group, Application Specific Information,
/// Link, Alternative Name, Key Value Location, custom attributes).
fn multi_instance(name: &str) -> bool {
    (is_stored(name) && !SINGLE.contains(&name)) || rule_of(name).is_some_and(|r| r.multiple)
}

/// The attributes a request gives: its Templates' in order, a later one's
/// single-instance value replacing an earlier's, then its own, which
/// replace any Template's single-instance value. A Template's Object Type
/// says what it was made for; the request's decides, so it is dropped.
pub(super) fn merge(templates: Vec<Vec<Attribute>>, own: &[Attribute]) -> Vec<Attribute> {
    let mut out: Vec<Attribute> = Vec::new();
    for attribute in templates.into_iter().flatten() {
        if attribute.name == "Object Type" {
            continue;
        }
        if !multi_instance(&attribute.name) {
            out.retain(|o| o.name != attribute.name);
        }
        out.push(attribute);
    }
    out.retain(|o| multi_instance(&o.name) || !own.iter().any(|a| a.name == o.name));
    out.extend(own.iter().cloned());
    out
}

/// Refuses a Template attribute no object could be given: one the server
/// sets, one this server does not keep, or a Name (names are unique, so
/// the objects a Template made would clash; the Template's own Name is
/// in the Register's Template-Attribute, §2.2.6).
fn check_content(attributes: &[Attribute]) -> R<()> {
    for a in attributes {
        if a.value.is_none() {
            return Err(KmipError::MissingData(format!("{} value", a.name)));
        }
        match a.name.as_str() {
            "Name" => {
                return Err(KmipError::InvalidField(
                    "a Template holds no Name: its own is in the Register's Template-Attribute"
                        .into(),
                ));
            }
            name if OBJECT_FIELDS.contains(&name) || client_sets(name) => {}
            name if attribute_tag_of(name).is_some() => {
                return Err(KmipError::InvalidField(format!(
                    "attribute {name} is set by the server, not by the client"
                )));
            }
            name => return Err(KmipError::FeatureNotSupported(format!("attribute {name}"))),
        }
    }
    Ok(())
}

impl Session<'_> {
    /// The attributes `attrs` gives once its Templates are read (each
    /// Template Name must name a Template the client may use).
    pub(super) async fn with_templates(&mut self, attrs: &AttributeSet) -> R<Vec<Attribute>> {
        if attrs.templates.is_empty() {
            return Ok(attrs.attributes.clone());
        }
        if self.version >= ProtocolVersion::V2_0 {
            return Err(KmipError::InvalidField("KMIP 2.x has no Templates".into()));
        }
        let mut contents = Vec::with_capacity(attrs.templates.len());
        for name in &attrs.templates {
            contents.push(self.template_content(name).await?);
        }
        Ok(merge(contents, &attrs.attributes))
    }

    /// The attributes of the Template named `name` the client may use:
    /// Item Not Found when there is none (KMIP 1.4 §11.1).
    async fn template_content(&mut self, name: &Name) -> R<Vec<Attribute>> {
        let value = encode_value("Name", &name.to_value(Tag::ATTRIBUTE_VALUE))?;
        let state = self.state;
        let store = &state.store;
        let mut holders = Holders::new("Name", value);
        while let Some(page) = holders.next_page(store.as_ref()).await? {
            for key in page {
                let Some(info) = store.get_key(key.clone()).await.map_err(kms)? else { continue };
                let Some(latest) = info.latest().map(|v| v.version) else { continue };
                if !access::may_see(self.client, &info.allow) {
                    continue;
                }
                let obj = self.load(&unique_identifier(&key, latest)).await?;
                let destroyed = matches!(
                    obj.state(now_ms()),
                    KState::DESTROYED | KState::DESTROYED_COMPROMISED
                );
                if obj.object_type() != ObjectType::TEMPLATE || destroyed {
                    continue;
                }
                self.require_use(&obj)?;
                let material = self.material(&obj).await?;
                return template_attributes(&material);
            }
        }
        Err(KmipError::ItemNotFound(format!("Template {}", name.value)))
    }
}

/// Register of a Template: its own attributes (`new`, from the request's
/// Template-Attribute) must name it, so that requests can; the attributes
/// it gives are checked and become its material.
pub(super) fn template_body(attributes: &[Attribute], new: &NewObject) -> R<SecretBytes> {
    check_content(attributes)?;
    if new.names.is_empty() {
        return Err(KmipError::MissingData("the Name of the Template".into()));
    }
    if new.algorithm.is_some()
        || new.length.is_some()
        || new.usage_mask.is_some()
        || new.activation_ms.is_some()
        || new.deactivation_ms.is_some()
    {
        return Err(KmipError::InvalidField(
            "the attributes a Template gives are in its Template structure".into(),
        ));
    }
    let body = ManagedObject::Template(attributes.to_vec()).to_item();
    Ok(SecretBytes::new(body.encode()?))
}

/// KMIP 2.x reserves the Template's Object Type (2.1 §11.34): Register
/// of one by a 2.x client is Invalid Object Type, before its body is read.
pub(super) fn refuse_in_2x(payload: &Item, version: ProtocolVersion) -> R<()> {
    if version < ProtocolVersion::V2_0 {
        return Ok(());
    }
    let object_type = Fields::of(payload)?.optional(Tag::OBJECT_TYPE)?.map(Item::as_enum);
    if object_type.transpose()? == Some(ObjectType::TEMPLATE.0) {
        return Err(KmipError::InvalidObjectType(
            "KMIP 2.x has no Template object (use Attributes)".into(),
        ));
    }
    Ok(())
}

/// The attributes a Template's material (its Template structure) holds.
pub(super) fn template_attributes(material: &SecretBytes) -> R<Vec<Attribute>> {
    let body = ttlv::decode(material.expose(), &Limits::default())
        .ok()
        .filter(|item| item.tag == Tag::TEMPLATE)
        .ok_or_else(|| KmipError::GeneralFailure("a Template whose body does not decode".into()))?;
    Fields::of(&body)?.all(Tag::ATTRIBUTE).map(Attribute::parse).collect()
}
