//! Adjust Attribute (KMIP 2.1 §6.1.3): an attribute's one value moved by
//! an Increment or Decrement (Integer, Long Integer, Interval, Date-Time,
//! Date-Time Extended) or a Negate (Integer, Long Integer, Boolean); an
//! absent attribute counts as 0 or False, its type the Adjustment
//! Value's. The new value is then set as Set Attribute sets one, so that
//! the attribute's rules (read-only, modifiable, dates) are the same.

use rampart_kmip::enums::AdjustmentType;
use rampart_kmip::message::Attribute;
use rampart_kmip::payload::{AdjustAttributeRequest, AttributeChangeRequest};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};
use rampart_kmip::KmipError;

use super::errors::R;
use super::server_attributes::complete;
use super::session::Session;
use crate::model::now_ms;

impl Session<'_> {
    pub(super) async fn adjust_attribute(
        &mut self,
        request: &AdjustAttributeRequest,
    ) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let mut obj = self.load_with_attributes(&uid).await?;
        self.require_manage(&obj)?;
        self.ensure_own_rows(&mut obj).await?;
        let name = &request.attribute;
        let mut attrs = obj.attributes(now_ms());
        complete(&obj, &mut attrs, self.version);
        let mut values = attrs.iter().filter(|a| &a.name == name).filter_map(|a| a.value.as_ref());
        let current = values.next();
        if values.next().is_some() {
            return Err(KmipError::MultiValuedAttribute(format!("{name} of {uid}")));
        }
        let value = adjusted(request.adjustment, current, request.value.as_ref())?;
        let change = AttributeChangeRequest {
            unique_identifier: Some(uid),
            attribute: Attribute {
                name: name.clone(),
                index: None,
                value: Some(Item::new(Tag::ATTRIBUTE_VALUE, value)),
            },
            current: None,
        };
        self.set_attribute(&change).await
    }
}

/// `current` (absent: the zero of `by`'s type) adjusted by `by` (absent:
/// one unit, one second for a Date-Time, one microsecond for a Date-Time
/// Extended).
fn adjusted(kind: AdjustmentType, current: Option<&Item>, by: Option<&Item>) -> R<Value> {
    let range = || KmipError::NumericRange(format!("{kind:?} leaves the attribute's range"));
    let base = match (current, by) {
        (Some(c), _) => c.value.clone(),
        (None, Some(b)) => zero_of(&b.value)?,
        (None, None) => {
            return Err(KmipError::MissingData(
                "an Adjustment Value (the attribute has no value to give its type)".into(),
            ));
        }
    };
    if let Some(b) = by {
        if std::mem::discriminant(&b.value) != std::mem::discriminant(&base) {
            return Err(KmipError::InvalidDataType(format!(
                "an Adjustment Value of type {:?} for a value of type {:?}",
                b.value.item_type(),
                base.item_type()
            )));
        }
    }
    let by = by.map(|b| &b.value);
    match kind {
        AdjustmentType::INCREMENT | AdjustmentType::DECREMENT => {
            let up = kind == AdjustmentType::INCREMENT;
            Ok(match (base, by) {
                (Value::Integer(v), d) => {
                    let d = match d {
                        Some(Value::Integer(d)) => *d,
                        _ => 1,
                    };
                    Value::Integer(
                        if up { v.checked_add(d) } else { v.checked_sub(d) }.ok_or_else(range)?,
                    )
                }
                (Value::LongInteger(v), d) => {
                    let d = match d {
                        Some(Value::LongInteger(d)) => *d,
                        _ => 1,
                    };
                    Value::LongInteger(
                        if up { v.checked_add(d) } else { v.checked_sub(d) }.ok_or_else(range)?,
                    )
                }
                (Value::Interval(v), d) => {
                    let d = match d {
                        Some(Value::Interval(d)) => *d,
                        _ => 1,
                    };
                    Value::Interval(
                        if up { v.checked_add(d) } else { v.checked_sub(d) }.ok_or_else(range)?,
                    )
                }
                (Value::DateTime(v), d) => {
                    let d = match d {
                        Some(Value::DateTime(d)) => *d,
                        _ => 1,
                    };
                    Value::DateTime(
                        if up { v.checked_add(d) } else { v.checked_sub(d) }.ok_or_else(range)?,
                    )
                }
                (Value::DateTimeExtended(v), d) => {
                    let d = match d {
                        Some(Value::DateTimeExtended(d)) => *d,
                        _ => 1,
                    };
                    Value::DateTimeExtended(
                        if up { v.checked_add(d) } else { v.checked_sub(d) }.ok_or_else(range)?,
                    )
                }
                (other, _) => return Err(not_adjustable(kind, &other)),
            })
        }
        AdjustmentType::NEGATE => {
            if by.is_some() {
                return Err(KmipError::InvalidField("Negate takes no Adjustment Value".into()));
            }
            Ok(match base {
                Value::Integer(v) => Value::Integer(v.checked_neg().ok_or_else(range)?),
                Value::LongInteger(v) => Value::LongInteger(v.checked_neg().ok_or_else(range)?),
                Value::Boolean(v) => Value::Boolean(!v),
                other => return Err(not_adjustable(kind, &other)),
            })
        }
        other => Err(KmipError::InvalidField(format!("Adjustment Type {other:?}"))),
    }
}

