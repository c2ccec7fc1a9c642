//! Usage Limits (KMIP 1.4 §3.21): a key whose Usage Limits attribute
//! caps the bytes (or objects) it may protect gives each Encrypt an
//! allocation from the remaining Usage Limits Count, or Permission Denied
//! once it cannot (§4.29).

use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item, Value};
use rampart_kmip::KmipError;

use super::errors::{kms, R};
use super::object::{encode_value, Obj};
use super::session::Session;

const NAME: &str = "Usage Limits";
/// Usage Limits Total and Unit (KMIP 1.4 §9.1.3.2.31 Usage Limits Unit:
/// Byte 1, Object 2).
const TAG_TOTAL: Tag = Tag(0x42_0097);
const TAG_UNIT: Tag = Tag(0x42_0098);
const UNIT_BYTE: u32 = 0x01;
const UNIT_OBJECT: u32 = 0x02;

/// One process allocates at a time, so two connections cannot both spend
/// the same remainder (the store's read and write are separate calls).
static ALLOCATING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Session<'_> {
    /// Takes `bytes` (one object for an Object limit) from `obj`'s Usage
    /// Limits, if it has any; Permission Denied when too little remains.
    pub(super) async fn allocate_usage(&mut self, obj: &Obj, bytes: usize) -> R<()> {
        if obj.stored_values(NAME).is_empty() {
            return Ok(());
        }
        let _held = ALLOCATING.lock().await;
        // Re-read under the lock: another connection may have spent some.
        let fresh = self.load_with_attributes(&obj.uid()).await?;
        let Some(limits) = fresh.stored_values(NAME).into_iter().next() else {
            return Ok(());
        };
        let f = Fields::of(&limits)?;
        let total = f.required(TAG_TOTAL)?.as_long()?;
        let unit = f.required(TAG_UNIT)?.as_enum()?;
        let count = match f.optional(Tag::USAGE_LIMITS_COUNT)? {
            Some(c) => c.as_long()?,
            None => total,
        };
        let need = match unit {
            UNIT_BYTE => i64::try_from(bytes).unwrap_or(i64::MAX),
            UNIT_OBJECT => 1,
            other => {
                return Err(KmipError::FeatureNotSupported(format!("Usage Limits Unit {other}")))
            }
        };
        if need > count {
            return Err(KmipError::PermissionDenied(format!(
                "object {} has {count} of its Usage Limits left, this needs {need}",
                obj.uid()
            )));
        }
        let value = Item::new(
            Tag::ATTRIBUTE_VALUE,
            Value::Structure(vec![
                Item::long(TAG_TOTAL, total),
                Item::long(Tag::USAGE_LIMITS_COUNT, count - need),
                Item::enumeration(TAG_UNIT, unit),
            ]),
        );
        let version = fresh.version.version;
        let inherit = fresh.source.filter(|s| *s != version);
        self.state
            .store
            .kmip_set_attribute(
                fresh.key.name.clone(),
                version,
                NAME.to_owned(),
                vec![encode_value(NAME, &value)?],
                inherit,
            )
            .await
            .map_err(kms)?;
        if inherit.is_some() {
            if let Some(kmip) = fresh.kmip.clone() {
                self.state.store.kmip_put_object(kmip, None).await.map_err(kms)?;
            }
        }
        Ok(())
    }
}
