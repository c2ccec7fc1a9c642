//! The mandatory test cases of the OASIS KMIP Profiles replayed against a
//! real `kms serve` over mTLS, on SQLite and (when `RAMPART_TEST_PG_URL`
//! is set) on PostgreSQL.
//!
//! The corpus under `kmip/conformance/<version>/<profile>/` is the XML of
//! "Key Management Interoperability Protocol Profiles Version 1.4" (OASIS
//! Standard, 22 November 2017, test-cases/kmip-v1.4/mandatory/) and
//! "... Version 2.1" (OASIS Standard, 14 December 2020,
//! test-cases/kmip-v2.1/mandatory/), each file as published with its
//! OASIS notice (taken from the copies kept in github.com/Cosmian/kmip).
//!
//! A case is its requests sent in order on one connection, each response
//! compared field by field with the published one. Placeholders follow
//! the profiles' conventions: a `$NAME` in a response binds NAME to what
//! the server answered there (or, once bound, must equal it), a `$NAME`
//! in a request sends the bound value, `$NOW` (optionally `+N`/`-N`
//! seconds) is the current time in requests and any time in responses.
//! Besides placeholders, only what the capturing server chose freely is
//! not compared: a Result Message's text (vendor-specific, and optional),
//! the Vendor Identification and Server Information a Query returns (the
//! capturing server's own), a Server Correlation Value (optional, and the
//! capturing server's own), and the Key Material and Digest Value of an
//! object the server generated in the case (Create, Re-key...), which
//! the capturing server drew at random, with the Data, MAC Data and tags
//! of operations under such a key, as it drew the Data an RNG Retrieve
//! answers and the IV (with the Data under it) of an Encrypt that asked
//! for a random IV, and that object's Random Number Generator beyond
//! naming an RNG Algorithm (which generator drew it is the server's own).
//! Items are matched by tag
//! regardless of order, since the profiles list attributes in the
//! capturing server's order; an item the server sends that the case does
//! not list is a difference, except those the specification and the
//! profiles' "Permitted Test Case Variations" let a server add (see
//! `compare_children`): attributes beyond those the response notes, and
//! in a Query answer Operations, Object Types, Extensions and Application
//! Namespaces, which may also be absent unless the profile requires them
//! (an Operation or Object Type the profile's mandatory cases send).
//!
//! The HTTPS, XML and JSON Server profiles' cases travel as KMIP over
//! HTTPS does: each request `POST /kmip` on the KMIP port, in TTLV, XML
//! or JSON, the response headers checked as the profiles require.
//!
//! Which cases must pass: those of the profiles the server claims in its
//! Query Profiles answer. Every other case is run too and its outcome
//! must be the one recorded in `kmip/conformance/status.txt`, so a case
//! that starts passing (or stops) fails the test until it is recorded:
//! `RAMPART_CONFORMANCE_RECORD=DIR` writes each case's status line to
//! `DIR/<case>` instead of failing on a change (`cat DIR/* > status.txt`),
//! and `RAMPART_CONFORMANCE_KEEP_GOING=1` reports every failing exchange
//! of a case, not only the first.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rampart_kmip::json;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Fields, Item, ItemType, Value};
use rampart_kmip::xml::{self, Element, XmlLimits};
use rampart_kmip::Limits;
use rampart_kms::testing::{TestDeployment, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{PgCluster, TempDir};
use crate::kmip_support::{connect, Tls};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kmip/conformance")
}

/// The outcome of one case on one store.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    passed: bool,
    /// The first difference, in one line ("" when passed).
    reason: String,
    /// Every difference of the first failing exchange, one a line.
    detail: String,
}

/// One request or response of a case, as published.
struct Exchange {
    request: Element,
    response: Element,
}