fn not_adjustable(kind: AdjustmentType, value: &Value) -> KmipError {
    KmipError::InvalidDataType(format!("{kind:?} of a {:?}", value.item_type()))
}

/// The value an absent attribute counts as, of `like`'s type.
fn zero_of(like: &Value) -> R<Value> {
    Ok(match like {
        Value::Integer(_) => Value::Integer(0),
        Value::LongInteger(_) => Value::LongInteger(0),
        Value::Interval(_) => Value::Interval(0),
        Value::DateTime(_) => Value::DateTime(0),
        Value::DateTimeExtended(_) => Value::DateTimeExtended(0),
        Value::Boolean(_) => Value::Boolean(false),
        other => {
            return Err(KmipError::InvalidDataType(format!(
                "an absent attribute of type {:?} has no value to adjust",
                other.item_type()
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(v: Value) -> Item {
        Item::new(Tag::ATTRIBUTE_VALUE, v)
    }

    #[test]
    fn adjustments_follow_the_types_and_their_ranges() {
        let inc = AdjustmentType::INCREMENT;
        let dec = AdjustmentType::DECREMENT;
        let neg = AdjustmentType::NEGATE;
        let five = item(Value::Integer(5));
        assert_eq!(adjusted(inc, Some(&five), None).unwrap(), Value::Integer(6));
        assert_eq!(
            adjusted(dec, Some(&five), Some(&item(Value::Integer(7)))).unwrap(),
            Value::Integer(-2)
        );
        assert_eq!(adjusted(neg, Some(&five), None).unwrap(), Value::Integer(-5));
        assert_eq!(
            adjusted(inc, None, Some(&item(Value::Interval(30)))).unwrap(),
            Value::Interval(30)
        );
        assert_eq!(
            adjusted(inc, Some(&item(Value::DateTime(100))), None).unwrap(),
            Value::DateTime(101)
        );
        assert_eq!(
            adjusted(neg, Some(&item(Value::Boolean(false))), None).unwrap(),
            Value::Boolean(true)
        );
        assert!(matches!(
            adjusted(inc, Some(&item(Value::Integer(i32::MAX))), None),
            Err(KmipError::NumericRange(_))
        ));
        assert!(matches!(
            adjusted(dec, Some(&item(Value::Interval(0))), None),
            Err(KmipError::NumericRange(_))
        ));
        assert!(matches!(
            adjusted(inc, Some(&item(Value::TextString("a".into()))), None),
            Err(KmipError::InvalidDataType(_))
        ));
        assert!(matches!(
            adjusted(inc, Some(&five), Some(&item(Value::LongInteger(1)))),
            Err(KmipError::InvalidDataType(_))
        ));
        assert!(matches!(adjusted(inc, None, None), Err(KmipError::MissingData(_))));
    }
}
