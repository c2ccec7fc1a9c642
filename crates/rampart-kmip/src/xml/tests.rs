use super::*;
use crate::enums::{ObjectType, Operation};

const CREATE: &str = r#"<?xml version="1.0"?>
<KMIP>
<!-- a comment -->
<RequestMessage>
  <RequestHeader>
    <ProtocolVersion>
      <ProtocolVersionMajor type="Integer" value="1"/>
      <ProtocolVersionMinor type="Integer" value="4"/>
    </ProtocolVersion>
    <BatchCount type="Integer" value="1"/>
  </RequestHeader>
  <BatchItem>
    <Operation type="Enumeration" value="Create"/>
    <RequestPayload>
      <ObjectType type="Enumeration" value="SymmetricKey"/>
      <TemplateAttribute>
        <Attribute>
          <AttributeName type="TextString" value="Cryptographic Usage Mask"/>
          <AttributeValue type="Integer" value="Encrypt Decrypt"/>
        </Attribute>
        <Attribute>
          <AttributeName type="TextString" value="State"/>
          <AttributeValue type="Enumeration" value="PreActive"/>
        </Attribute>
        <Attribute>
          <AttributeName type="TextString" value="Name"/>
          <AttributeValue>
            <NameValue type="TextString" value="a &amp; b &#x41;"/>
            <NameType type="Enumeration" value="0x00000001"/>
          </AttributeValue>
        </Attribute>
      </TemplateAttribute>
      <0x420039 type="DateTime" value="2000-01-01T00:00:00+10:00"/>
    </RequestPayload>
  </BatchItem>
</RequestMessage>
</KMIP>
"#;

fn message(text: &str) -> Item {
    let top = parse_document(text, &XmlLimits::default()).unwrap();
    assert_eq!(top.len(), 1);
    to_item(&top[0].children[0]).unwrap()
}

fn find(item: &Item, tag: Tag) -> Option<&Item> {
    if item.tag == tag {
        return Some(item);
    }
    match &item.value {
        Value::Structure(children) => children.iter().find_map(|c| find(c, tag)),
        _ => None,
    }
}

#[test]
fn a_profile_request_reads_into_the_items_it_names() {
    let item = message(CREATE);
    assert_eq!(item.tag, Tag::REQUEST_MESSAGE);
    assert_eq!(find(&item, Tag::OPERATION).unwrap().as_enum().unwrap(), Operation::CREATE.0);
    assert_eq!(
        find(&item, Tag::OBJECT_TYPE).unwrap().as_enum().unwrap(),
        ObjectType::SYMMETRIC_KEY.0
    );
    let values: Vec<&Item> = {
        let mut out = Vec::new();
        fn walk<'a>(i: &'a Item, out: &mut Vec<&'a Item>) {
            if i.tag == Tag::ATTRIBUTE_VALUE {
                out.push(i);
            }
            if let Value::Structure(c) = &i.value {
                c.iter().for_each(|c| walk(c, out));
            }
        }
        walk(&item, &mut out);
        out
    };
    // Encrypt (0x04) | Decrypt (0x08), read through the Attribute Name.
    assert_eq!(values[0].value, Value::Integer(0x0C));
    assert_eq!(values[1].value, Value::Enumeration(1)); // Pre-Active
    assert_eq!(find(&item, Tag::NAME_VALUE).unwrap().as_text().unwrap(), "a & b A");
    assert_eq!(find(&item, Tag::NAME_TYPE).unwrap().as_enum().unwrap(), 1);
    // 2000-01-01T00:00:00+10:00 is 1999-12-31T14:00:00Z.
    assert_eq!(find(&item, Tag::INITIAL_DATE).unwrap().value, Value::DateTime(946_648_800));
}

