//! TTLV conformance: every item type against the encoding examples of the
//! KMIP specification, whole request messages from the OASIS KMIP test
//! cases, and malformed input (wrong lengths, padding, depth bombs,
//! truncated batches), each refused with the reason asserted.
//!
//! Sources of the byte strings:
//! * "SPEC-9.1.2": Key Management Interoperability Protocol Specification
//!   v1.0–v1.4, §9.1.2 "Examples" (tag 0x420020, the same bytes in every
//!   1.x version).
//! * "TC-1.1-3.1.1", "TC-1.1-3.1.3", "TC-1.1-5.1", "TC-1.1-11.1": KMIP
//!   Test Cases v1.1 (kmip-testcases-v1.1), sections 3.1.1 (Create /
//!   Get / Destroy of a symmetric key), 3.1.3 (Locate by Object Type and
//!   Name), 5.1 (Get Usage Allocation payload), 11.1 (Authentication).
//! * "TC-1.2-MAC": the MAC request of the KMIP 1.2 test cases (protocol
//!   1.2, MAC with HMAC-SHA512 Cryptographic Parameters).

#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use rampart_kmip::enums::{
    BatchErrorContinuationOption, CryptographicAlgorithm, ObjectType, Operation, ResultReason,
    ResultStatus,
};
use rampart_kmip::message::{
    Attribute, ProtocolVersion, RequestMessage, ResponseBatchItem, ResponseHeader, ResponseMessage,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Fields, Item, ItemType, TtlvError, Value};
use rampart_kmip::{KmipError, Limits};

use crate::vectors;
use vectors::{spec, TC_1_1_3_1_1_CREATE, TC_1_1_3_1_1_GET, TC_1_1_3_1_3_LOCATE, TC_1_2_MAC};

fn roundtrip(bytes: &[u8], expected: &Item) {
    let decoded = ttlv::decode(bytes, &Limits::default()).expect("decodes");
    assert_eq!(&decoded, expected);
    assert_eq!(expected.encode().expect("encodes"), bytes);
    assert_eq!(expected.encoded_len(), bytes.len());
}

const T: Tag = Tag(0x42_0020);

#[test]
fn spec_9_1_2_integer() {
    roundtrip(&spec("42 00 20 | 02 | 00 00 00 04 | 00 00 00 08 00 00 00 00"), &Item::int(T, 8));
}

#[test]
fn spec_9_1_2_long_integer() {
    roundtrip(
        &spec("42 00 20 | 03 | 00 00 00 08 | 01 B6 9B 4B A5 74 92 00"),
        &Item::long(T, 123_456_789_000_000_000),
    );
}

#[test]
fn spec_9_1_2_big_integer() {
    // 1234567890000000000000000000, sign-extended to 16 bytes.
    roundtrip(
        &spec("42 00 20 | 04 | 00 00 00 10 | 00 00 00 00 03 FD 35 EB 6B C2 DF 46 18 08 00 00"),
        &Item::new(T, Value::BigInteger(spec("00 00 00 00 03 FD 35 EB 6B C2 DF 46 18 08 00 00"))),
    );
}

#[test]
fn spec_9_1_2_enumeration() {
    roundtrip(
        &spec("42 00 20 | 05 | 00 00 00 04 | 00 00 00 FF 00 00 00 00"),
        &Item::enumeration(T, 255),
    );
}

#[test]
fn spec_9_1_2_boolean() {
    roundtrip(
        &spec("42 00 20 | 06 | 00 00 00 08 | 00 00 00 00 00 00 00 01"),
        &Item::boolean(T, true),
    );
}

#[test]
fn spec_9_1_2_text_string() {
    roundtrip(
        &spec("42 00 20 | 07 | 00 00 00 0B | 48 65 6C 6C 6F 20 57 6F 72 6C 64 00 00 00 00 00"),
        &Item::text(T, "Hello World"),
    );
}

#[test]
fn spec_9_1_2_byte_string() {
    roundtrip(
        &spec("42 00 20 | 08 | 00 00 00 03 | 01 02 03 00 00 00 00 00"),
        &Item::bytes(T, &[1, 2, 3]),
    );
}

#[test]
fn spec_9_1_2_date_time() {
    // Friday, March 14, 2008, 11:56:40 GMT.
    roundtrip(
        &spec("42 00 20 | 09 | 00 00 00 08 | 00 00 00 00 47 DA 67 F8"),
        &Item::date_time(T, 1_205_495_800),
    );
}

