//! Create Split Key and Join Split Key (KMIP 1.4 §4.38, §4.39; 2.1
//! §6.1.10, §6.1.27) over the Split Key objects of §2.2.5, by three of
//! its methods:
//!
//! - XOR: every part is needed (Split Key Threshold equals Split Key
//!   Parts); all but the last are random, the last is the key XOR them.
//! - Polynomial Sharing GF(2^8): Shamir's scheme byte by byte over the
//!   AES field (the key manager's own `shamir`, which splits its root
//!   key), the Key Part Identifier being the x coordinate.
//! - Polynomial Sharing Prime Field: Shamir's scheme over GF(Prime Field
//!   Size), a prime above 2^L for an L-bit key, the key and each part
//!   big-endian integers (a part as long as the prime).
//!
//! Polynomial Sharing GF(2^16) is Invalid Field (KMIP 1.4 §11.39: "Split
//! Key Method not supported"). Each part is a Split Key object of its
//! own, whose Key Block's algorithm and length are the split key's; the
//! parts link to one another (Previous and Next Links, in Key Part
//! Identifier order) and, when an existing key was split, to it (Parent
//! Link) and it to them (Child Links). Join forms a new Symmetric Key or
//! Secret Data object from at least a threshold of parts of one split.

use num_bigint::BigUint;
use rampart_crypto::{random_secret, SecretBytes};
use rampart_kmip::enums::{
    CryptographicAlgorithm, LinkType, ObjectType, SecretDataType, SplitKeyMethod, State as KState,
};
use rampart_kmip::object_parts::SplitKeyFields;
use rampart_kmip::payload::{CreateSplitKeyRequest, JoinSplitKeyRequest};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::crypto::{check_algorithm, default_usage_mask, set_des_parity};
use super::errors::{crypto, kms, R};
use super::object::{encode_value, link_value, Obj, SPLIT_KEY_ROW};
use super::server_attributes::default_format;
use super::session::Session;
use crate::model::now_ms;
use crate::shamir;

/// Largest Prime Field Size, in bits: a prime comfortably above any key
/// this server splits (64 bytes at most), and a bound on the time a
/// request's primality test and interpolation take.
const MAX_PRIME_BITS: u64 = 2048;

/// Miller-Rabin rounds a Prime Field Size must pass (a composite passes
/// one with probability at most 1/4).
const PRIME_ROUNDS: usize = 32;

