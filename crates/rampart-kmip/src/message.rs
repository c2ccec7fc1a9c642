//! Request and response messages (KMIP 1.4 §7, KMIP 2.1 §8): the header,
//! batch items and the message-level options. Payloads stay [`Item`]s
//! here; the server parses each operation's payload itself, so a malformed
//! payload fails its own batch item and not the message.

use crate::enums::{BatchErrorContinuationOption, Operation, ResultReason, ResultStatus};
use crate::error::KmipError;
use crate::tag::Tag;
use crate::ttlv::{Fields, Item, TtlvError, Value};

/// Protocol Version: major.minor, ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    pub major: i32,
    pub minor: i32,
}

impl ProtocolVersion {
    pub const V1_0: Self = Self::new(1, 0);
    pub const V1_1: Self = Self::new(1, 1);
    pub const V1_2: Self = Self::new(1, 2);
    pub const V1_3: Self = Self::new(1, 3);
    pub const V1_4: Self = Self::new(1, 4);
    pub const V2_0: Self = Self::new(2, 0);
    pub const V2_1: Self = Self::new(2, 1);

    #[must_use]
    pub const fn new(major: i32, minor: i32) -> Self {
        Self { major, minor }
    }

    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        Ok(Self {
            major: f.required(Tag::PROTOCOL_VERSION_MAJOR)?.as_int()?,
            minor: f.required(Tag::PROTOCOL_VERSION_MINOR)?.as_int()?,
        })
    }

    #[must_use]
    pub fn to_item(self) -> Item {
        Item::structure(
            Tag::PROTOCOL_VERSION,
            vec![
                Item::int(Tag::PROTOCOL_VERSION_MAJOR, self.major),
                Item::int(Tag::PROTOCOL_VERSION_MINOR, self.minor),
            ],
        )
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Request Header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    pub protocol_version: ProtocolVersion,
    /// Bytes the client accepts in the response, if it says.
    pub maximum_response_size: Option<i32>,
    /// Set to true by a client that wants asynchronous operations; the
    /// server refuses those (see [`RequestMessage::refuse_async`]).
    pub asynchronous_indicator: bool,
    /// Kept for the server to inspect; Rampart authenticates by the TLS
    /// client certificate.
    pub authentication: Option<Item>,
    /// What to do after a failed batch item; Stop when absent.
    pub batch_error_continuation: BatchErrorContinuationOption,
    pub batch_order_option: Option<bool>,
    pub time_stamp: Option<i64>,
    pub batch_count: i32,
}

/// One Batch Item of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestBatchItem {
    pub operation: Operation,
    pub unique_batch_item_id: Option<Vec<u8>>,
    /// The Request Payload (an empty structure when the client sent none).
    pub payload: Item,
}

/// A decoded Request Message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMessage {
    pub header: RequestHeader,
    pub batch_items: Vec<RequestBatchItem>,
}