#[test]
fn spec_9_1_2_interval() {
    // Ten days.
    roundtrip(
        &spec("42 00 20 | 0A | 00 00 00 04 | 00 0D 2F 00 00 00 00 00"),
        &Item::interval(T, 864_000),
    );
}

#[test]
fn spec_9_1_2_structure() {
    // An Enumeration 254 (tag 0x420004) followed by an Integer 255 (0x420005).
    roundtrip(
        &spec(
            "42 00 20 | 01 | 00 00 00 20 | 42 00 04 | 05 | 00 00 00 04 | 00 00 00 FE 00 00 00 00 \
             | 42 00 05 | 02 | 00 00 00 04 | 00 00 00 FF 00 00 00 00",
        ),
        &Item::structure(
            T,
            vec![Item::enumeration(Tag(0x42_0004), 254), Item::int(Tag(0x42_0005), 255)],
        ),
    );
}

#[test]
fn date_time_extended_and_empty_values_round_trip() {
    // KMIP 2.0 type 0x0B, and the zero-length strings every version allows.
    roundtrip(
        &spec("42 00 20 | 0B | 00 00 00 08 | 00 04 6C 3E 29 DA 1A 00"),
        &Item::new(T, Value::DateTimeExtended(0x0004_6C3E_29DA_1A00)),
    );
    roundtrip(&spec("42 00 20 | 07 | 00 00 00 00"), &Item::text(T, ""));
    roundtrip(&spec("42 00 20 | 08 | 00 00 00 00"), &Item::bytes(T, &[]));
    roundtrip(&spec("42 00 20 | 01 | 00 00 00 00"), &Item::structure(T, vec![]));
    roundtrip(&spec("42 00 20 | 02 | 00 00 00 04 | FF FF FF FF 00 00 00 00"), &Item::int(T, -1));
}

fn parse_request(hex: &str) -> (Vec<u8>, RequestMessage) {
    let bytes = spec(hex);
    let mut header = [0u8; 8];
    header.copy_from_slice(&bytes[..8]);
    assert_eq!(ttlv::message_len(&header, &Limits::default()).unwrap(), bytes.len());
    let item = ttlv::decode(&bytes, &Limits::default()).expect("test case decodes");
    assert_eq!(item.encode().unwrap(), bytes, "re-encodes byte for byte");
    (bytes, RequestMessage::parse(&item).expect("test case parses"))
}

#[test]
fn tc_1_1_3_1_1_create_request() {
    let (bytes, msg) = parse_request(TC_1_1_3_1_1_CREATE);
    assert_eq!(msg.header.protocol_version, ProtocolVersion::V1_1);
    assert_eq!(msg.header.batch_count, 1);
    assert_eq!(msg.header.batch_error_continuation, BatchErrorContinuationOption::STOP);
    let item = &msg.batch_items[0];
    assert_eq!(item.operation, Operation::CREATE);
    let p = Fields::of(&item.payload).unwrap();
    assert_eq!(
        p.required(Tag::OBJECT_TYPE).unwrap().as_enum().unwrap(),
        ObjectType::SYMMETRIC_KEY.0
    );
    let template = Fields::of(p.required(Tag::TEMPLATE_ATTRIBUTE).unwrap()).unwrap();
    let attrs: Vec<Attribute> =
        template.all(Tag::ATTRIBUTE).map(|a| Attribute::parse(a).unwrap()).collect();
    let names: Vec<&str> = attrs.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["Cryptographic Algorithm", "Cryptographic Length", "Cryptographic Usage Mask"]
    );
    assert_eq!(attrs[0].value.as_ref().unwrap().as_enum().unwrap(), CryptographicAlgorithm::AES.0);
    assert_eq!(attrs[1].value.as_ref().unwrap().as_int().unwrap(), 128);
    assert_eq!(attrs[2].value.as_ref().unwrap().as_int().unwrap(), 0x0C);
    // The typed message encodes back to the same bytes.
    assert_eq!(msg.to_item().encode().unwrap(), bytes);
}

#[test]
fn tc_1_1_3_1_1_get_request() {
    let (_, msg) = parse_request(TC_1_1_3_1_1_GET);
    let item = &msg.batch_items[0];
    assert_eq!(item.operation, Operation::GET);
    let p = Fields::of(&item.payload).unwrap();
    assert_eq!(
        p.required(Tag::UNIQUE_IDENTIFIER).unwrap().as_text().unwrap(),
        "49a1ca88-6bea-4fb2-b450-7e58802c3038"
    );
}