fn read_case(path: &Path) -> Vec<Exchange> {
    let text = std::fs::read_to_string(path).unwrap();
    let top = xml::parse_document(&text, &XmlLimits::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(top.len(), 1, "{}: one <KMIP> element", path.display());
    let messages = &top[0].children;
    assert!(messages.len() % 2 == 0, "{}: requests and responses in pairs", path.display());
    messages
        .chunks(2)
        .map(|pair| {
            assert_eq!(pair[0].name, "RequestMessage", "{}", path.display());
            assert_eq!(pair[1].name, "ResponseMessage", "{}", path.display());
            Exchange { request: pair[0].clone(), response: pair[1].clone() }
        })
        .collect()
}

/// What the placeholders of a case are bound to (XML value texts), and
/// the objects the server generated in it.
#[derive(Debug, Clone, Default)]
struct Bindings {
    values: HashMap<String, String>,
    /// Unique Identifiers that Create, Create Key Pair, Re-key, Derive
    /// Key... answered: their key material is the server's own.
    generated: HashSet<String>,
    /// Whether the structure being compared describes one of those.
    inside_generated: bool,
    /// Whether the batch item being compared is an RNG Retrieve, whose
    /// Data the server draws at random, or an Encrypt with a drawn IV.
    inside_random: bool,
    /// Whether the batch item being compared is a Query's.
    inside_query: bool,
    /// Whether the case has named a randomized RSA padding (OAEP, PKCS#1
    /// v1.5), under which an Encrypt's ciphertext is the server's draw.
    randomized_padding: bool,
    /// The operations and object types the profile requires (see
    /// [`required_by_profile`]).
    required: std::sync::Arc<HashSet<String>>,
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// `$NOW`, `$NOW+N`, `$NOW-N`: the offset in seconds.
fn now_offset(placeholder: &str) -> Option<i64> {
    let rest = placeholder.strip_prefix("$NOW")?;
    if rest.is_empty() {
        return Some(0);
    }
    let (sign, digits) = match rest.as_bytes()[0] {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => return None,
    };
    digits.parse::<i64>().ok().map(|n| sign * n)
}

/// The request with its placeholders replaced, or the placeholder that
/// nothing bound.
fn bind_request(element: &Element, bindings: &Bindings) -> Result<Element, String> {
    let mut out = element.clone();
    if let Some(value) = element.attribute("value") {
        if value.starts_with('$') {
            let bound = match now_offset(value) {
                Some(offset) => xml::format_date_time(now() + offset, None),
                None => bindings
                    .values
                    .get(value)
                    .cloned()
                    .ok_or_else(|| format!("request needs {value}, which no response bound"))?,
            };
            out.set_attribute("value", bound);
        }
    }
    out.children =
        element.children.iter().map(|c| bind_request(c, bindings)).collect::<Result<_, _>>()?;
    Ok(out)
}

/// Not compared: chosen freely by the capturing server (see the module
/// comment).
fn variable(tag: Tag) -> bool {
    tag == Tag::RESULT_MESSAGE
        || tag == Tag::VENDOR_IDENTIFICATION
        || tag == Tag::SERVER_INFORMATION
        || xml::tag_name(tag) == Some("Server Correlation Value")
}

/// Not compared in what describes an object the server generated: its key
/// material and digest, which the capturing server drew at random, what a
/// cryptographic operation under that key answered (Data, MAC Data, tag),
/// which depends on them, and its Random Number Generator beyond its RNG
/// Algorithm being named (the capturing server's generator is its own).
fn generated_value(tag: Tag) -> bool {
    tag == Tag::KEY_MATERIAL
        || xml::tag_name(tag) == Some("Digest Value")
        || tag == Tag::DATA
        || tag == Tag::MAC_DATA
        || tag == Tag::AUTHENTICATED_ENCRYPTION_TAG
}

const GENERATING: [&str; 7] = [
    "Create",
    "CreateKeyPair",
    "ReKey",
    "ReKeyKeyPair",
    "DeriveKey",
    "CreateSplitKey",
    "JoinSplitKey",
];

/// The identifiers a response's generating operations answered.
fn generated_ids(response: &Item, out: &mut HashSet<String>) {
    let Ok(fields) = Fields::of(response) else { return };
    for batch in fields.all(Tag::BATCH_ITEM) {
        let Ok(f) = Fields::of(batch) else { continue };
        let op = f.optional(Tag::OPERATION).ok().flatten().and_then(|o| xml::value_text(o, None));
        if !op.is_some_and(|op| GENERATING.contains(&op.as_str())) {
            continue;
        }
        let Some(payload) = f.optional(Tag::RESPONSE_PAYLOAD).ok().flatten() else { continue };
        let mut ids = Vec::new();
        for name in
            ["Unique Identifier", "Private Key Unique Identifier", "Public Key Unique Identifier"]
        {
            collect(payload, xml::tag_by_name(name).unwrap(), &mut ids);
        }
        out.extend(ids.iter().filter_map(|i| i.as_text().ok()).map(str::to_owned));
    }
}

/// The expected element against the actual item: the differences, each
/// one line naming the path. Binds unbound placeholders as it goes.
fn compare(
    expected: &Element,
    actual: &Item,
    context: Option<&str>,
    path: &str,
    bindings: &mut Bindings,
    diffs: &mut Vec<String>,
) {
    let name = expected
        .children
        .iter()
        .find(|c| xml::tag_by_name(&c.name) == Some(Tag::ATTRIBUTE_NAME))
        .and_then(|c| c.attribute("value"));
    let path = match name {
        Some(name) => format!("{path}/{}[{name}]", expected.name),
        None => format!("{path}/{}", expected.name),
    };
    let Some(tag) = xml::tag_by_name(&expected.name) else {
        diffs.push(format!("{path}: unknown tag in the test case"));
        return;
    };
    if tag != actual.tag {
        diffs.push(format!("{path}: expected this item, got {}", xml::element_name(actual.tag)));
        return;
    }
    let expected_type = match expected.attribute("type") {
        None => ItemType::Structure,
        Some(t) => match xml::type_by_name(t) {
            Some(t) => t,
            None => {
                diffs.push(format!("{path}: unknown type {t:?} in the test case"));
                return;
            }
        },
    };
    let actual_type = actual.value.item_type();
    if expected_type != actual_type {
        diffs.push(format!(
            "{path}: expected a {}, got a {}",
            xml::type_name(expected_type),
            xml::type_name(actual_type)
        ));
        return;
    }
    if variable(tag) && expected_type == ItemType::Structure {
        return;
    }
    // A placeholder there still binds what the server answered.
    let placeholder = expected.attribute("value").is_some_and(|v| v.starts_with('$'));
    if bindings.inside_generated && generated_value(tag) && !placeholder {
        return;
    }
    let rng = tag == xml::tag_by_name("Random Number Generator").unwrap()
        || tag == Tag::ATTRIBUTE_VALUE && context == Some("Random Number Generator");
    if bindings.inside_generated && rng && expected_type == ItemType::Structure {
        // The generator of an object the server generated is the
        // capturing server's own: that one is named is what is compared.
        let rng_algorithm = xml::tag_by_name("RNG Algorithm");
        if !actual.children().is_ok_and(|c| c.iter().any(|i| Some(i.tag) == rng_algorithm)) {
            diffs.push(format!("{path}: no RNG Algorithm"));
        }
        return;
    }
    if bindings.inside_random && (tag == Tag::DATA || tag == Tag::IV_COUNTER_NONCE) && !placeholder
    {
        return;
    }
    if let Value::Structure(children) = &actual.value {
        let outer = (bindings.inside_generated, bindings.inside_random, bindings.inside_query);
        bindings.inside_generated |= children.iter().any(|c| {
            c.tag == Tag::UNIQUE_IDENTIFIER
                && c.as_text().is_ok_and(|id| bindings.generated.contains(id))
        });
        let operation = (tag == Tag::BATCH_ITEM)
            .then(|| children.iter().find(|c| c.tag == Tag::OPERATION))
            .flatten()
            .and_then(|c| xml::value_text(c, None));
        bindings.inside_random |= operation.as_deref() == Some("RNGRetrieve")
            || bindings.randomized_padding && operation.as_deref() == Some("Encrypt");
        bindings.inside_query |= operation.as_deref() == Some("Query");
        // An Encrypt answering an IV/Counter/Nonce drew it (a given one is
        // not returned): its Data and IV are the server's random choice.
        bindings.inside_random |= tag == Tag::RESPONSE_PAYLOAD
            && children.iter().any(|c| c.tag == Tag::IV_COUNTER_NONCE)
            && children.iter().any(|c| c.tag == Tag::DATA);
        compare_children(expected, children, &path, bindings, diffs);
        (bindings.inside_generated, bindings.inside_random, bindings.inside_query) = outer;
        return;
    }
    let text = expected.attribute("value").unwrap_or("");
    let got = xml::value_text(actual, context).unwrap_or_default();
    if text.starts_with('$') {
        if now_offset(text).is_some() {
            return;
        }
        match bindings.values.get(text) {
            Some(bound) if *bound == got => {}
            Some(bound) => diffs.push(format!("{path}: {text} is {bound:?}, got {got:?}")),
            None => {
                bindings.values.insert(text.to_owned(), got);
            }
        }
        return;
    }
    if variable(tag) {
        return;
    }
    match xml::parse_value(tag, expected_type, text, context) {
        Ok(value) if value == actual.value => {}
        Ok(_) => diffs.push(format!("{path}: expected {text:?}, got {got:?}")),
        Err(e) => diffs.push(format!("{path}: the test case's value does not read: {e}")),
    }
}

/// The Attribute Name an Attribute carries, which pairs it up.
/// Only an Attribute is paired by its name: a 1.x Get Attribute List
/// answer is a payload of many Attribute Names.
fn attribute_key(item: &Item) -> Option<String> {
    if item.tag != Tag::ATTRIBUTE {
        return None;
    }
    let f = Fields::of(item).ok()?;
    Some(f.optional(Tag::ATTRIBUTE_NAME).ok()??.as_text().ok()?.to_owned())
}

fn expected_key(element: &Element) -> Option<String> {
    if xml::tag_by_name(&element.name) != Some(Tag::ATTRIBUTE) {
        return None;
    }
    element
        .children
        .iter()
        .find(|c| xml::tag_by_name(&c.name) == Some(Tag::ATTRIBUTE_NAME))
        .and_then(|c| c.attribute("value"))
        .map(str::to_owned)
}

/// A structure's items, matched by tag in any order: first every expected
/// item that some unused actual item matches whole, then each remaining
/// one with the closest unused item of its tag (and Attribute Name), to
/// report how it differs.
fn compare_children(
    expected: &Element,
    actual: &[Item],
    path: &str,
    bindings: &mut Bindings,
    diffs: &mut Vec<String>,
) {
    let attribute_name = expected_key(expected);
    let context = attribute_name.as_deref();
    let mut used = vec![false; actual.len()];
    let mut pairs: Vec<Option<usize>> = vec![None; expected.children.len()];
    let candidates = |child: &Element, used: &[bool]| -> Vec<usize> {
        let tag = xml::tag_by_name(&child.name);
        let key = expected_key(child);
        (0..actual.len())
            .filter(|&i| !used[i] && Some(actual[i].tag) == tag)
            .filter(|&i| key.is_none() || attribute_key(&actual[i]) == key)
            .collect()
    };
    for (n, child) in expected.children.iter().enumerate() {
        let whole = candidates(child, &used).into_iter().find(|&i| {
            let mut trial = bindings.clone();
            let mut trial_diffs = Vec::new();
            compare(child, &actual[i], context, path, &mut trial, &mut trial_diffs);
            if trial_diffs.is_empty() {
                *bindings = trial;
            }
            trial_diffs.is_empty()
        });
        if let Some(i) = whole {
            used[i] = true;
            pairs[n] = Some(i);
        }
    }
    for (n, child) in expected.children.iter().enumerate() {
        if pairs[n].is_some() || may_be_absent_from_query(child, bindings) {
            continue;
        }
        let closest = candidates(child, &used).into_iter().min_by_key(|&i| {
            let mut trial = bindings.clone();
            let mut trial_diffs = Vec::new();
            compare(child, &actual[i], context, path, &mut trial, &mut trial_diffs);
            trial_diffs.len()
        });
        let tag = xml::tag_by_name(&child.name);
        match closest {
            Some(i) => {
                used[i] = true;
                compare(child, &actual[i], context, path, bindings, diffs);
            }
            None if tag.is_some_and(variable) => {}
            None => match expected_key(child) {
                Some(key) => diffs.push(format!("{path}/{}[{key}]: missing", child.name)),
                None => diffs.push(format!("{path}/{}: missing", child.name)),
            },
        }
    }
    for (item, _) in actual.iter().zip(&used).filter(|(_, &u)| !u) {
        // What the specification lets a server add at its discretion: an
        // Attribute Index of 0 (KMIP 1.x, the default), a Result Message,
        // and Located Items, which a server "MAY elect to return ... even
        // if Offset Items is not present" (KMIP 1.4 §4.9, 2.1 §6.1.28).
        if item.tag == Tag::ATTRIBUTE_INDEX && item.value == Value::Integer(0)
            || item.tag == Tag::RESULT_MESSAGE
            || item.tag == Tag::LOCATED_ITEMS
            || bindings.inside_query
                && QUERY_VARIABLE.iter().any(|n| xml::tag_name(item.tag) == Some(n))
            || additional_attribute(xml::tag_by_name(&expected.name), item.tag)
        {
            continue;
        }
        let what = match attribute_key(item) {
            Some(key) => format!("{}[{key}]", xml::element_name(item.tag)),
            None => xml::element_name(item.tag),
        };
        let text = xml::value_text(item, context).map_or_else(String::new, |v| format!(" = {v:?}"));
        diffs.push(format!("{path}/{what}: not expected{text}"));
    }
}

/// How a case's messages travel: binary TTLV on the KMIP connection, or
/// (the HTTPS, XML and JSON Server profiles) `POST /kmip` on it in the
/// profile's encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Ttlv,
    Https,
    HttpsXml,
    HttpsJson,
}

impl Transport {
    fn of(profile: &str) -> Self {
        match profile {
            "MSGENC-HTTPS" => Self::Https,
            "MSGENC-XML" => Self::HttpsXml,
            "MSGENC-JSON" => Self::HttpsJson,
            _ => Self::Ttlv,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::Ttlv | Self::Https => "application/octet-stream",
            Self::HttpsXml => "text/xml",
            Self::HttpsJson => "application/json",
        }
    }
}

/// What a Query answer may list beyond (or instead of) what the capturing
/// server listed: the "Permitted Test Case Variations" of the KMIP
/// Profiles (Variable Items) let Object Types and Operations other than
/// those the profile requires vary, and Extensions and Application
/// Namespaces too.
const QUERY_VARIABLE: [&str; 4] =
    ["Operation", "Object Type", "Application Namespace", "Extension Information"];

/// Whether an expected item of a Query answer may be missing: one of
/// [`QUERY_VARIABLE`] that the profile does not require.
fn may_be_absent_from_query(expected: &Element, bindings: &Bindings) -> bool {
    if !bindings.inside_query {
        return false;
    }
    let Some(name) = xml::tag_by_name(&expected.name).and_then(xml::tag_name) else {
        return false;
    };
    match name {
        "Operation" | "Object Type" => {
            !expected.attribute("value").is_some_and(|v| bindings.required.contains(v))
        }
        "Application Namespace" | "Extension Information" => true,
        _ => false,
    }
}

/// Whether an item a server sends beyond the published response is one of
/// the "additional attributes beyond those noted in the response" the
/// Permitted Test Case Variations allow: an Attribute (or Attribute Name)
/// of a KMIP 1.x response payload, or anything in a 2.x Attributes
/// structure or Get Attribute List's Attribute References.
fn additional_attribute(parent: Option<Tag>, item: Tag) -> bool {
    match parent {
        Some(Tag::RESPONSE_PAYLOAD) => {
            item == Tag::ATTRIBUTE
                || item == Tag::ATTRIBUTE_NAME
                || xml::tag_name(item) == Some("Attribute Reference")
        }
        Some(parent) => xml::tag_name(parent) == Some("Attributes"),
        None => false,
    }
}

/// The operations and object types a profile requires, as far as the
/// replayer can tell: every Operation and Object Type its mandatory cases
/// (of `version_dir`) send.
fn required_by_profile(version_dir: &Path) -> HashSet<String> {
    let mut out = HashSet::new();
    fn walk(element: &Element, out: &mut HashSet<String>) {
        if matches!(element.name.as_str(), "Operation" | "ObjectType") {
            if let Some(v) = element.attribute("value") {
                out.insert(v.to_owned());
            }
        }
        element.children.iter().for_each(|c| walk(c, out));
    }
    for case in CASES.iter().filter(|c| Path::new(c).parent() == Some(version_dir)) {
        for exchange in read_case(&corpus().join(case)) {
            walk(&exchange.request, &mut out);
        }
    }
    out
}

async fn exchange(tls: &mut Tls, transport: Transport, request: &Item) -> Result<Item, String> {
    let bytes = request.encode().map_err(|e| e.to_string())?;
    let run = async {
        if transport != Transport::Ttlv {
            return http_exchange(tls, transport, request, &bytes).await;
        }
        tls.write_all(&bytes).await.map_err(|e| format!("sending: {e}"))?;
        let mut header = [0u8; 8];
        tls.read_exact(&mut header).await.map_err(|e| format!("reading the response: {e}"))?;
        let len = ttlv::message_len(&header, &Limits::default()).map_err(|e| e.to_string())?;
        let mut message = vec![0u8; len];
        message[..8].copy_from_slice(&header);
        tls.read_exact(&mut message[8..])
            .await
            .map_err(|e| format!("reading the response: {e}"))?;
        ttlv::decode(&message, &Limits::default()).map_err(|e| e.to_string())
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .unwrap_or_else(|_| Err("no response within 30 s".to_owned()))
}

/// One HTTP/1.1 exchange as KMIP Additional Message Encodings §2.4 has a
/// client send it, checking the response headers §2.5 requires.
async fn http_exchange(
    tls: &mut Tls,
    transport: Transport,
    request: &Item,
    ttlv_bytes: &[u8],
) -> Result<Item, String> {
    let body = match transport {
        Transport::HttpsXml => xml::to_xml(request).into_bytes(),
        Transport::HttpsJson => json::to_json(request).into_bytes(),
        _ => ttlv_bytes.to_vec(),
    };
    let head = format!(
        "POST /kmip HTTP/1.1\r\nHost: localhost\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Cache-Control: no-cache\r\n\r\n",
        transport.content_type(),
        body.len()
    );
    tls.write_all(head.as_bytes()).await.map_err(|e| format!("sending: {e}"))?;
    tls.write_all(&body).await.map_err(|e| format!("sending: {e}"))?;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        tls.read_exact(&mut byte).await.map_err(|e| format!("reading the response: {e}"))?;
        head.push(byte[0]);
        if head.len() > 16 << 10 {
            return Err("HTTP response headers over 16 KiB".into());
        }
    }
    let head = String::from_utf8(head).map_err(|_| "HTTP response headers not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    if !status.starts_with("HTTP/1.1 200 ") {
        return Err(format!("HTTP status {status:?}, not 200"));
    }
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    if headers.get("content-type").map(String::as_str) != Some(transport.content_type()) {
        return Err(format!(
            "Content-Type {:?}, not {}",
            headers.get("content-type"),
            transport.content_type()
        ));
    }
    if headers.get("cache-control").map(String::as_str) != Some("no-cache") {
        return Err(format!("Cache-Control {:?}, not no-cache", headers.get("cache-control")));
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .ok_or("no Content-Length in the HTTP response")?;
    let mut body = vec![0u8; len];
    tls.read_exact(&mut body).await.map_err(|e| format!("reading the response: {e}"))?;
    match transport {
        Transport::HttpsXml => {
            let text = String::from_utf8(body).map_err(|_| "XML response not UTF-8")?;
            let top =
                xml::parse_document(&text, &XmlLimits::default()).map_err(|e| e.to_string())?;
            let [message] = top.as_slice() else {
                return Err("XML response not one element".into());
            };
            xml::to_item(message).map_err(|e| e.to_string())
        }
        Transport::HttpsJson => {
            let text = String::from_utf8(body).map_err(|_| "JSON response not UTF-8")?;
            json::from_json(&text, &XmlLimits::default()).map_err(|e| e.to_string())
        }
        _ => ttlv::decode(&body, &Limits::default()).map_err(|e| e.to_string()),
    }
}

/// The operation of a published request, for messages.
/// Whether any element under `element` is a Padding Method of randomized
/// RSA encryption.
fn randomized_padding(element: &Element) -> bool {
    element.children.iter().any(|c| {
        c.name == "PaddingMethod" && matches!(c.attribute("value"), Some("OAEP" | "PKCS1_v1_5"))
            || randomized_padding(c)
    })
}

fn operation_of(request: &Element) -> String {
    request
        .children
        .iter()
        .filter(|c| c.name == "BatchItem")
        .filter_map(|b| b.children.iter().find(|c| c.name == "Operation"))
        .filter_map(|o| o.attribute("value"))
        .collect::<Vec<_>>()
        .join("+")
}

/// Replays one case on a server; the outcome.
/// `generated`: the objects the server generated, in this case and in the
/// earlier ones it works on (whose key material is as much the server's).
async fn replay(
    server: &TestServer,
    exchanges: &[Exchange],
    transport: Transport,
    required: &std::sync::Arc<HashSet<String>>,
    generated: &mut HashSet<String>,
) -> Outcome {
    // RAMPART_CONFORMANCE_KEEP_GOING: on past a failing exchange, to see
    // everything a case still needs (the outcome stays the first failure's).
    let keep_going = std::env::var_os("RAMPART_CONFORMANCE_KEEP_GOING").is_some();
    let endpoint = server.kmip.clone().unwrap();
    let mut tls = connect(&server.admin, &endpoint, &rustls::version::TLS13).await;
    let mut bindings = Bindings {
        required: required.clone(),
        generated: std::mem::take(generated),
        ..Bindings::default()
    };
    let mut outcome = Outcome { passed: true, reason: String::new(), detail: String::new() };
    let mut fail = |reason: String, detail: String| {
        if outcome.passed {
            outcome.passed = false;
            outcome.reason = reason.clone();
        }
        outcome.detail.push_str(&format!("{reason}\n{detail}"));
    };
    for (n, step) in exchanges.iter().enumerate() {
        let what = format!("exchange {} ({})", n + 1, operation_of(&step.request));
        let request = match bind_request(&step.request, &bindings)
            .and_then(|r| xml::to_item(&r).map_err(|e| e.to_string()))
        {
            Ok(item) => item,
            Err(e) => {
                fail(format!("{what}: {e}"), String::new());
                break;
            }
        };
        let response = match exchange(&mut tls, transport, &request).await {
            Ok(item) => item,
            Err(e) => {
                fail(format!("{what}: {e}"), String::new());
                break;
            }
        };
        generated_ids(&response, &mut bindings.generated);
        // The padding is often the key's: named once, at its Register.
        bindings.randomized_padding |= randomized_padding(&step.request);
        let mut diffs = Vec::new();
        compare(&step.response, &response, None, "", &mut bindings, &mut diffs);
        if !diffs.is_empty() {
            let detail =
                format!("  {}\nresponse received:\n{}", diffs.join("\n  "), xml::to_xml(&response));
            fail(format!("{what}: {}", summary(&diffs, &response)), detail);
            if !keep_going {
                break;
            }
        }
    }
    *generated = bindings.generated;
    outcome
}

/// One line for the status file: the server's Result Reason when it
/// refused something, else the first difference; nothing that changes
/// from run to run (identifiers, times).
fn summary(diffs: &[String], response: &Item) -> String {
    let mut failures = Vec::new();
    if let Ok(fields) = Fields::of(response) {
        for batch in fields.all(Tag::BATCH_ITEM) {
            let Ok(f) = Fields::of(batch) else { continue };
            let reason = f.optional(Tag::RESULT_REASON).ok().flatten();
            let op = f.optional(Tag::OPERATION).ok().flatten();
            if let Some(reason) = reason {
                let op = op.and_then(|o| xml::value_text(o, None)).unwrap_or_default();
                let reason = xml::value_text(reason, None).unwrap_or_default();
                failures.push(format!("{op} answered {reason}"));
            }
        }
    }
    let first = diffs
        .first()
        .map(|d| stable(d.trim_start_matches("/ResponseMessage/")))
        .unwrap_or_default();
    if failures.is_empty() {
        first
    } else {
        format!("{}; {first}", failures.join(", "))
    }
}

/// A difference without the values that vary between runs.
fn stable(diff: &str) -> String {
    match diff.find(", got ") {
        Some(at) if diff.contains("$") || diff.contains("Date") || diff.contains("Identifier") => {
            diff[..at].to_owned()
        }
        _ => diff.to_owned(),
    }
}

/// A deployment for one case: its own directory and store, so cases never
/// see each other's objects.
async fn deployment(tag: &str, pg: Option<&PgCluster>) -> (TestServer, TempDir) {
    let temp = TempDir::new(&format!("conf-{tag}"));
    let url = pg.map(|c| c.database(&format!("conf_{}", tag.replace('-', "_").to_lowercase())));
    let how = TestDeployment { store_url: url.as_deref(), kmip: true, ..TestDeployment::default() };
    // The BL cases open and close with Interop, which a server answers only
    // when started for interop testing.
    let server =
        TestServer::start(&temp.path().join("data"), &how, |o| o.kmip_interop = true).await;
    (server, temp)
}

/// The profile a case belongs to (`SKLC`, `CS-BC`, ...), from its file
/// name.
fn profile_of(case: &str) -> &str {
    case.split("-M-").next().unwrap()
}

/// Each profile of the corpus and how its Profile Name starts.
const PROFILE_NAMES: [(&str, &str); 18] = [
    ("BL", "Baseline Server"),
    ("SKLC", "Symmetric Key Lifecycle Server"),
    ("AKLC", "Asymmetric Key Lifecycle Server"),
    ("CS-BC", "Basic Cryptographic Server"),
    ("CS-AC", "Advanced Cryptographic Server"),
    ("CS-RNG", "RNG Cryptographic Server"),
    ("SKFF", "Symmetric Key Foundry Server"),
    ("OMOS", "Opaque Managed Object Store Server"),
    ("SUITEB_128", "Suite B minLOS_128 Server"),
    ("SUITEB_192", "Suite B minLOS_192 Server"),
    ("SASED", "Storage Array with Self Encrypting Drive Server"),
    ("MSGENC-HTTPS", "HTTPS Server"),
    ("MSGENC-JSON", "JSON Server"),
    ("MSGENC-XML", "XML Server"),
    ("AX", "AES XTS Server"),
    ("QS", "Quantum Safe Server"),
    ("PKCS11", "PKCS#11 Server"),
    ("TL", "Tape Library Server"),
];

/// The (version, profile) pairs the server claims in Query Profiles, asked
/// in both protocol versions of the corpus.
async fn claimed_profiles(server: &TestServer) -> Vec<(String, String)> {
    let endpoint = server.kmip.clone().unwrap();
    let mut tls = connect(&server.admin, &endpoint, &rustls::version::TLS13).await;
    let mut claimed = Vec::new();
    for (major, minor) in [(1, 4), (2, 1)] {
        let query = format!(
            r#"<RequestMessage><RequestHeader><ProtocolVersion>
            <ProtocolVersionMajor type="Integer" value="{major}"/>
            <ProtocolVersionMinor type="Integer" value="{minor}"/></ProtocolVersion>
            <BatchCount type="Integer" value="1"/></RequestHeader>
            <BatchItem><Operation type="Enumeration" value="Query"/><RequestPayload>
            <QueryFunction type="Enumeration" value="QueryProfiles"/>
            </RequestPayload></BatchItem></RequestMessage>"#
        );
        let request = xml::parse_document(&query, &XmlLimits::default()).unwrap();
        let request = xml::to_item(&request[0]).unwrap();
        let response = exchange(&mut tls, Transport::Ttlv, &request).await.unwrap();
        let mut names = Vec::new();
        collect(&response, xml::tag_by_name("Profile Name").unwrap(), &mut names);
        claimed.extend(names.iter().filter_map(|n| n.as_enum().ok()).flat_map(profiles_named));
    }
    claimed
}

/// The (version, profile) pairs of the corpus a Profile Name value
/// stands for: KMIP 1.x names carry their version, 2.x names apply to 2.1.
fn profiles_named(value: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for text in xml::enumeration_names("Profile Name", value) {
        let version = if text.ends_with("KMIP v1.4") {
            "1.4"
        } else if text.contains("KMIP v1.") {
            continue;
        } else {
            "2.1"
        };
        for (profile, fragment) in PROFILE_NAMES {
            if text.starts_with(fragment) {
                out.push((version.to_owned(), profile.to_owned()));
            }
        }
    }
    out
}

#[test]
fn profile_names_map_to_the_profiles_of_the_corpus() {
    let pair = |v: &str, p: &str| vec![(v.to_owned(), p.to_owned())];
    // Symmetric Key Lifecycle Server KMIP v1.4, and its KMIP 2.x name.
    assert_eq!(profiles_named(0x82), pair("1.4", "SKLC"));
    assert_eq!(profiles_named(0x109), pair("2.1", "SKLC"));
    assert_eq!(profiles_named(0x12B), pair("2.1", "BL"));
    assert_eq!(profiles_named(0x86), pair("1.4", "CS-BC"));
    // Baseline Server Basic KMIP v1.2: no case of the corpus.
    assert_eq!(profiles_named(0x01), vec![]);
    // A client profile claims nothing for a server.
    assert_eq!(profiles_named(0x108), vec![]);
    // Every profile of the corpus has a name.
    for dir in ["1.4", "2.1"] {
        for profile in std::fs::read_dir(corpus().join(dir)).unwrap() {
            let name = profile.unwrap().file_name().into_string().unwrap();
            assert!(PROFILE_NAMES.iter().any(|(p, _)| *p == name), "{name}");
        }
    }
}

fn collect<'a>(item: &'a Item, tag: Tag, out: &mut Vec<&'a Item>) {
    if item.tag == tag {
        out.push(item);
    }
    if let Value::Structure(children) = &item.value {
        children.iter().for_each(|c| collect(c, tag, out));
    }
}

/// `status.txt`: case -> (pass or fail, reason).
fn recorded() -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(corpus().join("status.txt")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let case = parts.next().unwrap().to_owned();
            let status = parts.next().unwrap_or("").to_owned();
            (case, (status, parts.next().unwrap_or("").trim().to_owned()))
        })
        .collect()
}