impl Session<'_> {
    pub(super) async fn create_split_key(
        &mut self,
        request: &CreateSplitKeyRequest,
    ) -> R<Vec<Item>> {
        if !matches!(
            request.object_type,
            ObjectType::SPLIT_KEY | ObjectType::SYMMETRIC_KEY | ObjectType::SECRET_DATA
        ) {
            return Err(KmipError::InvalidField(format!(
                "Create Split Key makes Split Keys, not {}",
                request.object_type
            )));
        }
        let (parts, threshold) = (request.parts, request.threshold);
        let prime = match (request.method, &request.prime_field_size) {
            (SplitKeyMethod::XOR, None) if parts != threshold => {
                return Err(KmipError::InvalidField(
                    "XOR needs every part: a Split Key Threshold equal to the Split Key Parts"
                        .into(),
                ));
            }
            (SplitKeyMethod::XOR | SplitKeyMethod::POLYNOMIAL_SHARING_GF_2_8, None) => None,
            (SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD, Some(p)) => Some(prime_field(p)?),
            (SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD, None) => {
                return Err(KmipError::MissingData(
                    "Prime Field Size (the method is Polynomial Sharing Prime Field)".into(),
                ));
            }
            (SplitKeyMethod::XOR | SplitKeyMethod::POLYNOMIAL_SHARING_GF_2_8, Some(_)) => {
                return Err(KmipError::InvalidField(
                    "Prime Field Size is only for Polynomial Sharing Prime Field".into(),
                ));
            }
            (other, _) => {
                return Err(KmipError::InvalidField(format!(
                    "Split Key Method {other} is not supported"
                )));
            }
        };
        let mut new = self.template(&request.attributes, ObjectType::SPLIT_KEY).await?;
        if parts > 1 && !new.names.is_empty() {
            return Err(KmipError::InvalidField(
                "a Name names one object, and the parts are several".into(),
            ));
        }
        // §4.38: the attributes of a key named take precedence.
        let (secret, base) = match &request.unique_identifier {
            Some(uid) => {
                let (obj, material) = self.key_to_split(uid).await?;
                if let Some(k) = &obj.kmip {
                    new.algorithm = k.algorithm;
                    new.length = k.length;
                }
                (material, Some(obj))
            }
            None => (self.key_drawn(&new)?, None),
        };
        new.length.get_or_insert(i32::try_from(secret.len() * 8).unwrap_or(i32::MAX));
        let shares = split(request.method, secret.expose(), parts, threshold, prime.as_ref())?;
        drop(secret);
        let mut uids = Vec::with_capacity(shares.len());
        for (id, share) in (1..).zip(&shares) {
            let fields = SplitKeyFields {
                parts,
                key_part_identifier: id,
                threshold,
                method: request.method,
                prime_field_size: request.prime_field_size.clone(),
            };
            let mut part = new.clone();
            let row = Item::structure(Tag::SPLIT_KEY, fields.items());
            part.stored.push((SPLIT_KEY_ROW.to_owned(), encode_value(SPLIT_KEY_ROW, &row)?));
            uids.push(self.store_new(ObjectType::SPLIT_KEY, part, share).await?);
        }
        drop(shares);
        self.link_parts(&uids, base.as_ref()).await?;
        Ok(uids.into_iter().map(|uid| Item::text(Tag::UNIQUE_IDENTIFIER, uid)).collect())
    }

    /// The key a Create Split Key names, and its material: a client
    /// splits what it could Get (the parts it can Get give the key).
    async fn key_to_split(&mut self, uid: &str) -> R<(Obj, SecretBytes)> {
        let obj = self.load_with_attributes(uid).await?;
        self.require_use(&obj)?;
        if !matches!(obj.object_type(), ObjectType::SYMMETRIC_KEY | ObjectType::SECRET_DATA) {
            return Err(KmipError::InvalidObjectType(format!(
                "object {uid} is a {}: only a Symmetric Key or Secret Data is split",
                obj.object_type()
            )));
        }
        if matches!(obj.state(now_ms()), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::ObjectDestroyed(format!("object {uid}")));
        }
        if !obj.key.exportable {
            return Err(KmipError::NotExtractable(format!("key {} is not exportable", uid)));
        }
        self.check_serve(&obj, false, false).await?;
        let material = self.material(&obj).await?;
        Ok((obj, material))
    }

    /// A new key of the attributes' algorithm and length, to split.
    fn key_drawn(&self, new: &super::lifecycle::NewObject) -> R<SecretBytes> {
        let algorithm = CryptographicAlgorithm(new.algorithm.ok_or_else(|| {
            KmipError::MissingData("the Cryptographic Algorithm of the key to split".into())
        })?);
        let length = new.length.ok_or_else(|| {
            KmipError::MissingData("the Cryptographic Length of the key to split".into())
        })?;
        let mut material = random_secret(check_algorithm(algorithm, length)?).map_err(crypto)?;
        if algorithm == CryptographicAlgorithm::TRIPLE_DES {
            set_des_parity(material.expose_mut());
        }
        Ok(material)
    }

    /// The parts' Previous and Next Links, their Parent Link to the key
    /// split, and its Child Links to them.
    async fn link_parts(&mut self, uids: &[String], base: Option<&Obj>) -> R<()> {
        for (i, uid) in uids.iter().enumerate() {
            let mut links = Vec::new();
            if let Some(base) = base {
                links.push(link_value(LinkType::PARENT, &base.uid())?);
            }
            if let Some(previous) = i.checked_sub(1).and_then(|p| uids.get(p)) {
                links.push(link_value(LinkType::PREVIOUS, previous)?);
            }
            if let Some(next) = uids.get(i + 1) {
                links.push(link_value(LinkType::NEXT, next)?);
            }
            if links.is_empty() {
                continue;
            }
            let (name, version) = super::object::parse_uid(uid)?;
            self.state
                .store
                .kmip_set_attribute(name, version, "Link".into(), links, None)
                .await
                .map_err(kms)?;
        }
        if let Some(base) = base {
            let children =
                uids.iter().map(|uid| link_value(LinkType::CHILD, uid)).collect::<R<Vec<_>>>()?;
            self.add_links(base, children).await?;
        }
        Ok(())
    }

    pub(super) async fn join_split_key(&mut self, request: &JoinSplitKeyRequest) -> R<Vec<Item>> {
        let object_type = request.object_type;
        if !matches!(object_type, ObjectType::SYMMETRIC_KEY | ObjectType::SECRET_DATA) {
            return Err(KmipError::InvalidField(format!(
                "Join Split Key forms a Symmetric Key or Secret Data, not {object_type}"
            )));
        }
        let mut parts: Vec<(SplitKeyFields, SecretBytes)> = Vec::new();
        let mut described: (Option<u32>, Option<i32>) = (None, None);
        for uid in &request.unique_identifiers {
            let obj = self.load_with_attributes(uid).await?;
            self.require_use(&obj)?;
            if obj.object_type() != ObjectType::SPLIT_KEY {
                return Err(KmipError::InvalidObjectType(format!("object {uid} is no Split Key")));
            }
            if matches!(obj.state(now_ms()), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
                return Err(KmipError::ObjectDestroyed(format!("object {uid}")));
            }
            let fields = obj.split_key_fields()?;
            if let Some((first, _)) = parts.first() {
                let same = first.parts == fields.parts
                    && first.threshold == fields.threshold
                    && first.method == fields.method
                    && first.prime_field_size == fields.prime_field_size;
                if !same {
                    return Err(KmipError::InvalidField(format!(
                        "object {uid} is a part of another split"
                    )));
                }
            }
            if parts.iter().any(|(f, _)| f.key_part_identifier == fields.key_part_identifier) {
                return Err(KmipError::InvalidField(format!(
                    "Key Part Identifier {} given twice",
                    fields.key_part_identifier
                )));
            }
            if let Some(k) = &obj.kmip {
                described = (described.0.or(k.algorithm), described.1.or(k.length));
            }
            let material = self.material(&obj).await?;
            parts.push((fields, material));
        }
        let mut new = self.template(&request.attributes, object_type).await?;
        let length = new.length.or(described.1);
        let secret = join(&parts, length)?;
        drop(parts);
        if object_type == ObjectType::SYMMETRIC_KEY {
            let algorithm =
                CryptographicAlgorithm(new.algorithm.or(described.0).ok_or_else(|| {
                    KmipError::MissingData("the Cryptographic Algorithm of the joined key".into())
                })?);
            let bits = length.unwrap_or_else(|| i32::try_from(secret.len() * 8).unwrap_or(0));
            if check_algorithm(algorithm, bits)? != secret.len() {
                return Err(KmipError::CryptographicFailure(format!(
                    "the parts join into {} bytes, not a {bits}-bit {algorithm} key",
                    secret.len()
                )));
            }
            (new.algorithm, new.length) = (Some(algorithm.0), Some(bits));
            new.usage_mask.get_or_insert(default_usage_mask(algorithm));
        } else {
            new.secret_type = Some(request.secret_data_type.unwrap_or(SecretDataType::SEED).0);
            (new.algorithm, new.length) = (None, None);
        }
        // Formed from parts, not drawn: no Random Number Generator.
        new.registered_format = Some(default_format(object_type));
        let uid = self.store_new(object_type, new, &secret).await?;
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }
}