#[test]
fn tc_1_1_3_1_3_locate_request() {
    let (_, msg) = parse_request(TC_1_1_3_1_3_LOCATE);
    let item = &msg.batch_items[0];
    assert_eq!(item.operation, Operation::LOCATE);
    let p = Fields::of(&item.payload).unwrap();
    let attrs: Vec<Attribute> =
        p.all(Tag::ATTRIBUTE).map(|a| Attribute::parse(a).unwrap()).collect();
    assert_eq!(attrs[0].name, "Object Type");
    assert_eq!(attrs[1].name, "Name");
    let name = Fields::of(attrs[1].value.as_ref().unwrap()).unwrap();
    assert_eq!(name.required(Tag::NAME_VALUE).unwrap().as_text().unwrap(), "Key1");
    assert_eq!(name.required(Tag::NAME_TYPE).unwrap().as_enum().unwrap(), 1);
}

#[test]
fn tc_1_2_mac_request() {
    let (_, msg) = parse_request(TC_1_2_MAC);
    assert_eq!(msg.header.protocol_version, ProtocolVersion::V1_2);
    let item = &msg.batch_items[0];
    assert_eq!(item.operation, Operation::MAC);
    let p = Fields::of(&item.payload).unwrap();
    assert_eq!(p.required(Tag::DATA).unwrap().as_bytes().unwrap(), (0u8..16).collect::<Vec<_>>());
    let params = Fields::of(p.required(Tag::CRYPTOGRAPHIC_PARAMETERS).unwrap()).unwrap();
    assert_eq!(
        params.required(Tag::CRYPTOGRAPHIC_ALGORITHM).unwrap().as_enum().unwrap(),
        CryptographicAlgorithm::HMAC_SHA512.0
    );
}

#[test]
fn tc_1_1_5_1_and_11_1_payloads() {
    // Get Usage Allocation payload: a Unique Identifier and a Long Integer.
    let payload = spec(
        "420079010000004042009407000000243263323332313765 2D 66353363 2D 34626466 2D 61643061 2D 353861333166643364346236 00000000
         42009603000000080000000000000 1F4",
    );
    let item = ttlv::decode(&payload, &Limits::default()).unwrap();
    let f = Fields::of(&item).unwrap();
    assert_eq!(
        f.required(Tag::UNIQUE_IDENTIFIER).unwrap().as_text().unwrap(),
        "2c23217e-f53c-4bdf-ad0a-58a31fd3d4b6"
    );
    assert_eq!(f.required(Tag::USAGE_LIMITS_COUNT).unwrap().as_long().unwrap(), 500);
    assert_eq!(item.encode().unwrap(), payload);
    // Authentication with a username and password credential.
    let auth = spec(
        "42000C0100000048 4200230100000040 42002405000000040000000100000000 4200250100000028
         42009907000000044672656400000000 4200A10700000009 70617373776F72643100000000000000",
    );
    let item = ttlv::decode(&auth, &Limits::default()).unwrap();
    let cred = Fields::of(Fields::of(&item).unwrap().required(Tag::CREDENTIAL).unwrap()).unwrap();
    let value = Fields::of(cred.required(Tag::CREDENTIAL_VALUE).unwrap()).unwrap();
    assert_eq!(value.required(Tag::USERNAME).unwrap().as_text().unwrap(), "Fred");
    assert_eq!(value.required(Tag::PASSWORD).unwrap().as_text().unwrap(), "password1");
    assert_eq!(item.encode().unwrap(), auth);
}

#[test]
fn response_round_trip_and_maximum_response_size() {
    let ok = ResponseMessage {
        header: ResponseHeader {
            protocol_version: ProtocolVersion::V1_4,
            time_stamp: 1_205_495_800,
        },
        batch_items: vec![
            ResponseBatchItem::success(
                Operation::GET,
                Some(vec![1]),
                vec![
                    Item::text(Tag::UNIQUE_IDENTIFIER, "1"),
                    Item::bytes(Tag::KEY_MATERIAL, &[7; 512]),
                ],
            ),
            ResponseBatchItem::failure(
                Some(Operation::CHECK),
                Some(vec![2]),
                &KmipError::ItemNotFound("2".into()),
            ),
        ],
    };
    let bytes = ok.clone().encode_bounded(None).unwrap();
    let back = ResponseMessage::parse(&ttlv::decode(&bytes, &Limits::default()).unwrap()).unwrap();
    assert_eq!(back, ok);
    assert_eq!(back.batch_items[1].result_reason, Some(ResultReason::ITEM_NOT_FOUND));
    // Under a 400-byte Maximum Response Size the successful item becomes
    // Response Too Large; the failure stays what it was.
    let small = ok.clone().encode_bounded(Some(400)).unwrap();
    let back = ResponseMessage::parse(&ttlv::decode(&small, &Limits::default()).unwrap()).unwrap();
    assert_eq!(back.batch_items[0].result_status, ResultStatus::OPERATION_FAILED);
    assert_eq!(back.batch_items[0].result_reason, Some(ResultReason::RESPONSE_TOO_LARGE));
    assert_eq!(back.batch_items[0].unique_batch_item_id, Some(vec![1]));
    assert_eq!(back.batch_items[1].result_reason, Some(ResultReason::ITEM_NOT_FOUND));
    assert!(small.len() < bytes.len());
}

