//! Hash, MAC, MAC Verify, RNG Retrieve and RNG Seed (KMIP 1.4 §4.33–4.37,
//! and the same operations of KMIP 2.1 §6.1).
//!
//! Hash, MAC and MAC Verify are single-part, or streamed: a request with
//! Init Indicator opens a stream and gets a Correlation Value back, later
//! requests name it, and the one with Final Indicator gets the result.
//! Open streams belong to the connection (`stream_table::Streams`): a digest or HMAC
//! context each, never the data, at most [`MAX_STREAMS`] at once, dropped
//! when the connection ends. A streamed MAC re-checks its key (access,
//! state, usage mask) on every part, since either may change between
//! messages.

use rampart_crypto::{fill_random, DigestAlg, Hasher, Mac, MacAlg};
use rampart_kmip::enums::{
    usage_mask, CryptographicAlgorithm, HashingAlgorithm, Operation, ValidityIndicator,
};
use rampart_kmip::payload::StreamRequest;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Bytes, Item};
use rampart_kmip::KmipError;

use super::ciphers::key_parameters;
use super::crypto::{mac_alg, MAX_DATA};
use super::errors::{crypto, R};
use super::session::Session;
use super::stream_table::{Stream, Work};

/// The most bytes one RNG Retrieve returns: checked before anything is
/// allocated, so a request's Data Length never sizes a buffer past it.
pub(crate) const MAX_RNG_RETRIEVE: usize = 64 * 1024;

/// The digest a Hashing Algorithm names, where AWS-LC has it.
fn digest_alg(alg: HashingAlgorithm) -> R<DigestAlg> {
    Ok(match alg {
        HashingAlgorithm::SHA1 => DigestAlg::Sha1,
        HashingAlgorithm::SHA224 => DigestAlg::Sha224,
        HashingAlgorithm::SHA256 => DigestAlg::Sha256,
        HashingAlgorithm::SHA384 => DigestAlg::Sha384,
        HashingAlgorithm::SHA512 => DigestAlg::Sha512,
        HashingAlgorithm::SHA512_256 => DigestAlg::Sha512_256,
        HashingAlgorithm::SHA3_256 => DigestAlg::Sha3_256,
        HashingAlgorithm::SHA3_384 => DigestAlg::Sha3_384,
        HashingAlgorithm::SHA3_512 => DigestAlg::Sha3_512,
        other => {
            return Err(KmipError::FeatureNotSupported(format!(
                "Hashing Algorithm {other} (SHA-1, SHA-2 and SHA3-256/384/512 are served)"
            )))
        }
    })
}

/// The HMAC a Hashing Algorithm names (a client may give the hash alone).
fn mac_alg_of_hash(alg: HashingAlgorithm) -> Option<MacAlg> {
    Some(match alg {
        HashingAlgorithm::SHA1 => MacAlg::HmacSha1,
        HashingAlgorithm::SHA224 => MacAlg::HmacSha224,
        HashingAlgorithm::SHA256 => MacAlg::HmacSha256,
        HashingAlgorithm::SHA384 => MacAlg::HmacSha384,
        HashingAlgorithm::SHA512 => MacAlg::HmacSha512,
        _ => None?,
    })
}

fn checked_data(data: Option<&Bytes>) -> R<&[u8]> {
    let data = data.map_or(&[][..], Bytes::as_slice);
    if data.len() > MAX_DATA {
        return Err(KmipError::InvalidField(format!("Data is larger than {MAX_DATA} bytes")));
    }
    Ok(data)
}

/// What one part of a stream (or a whole single-part request) leaves.
enum Step<T> {
    /// More parts follow: the Correlation Value to send with them.
    Continue(Vec<u8>),
    Done(T),
}