impl RequestMessage {
    /// Parses a decoded item as a Request Message. Unknown fields are
    /// ignored (a newer client's extensions), unknown operations kept.
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        if item.tag != Tag::REQUEST_MESSAGE {
            return Err(KmipError::UnexpectedTag {
                expected: Tag::REQUEST_MESSAGE,
                found: item.tag,
            });
        }
        let f = Fields::of(item)?;
        let h = Fields::of(f.required(Tag::REQUEST_HEADER)?)?;
        let header = RequestHeader {
            protocol_version: ProtocolVersion::parse(h.required(Tag::PROTOCOL_VERSION)?)?,
            maximum_response_size: h
                .optional(Tag::MAXIMUM_RESPONSE_SIZE)?
                .map(Item::as_int)
                .transpose()?,
            asynchronous_indicator: h
                .optional(Tag::ASYNCHRONOUS_INDICATOR)?
                .map(Item::as_bool)
                .transpose()?
                .unwrap_or(false),
            authentication: h.optional(Tag::AUTHENTICATION)?.cloned(),
            batch_error_continuation: h
                .optional(Tag::BATCH_ERROR_CONTINUATION_OPTION)?
                .map(Item::as_enum)
                .transpose()?
                .map_or(BatchErrorContinuationOption::STOP, BatchErrorContinuationOption),
            batch_order_option: h
                .optional(Tag::BATCH_ORDER_OPTION)?
                .map(Item::as_bool)
                .transpose()?,
            time_stamp: h.optional(Tag::TIME_STAMP)?.map(Item::as_date_time).transpose()?,
            batch_count: h.required(Tag::BATCH_COUNT)?.as_int()?,
        };
        let mut batch_items = Vec::new();
        for bi in f.all(Tag::BATCH_ITEM) {
            let b = Fields::of(bi)?;
            batch_items.push(RequestBatchItem {
                operation: Operation(b.required(Tag::OPERATION)?.as_enum()?),
                unique_batch_item_id: b
                    .optional(Tag::UNIQUE_BATCH_ITEM_ID)?
                    .map(|i| i.as_bytes().map(<[u8]>::to_vec))
                    .transpose()?,
                payload: match b.optional(Tag::REQUEST_PAYLOAD)? {
                    Some(p) => {
                        p.children()?;
                        p.clone()
                    }
                    None => Item::structure(Tag::REQUEST_PAYLOAD, Vec::new()),
                },
            });
        }
        if batch_items.is_empty() {
            return Err(
                TtlvError::Missing { tag: Tag::BATCH_ITEM, within: Tag::REQUEST_MESSAGE }.into()
            );
        }
        if usize::try_from(header.batch_count).ok() != Some(batch_items.len()) {
            return Err(KmipError::BatchCountMismatch {
                declared: header.batch_count,
                found: batch_items.len(),
            });
        }
        Ok(Self { header, batch_items })
    }

    /// Encodes the message (for clients: the load generator and tests).
    #[must_use]
    pub fn to_item(&self) -> Item {
        let h = &self.header;
        let mut header = vec![h.protocol_version.to_item()];
        if let Some(max) = h.maximum_response_size {
            header.push(Item::int(Tag::MAXIMUM_RESPONSE_SIZE, max));
        }
        if h.asynchronous_indicator {
            header.push(Item::boolean(Tag::ASYNCHRONOUS_INDICATOR, true));
        }
        if let Some(auth) = &h.authentication {
            header.push(auth.clone());
        }
        if h.batch_error_continuation != BatchErrorContinuationOption::STOP {
            header.push(Item::enumeration(
                Tag::BATCH_ERROR_CONTINUATION_OPTION,
                h.batch_error_continuation.0,
            ));
        }
        if let Some(order) = h.batch_order_option {
            header.push(Item::boolean(Tag::BATCH_ORDER_OPTION, order));
        }
        if let Some(ts) = h.time_stamp {
            header.push(Item::date_time(Tag::TIME_STAMP, ts));
        }
        header.push(Item::int(Tag::BATCH_COUNT, h.batch_count));
        let mut items = vec![Item::structure(Tag::REQUEST_HEADER, header)];
        for b in &self.batch_items {
            let mut bi = vec![Item::enumeration(Tag::OPERATION, b.operation.0)];
            if let Some(id) = &b.unique_batch_item_id {
                bi.push(Item::bytes(Tag::UNIQUE_BATCH_ITEM_ID, id));
            }
            bi.push(b.payload.clone());
            items.push(Item::structure(Tag::BATCH_ITEM, bi));
        }
        Item::structure(Tag::REQUEST_MESSAGE, items)
    }

    /// A request of one batch item per (operation, payload fields).
    #[must_use]
    pub fn new(version: ProtocolVersion, operations: Vec<(Operation, Vec<Item>)>) -> Self {
        let batch_items: Vec<RequestBatchItem> = operations
            .into_iter()
            .map(|(operation, fields)| RequestBatchItem {
                operation,
                unique_batch_item_id: None,
                payload: Item::structure(Tag::REQUEST_PAYLOAD, fields),
            })
            .collect();
        Self {
            header: RequestHeader {
                protocol_version: version,
                maximum_response_size: None,
                asynchronous_indicator: false,
                authentication: None,
                batch_error_continuation: BatchErrorContinuationOption::STOP,
                batch_order_option: None,
                time_stamp: None,
                batch_count: i32::try_from(batch_items.len()).unwrap_or(i32::MAX),
            },
            batch_items,
        }
    }

    /// The response to a request the server will not run because it asked
    /// for asynchronous operation: every batch item fails with Feature Not
    /// Supported (Rampart answers every operation synchronously).
    #[must_use]
    pub fn refuse_async(&self, version: ProtocolVersion, time_stamp: i64) -> ResponseMessage {
        let err = KmipError::FeatureNotSupported("asynchronous operations".into());
        ResponseMessage {
            header: ResponseHeader { protocol_version: version, time_stamp },
            batch_items: self
                .batch_items
                .iter()
                .map(|b| {
                    ResponseBatchItem::failure(
                        Some(b.operation),
                        b.unique_batch_item_id.clone(),
                        &err,
                    )
                })
                .collect(),
        }
    }
}