#[test]
fn asynchronous_indicator_is_refused_per_item() {
    let (_, mut msg) = parse_request(TC_1_1_3_1_1_CREATE);
    msg.header.asynchronous_indicator = true;
    let bytes = msg.to_item().encode().unwrap();
    let parsed = RequestMessage::parse(&ttlv::decode(&bytes, &Limits::default()).unwrap()).unwrap();
    assert!(parsed.header.asynchronous_indicator);
    let resp = parsed.refuse_async(ProtocolVersion::V1_1, 0);
    assert_eq!(resp.batch_items.len(), 1);
    assert_eq!(resp.batch_items[0].result_reason, Some(ResultReason::FEATURE_NOT_SUPPORTED));
}

#[test]
fn byte_strings_never_show_in_debug() {
    let item = Item::bytes(Tag::KEY_MATERIAL, b"super secret key material!!!!!!!");
    let shown = format!("{item:?}");
    assert!(!shown.contains("super") && !shown.contains("115, 117"), "{shown}");
    assert!(shown.contains("32 bytes"));
}

// Malformed input: each refused with its reason, never a panic.

fn refuse(bytes: &[u8]) -> TtlvError {
    ttlv::decode(bytes, &Limits::default()).expect_err("malformed TTLV must be refused")
}

#[test]
fn wrong_fixed_lengths_are_refused() {
    for (ty, len) in [(2u8, 8u32), (3, 4), (5, 8), (6, 4), (9, 4), (0x0A, 8), (0x0B, 16), (2, 0)] {
        let mut b = spec("42 00 20");
        b.push(ty);
        b.extend_from_slice(&len.to_be_bytes());
        b.extend_from_slice(&[0; 16]);
        b.truncate(8 + ((len as usize + 7) & !7));
        assert!(matches!(refuse(&b), TtlvError::BadLength { .. }), "type {ty} length {len}");
    }
    // A Big Integer must be a non-empty multiple of 8 bytes.
    assert!(matches!(
        refuse(&spec("42 00 20 | 04 | 00 00 00 04 | 00 00 00 01 00 00 00 00")),
        TtlvError::BadLength { .. }
    ));
    // A structure's length is a multiple of 8.
    assert!(matches!(
        refuse(&spec("42 00 20 | 01 | 00 00 00 04 | 00 00 00 00")),
        TtlvError::BadLength { .. }
    ));
}

#[test]
fn lengths_past_the_end_are_refused_without_allocating() {
    // A byte string claiming 4 GiB, a structure claiming 4 GiB.
    assert!(matches!(
        refuse(&spec("42 00 20 | 08 | FF FF FF FF | 01 02 03 04")),
        TtlvError::Truncated { .. }
    ));
    assert!(matches!(
        refuse(&spec("42 00 20 | 01 | FF FF FF F8 | 42 00 20 02 00 00 00 04")),
        TtlvError::Truncated { .. }
    ));
    // message_len refuses the 4 GiB header before a buffer exists.
    let header: [u8; 8] = spec("42 00 78 | 01 | FF FF FF F8").try_into().unwrap();
    assert!(matches!(
        ttlv::message_len(&header, &Limits::default()),
        Err(TtlvError::TooLong { .. })
    ));
    let header: [u8; 8] = spec("42 00 78 | 07 | 00 00 00 08").try_into().unwrap();
    assert!(matches!(
        ttlv::message_len(&header, &Limits::default()),
        Err(TtlvError::NotAStructure { .. })
    ));
    // A child that runs past its structure's end.
    assert!(matches!(
        refuse(&spec(
            "42 00 20 | 01 | 00 00 00 08 | 42 00 04 | 02 | 00 00 00 04 | 00 00 00 01 00 00 00 00"
        )),
        TtlvError::Truncated { .. }
    ));
    // Trailing garbage and a bare header.
    assert!(matches!(
        refuse(&spec("42 00 20 | 01 | 00 00 00 00 | 00")),
        TtlvError::TrailingBytes { len: 1 }
    ));
    assert!(matches!(refuse(&spec("42 00 20 | 02 | 00 00")), TtlvError::Truncated { .. }));
}