#[test]
fn written_xml_reads_back_to_the_same_item() {
    let item = message(CREATE);
    let again = parse_document(&to_xml(&item), &XmlLimits::default()).unwrap();
    assert_eq!(to_item(&again[0]).unwrap(), item);
    assert!(to_xml(&item).contains(r#"<AttributeValue type="Integer" value="Encrypt Decrypt"/>"#));
    assert!(to_xml(&item).contains(r#"<ObjectType type="Enumeration" value="SymmetricKey"/>"#));
    // Every type, with values that only the hex forms carry.
    let all = Item::structure(
        Tag(0x54_0001),
        vec![
            Item::long(Tag::DATA_LENGTH, -5),
            Item::new(Tag(0x42_0050), Value::BigInteger(vec![0xFF; 16])),
            Item::boolean(Tag::FRESH, true),
            Item::bytes(Tag::DATA, &[0, 1, 0xFE]),
            Item::interval(Tag::LEASE_TIME, 3600),
            Item::new(Tag::INITIAL_DATE, Value::DateTimeExtended(1_500_000_000_123_456)),
            Item::enumeration(Tag::OBJECT_TYPE, 0x8000_0001),
            Item::int(Tag::CRYPTOGRAPHIC_USAGE_MASK, 0x0010_0004),
            Item::text(Tag::NAME_VALUE, "<\"quoted\" & \n>"),
            Item::structure(Tag::ATTRIBUTES, vec![]),
        ],
    );
    let again = parse_document(&to_xml(&all), &XmlLimits::default()).unwrap();
    assert_eq!(to_item(&again[0]).unwrap(), all);
}

#[test]
fn names_are_read_in_any_spelling_and_as_hex() {
    assert_eq!(tag_by_name("IVCounterNonce"), Some(Tag::IV_COUNTER_NONCE));
    assert_eq!(tag_by_name("0x42003D"), Some(Tag::IV_COUNTER_NONCE));
    assert_eq!(tag_by_name("PKCS_11Function"), tag_by_name("PKCS#11 Function"));
    assert_eq!(tag_by_name("NoSuchTag"), None);
    assert_eq!(enumeration_value("Hashing Algorithm", "SHA_256"), Some(6));
    assert_eq!(enumeration_value("State", "PRE_ACTIVE"), Some(1));
    assert_eq!(enumeration_value("Cryptographic Algorithm", "DES3"), Some(2));
    let v = parse_value(Tag::ATTRIBUTE_REFERENCE, ItemType::Enumeration, "State", None).unwrap();
    assert_eq!(v, Value::Enumeration(Tag::STATE.0));
}

#[test]
fn date_times_are_iso_8601_in_any_offset() {
    assert_eq!(parse_date_time("1970-01-01T00:00:06+00:00"), Some((6, 0)));
    assert_eq!(parse_date_time("1970-01-01T00:00:06Z"), Some((6, 0)));
    assert_eq!(parse_date_time("2018-12-09T18:43:13+10:00"), Some((1_544_344_993, 0)));
    assert_eq!(parse_date_time("1969-12-31T23:59:59.5-00:00"), Some((-1, 500_000)));
    assert_eq!(format_date_time(1_544_344_993, None), "2018-12-09T08:43:13+00:00");
    assert_eq!(format_date_time(-1, Some(5)), "1969-12-31T23:59:59.000005+00:00");
    for bad in ["", "2018-13-01T00:00:00Z", "2018-12-09 18:43", "2018-12-09T18:43:13+1000", "x"] {
        assert_eq!(parse_date_time(bad), None, "{bad:?}");
    }
}

#[test]
fn malformed_documents_fail_with_an_error_never_a_panic() {
    let limits = XmlLimits::default();
    // Every prefix of a valid document, and every byte replaced by a
    // character the grammar gives meaning to.
    for end in 0..CREATE.len() {
        if CREATE.is_char_boundary(end) {
            let _ =
                parse_document(&CREATE[..end], &limits).map(|top| top.iter().map(to_item).count());
        }
    }
    for (at, _) in CREATE.char_indices().step_by(7) {
        for c in ['<', '>', '"', '/', '&', '=', 'x', '!', '?', '\u{e9}'] {
            let mut mutated = CREATE.to_owned();
            let len = mutated[at..].chars().next().map_or(0, char::len_utf8);
            mutated.replace_range(at..at + len, &c.to_string());
            if let Ok(top) = parse_document(&mutated, &limits) {
                for element in &top {
                    let _ = to_item(element);
                }
            }
        }
    }
    for (bad, what) in [
        ("<A>", "unclosed element"),
        ("<A></B>", "end tag does not match its start tag"),
        ("</A>", "end tag without a start tag"),
        ("<A x=1/>", "attribute value not quoted"),
        ("<A x='1' x='2'/>", "duplicate attribute"),
        ("<A>text</A>", "text content is not part of TTLV-XML"),
        ("<!DOCTYPE A [<!ENTITY e 'x'>]><A/>", "document types and CDATA are not accepted"),
        ("<A x='&e;'/>", "bad character reference"),
        ("<A x='&#xD800;'/>", "bad character reference"),
    ] {
        match parse_document(bad, &limits) {
            Err(TextError::Syntax { what: found, .. }) => assert_eq!(found, what, "{bad:?}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let unknown = parse_document("<NoSuchTag/>", &limits).unwrap();
    assert!(matches!(to_item(&unknown[0]), Err(TextError::UnknownTag(_))));
    for (element, value) in [
        ("ObjectType type=\"Enumeration\"", "NoSuchType"),
        ("BatchCount type=\"Integer\"", "Encrypt"),
        ("Data type=\"ByteString\"", "abc"),
        ("Fresh type=\"Boolean\"", "yes"),
        ("InitialDate type=\"DateTime\"", "$NOW"),
        ("LeaseTime type=\"Interval\"", "-1"),
    ] {
        let doc = format!("<{element} value=\"{value}\"/>");
        let top = parse_document(&doc, &limits).unwrap();
        assert!(matches!(to_item(&top[0]), Err(TextError::BadValue { .. })), "{doc}");
    }
    let typed = parse_document("<Data type=\"Blob\"/>", &limits).unwrap();
    assert!(matches!(to_item(&typed[0]), Err(TextError::UnknownType { .. })));
    let nested = parse_document("<Data type=\"ByteString\"><Data/></Data>", &limits).unwrap();
    assert!(matches!(to_item(&nested[0]), Err(TextError::ChildrenInPrimitive { .. })));
}

#[test]
fn documents_over_the_limits_are_refused_as_they_are_read() {
    let small = XmlLimits { max_len: 64, max_depth: 3, max_elements: 4 };
    assert!(matches!(
        parse_document(&" ".repeat(65), &small),
        Err(TextError::TooLong { len: 65, max: 64 })
    ));
    assert!(matches!(
        parse_document("<A><A><A><A/></A></A></A>", &small),
        Err(TextError::TooDeep { max: 3 })
    ));
    assert!(matches!(
        parse_document("<A/><A/><A/><A/><A/>", &small),
        Err(TextError::TooManyElements { max: 4 })
    ));
    // A deep document within the default limits is read without recursion.
    let deep = format!("{}{}", "<A>".repeat(32), "</A>".repeat(32));
    assert!(parse_document(&deep, &XmlLimits::default()).is_ok());
}
