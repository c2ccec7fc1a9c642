//! Locate: the keys a client may see whose attributes match, walked a
//! store page at a time, with Maximum Items and Offset Items.

use rampart_kmip::message::ProtocolVersion;
use rampart_kmip::payload::{
    attribute_name_of, attribute_tag_of, is_custom_attribute, AttributeSet, LocateRequest, Name,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::errors::{kms, R};
use super::object::{encode_value, is_stored, Obj};
use super::session::{inherit_object, Session};
use crate::model::{check_name, now_ms, KeyInfo, KeyState};
use crate::server::service::access;
use crate::store::{KeyFilter, MAX_PAGE};

impl Session<'_> {
    // ---- Locate ----------------------------------------------------------

    pub(super) async fn locate(&mut self, request: &LocateRequest) -> R<Vec<Item>> {
        let now = now_ms();
        let store = &self.state.store;
        let mut stored = Vec::new();
        for a in &request.attributes.attributes {
            // A date asked as a range is no single value an index holds.
            if !is_stored(&a.name) || date_range(&request.attributes, &a.name).is_some() {
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
    pub(super) async fn locate_key(
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
    pub(super) async fn locate_in(
        &self,
        key: &KeyInfo,
        request: &LocateRequest,
        by_name: bool,
        now: i64,
        hits: &mut Hits,
    ) -> R<()> {
        if hits.complete() || !access::may_see(self.client, &key.allow) {
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
                sealed: None,
            };
            if by_name && !obj.is_latest() {
                continue;
            }
            // KMIP 2.1 §6.1.28: destroyed objects only when the Storage
            // Status Mask asks for them (Destroyed Storage).
            let destroyed_asked =
                request.storage_status_mask.is_some_and(|m| m & STORAGE_DESTROYED != 0);
            if version.state == KeyState::Destroyed && !destroyed_asked {
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
}

/// Storage Status Mask Destroyed Storage (KMIP 2.1 §11.x).
const STORAGE_DESTROYED: i32 = 0x04;

/// Keys read per store query while Locate (or a Name check) walks keys.
pub(super) const LOCATE_PAGE: u32 = 1000;

/// The names of the keys holding one stored attribute value, walked a
/// store page ([`LOCATE_PAGE`]) at a time in key order: another client's
/// objects, or most of a fleet's, may share the value.
pub(super) struct Holders {
    pub(super) attribute: String,
    pub(super) value: String,
    pub(super) after: String,
    pub(super) done: bool,
}

impl Holders {
    pub(super) fn new(attribute: &str, value: String) -> Self {
        Self { attribute: attribute.to_owned(), value, after: String::new(), done: false }
    }

    /// The next page, or `None` past the last.
    pub(super) async fn next_page(
        &mut self,
        store: &dyn crate::store::Store,
    ) -> R<Option<Vec<String>>> {
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
pub(super) const LOCATE_MAX: usize = MAX_PAGE as usize;

/// Locate's answer window and its count of every match.
pub(super) struct Hits {
    pub(super) offset: usize,
    pub(super) max: usize,
    /// Whether every match is counted (for Located Items), or the walk
    /// may end once the window is full.
    pub(super) count_all: bool,
    pub(super) total: usize,
    pub(super) page: Vec<String>,
}

impl Hits {
    /// Whether no further match can change the answer.
    pub(super) fn complete(&self) -> bool {
        !self.count_all && self.page.len() >= self.max
    }
}

/// Whether an object has every attribute value a Locate asks for.
pub(super) fn matches_criteria(obj: &Obj, criteria: &AttributeSet, now: i64) -> R<bool> {
    let attrs = obj.attributes(now);
    for c in &criteria.attributes {
        let Some(want) = &c.value else { continue };
        if let Some((from, to)) = date_range(criteria, &c.name) {
            // KMIP 2.1 §6.1.28 (1.4 §4.9): a date given twice is a range,
            // its ends included.
            let within = attrs
                .iter()
                .filter(|a| a.name == c.name)
                .filter_map(|a| a.value.as_ref()?.as_date_time().ok())
                .any(|at| from <= at && at <= to);
            if !within {
                return Ok(false);
            }
            continue;
        }
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

/// The range a Locate asks of date attribute `name`: its two values, in
/// order, when it gives exactly two Date-Times.
fn date_range(criteria: &AttributeSet, name: &str) -> Option<(i64, i64)> {
    let dates: Vec<i64> =
        criteria.values(name).map(|v| v.as_date_time().ok()).collect::<Option<_>>()?;
    match dates.as_slice() {
        [a, b] => Some(((*a).min(*b), (*a).max(*b))),
        _ => None,
    }
}