#[test]
fn bad_padding_booleans_utf8_and_types_are_refused() {
    assert!(matches!(
        refuse(&spec("42 00 20 | 02 | 00 00 00 04 | 00 00 00 08 00 00 00 01")),
        TtlvError::BadPadding { .. }
    ));
    assert!(matches!(
        refuse(&spec(
            "42 00 20 | 07 | 00 00 00 0B | 48 65 6C 6C 6F 20 57 6F 72 6C 64 00 00 00 00 FF"
        )),
        TtlvError::BadPadding { .. }
    ));
    assert!(matches!(
        refuse(&spec("42 00 20 | 08 | 00 00 00 03 | 01 02 03 00 00 00 00")),
        TtlvError::Truncated { .. }
    ));
    assert!(matches!(
        refuse(&spec("42 00 20 | 06 | 00 00 00 08 | 00 00 00 00 00 00 00 02")),
        TtlvError::BadBoolean { value: 2, .. }
    ));
    assert!(matches!(
        refuse(&spec("42 00 20 | 07 | 00 00 00 02 | C3 28 00 00 00 00 00 00")),
        TtlvError::BadUtf8 { .. }
    ));
    assert!(matches!(
        refuse(&spec("42 00 20 | 0C | 00 00 00 04 | 00 00 00 01 00 00 00 00")),
        TtlvError::UnknownType { item_type: 0x0C, .. }
    ));
    assert!(matches!(
        refuse(&spec("42 00 20 | 00 | 00 00 00 00")),
        TtlvError::UnknownType { item_type: 0, .. }
    ));
}

fn nested(depth: usize) -> Vec<u8> {
    let mut item = Item::int(T, 1);
    for _ in 0..depth {
        item = Item::structure(T, vec![item]);
    }
    item.encode().unwrap()
}

#[test]
fn depth_bombs_are_refused() {
    let limits = Limits::default();
    // 15 structures around an integer: depth 16 counting the integer's
    // level is the last accepted.
    assert!(ttlv::decode(&nested(limits.max_depth - 1), &limits).is_ok());
    assert_eq!(
        ttlv::decode(&nested(limits.max_depth), &limits),
        Err(TtlvError::TooDeep { max: 16 })
    );
    // A bomb of 100,000 nested empty-ended structures: refused at depth 16
    // after reading 16 headers, no recursion beyond it.
    let mut bomb = Vec::new();
    let n = 100_000usize;
    for i in 0..n {
        bomb.extend_from_slice(&[0x42, 0x00, 0x20, 0x01]);
        bomb.extend_from_slice(&u32::try_from((n - i - 1) * 8).unwrap().to_be_bytes());
    }
    assert!(matches!(
        ttlv::decode(&bomb, &Limits { max_message_len: 1 << 24, ..limits }),
        Err(TtlvError::TooDeep { .. })
    ));
}

#[test]
fn item_counts_are_capped() {
    let limits = Limits { max_items: 100, ..Limits::default() };
    let flat = |n| Item::structure(T, (0..n).map(|i| Item::int(T, i)).collect()).encode().unwrap();
    assert!(ttlv::decode(&flat(99), &limits).is_ok());
    assert_eq!(ttlv::decode(&flat(100), &limits), Err(TtlvError::TooManyItems { max: 100 }));
    let too_long = Limits { max_message_len: 64, ..Limits::default() };
    assert!(matches!(ttlv::decode(&flat(20), &too_long), Err(TtlvError::TooLong { .. })));
}