impl Session<'_> {
    pub(super) async fn hash(&mut self, request: &StreamRequest) -> R<Vec<Item>> {
        let data = checked_data(request.data.as_ref())?;
        let hasher = match &request.correlation_value {
            Some(id) => match self.streams.take(Operation::HASH, id)?.work {
                Work::Hash(h) => *h,
                Work::Mac { .. } | Work::Gcm { .. } => {
                    return Err(KmipError::InvalidField("not a Hash stream".into()));
                }
            },
            None => {
                // KMIP 1.4 §4.37: Cryptographic Parameters with the Hashing
                // Algorithm are required on the first (or only) part.
                let alg =
                    request.parameters.as_ref().and_then(|p| p.hashing_algorithm).ok_or_else(
                        || {
                            KmipError::MissingData(
                                "Cryptographic Parameters with a Hashing Algorithm".into(),
                            )
                        },
                    )?;
                if request.data.is_none() && !request.is_streamed() {
                    return Err(KmipError::MissingData("Data".into()));
                }
                Hasher::new(digest_alg(alg)?)
            }
        };
        let mut hasher = hasher;
        hasher.update(data);
        match self.finish_or_keep(request, Operation::HASH, Work::Hash(Box::new(hasher)))? {
            Step::Continue(id) => Ok(vec![Item::bytes(Tag::CORRELATION_VALUE, &id)]),
            Step::Done(Work::Hash(h)) => Ok(vec![Item::bytes(Tag::DATA, &h.finish())]),
            Step::Done(Work::Mac { .. } | Work::Gcm { .. }) => {
                Err(KmipError::GeneralFailure("stream mix-up".into()))
            }
        }
    }

    /// MAC (`verify` false) and MAC Verify (`verify` true).
    pub(super) async fn mac(&mut self, request: &StreamRequest, verify: bool) -> R<Vec<Item>> {
        let operation = if verify { Operation::MAC_VERIFY } else { Operation::MAC };
        let (bit, protect) =
            if verify { (usage_mask::MAC_VERIFY, false) } else { (usage_mask::MAC_GENERATE, true) };
        let data = checked_data(request.data.as_ref())?;
        let (uid, mut mac) = match &request.correlation_value {
            Some(id) => {
                let stream = self.streams.take(operation, id)?;
                let Work::Mac { mac, uid } = stream.work else {
                    return Err(KmipError::InvalidField("not a MAC stream".into()));
                };
                if request.unique_identifier.as_ref().is_some_and(|u| *u != uid) {
                    return Err(KmipError::InvalidField(format!(
                        "the stream is under object {uid}, not {}",
                        request.unique_identifier.as_deref().unwrap_or_default()
                    )));
                }
                // Access or state may have changed since the stream opened.
                self.usable_key(&uid, bit, protect).await?;
                (uid, *mac)
            }
            None => {
                let uid = self.uid(request.unique_identifier.as_ref())?;
                let (obj, key) = self.usable_key(&uid, bit, protect).await?;
                // KMIP 1.4 §4.33: parameters the request leaves out are the
                // key's Cryptographic Parameters.
                let params =
                    Some(request.parameters.clone().unwrap_or_default().or(&key_parameters(&obj)?));
                let params = params.as_ref();
                let key_alg =
                    obj.kmip.as_ref().and_then(|k| k.algorithm).map(CryptographicAlgorithm);
                // KMIP 1.4 §4.33: the Cryptographic Parameters name the MAC
                // algorithm, else the key's own Cryptographic Algorithm does.
                let alg = match (
                    params.and_then(|p| p.cryptographic_algorithm),
                    params.and_then(|p| p.hashing_algorithm),
                ) {
                    (Some(a), _) => mac_alg(a).ok_or_else(|| {
                        KmipError::FeatureNotSupported(format!(
                            "MAC with {a} (HMAC-SHA1/224/256/384/512 are served)"
                        ))
                    })?,
                    (None, Some(h)) => mac_alg_of_hash(h).ok_or_else(|| {
                        KmipError::FeatureNotSupported(format!("HMAC with Hashing Algorithm {h}"))
                    })?,
                    (None, None) => key_alg.and_then(mac_alg).ok_or_else(|| {
                        KmipError::MissingData(
                            "Cryptographic Parameters naming an HMAC (the key is not an HMAC key)"
                                .into(),
                        )
                    })?,
                };
                if request.data.is_none() && !request.is_streamed() {
                    return Err(KmipError::MissingData("Data".into()));
                }
                (uid, Mac::new(alg, key.expose()))
            }
        };
        mac.update(data);
        let done = match self.finish_or_keep(
            request,
            operation,
            Work::Mac { mac: Box::new(mac), uid: uid.clone() },
        )? {
            Step::Continue(id) => {
                let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
                if verify {
                    // KMIP 1.4 §4.34 always answers a Validity Indicator: a
                    // part before the last cannot be judged yet.
                    out.push(Item::enumeration(
                        Tag::VALIDITY_INDICATOR,
                        ValidityIndicator::UNKNOWN.0,
                    ));
                }
                out.push(Item::bytes(Tag::CORRELATION_VALUE, &id));
                return Ok(out);
            }
            Step::Done(Work::Mac { mac, .. }) => mac,
            Step::Done(Work::Hash(_) | Work::Gcm { .. }) => {
                return Err(KmipError::GeneralFailure("stream mix-up".into()));
            }
        };
        let mut out = vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
        if verify {
            let tag = request
                .mac_data
                .as_deref()
                .ok_or_else(|| KmipError::MissingData("MAC Data to verify".into()))?;
            let valid = done.verify(tag);
            out.push(Item::enumeration(
                Tag::VALIDITY_INDICATOR,
                if valid { ValidityIndicator::VALID.0 } else { ValidityIndicator::INVALID.0 },
            ));
        } else {
            out.push(Item::bytes(Tag::MAC_DATA, done.finish().expose()));
        }
        Ok(out)
    }

    /// Keeps the stream open (returning its Correlation Value) unless this
    /// part is the last or the request is single-part.
    fn finish_or_keep(
        &mut self,
        request: &StreamRequest,
        operation: Operation,
        work: Work,
    ) -> R<Step<Work>> {
        if request.last || !request.is_streamed() {
            return Ok(Step::Done(work));
        }
        match &request.correlation_value {
            Some(id) => {
                self.streams.put_back(id.clone(), Stream { operation, work });
                Ok(Step::Continue(id.clone()))
            }
            None => Ok(Step::Continue(self.streams.open(operation, work)?)),
        }
    }

    pub(super) fn rng_retrieve(&mut self, length: i32) -> R<Vec<Item>> {
        let len = usize::try_from(length)
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| KmipError::InvalidField(format!("Data Length {length}")))?;
        if len > MAX_RNG_RETRIEVE {
            return Err(KmipError::InvalidField(format!(
                "Data Length {len}: at most {MAX_RNG_RETRIEVE} bytes an RNG Retrieve"
            )));
        }
        let mut out = vec![0u8; len];
        fill_random(&mut out).map_err(crypto)?;
        Ok(vec![Item::bytes(Tag::DATA, &out)])
    }

    /// RNG Seed: AWS-LC's generator reseeds itself from the operating
    /// system and takes no outside seed, so none is mixed in and the
    /// answer says so (KMIP 1.4 §4.36: Data Length is the amount accepted).
    pub(super) fn rng_seed(&mut self, seed: &Bytes) -> R<Vec<Item>> {
        if seed.len() > MAX_DATA {
            return Err(KmipError::InvalidField(format!("Data is larger than {MAX_DATA} bytes")));
        }
        Ok(vec![Item::int(Tag::DATA_LENGTH, 0)])
    }
}
