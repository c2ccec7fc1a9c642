//! Get Attributes, Get Attribute List, Add, Modify, Delete and Set
//! Attribute: which attributes a client sets and how they are stored.

use rampart_kmip::enums::State as KState;
use rampart_kmip::message::{Attribute, ProtocolVersion};
use rampart_kmip::payload::{
    attribute_reference, attribute_tag_of, vendor_attribute_item, AttributeChangeRequest, Name,
    ObjectRequest,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::errors::{kms, R};
use super::locate::Holders;
use super::object::{decode_value, encode_value, Obj, SINGLE};
pub(super) use super::server_attributes::Change;
use super::server_attributes::{check_change, client_sets, complete, follow_on};
use super::session::Session;
use crate::model::{check_name, now_ms};
use crate::server::service::access;

impl Session<'_> {
    pub(super) fn attribute_items(&self, attrs: Vec<Attribute>) -> Vec<Item> {
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

    pub(super) async fn get_attributes(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let mut obj = self.load_with_attributes(&uid).await?;
        self.require_visible(&obj)?;
        self.ensure_own_rows(&mut obj).await?;
        let mut attrs = obj.attributes(now_ms());
        complete(&obj, &mut attrs, self.version);
        if !request.attribute_names.is_empty() {
            attrs.retain(|a| request.attribute_names.contains(&a.name));
        }
        let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
        out.extend(self.attribute_items(attrs));
        Ok(out)
    }

    pub(super) async fn get_attribute_list(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let mut obj = self.load_with_attributes(&uid).await?;
        self.require_visible(&obj)?;
        self.ensure_own_rows(&mut obj).await?;
        let mut attrs = obj.attributes(now_ms());
        complete(&obj, &mut attrs, self.version);
        let mut names: Vec<String> = Vec::new();
        for a in attrs {
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

    pub(super) async fn change_attribute(
        &mut self,
        change: Change,
        request: &AttributeChangeRequest,
    ) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let mut obj = self.load_with_attributes(&uid).await?;
        self.require_manage(&obj)?;
        self.ensure_own_rows(&mut obj).await?;
        let now = now_ms();
        let name = request.attribute.name.clone();
        let index = request.attribute.index.unwrap_or(0);
        let value = request.attribute.value.clone();
        let need_value =
            || value.clone().ok_or_else(|| KmipError::MissingData(format!("the value of {name}")));
        if matches!(obj.state(now), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::ObjectDestroyed(format!("object {uid}")));
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
                        return Err(KmipError::WrongKeyLifecycleState(format!(
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
            n if client_sets(n) => {
                let mut values: Vec<String> =
                    obj.stored.iter().filter(|a| a.name == name).map(|a| a.value.clone()).collect();
                check_change(change, &name, values.len(), &obj, now)?;
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
                            return Err(KmipError::AttributeSingleValued(format!(
                                "{name} of {uid}"
                            )));
                        }
                        let v = need_value()?;
                        if name == "Name" {
                            let n = Name::parse(&v)?;
                            if values.contains(&encode_value(&name, &v)?) {
                                return Err(KmipError::NonUniqueName(format!(
                                    "{uid} already has the Name {}",
                                    n.value
                                )));
                            }
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
                if let Some((other, v)) = follow_on(&name, result_value.as_ref()) {
                    let v = encode_value(other, &v)?;
                    let store = &self.state.store;
                    store
                        .kmip_set_attribute(
                            obj.key.name.clone(),
                            version,
                            other.into(),
                            vec![v],
                            None,
                        )
                        .await
                        .map_err(kms)?;
                }
                if obj.kmip.is_none() {
                    // A REST key gets a KMIP object once it has KMIP attributes.
                    let kmip = obj.rest_key_object();
                    self.state.store.kmip_put_object(kmip.clone(), None).await.map_err(kms)?;
                    obj.kmip = Some(kmip);
                }
            }
            n if attribute_tag_of(n).is_some() => {
                return Err(KmipError::AttributeReadOnly(n.to_owned()));
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

    /// Set Attribute (KMIP 2.1 §6.1.51): Add Attribute when the object has
    /// no value of the attribute, Modify Attribute of its one value when it
    /// has one, Multi Valued Attribute when it has more.
    pub(super) async fn set_attribute(&mut self, request: &AttributeChangeRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let mut obj = self.load_with_attributes(&uid).await?;
        self.require_manage(&obj)?;
        self.ensure_own_rows(&mut obj).await?;
        let name = &request.attribute.name;
        let mut attrs = obj.attributes(now_ms());
        complete(&obj, &mut attrs, self.version);
        let change = match attrs.iter().filter(|a| &a.name == name).count() {
            0 => Change::Add,
            1 => Change::Modify,
            _ => return Err(KmipError::MultiValuedAttribute(format!("{name} of {uid}"))),
        };
        let mut single = request.clone();
        single.unique_identifier = Some(uid);
        single.attribute.index = None;
        single.current = None;
        self.change_attribute(change, &single).await
    }

    /// Refuses a Name stored on a key other than `except` that the client
    /// sees (names are unique in the client's scope). The keys holding it
    /// are read a page at a time: another client's objects may share it.
    pub(super) async fn refuse_stored_name(&self, name: &Name, except: Option<&str>) -> R<()> {
        let value = encode_value("Name", &name.to_value(Tag::ATTRIBUTE_VALUE))?;
        let store = &self.state.store;
        let mut holders = Holders::new("Name", value);
        while let Some(page) = holders.next_page(store.as_ref()).await? {
            for key in &page {
                if Some(key.as_str()) == except {
                    continue;
                }
                if let Some(info) = store.get_key(key.clone()).await.map_err(kms)? {
                    if access::may_see(self.client, &info.allow) {
                        return Err(KmipError::NonUniqueName(format!(
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
    pub(super) async fn check_name_free(&self, obj: &Obj, name: &Name) -> R<()> {
        self.refuse_stored_name(name, Some(&obj.key.name)).await?;
        // A REST key the client sees is named by its own name.
        if name.value != obj.key.name && check_name("key name", &name.value).is_ok() {
            let store = &self.state.store;
            if let Some(info) = store.get_key(name.value.clone()).await.map_err(kms)? {
                if access::may_see(self.client, &info.allow)
                    && store.kmip_object(name.value.clone(), u32::MAX).await.map_err(kms)?.is_none()
                {
                    return Err(KmipError::NonUniqueName(format!(
                        "an object named {} exists",
                        name.value
                    )));
                }
            }
        }
        Ok(())
    }
}