#[test]
fn codec_errors_become_kmip_errors_with_their_result_reasons() {
    let framing = KmipError::from(TtlvError::TooLong { len: 1 << 21, max: 1 << 20 });
    assert_eq!(framing.result_reason(), ResultReason::INVALID_MESSAGE);
    assert!(framing.is_framing());
    assert!(KmipError::from(TtlvError::NotAStructure { tag: T }).is_framing());
    let truncated = KmipError::from(TtlvError::Truncated { needed: 8, left: 2 });
    assert_eq!(truncated.result_reason(), ResultReason::INVALID_MESSAGE);
    assert!(!truncated.is_framing());
    assert_eq!(truncated.to_string(), "truncated TTLV: 8 bytes needed, 2 left");
    let missing = KmipError::from(TtlvError::Missing { tag: T, within: Tag::REQUEST_HEADER });
    assert_eq!(missing.result_reason(), ResultReason::MISSING_DATA);
    let duplicate = KmipError::from(TtlvError::Duplicate { tag: T, within: Tag::REQUEST_HEADER });
    assert_eq!(duplicate.result_reason(), ResultReason::INVALID_MESSAGE);
}

#[test]
fn truncated_batches_and_bad_messages_are_refused() {
    let create = spec(TC_1_1_3_1_1_CREATE);
    // Every truncation of a real request fails to decode, none panics.
    for cut in 0..create.len() {
        assert!(ttlv::decode(&create[..cut], &Limits::default()).is_err(), "cut at {cut}");
    }
    // A batch count that disagrees with the batch items.
    let (_, mut msg) = parse_request(TC_1_1_3_1_1_CREATE);
    msg.header.batch_count = 2;
    let item = ttlv::decode(&msg.to_item().encode().unwrap(), &Limits::default()).unwrap();
    assert_eq!(
        RequestMessage::parse(&item),
        Err(KmipError::BatchCountMismatch { declared: 2, found: 1 })
    );
    assert_eq!(
        KmipError::BatchCountMismatch { declared: 2, found: 1 }.result_reason(),
        ResultReason::INVALID_MESSAGE
    );
    // A response message where a request is expected, a missing header,
    // a duplicate header field, an operation of the wrong type.
    let resp =
        ResponseMessage::error(ProtocolVersion::V1_4, 0, &KmipError::GeneralFailure("x".into()))
            .to_item();
    assert!(matches!(RequestMessage::parse(&resp), Err(KmipError::UnexpectedTag { .. })));
    let no_header = Item::structure(Tag::REQUEST_MESSAGE, vec![]);
    assert!(matches!(
        RequestMessage::parse(&no_header),
        Err(KmipError::Ttlv(TtlvError::Missing { tag: Tag::REQUEST_HEADER, .. }))
    ));
    let f = Fields::of(&item).unwrap();
    let mut header = f.required(Tag::REQUEST_HEADER).unwrap().clone();
    if let Value::Structure(h) = &mut header.value {
        h.push(Item::int(Tag::BATCH_COUNT, 1));
    }
    let dup = Item::structure(
        Tag::REQUEST_MESSAGE,
        vec![header, f.required(Tag::BATCH_ITEM).unwrap().clone()],
    );
    assert!(matches!(
        RequestMessage::parse(&dup),
        Err(KmipError::Ttlv(TtlvError::Duplicate { tag: Tag::BATCH_COUNT, .. }))
    ));
    let wrong = Item::structure(
        Tag::REQUEST_MESSAGE,
        vec![
            Item::structure(
                Tag::REQUEST_HEADER,
                vec![ProtocolVersion::V1_4.to_item(), Item::int(Tag::BATCH_COUNT, 1)],
            ),
            Item::structure(Tag::BATCH_ITEM, vec![Item::text(Tag::OPERATION, "Get")]),
        ],
    );
    let err = RequestMessage::parse(&wrong).unwrap_err();
    assert!(matches!(
        err,
        KmipError::Ttlv(TtlvError::WrongType { expected: ItemType::Enumeration, .. })
    ));
    assert_eq!(err.result_reason(), ResultReason::INVALID_FIELD);
}

#[test]
fn unknown_operations_and_tags_are_kept() {
    let msg = RequestMessage::new(
        ProtocolVersion::V2_1,
        vec![(Operation(0x99), vec![Item::text(Tag(0x54_0001), "vendor")])],
    );
    let item = ttlv::decode(&msg.to_item().encode().unwrap(), &Limits::default()).unwrap();
    let parsed = RequestMessage::parse(&item).unwrap();
    assert_eq!(parsed.batch_items[0].operation, Operation(0x99));
    assert_eq!(format!("{:?}", Operation(0x99)), "Operation(0x00000099)");
    assert_eq!(format!("{}", Operation::DISCOVER_VERSIONS), "Discover Versions");
    assert_eq!(format!("{}", Tag(0x54_0001)), "0x540001");
}
