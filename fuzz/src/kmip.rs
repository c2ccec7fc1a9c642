//! The KMIP front end's parsers of untrusted bytes: TTLV, its XML and JSON
//! encodings, and messages.

use rampart_crypto::key_formats as kf;
use rampart_kmip::enums::ObjectType;
use rampart_kmip::message::{ProtocolVersion, RequestMessage, ResponseMessage};
use rampart_kmip::payload::{
    parse_rng_retrieve, parse_rng_seed, AdjustAttributeRequest, AttributeChangeRequest,
    CertifyRequest, CreateKeyPairRequest, CreateRequest, CreateSplitKeyRequest, CryptoRequest,
    DeriveKeyRequest, GetRequest, JoinSplitKeyRequest, LocateRequest, ManagedObject, ObjectRequest,
    ReKeyKeyPairRequest, ReKeyRequest, RegisterRequest, RevokeRequest, SignRequest, StreamRequest,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Fields, Item, HEADER_LEN};
use rampart_kmip::xml::{self, XmlLimits};
use rampart_kmip::{json, KmipError, Limits};

/// Small limits, so that the fuzzer reaches the caps often.
const LIMITS: Limits = Limits { max_message_len: 64 * 1024, max_depth: 16, max_items: 2048 };

/// The input as one message, read as the server does: the length from
/// the first 8 bytes (refused before any buffer when too long or not a
/// structure), then the item decoded with the bounded reader, parsed as a
/// Request Message (or a Response Message, as the load generator does),
/// its Hash, MAC and RNG payloads decoded, and answered. Whatever decodes must encode back to the same bytes and
/// decode to the same item.
pub fn kmip_ttlv(data: &[u8]) {
    if let Some(header) = data.get(..HEADER_LEN) {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(header);
        if let Ok(len) = ttlv::message_len(&h, &LIMITS) {
            assert!(len <= LIMITS.max_message_len);
        }
    }
    let item = match ttlv::decode(data, &LIMITS) {
        Ok(item) => item,
        Err(err) => {
            let _ = KmipError::from(err).result_reason();
            return;
        }
    };
    let encoded = item.encode().expect("a decoded item encodes");
    assert_eq!(encoded, data, "decode/encode must round-trip byte for byte");
    assert_eq!(item.encoded_len(), data.len());
    match RequestMessage::parse(&item) {
        Ok(request) => {
            let again = ttlv::decode(
                &request.to_item().encode().expect("a request encodes"),
                &Limits { max_message_len: usize::MAX, ..LIMITS },
            )
            .expect("an encoded request decodes");
            assert_eq!(RequestMessage::parse(&again).as_ref(), Ok(&request));
            payloads(&request);
            let response = request.refuse_async(request.header.protocol_version, 0);
            let _ = response.encode_bounded(request.header.maximum_response_size);
        }
        Err(err) => {
            let response = ResponseMessage::error(ProtocolVersion::V1_4, 0, &err);
            let bytes = response.encode_bounded(Some(1024)).expect("an error response encodes");
            assert!(!bytes.is_empty());
        }
    }
    if let Ok(response) = ResponseMessage::parse(&item) {
        let bytes = response.clone().encode_bounded(None).expect("a response encodes");
        let back = ttlv::decode(&bytes, &LIMITS)
            .map_err(KmipError::from)
            .and_then(|i| ResponseMessage::parse(&i));
        assert_eq!(back.as_ref().ok(), Some(&response));
    }
}