fn status_line(case: &str, outcome: &Outcome) -> String {
    if outcome.passed {
        format!("{case} pass\n")
    } else {
        format!("{case} fail {}\n", outcome.reason.replace('\n', " "))
    }
}

/// Runs the case in `VERSION/PROFILE/FILE` on each store and checks it
/// against what the server claims and what `status.txt` records.
async fn run_case(relative: &str) {
    let path = corpus().join(relative);
    let case = path.file_stem().unwrap().to_str().unwrap().to_owned();
    let version = relative.split('/').next().unwrap().to_owned();
    let exchanges = read_case(&path);
    // A case that starts by locating works on what the earlier cases of its
    // profile left (TL-M-3 on TL-M-2's keys, SASED-M-3 on SASED-M-2's):
    // those run first on the same server, their outcomes their own tests'.
    let starts_with_locate = operation_of(&exchanges[0].request).starts_with("Locate");
    let directory = Path::new(relative).parent().unwrap();
    let prerequisites: Vec<&str> = CASES
        .iter()
        .take_while(|c| **c != relative)
        .filter(|c| starts_with_locate && Path::new(c).parent() == Some(directory))
        .copied()
        .collect();
    let required = std::sync::Arc::new(required_by_profile(directory));
    let mut outcomes = Vec::new();
    let pg = std::env::var_os("RAMPART_TEST_PG_URL").map(|_| PgCluster::get());
    let mut claimed = false;
    for (store, cluster) in [("SQLite", None), ("PostgreSQL", pg.as_ref())] {
        if store == "PostgreSQL" && cluster.is_none() {
            continue;
        }
        let (server, _temp) = deployment(&case, cluster).await;
        let profiles = claimed_profiles(&server).await;
        claimed |= profiles.contains(&(version.clone(), profile_of(&case).to_owned()));
        let mut generated = HashSet::new();
        for earlier in &prerequisites {
            let earlier = read_case(&corpus().join(earlier));
            replay(&server, &earlier, Transport::Ttlv, &required, &mut generated).await;
        }
        let transport = Transport::of(profile_of(&case));
        outcomes
            .push((store, replay(&server, &exchanges, transport, &required, &mut generated).await));
    }
    let (_, first) = &outcomes[0];
    let line = status_line(&case, first);
    let report = outcomes
        .iter()
        .map(|(store, o)| {
            let verdict = if o.passed { "pass".to_owned() } else { format!("fail: {}", o.reason) };
            format!("{store}: {verdict}\n{}", o.detail)
        })
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(dir) = std::env::var_os("RAMPART_CONFORMANCE_RECORD") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(Path::new(&dir).join(&case), &line).unwrap();
    }
    assert!(
        outcomes.iter().all(|(_, o)| o.passed == first.passed),
        "{case}: the stores disagree\n{report}"
    );
    assert!(
        first.passed || !claimed,
        "{case}: the server claims {} {} in Query Profiles, so this case must pass\n{report}",
        profile_of(&case),
        version
    );
    if std::env::var_os("RAMPART_CONFORMANCE_RECORD").is_some() {
        return;
    }
    let want = recorded().get(&case).map(|(s, _)| s.clone());
    let got = if first.passed { "pass" } else { "fail" };
    assert_eq!(
        want.as_deref(),
        Some(got),
        "{case}: kmip/conformance/status.txt records {want:?}, the case now gives {got}; \
         record it with this line:\n{line}\n{report}"
    );
}