/// Response Header (the Batch Count is the number of batch items).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHeader {
    pub protocol_version: ProtocolVersion,
    pub time_stamp: i64,
}

/// One Batch Item of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseBatchItem {
    pub operation: Option<Operation>,
    pub unique_batch_item_id: Option<Vec<u8>>,
    pub result_status: ResultStatus,
    pub result_reason: Option<ResultReason>,
    pub result_message: Option<String>,
    /// The Response Payload's fields.
    pub payload: Option<Item>,
}

impl ResponseBatchItem {
    #[must_use]
    pub fn success(operation: Operation, id: Option<Vec<u8>>, fields: Vec<Item>) -> Self {
        Self {
            operation: Some(operation),
            unique_batch_item_id: id,
            result_status: ResultStatus::SUCCESS,
            result_reason: None,
            result_message: None,
            payload: Some(Item::structure(Tag::RESPONSE_PAYLOAD, fields)),
        }
    }

    #[must_use]
    pub fn failure(operation: Option<Operation>, id: Option<Vec<u8>>, err: &KmipError) -> Self {
        Self {
            operation,
            unique_batch_item_id: id,
            result_status: ResultStatus::OPERATION_FAILED,
            result_reason: Some(err.result_reason()),
            result_message: Some(err.to_string()),
            payload: None,
        }
    }

    /// A batch item not run because an earlier one failed under Batch
    /// Error Continuation Option Stop (KMIP 1.4 §7.1: Operation Failed
    /// with no reason would be ambiguous, so Rampart says why).
    #[must_use]
    pub fn not_run(operation: Operation, id: Option<Vec<u8>>) -> Self {
        Self {
            operation: Some(operation),
            unique_batch_item_id: id,
            result_status: ResultStatus::OPERATION_FAILED,
            result_reason: Some(ResultReason::OPERATION_CANCELED_BY_REQUESTER),
            result_message: Some(
                "not run: an earlier batch item failed and the batch stops on error".into(),
            ),
            payload: None,
        }
    }

    /// A batch item that ran but was undone because a later one failed
    /// under Batch Error Continuation Option Undo (KMIP 1.4 §6.13): Result
    /// Status Operation Undone. Of its payload only the Unique Identifiers
    /// stay: the objects it named, not what it returned (key material,
    /// data, random bytes).
    #[must_use]
    pub fn undone(
        operation: Option<Operation>,
        id: Option<Vec<u8>>,
        payload: Option<Item>,
    ) -> Self {
        let names = [
            Tag::UNIQUE_IDENTIFIER,
            Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER,
            Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER,
        ];
        let payload =
            payload.and_then(|p| p.children().ok().map(<[Item]>::to_vec)).and_then(|children| {
                let kept: Vec<Item> =
                    children.into_iter().filter(|i| names.contains(&i.tag)).collect();
                (!kept.is_empty()).then(|| Item::structure(Tag::RESPONSE_PAYLOAD, kept))
            });
        Self {
            operation,
            unique_batch_item_id: id,
            result_status: ResultStatus::OPERATION_UNDONE,
            result_reason: None,
            result_message: Some("undone: a later batch item failed".into()),
            payload,
        }
    }

    fn to_item(&self) -> Item {
        let mut items = Vec::new();
        if let Some(op) = self.operation {
            items.push(Item::enumeration(Tag::OPERATION, op.0));
        }
        if let Some(id) = &self.unique_batch_item_id {
            items.push(Item::bytes(Tag::UNIQUE_BATCH_ITEM_ID, id));
        }
        items.push(Item::enumeration(Tag::RESULT_STATUS, self.result_status.0));
        if let Some(reason) = self.result_reason {
            items.push(Item::enumeration(Tag::RESULT_REASON, reason.0));
        }
        if let Some(msg) = &self.result_message {
            items.push(Item::text(Tag::RESULT_MESSAGE, msg.clone()));
        }
        if let Some(payload) = &self.payload {
            items.push(payload.clone());
        }
        Item::structure(Tag::BATCH_ITEM, items)
    }
}