fn count(n: i32) -> R<u8> {
    u8::try_from(n).map_err(|_| KmipError::InvalidField(format!("{n} parts")))
}

/// `secret` split into `parts` parts, any `threshold` of which join it.
fn split(
    method: SplitKeyMethod,
    secret: &[u8],
    parts: i32,
    threshold: i32,
    prime: Option<&BigUint>,
) -> R<Vec<SecretBytes>> {
    let (n, k) = (count(parts)?, count(threshold)?);
    match (method, prime) {
        (SplitKeyMethod::XOR, _) => {
            let mut last = SecretBytes::from_slice(secret);
            let mut out = Vec::with_capacity(usize::from(n));
            for _ in 1..n {
                let part = random_secret(secret.len()).map_err(crypto)?;
                xor_into(last.expose_mut(), part.expose());
                out.push(part);
            }
            out.push(last);
            Ok(out)
        }
        // A polynomial of degree 0: each part is the key.
        (_, _) if k == 1 => Ok((0..n).map(|_| SecretBytes::from_slice(secret)).collect()),
        (SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD, Some(p)) => prime_split(secret, k, n, p),
        _ => Ok(shamir::split(secret, k, n)
            .map_err(kms)?
            .iter()
            .map(|s| SecretBytes::from_slice(s.y().expose()))
            .collect()),
    }
}

