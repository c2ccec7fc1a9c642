//! The encodings signatures take between a DER world (KMIP, X.509,
//! AWS-LC) and PKCS#11's fixed-size one: ECDSA signatures as `r || s`
//! (PKCS#11 3.0 §2.3.1) against `ECDSA-Sig-Value` (RFC 3279 §2.2.3).

use crate::der::{self, Reader, SEQUENCE};
use crate::{CryptoError, Curve, Result};

fn malformed(what: &'static str) -> CryptoError {
    CryptoError::InvalidEncoding(what)
}

/// Bytes of each of `r` and `s` on `curve`.
#[must_use]
pub fn ecdsa_scalar_len(curve: Curve) -> usize {
    match curve {
        Curve::P256 => 32,
        Curve::P384 => 48,
        Curve::P521 => 66,
    }
}

/// An `ECDSA-Sig-Value` as `r || s`, each left-padded to the curve's size.
pub fn ecdsa_der_to_fixed(signature: &[u8], curve: Curve) -> Result<Vec<u8>> {
    let len = ecdsa_scalar_len(curve);
    let mut outer = Reader::new(signature);
    let mut r = outer.sequence("ECDSA-Sig-Value")?;
    outer.finish("ECDSA-Sig-Value")?;
    let mut out = vec![0u8; 2 * len];
    for (i, what) in ["ECDSA r", "ECDSA s"].into_iter().enumerate() {
        let magnitude = r.unsigned(what)?;
        let magnitude = &magnitude[magnitude.iter().take_while(|b| **b == 0).count()..];
        if magnitude.len() > len {
            return Err(malformed(what));
        }
        let end = (i + 1) * len;
        out[end - magnitude.len()..end].copy_from_slice(magnitude);
    }
    r.finish("ECDSA-Sig-Value")?;
    Ok(out)
}

/// `r || s` (two halves of equal size) as an `ECDSA-Sig-Value`.
pub fn ecdsa_fixed_to_der(signature: &[u8]) -> Result<Vec<u8>> {
    if signature.is_empty() || !signature.len().is_multiple_of(2) {
        return Err(malformed("an ECDSA signature of two equal halves"));
    }
    let (r, s) = signature.split_at(signature.len() / 2);
    let mut body = zeroize::Zeroizing::new(Vec::with_capacity(signature.len() + 8));
    der::put_unsigned(&mut body, r);
    der::put_unsigned(&mut body, s);
    Ok(std::mem::take(&mut *der::element(SEQUENCE, &body)))
}

/// The parts of an X.509 certificate that PKCS#11 repeats as attributes
/// (`CKA_SERIAL_NUMBER`, `CKA_ISSUER`, `CKA_SUBJECT`), each as its DER
/// element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateNames {
    pub serial_number: Vec<u8>,
    pub issuer: Vec<u8>,
    pub subject: Vec<u8>,
}

/// Reads [`CertificateNames`] from a certificate's DER.
pub fn certificate_names(certificate: &[u8]) -> Result<CertificateNames> {
    const EXPLICIT_0: u8 = 0xA0;
    let mut outer = Reader::new(certificate);
    let mut cert = outer.sequence("Certificate")?;
    outer.finish("Certificate")?;
    let mut tbs = cert.sequence("TBSCertificate")?;
    // The version, [0] EXPLICIT, is absent from v1 certificates.
    let mut peek = tbs;
    if let (EXPLICIT_0, _) = peek.any()? {
        tbs.any()?;
    }
    // A whole element, tag and length included.
    let element = |r: &mut Reader<'_>| -> Result<Vec<u8>> {
        let before = *r;
        r.any()?;
        Ok(before.rest_prefix(before.remaining() - r.remaining()).to_vec())
    };
    let serial_number = element(&mut tbs)?;
    tbs.sequence("signature")?;
    let issuer = element(&mut tbs)?;
    tbs.sequence("validity")?;
    let subject = element(&mut tbs)?;
    if serial_number.first() != Some(&der::INTEGER)
        || issuer.first() != Some(&SEQUENCE)
        || subject.first() != Some(&SEQUENCE)
    {
        return Err(malformed("TBSCertificate"));
    }
    Ok(CertificateNames { serial_number, issuer, subject })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ecdsa_signature_goes_to_fixed_size_and_back() {
        // r has a leading 0x80 byte (a DER zero is added), s is short.
        let mut fixed = vec![0u8; 64];
        fixed[0] = 0x80;
        fixed[31] = 1;
        fixed[63] = 7;
        let der = ecdsa_fixed_to_der(&fixed).expect("encodes");
        assert_eq!(der[..4], [0x30, 0x26, 0x02, 0x21]);
        assert_eq!(ecdsa_der_to_fixed(&der, Curve::P256).expect("decodes"), fixed);
    }

    #[test]
    fn an_ecdsa_scalar_longer_than_the_curve_is_refused() {
        let der = ecdsa_fixed_to_der(&[0x7F; 66]).expect("encodes");
        assert!(ecdsa_der_to_fixed(&der, Curve::P256).is_err());
    }
}
