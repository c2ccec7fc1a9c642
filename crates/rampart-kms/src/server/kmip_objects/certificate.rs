//! A registered X.509 certificate's attributes, derived once from its
//! DER and stored with the object (KMIP 1.4 §3.6–§3.9 and §3.38–§3.40,
//! KMIP 2.1 §4): Certificate Type and Length, X.509 Certificate
//! Identifier, Subject and Issuer (the DER of the names and the serial
//! number), the deprecated 1.x Certificate Identifier, Subject and Issuer
//! (the same as text, which 2.x clients do not see), the Digital
//! Signature Algorithm, the 2.x Certificate Subject and Issuer name parts
//! (CN, O, OU...), and the algorithm and length of its public key.

use rampart_crypto::key_formats as kf;
use rampart_kmip::enums::{CertificateType, DigitalSignatureAlgorithm as Dsa};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};
use rampart_kmip::KmipError;

use super::errors::R;
use super::key_formats::algorithm_of;

/// What Register keeps of a certificate.
pub(super) struct CertificateAttributes {
    /// (attribute name, value) in the order Get Attributes shows them.
    pub(super) attributes: Vec<(&'static str, Item)>,
    /// The public key's Cryptographic Algorithm and Length, when it is a
    /// key this server knows (RSA, EC, Ed25519).
    pub(super) algorithm: Option<u32>,
    pub(super) length: Option<i32>,
}

fn value(v: Value) -> Item {
    Item::new(Tag::ATTRIBUTE_VALUE, v)
}

fn structure(items: Vec<Item>) -> Item {
    Item::structure(Tag::ATTRIBUTE_VALUE, items)
}

/// The KMIP name of an X.509 signature algorithm (RFC 8017 Appendix C,
/// RFC 5758 §3.2).
fn signature_algorithm(oid: &str) -> Option<Dsa> {
    Some(match oid {
        "1.2.840.113549.1.1.4" => Dsa::MD5_WITH_RSA,
        "1.2.840.113549.1.1.5" => Dsa::SHA1_WITH_RSA,
        "1.2.840.113549.1.1.14" => Dsa::SHA224_WITH_RSA,
        "1.2.840.113549.1.1.11" => Dsa::SHA256_WITH_RSA,
        "1.2.840.113549.1.1.12" => Dsa::SHA384_WITH_RSA,
        "1.2.840.113549.1.1.13" => Dsa::SHA512_WITH_RSA,
        "1.2.840.113549.1.1.10" => Dsa::RSASSA_PSS,
        "1.2.840.10045.4.1" => Dsa::ECDSA_WITH_SHA1,
        "1.2.840.10045.4.3.1" => Dsa::ECDSA_WITH_SHA224,
        "1.2.840.10045.4.3.2" => Dsa::ECDSA_WITH_SHA256,
        "1.2.840.10045.4.3.3" => Dsa::ECDSA_WITH_SHA384,
        "1.2.840.10045.4.3.4" => Dsa::ECDSA_WITH_SHA512,
        _ => return None,
    })
}

/// The KMIP 2.x attributes of a certificate's subject and issuer names
/// (2.1 §4.10–§4.11), by the OID of the name component each holds.
const NAME_PARTS: [(&str, &str, &str); 12] = [
    ("2.5.4.3", "Certificate Subject CN", "Certificate Issuer CN"),
    ("2.5.4.10", "Certificate Subject O", "Certificate Issuer O"),
    ("2.5.4.11", "Certificate Subject OU", "Certificate Issuer OU"),
    ("1.2.840.113549.1.9.1", "Certificate Subject Email", "Certificate Issuer Email"),
    ("2.5.4.6", "Certificate Subject C", "Certificate Issuer C"),
    ("2.5.4.8", "Certificate Subject ST", "Certificate Issuer ST"),
    ("2.5.4.7", "Certificate Subject L", "Certificate Issuer L"),
    ("0.9.2342.19200300.100.1.1", "Certificate Subject UID", "Certificate Issuer UID"),
    ("2.5.4.5", "Certificate Subject Serial Number", "Certificate Issuer Serial Number"),
    ("2.5.4.12", "Certificate Subject Title", "Certificate Issuer Title"),
    ("0.9.2342.19200300.100.1.25", "Certificate Subject DC", "Certificate Issuer DC"),
    ("2.5.4.46", "Certificate Subject DN Qualifier", "Certificate Issuer DN Qualifier"),
];

/// Whether attribute `name` is one [`certificate_attributes`] derives
/// from a certificate's DER (what a new certificate replacing it derives
/// again instead of carrying over).
pub(crate) fn derived_from_certificate(name: &str) -> bool {
    matches!(
        name,
        "Certificate Type"
            | "Certificate Length"
            | "X.509 Certificate Identifier"
            | "X.509 Certificate Subject"
            | "X.509 Certificate Issuer"
            | "Certificate Identifier"
            | "Certificate Subject"
            | "Certificate Issuer"
            | "Digital Signature Algorithm"
    ) || NAME_PARTS.iter().any(|(_, subject, issuer)| name == *subject || name == *issuer)
}

/// Parses an X.509 certificate (DER, nothing after it) and derives its
/// attributes; anything else is an Invalid Field.
pub(super) fn certificate_attributes(
    certificate_type: CertificateType,
    der: &[u8],
) -> R<CertificateAttributes> {
    if certificate_type != CertificateType::X509 {
        return Err(KmipError::FeatureNotSupported(format!(
            "{certificate_type} certificates (X.509 only)"
        )));
    }
    let (rest, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| KmipError::InvalidField(format!("the X.509 certificate: {e}")))?;
    if !rest.is_empty() {
        return Err(KmipError::InvalidField("bytes after the X.509 certificate".into()));
    }
    let tbs = &cert.tbs_certificate;
    let issuer_der = tbs.issuer.as_raw();
    let subject_der = tbs.subject.as_raw();
    let serial = tbs.raw_serial();
    let serial_text: String = serial.iter().map(|b| format!("{b:02X}")).collect();
    let length = i32::try_from(der.len()).unwrap_or(i32::MAX);
    let mut attributes = vec![
        ("Certificate Type", value(Value::Enumeration(certificate_type.0))),
        ("Certificate Length", value(Value::Integer(length))),
        (
            "X.509 Certificate Identifier",
            structure(vec![
                Item::bytes(Tag::ISSUER_DISTINGUISHED_NAME, issuer_der),
                Item::bytes(Tag::CERTIFICATE_SERIAL_NUMBER, serial),
            ]),
        ),
        (
            "X.509 Certificate Subject",
            structure(vec![Item::bytes(Tag::SUBJECT_DISTINGUISHED_NAME, subject_der)]),
        ),
        (
            "X.509 Certificate Issuer",
            structure(vec![Item::bytes(Tag::ISSUER_DISTINGUISHED_NAME, issuer_der)]),
        ),
        (
            "Certificate Identifier",
            structure(vec![
                Item::text(Tag::ISSUER, tbs.issuer.to_string()),
                Item::text(Tag::SERIAL_NUMBER, serial_text),
            ]),
        ),
        (
            "Certificate Subject",
            structure(vec![Item::text(
                Tag::CERTIFICATE_SUBJECT_DISTINGUISHED_NAME,
                tbs.subject.to_string(),
            )]),
        ),
        (
            "Certificate Issuer",
            structure(vec![Item::text(
                Tag::CERTIFICATE_ISSUER_DISTINGUISHED_NAME,
                tbs.issuer.to_string(),
            )]),
        ),
    ];
    for (name, subject) in [(&tbs.subject, true), (&tbs.issuer, false)] {
        for part in name.iter_attributes() {
            let oid = part.attr_type().to_id_string();
            let Some(&(_, of_subject, of_issuer)) = NAME_PARTS.iter().find(|p| p.0 == oid) else {
                continue;
            };
            // A component that is not text (a rare BMPString...) is left out.
            if let Ok(text) = part.as_str() {
                let attribute = if subject { of_subject } else { of_issuer };
                attributes.push((attribute, value(Value::TextString(text.to_owned()))));
            }
        }
    }
    if let Some(dsa) = signature_algorithm(&cert.signature_algorithm.algorithm.to_id_string()) {
        attributes.push(("Digital Signature Algorithm", value(Value::Enumeration(dsa.0))));
    }
    // A key type this server does not use (DSA, X25519...) leaves the
    // certificate's algorithm and length unset rather than refusing it.
    let key = kf::public_key_info(tbs.subject_pki.raw).ok();
    Ok(CertificateAttributes {
        attributes,
        algorithm: key.map(|k| algorithm_of(k.kind).0 .0),
        length: key.map(|k| i32::try_from(k.bits).unwrap_or(i32::MAX)),
    })
}