/// The secret `parts` (of one split, distinct) join into; `length` the
/// joined key's in bits, if known (a prime field's integer is padded to it).
fn join(parts: &[(SplitKeyFields, SecretBytes)], length: Option<i32>) -> R<SecretBytes> {
    let Some((first, first_part)) = parts.first() else {
        return Err(KmipError::MissingData("the parts to join".into()));
    };
    if parts.len() < usize::try_from(first.threshold).unwrap_or(usize::MAX) {
        // KMIP 1.4 §11.40: fewer identifiers than the threshold.
        return Err(KmipError::CryptographicFailure(format!(
            "{} parts of a split needing {}",
            parts.len(),
            first.threshold
        )));
    }
    let len = first_part.len();
    if first.method != SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD
        && parts.iter().any(|(_, m)| m.len() != len)
    {
        return Err(KmipError::InvalidField("the parts differ in length".into()));
    }
    match first.method {
        SplitKeyMethod::XOR => {
            let mut out = SecretBytes::zeroed(len);
            for (_, part) in parts {
                xor_into(out.expose_mut(), part.expose());
            }
            Ok(out)
        }
        _ if first.threshold == 1 => Ok(SecretBytes::from_slice(first_part.expose())),
        SplitKeyMethod::POLYNOMIAL_SHARING_GF_2_8 => {
            let k = count(first.threshold)?;
            let shares = parts
                .iter()
                .map(|(f, part)| {
                    let x = count(f.key_part_identifier)?;
                    shamir::Share::from_parts(k, x, SecretBytes::from_slice(part.expose()))
                        .map_err(kms)
                })
                .collect::<R<Vec<_>>>()?;
            shamir::combine(&shares).map_err(kms)
        }
        SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD => {
            let p = prime_field(first.prime_field_size.as_deref().unwrap_or_default())?;
            prime_join(parts, &p, length)
        }
        other => Err(KmipError::InvalidField(format!("Split Key Method {other} is not supported"))),
    }
}

fn xor_into(out: &mut [u8], with: &[u8]) {
    for (o, w) in out.iter_mut().zip(with) {
        *o ^= w;
    }
}

/// The prime a Prime Field Size gives (a Big Integer: two's complement,
/// big-endian), checked to be a prime of at most [`MAX_PRIME_BITS`].
fn prime_field(big: &[u8]) -> R<BigUint> {
    if big.first().is_some_and(|b| b & 0x80 != 0) {
        return Err(KmipError::InvalidField("a negative Prime Field Size".into()));
    }
    let p = BigUint::from_bytes_be(big);
    if p.bits() > MAX_PRIME_BITS {
        return Err(KmipError::InvalidField(format!(
            "a Prime Field Size of at most {MAX_PRIME_BITS} bits"
        )));
    }
    if !probably_prime(&p)? {
        return Err(KmipError::InvalidField("the Prime Field Size is not a prime".into()));
    }
    Ok(p)
}

/// A uniform-enough integer below `bound` (128 bits more than it, reduced).
fn random_below(bound: &BigUint) -> R<BigUint> {
    let bytes = usize::try_from(bound.bits().div_ceil(8)).unwrap_or(0) + 16;
    let raw = random_secret(bytes).map_err(crypto)?;
    Ok(BigUint::from_bytes_be(raw.expose()) % bound)
}