/// A Response Message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseMessage {
    pub header: ResponseHeader,
    pub batch_items: Vec<ResponseBatchItem>,
}

impl ResponseMessage {
    /// A response of one failed batch item: for a message that could not
    /// be parsed at all.
    #[must_use]
    pub fn error(version: ProtocolVersion, time_stamp: i64, err: &KmipError) -> Self {
        Self {
            header: ResponseHeader { protocol_version: version, time_stamp },
            batch_items: vec![ResponseBatchItem::failure(None, None, err)],
        }
    }

    #[must_use]
    pub fn to_item(&self) -> Item {
        let count = i32::try_from(self.batch_items.len()).unwrap_or(i32::MAX);
        let mut items = vec![Item::structure(
            Tag::RESPONSE_HEADER,
            vec![
                self.header.protocol_version.to_item(),
                Item::date_time(Tag::TIME_STAMP, self.header.time_stamp),
                Item::int(Tag::BATCH_COUNT, count),
            ],
        )];
        items.extend(self.batch_items.iter().map(ResponseBatchItem::to_item));
        Item::structure(Tag::RESPONSE_MESSAGE, items)
    }

    /// Encodes the response; when it is larger than the client's Maximum
    /// Response Size, every batch item is replaced by a Response Too Large
    /// failure (KMIP 1.4 §6.3), which always fits a sane limit.
    pub fn encode_bounded(
        mut self,
        maximum_response_size: Option<i32>,
    ) -> Result<Vec<u8>, KmipError> {
        let bytes = self.to_item().encode()?;
        let Some(max) = maximum_response_size.and_then(|m| usize::try_from(m).ok()) else {
            return Ok(bytes);
        };
        if bytes.len() <= max {
            return Ok(bytes);
        }
        let err = KmipError::ResponseTooLarge { len: bytes.len(), max };
        for item in &mut self.batch_items {
            if item.result_status == ResultStatus::SUCCESS {
                *item = ResponseBatchItem::failure(
                    item.operation,
                    item.unique_batch_item_id.take(),
                    &err,
                );
            }
        }
        Ok(self.to_item().encode()?)
    }

    /// Parses a decoded Response Message (for clients).
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        if item.tag != Tag::RESPONSE_MESSAGE {
            return Err(KmipError::UnexpectedTag {
                expected: Tag::RESPONSE_MESSAGE,
                found: item.tag,
            });
        }
        let f = Fields::of(item)?;
        let h = Fields::of(f.required(Tag::RESPONSE_HEADER)?)?;
        let header = ResponseHeader {
            protocol_version: ProtocolVersion::parse(h.required(Tag::PROTOCOL_VERSION)?)?,
            time_stamp: h.required(Tag::TIME_STAMP)?.as_date_time()?,
        };
        let declared = h.required(Tag::BATCH_COUNT)?.as_int()?;
        let mut batch_items = Vec::new();
        for bi in f.all(Tag::BATCH_ITEM) {
            let b = Fields::of(bi)?;
            batch_items.push(ResponseBatchItem {
                operation: b
                    .optional(Tag::OPERATION)?
                    .map(Item::as_enum)
                    .transpose()?
                    .map(Operation),
                unique_batch_item_id: b
                    .optional(Tag::UNIQUE_BATCH_ITEM_ID)?
                    .map(|i| i.as_bytes().map(<[u8]>::to_vec))
                    .transpose()?,
                result_status: ResultStatus(b.required(Tag::RESULT_STATUS)?.as_enum()?),
                result_reason: b
                    .optional(Tag::RESULT_REASON)?
                    .map(Item::as_enum)
                    .transpose()?
                    .map(ResultReason),
                result_message: b
                    .optional(Tag::RESULT_MESSAGE)?
                    .map(|i| i.as_text().map(str::to_owned))
                    .transpose()?,
                payload: b.optional(Tag::RESPONSE_PAYLOAD)?.cloned(),
            });
        }
        if usize::try_from(declared).ok() != Some(batch_items.len()) {
            return Err(KmipError::BatchCountMismatch { declared, found: batch_items.len() });
        }
        Ok(Self { header, batch_items })
    }
}