/// Every case file of the corpus has a test below and a line in
/// `status.txt`, and nothing else does.
#[test]
fn every_published_case_is_run_and_recorded() {
    let mut files = Vec::new();
    for version in std::fs::read_dir(corpus()).unwrap() {
        let version = version.unwrap().path();
        if !version.is_dir() {
            continue;
        }
        for profile in std::fs::read_dir(&version).unwrap() {
            for file in std::fs::read_dir(profile.unwrap().path()).unwrap() {
                let file = file.unwrap().path();
                let relative = file.strip_prefix(corpus()).unwrap().to_str().unwrap().to_owned();
                files.push(relative);
            }
        }
    }
    files.sort();
    let mut listed: Vec<String> = CASES.iter().map(|c| (*c).to_owned()).collect();
    listed.sort();
    assert_eq!(files, listed, "the cases below and the files of kmip/conformance/");
    // Every published message reads, so a failing case fails on the server.
    let mut unreadable = Vec::new();
    // PKCS#11 Function and Return Code values are PKCS#11's own, which no
    // KMIP table lists: those cases fail in replay as unreadable.
    for file in files.iter().filter(|f| !f.contains("/PKCS11/")) {
        for step in read_case(&corpus().join(file)) {
            for message in [&step.request, &step.response] {
                if let Err(e) = xml::to_item(&without_placeholders(message)) {
                    unreadable.push(format!("{file}: {}: {e}", message.name));
                }
            }
        }
    }
    assert!(unreadable.is_empty(), "messages that do not read:\n{}", unreadable.join("\n"));
    let stems: Vec<String> = files
        .iter()
        .map(|f| Path::new(f).file_stem().unwrap().to_str().unwrap().to_owned())
        .collect();
    let recorded: Vec<String> = recorded().into_keys().collect();
    let mut sorted_stems = stems.clone();
    sorted_stems.sort();
    assert_eq!(recorded, sorted_stems, "the cases of kmip/conformance/status.txt");
}