/// Miller-Rabin with random bases, after trial division by small primes.
fn probably_prime(n: &BigUint) -> R<bool> {
    const SMALL: [u32; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    let one = BigUint::from(1u32);
    let two = BigUint::from(2u32);
    if n < &two {
        return Ok(false);
    }
    for s in SMALL {
        if *n == BigUint::from(s) {
            return Ok(true);
        }
        if (n % s) == BigUint::from(0u32) {
            return Ok(false);
        }
    }
    let n1 = n - &one;
    let s = n1.trailing_zeros().unwrap_or(0);
    let d = &n1 >> s;
    let three = BigUint::from(3u32);
    for _ in 0..PRIME_ROUNDS {
        // A base in [2, n - 2].
        let a = random_below(&(n - &three))? + &two;
        let mut x = a.modpow(&d, n);
        if x == one || x == n1 {
            continue;
        }
        let mut witness = true;
        for _ in 1..s {
            x = x.modpow(&two, n);
            if x == n1 {
                witness = false;
                break;
            }
        }
        if witness {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `value` big-endian in exactly `width` bytes (it fits).
fn fixed_width(value: &BigUint, width: usize) -> SecretBytes {
    let bytes = SecretBytes::new(value.to_bytes_be());
    let mut out = SecretBytes::zeroed(width);
    let start = width.saturating_sub(bytes.len());
    out.expose_mut()[start..].copy_from_slice(&bytes.expose()[..width - start]);
    out
}

/// Shamir over GF(p). The big integers are not zeroed when dropped (the
/// library keeps its limbs in plain vectors); the parts and key are.
fn prime_split(secret: &[u8], k: u8, n: u8, p: &BigUint) -> R<Vec<SecretBytes>> {
    // §2.2.5: a prime bigger than 2^L.
    if p.bits() <= u64::try_from(secret.len() * 8).unwrap_or(u64::MAX) {
        return Err(KmipError::InvalidField(format!(
            "the Prime Field Size must exceed 2^{} (the key's length)",
            secret.len() * 8
        )));
    }
    let s = BigUint::from_bytes_be(secret);
    let width = usize::try_from(p.bits().div_ceil(8)).unwrap_or(0);
    let coefficients = (1..k).map(|_| random_below(p)).collect::<R<Vec<BigUint>>>()?;
    let mut out = Vec::with_capacity(usize::from(n));
    for x in 1..=n {
        let x = BigUint::from(x);
        let mut acc = BigUint::from(0u32);
        for c in coefficients.iter().rev() {
            acc = (acc * &x + c) % p;
        }
        let y = (acc * &x + &s) % p;
        out.push(fixed_width(&y, width));
    }
    Ok(out)
}

/// Lagrange interpolation at 0 over GF(p) of the first threshold parts.
fn prime_join(
    parts: &[(SplitKeyFields, SecretBytes)],
    p: &BigUint,
    length: Option<i32>,
) -> R<SecretBytes> {
    let k = usize::try_from(parts[0].0.threshold).unwrap_or(usize::MAX);
    let used = &parts[..k.min(parts.len())];
    let exponent = p - BigUint::from(2u32);
    let mut secret = BigUint::from(0u32);
    for (i, (fi, yi)) in used.iter().enumerate() {
        let xi = BigUint::from(fi.key_part_identifier.unsigned_abs());
        let (mut num, mut den) = (BigUint::from(1u32), BigUint::from(1u32));
        for (j, (fj, _)) in used.iter().enumerate() {
            if i != j {
                let xj = BigUint::from(fj.key_part_identifier.unsigned_abs());
                num = num * &xj % p;
                // xj - xi mod p, both below p.
                den = den * ((&xj + p - &xi) % p) % p;
            }
        }
        let y = BigUint::from_bytes_be(yi.expose()) % p;
        let basis = num * den.modpow(&exponent, p) % p;
        secret = (secret + y * basis) % p;
    }
    let width = match length {
        Some(bits) => usize::try_from(bits).ok().filter(|b| b % 8 == 0).map(|b| b / 8),
        None => None,
    }
    .ok_or_else(|| {
        KmipError::MissingData("the Cryptographic Length of a prime field split key".into())
    })?;
    // The key is below the prime: a longer length is no key of this split
    // (and the allocation stays bounded by the prime's).
    if u64::try_from(width * 8).unwrap_or(u64::MAX) >= p.bits() {
        return Err(KmipError::InvalidField(format!(
            "a {}-bit key is not below the {}-bit Prime Field Size",
            width * 8,
            p.bits()
        )));
    }
    if secret.bits() > u64::try_from(width * 8).unwrap_or(u64::MAX) {
        return Err(KmipError::CryptographicFailure(
            "the parts do not join into a key of their length".into(),
        ));
    }
    Ok(fixed_width(&secret, width))
}