/// Attribute (KMIP 1.x): a name, an optional index and a value, as in
/// Template-Attribute, Get Attributes and Add/Modify/Delete Attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    pub name: String,
    pub index: Option<i32>,
    pub value: Option<Item>,
}

impl Attribute {
    pub fn parse(item: &Item) -> Result<Self, KmipError> {
        let f = Fields::of(item)?;
        Ok(Self {
            name: f.required(Tag::ATTRIBUTE_NAME)?.as_text()?.to_owned(),
            index: f.optional(Tag::ATTRIBUTE_INDEX)?.map(Item::as_int).transpose()?,
            value: f.optional(Tag::ATTRIBUTE_VALUE)?.cloned(),
        })
    }

    #[must_use]
    pub fn new(name: impl Into<String>, value: Value) -> Self {
        Self { name: name.into(), index: None, value: Some(Item::new(Tag::ATTRIBUTE_VALUE, value)) }
    }

    #[must_use]
    pub fn to_item(&self) -> Item {
        let mut items = vec![Item::text(Tag::ATTRIBUTE_NAME, self.name.clone())];
        if let Some(i) = self.index {
            items.push(Item::int(Tag::ATTRIBUTE_INDEX, i));
        }
        if let Some(v) = &self.value {
            items.push(v.clone());
        }
        Item::structure(Tag::ATTRIBUTE, items)
    }
}

impl KmipError {
    /// This error as a client speaking `version` is answered: the Result
    /// Reasons KMIP 2.0 added become the ones KMIP 1.x gives the same
    /// refusal (the 1.4 profiles' test cases answer those).
    #[must_use]
    pub fn for_version(self, version: ProtocolVersion) -> Self {
        if version >= ProtocolVersion::V2_0 {
            return self;
        }
        match self {
            Self::ObjectNotFound(why) => Self::ItemNotFound(why),
            Self::WrongKeyLifecycleState(why)
            | Self::IncompatibleCryptographicUsageMask(why)
            | Self::InvalidObjectType(why) => Self::PermissionDenied(why),
            Self::AttributeReadOnly(why) => Self::InvalidField(format!(
                "attribute {why} is set by the server, not by the client"
            )),
            Self::AttributeSingleValued(why) => {
                Self::IllegalOperation(format!("attribute {why} takes one value"))
            }
            Self::MultiValuedAttribute(why) => {
                Self::IllegalOperation(format!("attribute {why} has several values"))
            }
            Self::NonUniqueName(why) => Self::ObjectAlreadyExists(why),
            // KMIP 1.4 §11.8: a request that is not a signed one of its type.
            Self::InvalidCsr(why) => Self::InvalidField(format!("the certificate request: {why}")),
            Self::NumericRange(why) | Self::InvalidDataType(why) => Self::InvalidField(why),
            Self::ObjectDestroyed(why) => Self::IllegalOperation(format!("{why} is destroyed")),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enums::ResultReason;

    #[test]
    fn a_1_x_client_gets_only_the_reasons_kmip_1_4_defines() {
        let errors = [
            KmipError::ObjectNotFound("o".into()),
            KmipError::WrongKeyLifecycleState("o".into()),
            KmipError::IncompatibleCryptographicUsageMask("o".into()),
            KmipError::InvalidObjectType("o".into()),
            KmipError::AttributeReadOnly("State".into()),
            KmipError::AttributeSingleValued("Description".into()),
            KmipError::MultiValuedAttribute("Name".into()),
            KmipError::NonUniqueName("n".into()),
            KmipError::ObjectDestroyed("o".into()),
            KmipError::InvalidCsr("o".into()),
        ];
        for err in errors {
            let v2 = err.clone().for_version(ProtocolVersion::V2_1);
            assert_eq!(v2, err);
            assert!(v2.result_reason().0 > ResultReason::OBJECT_ALREADY_EXISTS.0, "{v2}");
            // KMIP 1.4 §9.1.3.2.29 ends at Object Already Exists (0x18).
            let v1 = err.for_version(ProtocolVersion::V1_4);
            assert!(v1.result_reason().0 <= ResultReason::OBJECT_ALREADY_EXISTS.0, "{v1}");
        }
    }
}