/// Every payload decoder takes each batch item's untrusted payload as it
/// comes, whatever its operation says; the key material a Register
/// carries goes through the DER readers the server stores keys with, and
/// a key that reads converts to the other forms without failing; the
/// certificate request a Certify or Re-certify carries goes through the
/// PKCS#10 reader.
fn payloads(request: &RequestMessage) {
    for item in &request.batch_items {
        let p = &item.payload;
        let _ = StreamRequest::parse(p).map(|r| r.is_streamed());
        let _ = parse_rng_retrieve(p);
        let _ = parse_rng_seed(p);
        let _ = CreateRequest::parse(p);
        let _ = CreateKeyPairRequest::parse(p);
        let _ = GetRequest::parse(p);
        let _ = ObjectRequest::parse(p);
        let _ = AttributeChangeRequest::parse(p);
        let _ = LocateRequest::parse(p);
        let _ = RevokeRequest::parse(p);
        let _ = ReKeyRequest::parse(p);
        let _ = ReKeyKeyPairRequest::parse(p);
        if let Ok(certify) = CertifyRequest::parse(p) {
            // A certificate request goes through the reader that checks
            // its self-signature before anything is issued.
            if let Some((_, request)) = &certify.request {
                let _ = rampart_kms::pki::read_certificate_request(request.as_slice());
            }
        }
        let _ = CryptoRequest::parse(p).map(|r| r.is_streamed());
        let _ = SignRequest::parse(p);
        let _ = DeriveKeyRequest::parse(p);
        let _ = CreateSplitKeyRequest::parse(p);
        let _ = JoinSplitKeyRequest::parse(p);
        let _ = AdjustAttributeRequest::parse(p);
        if let Ok(register) = RegisterRequest::parse(p) {
            // A Template written back reads as it was.
            let written = register.object.to_item();
            if let ManagedObject::Template(_) = &register.object {
                let again = Item::structure(
                    Tag::REQUEST_PAYLOAD,
                    vec![Item::enumeration(Tag::OBJECT_TYPE, ObjectType::TEMPLATE.0), written],
                );
                let fields = Fields::of(&again).expect("a written payload is a structure");
                let read = ManagedObject::parse(ObjectType::TEMPLATE, &fields);
                assert_eq!(read.as_ref(), Ok(&register.object));
            }
            key_material(&register.object);
        }
    }
}

fn key_material(object: &ManagedObject) {
    let material = |b: &rampart_kmip::payload::KeyBlock| b.material.as_slice().to_vec();
    match object {
        ManagedObject::PrivateKey(block) => {
            let bytes = material(block);
            if let Ok(pkcs8) = kf::rsa_private_pkcs8_from_pkcs1(&bytes) {
                kf::rsa_private_pkcs1(pkcs8.expose()).expect("a PKCS#1 key read is written");
            }
            if kf::private_key_info(&bytes).is_ok() {
                let _ = kf::rsa_private_parts(&bytes);
                let _ = kf::dsa_private_parts(&bytes);
                let _ = kf::public_key_of(&bytes);
            }
        }
        ManagedObject::PublicKey(block) => {
            let bytes = material(block);
            if let Ok(spki) = kf::spki_from_rsa_public(&bytes) {
                kf::rsa_public_pkcs1(&spki).expect("a PKCS#1 public key read is written");
            }
            if kf::public_key_info(&bytes).is_ok() {
                let _ = kf::rsa_public_parts(&bytes);
                if let Ok(parts) = kf::dsa_public_parts(&bytes) {
                    let _ = kf::dsa_public_spki(&parts);
                }
            }
        }
        _ => {}
    }
}

/// Small limits for the text encodings too.
const TEXT_LIMITS: XmlLimits = XmlLimits { max_len: 64 * 1024, max_depth: 16, max_elements: 2048 };

/// The input as a text-encoded message, read as `POST /kmip` does: TTLV-XML
/// when its first byte is even (`<` is), JSON when odd (`{` is). Whatever
/// converts to an item must encode as TTLV, and the text the server would
/// write for that item must read back to the same item, in both
/// encodings, so a response is never unreadable by the encoding's client.
pub fn kmip_text(data: &[u8]) {
    let Some(first) = data.first() else { return };
    let Ok(text) = std::str::from_utf8(data) else { return };
    let item = if first % 2 == 0 {
        let Ok(elements) = xml::parse_document(text, &TEXT_LIMITS) else { return };
        let Some(element) = elements.first() else { return };
        match xml::to_item(element) {
            Ok(item) => item,
            Err(err) => {
                let _ = KmipError::from(err).result_reason();
                return;
            }
        }
    } else {
        match json::from_json(text, &TEXT_LIMITS) {
            Ok(item) => item,
            Err(err) => {
                let _ = KmipError::from(err).result_reason();
                return;
            }
        }
    };
    let bytes = item.encode().expect("a converted item encodes");
    if let Ok(request) = RequestMessage::parse(&item) {
        payloads(&request);
    }
    let roomy = Limits { max_message_len: usize::MAX, max_depth: 64, max_items: usize::MAX };
    assert_eq!(ttlv::decode(&bytes, &roomy).as_ref(), Ok(&item));
    let as_xml = xml::to_xml(&item);
    let roomy_text = XmlLimits { max_len: usize::MAX, max_depth: 64, max_elements: usize::MAX };
    let back = xml::parse_document(&as_xml, &roomy_text).expect("written XML reads");
    assert_eq!(back.len(), 1);
    assert_eq!(xml::to_item(&back[0]).as_ref(), Ok(&item), "XML round trip");
    let as_json = json::to_json(&item);
    assert_eq!(json::from_json(&as_json, &roomy_text).as_ref(), Ok(&item), "JSON round trip");
}