/// A message with every placeholder replaced by some value of its type.
fn without_placeholders(element: &Element) -> Element {
    let mut out = element.clone();
    if element.attribute("value").is_some_and(|v| v.starts_with('$')) {
        let stand_in = match element.attribute("type").and_then(xml::type_by_name) {
            Some(ItemType::DateTime | ItemType::DateTimeExtended) => "1970-01-01T00:00:00Z",
            Some(ItemType::ByteString) => "00",
            Some(ItemType::Integer | ItemType::LongInteger | ItemType::Interval) => "0",
            Some(ItemType::Boolean) => "false",
            Some(ItemType::BigInteger) => "00",
            _ => "x",
        };
        out.set_attribute("value", stand_in.to_owned());
    }
    out.children = element.children.iter().map(without_placeholders).collect();
    out
}

macro_rules! cases {
    ($($name:ident => $path:literal,)*) => {
        const CASES: &[&str] = &[$($path,)*];
        mod case {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::run_case($path).await;
                }
            )*
        }
    };
}

// One test a published case: `case::<file name>`.
cases! {
    aklc_m_1_14 => "1.4/AKLC/AKLC-M-1-14.xml",
    aklc_m_2_14 => "1.4/AKLC/AKLC-M-2-14.xml",
    aklc_m_3_14 => "1.4/AKLC/AKLC-M-3-14.xml",
    ax_m_1_14 => "1.4/AX/AX-M-1-14.xml",
    ax_m_2_14 => "1.4/AX/AX-M-2-14.xml",
    cs_ac_m_1_14 => "1.4/CS-AC/CS-AC-M-1-14.xml",
    cs_ac_m_2_14 => "1.4/CS-AC/CS-AC-M-2-14.xml",
    cs_ac_m_3_14 => "1.4/CS-AC/CS-AC-M-3-14.xml",
    cs_ac_m_4_14 => "1.4/CS-AC/CS-AC-M-4-14.xml",
    cs_ac_m_5_14 => "1.4/CS-AC/CS-AC-M-5-14.xml",
    cs_ac_m_6_14 => "1.4/CS-AC/CS-AC-M-6-14.xml",
    cs_ac_m_7_14 => "1.4/CS-AC/CS-AC-M-7-14.xml",
    cs_ac_m_8_14 => "1.4/CS-AC/CS-AC-M-8-14.xml",
    cs_ac_m_oaep_1_14 => "1.4/CS-AC/CS-AC-M-OAEP-1-14.xml",
    cs_ac_m_oaep_2_14 => "1.4/CS-AC/CS-AC-M-OAEP-2-14.xml",
    cs_ac_m_oaep_3_14 => "1.4/CS-AC/CS-AC-M-OAEP-3-14.xml",
    cs_ac_m_oaep_4_14 => "1.4/CS-AC/CS-AC-M-OAEP-4-14.xml",
    cs_ac_m_oaep_5_14 => "1.4/CS-AC/CS-AC-M-OAEP-5-14.xml",
    cs_ac_m_oaep_6_14 => "1.4/CS-AC/CS-AC-M-OAEP-6-14.xml",
    cs_ac_m_oaep_7_14 => "1.4/CS-AC/CS-AC-M-OAEP-7-14.xml",
    cs_ac_m_oaep_8_14 => "1.4/CS-AC/CS-AC-M-OAEP-8-14.xml",
    cs_ac_m_oaep_9_14 => "1.4/CS-AC/CS-AC-M-OAEP-9-14.xml",
    cs_ac_m_oaep_10_14 => "1.4/CS-AC/CS-AC-M-OAEP-10-14.xml",
    cs_bc_m_1_14 => "1.4/CS-BC/CS-BC-M-1-14.xml",
    cs_bc_m_2_14 => "1.4/CS-BC/CS-BC-M-2-14.xml",
    cs_bc_m_3_14 => "1.4/CS-BC/CS-BC-M-3-14.xml",
    cs_bc_m_4_14 => "1.4/CS-BC/CS-BC-M-4-14.xml",
    cs_bc_m_5_14 => "1.4/CS-BC/CS-BC-M-5-14.xml",
    cs_bc_m_6_14 => "1.4/CS-BC/CS-BC-M-6-14.xml",
    cs_bc_m_7_14 => "1.4/CS-BC/CS-BC-M-7-14.xml",
    cs_bc_m_8_14 => "1.4/CS-BC/CS-BC-M-8-14.xml",
    cs_bc_m_9_14 => "1.4/CS-BC/CS-BC-M-9-14.xml",
    cs_bc_m_10_14 => "1.4/CS-BC/CS-BC-M-10-14.xml",
    cs_bc_m_11_14 => "1.4/CS-BC/CS-BC-M-11-14.xml",
    cs_bc_m_12_14 => "1.4/CS-BC/CS-BC-M-12-14.xml",
    cs_bc_m_13_14 => "1.4/CS-BC/CS-BC-M-13-14.xml",
    cs_bc_m_14_14 => "1.4/CS-BC/CS-BC-M-14-14.xml",
    cs_bc_m_gcm_1_14 => "1.4/CS-BC/CS-BC-M-GCM-1-14.xml",
    cs_bc_m_gcm_2_14 => "1.4/CS-BC/CS-BC-M-GCM-2-14.xml",
    cs_bc_m_gcm_3_14 => "1.4/CS-BC/CS-BC-M-GCM-3-14.xml",
    cs_rng_m_1_14 => "1.4/CS-RNG/CS-RNG-M-1-14.xml",
    msgenc_https_m_1_14 => "1.4/MSGENC-HTTPS/MSGENC-HTTPS-M-1-14.xml",
    msgenc_json_m_1_14 => "1.4/MSGENC-JSON/MSGENC-JSON-M-1-14.xml",
    msgenc_xml_m_1_14 => "1.4/MSGENC-XML/MSGENC-XML-M-1-14.xml",
    omos_m_1_14 => "1.4/OMOS/OMOS-M-1-14.xml",
    sased_m_1_14 => "1.4/SASED/SASED-M-1-14.xml",
    sased_m_2_14 => "1.4/SASED/SASED-M-2-14.xml",
    sased_m_3_14 => "1.4/SASED/SASED-M-3-14.xml",
    skff_m_1_14 => "1.4/SKFF/SKFF-M-1-14.xml",
    skff_m_2_14 => "1.4/SKFF/SKFF-M-2-14.xml",
    skff_m_3_14 => "1.4/SKFF/SKFF-M-3-14.xml",
    skff_m_4_14 => "1.4/SKFF/SKFF-M-4-14.xml",
    skff_m_5_14 => "1.4/SKFF/SKFF-M-5-14.xml",
    skff_m_6_14 => "1.4/SKFF/SKFF-M-6-14.xml",
    skff_m_7_14 => "1.4/SKFF/SKFF-M-7-14.xml",
    skff_m_8_14 => "1.4/SKFF/SKFF-M-8-14.xml",
    skff_m_9_14 => "1.4/SKFF/SKFF-M-9-14.xml",
    skff_m_10_14 => "1.4/SKFF/SKFF-M-10-14.xml",
    skff_m_11_14 => "1.4/SKFF/SKFF-M-11-14.xml",
    skff_m_12_14 => "1.4/SKFF/SKFF-M-12-14.xml",
    sklc_m_1_14 => "1.4/SKLC/SKLC-M-1-14.xml",
    sklc_m_2_14 => "1.4/SKLC/SKLC-M-2-14.xml",
    sklc_m_3_14 => "1.4/SKLC/SKLC-M-3-14.xml",
    suiteb_128_m_1_14 => "1.4/SUITEB_128/SUITEB_128-M-1-14.xml",
    suiteb_192_m_1_14 => "1.4/SUITEB_192/SUITEB_192-M-1-14.xml",
    tl_m_1_14 => "1.4/TL/TL-M-1-14.xml",
    tl_m_2_14 => "1.4/TL/TL-M-2-14.xml",
    tl_m_3_14 => "1.4/TL/TL-M-3-14.xml",
    aklc_m_1_21 => "2.1/AKLC/AKLC-M-1-21.xml",
    aklc_m_2_21 => "2.1/AKLC/AKLC-M-2-21.xml",
    aklc_m_3_21 => "2.1/AKLC/AKLC-M-3-21.xml",
    ax_m_1_21 => "2.1/AX/AX-M-1-21.xml",
    ax_m_2_21 => "2.1/AX/AX-M-2-21.xml",
    bl_m_1_21 => "2.1/BL/BL-M-1-21.xml",
    bl_m_2_21 => "2.1/BL/BL-M-2-21.xml",
    bl_m_3_21 => "2.1/BL/BL-M-3-21.xml",
    bl_m_4_21 => "2.1/BL/BL-M-4-21.xml",
    bl_m_5_21 => "2.1/BL/BL-M-5-21.xml",
    bl_m_6_21 => "2.1/BL/BL-M-6-21.xml",
    bl_m_7_21 => "2.1/BL/BL-M-7-21.xml",
    bl_m_8_21 => "2.1/BL/BL-M-8-21.xml",
    bl_m_9_21 => "2.1/BL/BL-M-9-21.xml",
    bl_m_10_21 => "2.1/BL/BL-M-10-21.xml",
    bl_m_11_21 => "2.1/BL/BL-M-11-21.xml",
    bl_m_12_21 => "2.1/BL/BL-M-12-21.xml",
    bl_m_13_21 => "2.1/BL/BL-M-13-21.xml",
    cs_ac_m_1_21 => "2.1/CS-AC/CS-AC-M-1-21.xml",
    cs_ac_m_2_21 => "2.1/CS-AC/CS-AC-M-2-21.xml",
    cs_ac_m_3_21 => "2.1/CS-AC/CS-AC-M-3-21.xml",
    cs_ac_m_4_21 => "2.1/CS-AC/CS-AC-M-4-21.xml",
    cs_ac_m_5_21 => "2.1/CS-AC/CS-AC-M-5-21.xml",
    cs_ac_m_6_21 => "2.1/CS-AC/CS-AC-M-6-21.xml",
    cs_ac_m_7_21 => "2.1/CS-AC/CS-AC-M-7-21.xml",
    cs_ac_m_8_21 => "2.1/CS-AC/CS-AC-M-8-21.xml",
    cs_ac_m_oaep_1_21 => "2.1/CS-AC/CS-AC-M-OAEP-1-21.xml",
    cs_ac_m_oaep_2_21 => "2.1/CS-AC/CS-AC-M-OAEP-2-21.xml",
    cs_ac_m_oaep_3_21 => "2.1/CS-AC/CS-AC-M-OAEP-3-21.xml",
    cs_ac_m_oaep_4_21 => "2.1/CS-AC/CS-AC-M-OAEP-4-21.xml",
    cs_ac_m_oaep_5_21 => "2.1/CS-AC/CS-AC-M-OAEP-5-21.xml",
    cs_ac_m_oaep_6_21 => "2.1/CS-AC/CS-AC-M-OAEP-6-21.xml",
    cs_ac_m_oaep_7_21 => "2.1/CS-AC/CS-AC-M-OAEP-7-21.xml",
    cs_ac_m_oaep_8_21 => "2.1/CS-AC/CS-AC-M-OAEP-8-21.xml",
    cs_ac_m_oaep_9_21 => "2.1/CS-AC/CS-AC-M-OAEP-9-21.xml",
    cs_ac_m_oaep_10_21 => "2.1/CS-AC/CS-AC-M-OAEP-10-21.xml",
    cs_bc_m_1_21 => "2.1/CS-BC/CS-BC-M-1-21.xml",
    cs_bc_m_2_21 => "2.1/CS-BC/CS-BC-M-2-21.xml",
    cs_bc_m_3_21 => "2.1/CS-BC/CS-BC-M-3-21.xml",
    cs_bc_m_4_21 => "2.1/CS-BC/CS-BC-M-4-21.xml",
    cs_bc_m_5_21 => "2.1/CS-BC/CS-BC-M-5-21.xml",
    cs_bc_m_6_21 => "2.1/CS-BC/CS-BC-M-6-21.xml",
    cs_bc_m_7_21 => "2.1/CS-BC/CS-BC-M-7-21.xml",
    cs_bc_m_8_21 => "2.1/CS-BC/CS-BC-M-8-21.xml",
    cs_bc_m_9_21 => "2.1/CS-BC/CS-BC-M-9-21.xml",
    cs_bc_m_10_21 => "2.1/CS-BC/CS-BC-M-10-21.xml",
    cs_bc_m_11_21 => "2.1/CS-BC/CS-BC-M-11-21.xml",
    cs_bc_m_12_21 => "2.1/CS-BC/CS-BC-M-12-21.xml",
    cs_bc_m_13_21 => "2.1/CS-BC/CS-BC-M-13-21.xml",
    cs_bc_m_14_21 => "2.1/CS-BC/CS-BC-M-14-21.xml",
    cs_bc_m_chacha20_1_21 => "2.1/CS-BC/CS-BC-M-CHACHA20-1-21.xml",
    cs_bc_m_chacha20_2_21 => "2.1/CS-BC/CS-BC-M-CHACHA20-2-21.xml",
    cs_bc_m_chacha20_3_21 => "2.1/CS-BC/CS-BC-M-CHACHA20-3-21.xml",
    cs_bc_m_chacha20poly1305_1_21 => "2.1/CS-BC/CS-BC-M-CHACHA20POLY1305-1-21.xml",
    cs_bc_m_gcm_1_21 => "2.1/CS-BC/CS-BC-M-GCM-1-21.xml",
    cs_bc_m_gcm_2_21 => "2.1/CS-BC/CS-BC-M-GCM-2-21.xml",
    cs_bc_m_gcm_3_21 => "2.1/CS-BC/CS-BC-M-GCM-3-21.xml",
    cs_rng_m_1_21 => "2.1/CS-RNG/CS-RNG-M-1-21.xml",
    msgenc_https_m_1_21 => "2.1/MSGENC-HTTPS/MSGENC-HTTPS-M-1-21.xml",
    msgenc_json_m_1_21 => "2.1/MSGENC-JSON/MSGENC-JSON-M-1-21.xml",
    msgenc_xml_m_1_21 => "2.1/MSGENC-XML/MSGENC-XML-M-1-21.xml",
    omos_m_1_21 => "2.1/OMOS/OMOS-M-1-21.xml",
    pkcs11_m_1_21 => "2.1/PKCS11/PKCS11-M-1-21.xml",
    qs_m_1_21 => "2.1/QS/QS-M-1-21.xml",
    qs_m_2_21 => "2.1/QS/QS-M-2-21.xml",
    sased_m_1_21 => "2.1/SASED/SASED-M-1-21.xml",
    sased_m_2_21 => "2.1/SASED/SASED-M-2-21.xml",
    sased_m_3_21 => "2.1/SASED/SASED-M-3-21.xml",
    skff_m_1_21 => "2.1/SKFF/SKFF-M-1-21.xml",
    skff_m_2_21 => "2.1/SKFF/SKFF-M-2-21.xml",
    skff_m_3_21 => "2.1/SKFF/SKFF-M-3-21.xml",
    skff_m_4_21 => "2.1/SKFF/SKFF-M-4-21.xml",
    skff_m_5_21 => "2.1/SKFF/SKFF-M-5-21.xml",
    skff_m_6_21 => "2.1/SKFF/SKFF-M-6-21.xml",
    skff_m_7_21 => "2.1/SKFF/SKFF-M-7-21.xml",
    skff_m_8_21 => "2.1/SKFF/SKFF-M-8-21.xml",
    skff_m_9_21 => "2.1/SKFF/SKFF-M-9-21.xml",
    skff_m_10_21 => "2.1/SKFF/SKFF-M-10-21.xml",
    skff_m_11_21 => "2.1/SKFF/SKFF-M-11-21.xml",
    skff_m_12_21 => "2.1/SKFF/SKFF-M-12-21.xml",
    sklc_m_1_21 => "2.1/SKLC/SKLC-M-1-21.xml",
    sklc_m_2_21 => "2.1/SKLC/SKLC-M-2-21.xml",
    sklc_m_3_21 => "2.1/SKLC/SKLC-M-3-21.xml",
    tl_m_1_21 => "2.1/TL/TL-M-1-21.xml",
    tl_m_2_21 => "2.1/TL/TL-M-2-21.xml",
    tl_m_3_21 => "2.1/TL/TL-M-3-21.xml",
}
