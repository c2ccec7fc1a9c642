//! Authenticated sectors as dm-crypt seals them over dm-integrity
//! (Linux 6.1 `crypt_convert_block_aead`), one LUKS sector at a time.
//!
//! * `hmac(sha256)` / `hmac(sha512)` with `aes-xts-plain64`
//!   (`authenc(hmac(…),xts(aes))`): the ciphertext is XTS under the
//!   encryption key with the `plain64` IV of the sector's 512-byte number
//!   plus `iv_tweak` (also for 4096-byte sectors); the tag is the HMAC of
//!   the sector's 512-byte number (little-endian 64 bits, without
//!   `iv_tweak`), the 16-byte IV and the ciphertext.
//! * `aead` with `aes-gcm-random`: a fresh random 12-byte IV per write;
//!   AES-GCM with the sector number and the IV as associated data; the
//!   16-byte GCM tag, then the IV.
//!
//! Tag bytes beyond those (dm-integrity's tag size rounded up) are zero
//! when written and ignored when read, as dm-crypt does.

use std::io;
use std::sync::Mutex;

use rampart_crypto::{fill_random, plain64, Gcm, HashAlg, HmacKey, SecretBytes, Xts};
use rampart_luks::{IntegrityKind, IntegritySegment};

use crate::VolumeError;

const GCM_TAG: usize = 16;
const GCM_IV: usize = 12;

/// Seals and opens whole sectors of one segment.
pub(crate) struct SectorAuth {
    kind: Kind,
    sector_size: usize,
    iv_tweak: u64,
    /// dm-integrity's tag size: the bytes each sector has on disk.
    tag_size: usize,
}

enum Kind {
    Hmac(Box<HmacParts>),
    Gcm(Gcm),
}

struct HmacParts {
    /// XTS instances are not `Sync`: a pool, one per running request part.
    pool: Mutex<Vec<Xts>>,
    template: Mutex<Xts>,
    mac: HmacKey,
    mac_len: usize,
}

impl std::fmt::Debug for SectorAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Hmac(parts) => format!("aes-xts-plain64 + hmac ({}-byte tags)", parts.mac_len),
            Kind::Gcm(_) => "aes-gcm-random".to_owned(),
        };
        f.debug_struct("SectorAuth")
            .field("kind", &kind)
            .field("sector_size", &self.sector_size)
            .field("tag_size", &self.tag_size)
            .finish_non_exhaustive()
    }
}

impl SectorAuth {
    /// The keys of `segment` from its volume key.
    pub(crate) fn new(
        segment: &IntegritySegment,
        volume_key: &SecretBytes,
    ) -> Result<Self, VolumeError> {
        segment.integrity.check_journal()?;
        let tags = segment.integrity.tag_layout(&segment.encryption)?;
        let keys = segment.integrity.key_layout(volume_key.len())?;
        let key = volume_key.expose();
        let encryption = key.get(keys.encryption.clone()).unwrap_or_default();
        let kind = match (&segment.integrity.kind, keys.integrity) {
            (IntegrityKind::HmacSha256 | IntegrityKind::HmacSha512, Some(range)) => {
                let (alg, mac_len) = if segment.integrity.kind == IntegrityKind::HmacSha256 {
                    (HashAlg::Sha256, 32)
                } else {
                    (HashAlg::Sha512, 64)
                };
                if tags.auth.len() != mac_len {
                    return Err(rampart_luks::Error::InvalidArgument("HMAC tag size".into()).into());
                }
                let mac = HmacKey::new(alg, key.get(range).unwrap_or_default());
                let xts = Xts::new_accepting_identical_halves(encryption)?;
                Kind::Hmac(Box::new(HmacParts {
                    pool: Mutex::new(Vec::new()),
                    template: Mutex::new(xts),
                    mac,
                    mac_len,
                }))
            }
            (IntegrityKind::Aead, None) => Kind::Gcm(Gcm::new(encryption)?),
            (kind, _) => {
                return Err(rampart_luks::Error::UnsupportedCipher(format!(
                    "integrity \"{}\" with a {}-byte volume key",
                    kind.spec(),
                    volume_key.len()
                ))
                .into())
            }
        };
        Ok(Self {
            kind,
            sector_size: segment.sector_size as usize,
            iv_tweak: segment.iv_tweak,
            tag_size: tags.tag_size(),
        })
    }

    /// The tag bytes a sector needs (at most dm-integrity's tag size).
    pub(crate) fn tag_size(&self) -> usize {
        self.tag_size
    }

    fn units(&self) -> u64 {
        (self.sector_size / 512) as u64
    }

    fn with_xts<T>(
        &self,
        pool: &Mutex<Vec<Xts>>,
        template: &Mutex<Xts>,
        f: impl FnOnce(&mut Xts) -> Result<T, rampart_crypto::CryptoError>,
    ) -> io::Result<T> {
        let pooled = lock(pool).pop();
        let mut xts = match pooled {
            Some(xts) => xts,
            None => lock(template).try_clone().map_err(io::Error::other)?,
        };
        let result = f(&mut xts).map_err(io::Error::other);
        lock(pool).push(xts);
        result
    }

    /// Encrypts and tags whole sectors: `plain` into `data` (the same
    /// length) and each sector's tag into `tags` (`disk_tag` bytes a
    /// sector, the rest zeroed). `first` is the first sector's number in
    /// 512-byte units of the plaintext device.
    pub(crate) fn seal(
        &self,
        plain: &[u8],
        data: &mut [u8],
        tags: &mut [u8],
        disk_tag: usize,
        first: u64,
    ) -> io::Result<()> {
        let sector = self.sector_size;
        let count = plain.len() / sector;
        if plain.len() % sector != 0 || data.len() != plain.len() || tags.len() != count * disk_tag
        {
            return Err(io::Error::other("sealing buffers do not match"));
        }
        match &self.kind {
            Kind::Hmac(parts) => {
                let HmacParts { pool, template, mac, mac_len } = &**parts;
                self.with_xts(pool, template, |xts| {
                    xts.encrypt_sectors_to(
                        plain,
                        data,
                        sector,
                        first.wrapping_add(self.iv_tweak),
                        self.units(),
                    )
                })?;
                for (i, (ciphertext, tag)) in
                    data.chunks_exact(sector).zip(tags.chunks_exact_mut(disk_tag)).enumerate()
                {
                    let number = first.wrapping_add(i as u64 * self.units());
                    self.hmac(mac, number, ciphertext, &mut tag[..*mac_len]);
                    tag[*mac_len..].fill(0);
                }
            }
            Kind::Gcm(gcm) => {
                let mut ivs = vec![0u8; count * GCM_IV];
                fill_random(&mut ivs).map_err(io::Error::other)?;
                for (i, ((out, input), (tag, iv))) in data
                    .chunks_exact_mut(sector)
                    .zip(plain.chunks_exact(sector))
                    .zip(tags.chunks_exact_mut(disk_tag).zip(ivs.chunks_exact(GCM_IV)))
                    .enumerate()
                {
                    let number = first.wrapping_add(i as u64 * self.units());
                    let iv: &[u8; GCM_IV] = iv.try_into().map_err(io::Error::other)?;
                    out.copy_from_slice(input);
                    let gcm_tag = gcm.seal(iv, &aad(number, iv), out).map_err(io::Error::other)?;
                    tag[..GCM_TAG].copy_from_slice(&gcm_tag);
                    tag[GCM_TAG..GCM_TAG + GCM_IV].copy_from_slice(iv);
                    tag[GCM_TAG + GCM_IV..].fill(0);
                }
            }
        }
        Ok(())
    }

    /// Verifies each sector of `data` against its tag and decrypts it in
    /// place. A sector whose tag does not verify fails the whole call with
    /// [`io::ErrorKind::InvalidData`] naming it; no plaintext of it is
    /// left in `data`.
    pub(crate) fn open(
        &self,
        data: &mut [u8],
        tags: &[u8],
        disk_tag: usize,
        first: u64,
    ) -> io::Result<()> {
        let sector = self.sector_size;
        if data.len() % sector != 0 || tags.len() != data.len() / sector * disk_tag {
            return Err(io::Error::other("opening buffers do not match"));
        }
        match &self.kind {
            Kind::Hmac(parts) => {
                let HmacParts { pool, template, mac, mac_len } = &**parts;
                for (i, (ciphertext, tag)) in
                    data.chunks_exact(sector).zip(tags.chunks_exact(disk_tag)).enumerate()
                {
                    let number = first.wrapping_add(i as u64 * self.units());
                    let mut digest = [0u8; 64];
                    self.hmac(mac, number, ciphertext, &mut digest[..*mac_len]);
                    if !constant_time_eq(&digest[..*mac_len], &tag[..*mac_len]) {
                        data.fill(0);
                        return Err(tag_mismatch(number));
                    }
                }
                self.with_xts(pool, template, |xts| {
                    xts.decrypt_sectors(
                        data,
                        sector,
                        first.wrapping_add(self.iv_tweak),
                        self.units(),
                    )
                })
            }
            Kind::Gcm(gcm) => {
                for (i, (block, tag)) in
                    data.chunks_exact_mut(sector).zip(tags.chunks_exact(disk_tag)).enumerate()
                {
                    let number = first.wrapping_add(i as u64 * self.units());
                    let gcm_tag: &[u8; GCM_TAG] =
                        tag[..GCM_TAG].try_into().map_err(io::Error::other)?;
                    let iv: &[u8; GCM_IV] =
                        tag[GCM_TAG..GCM_TAG + GCM_IV].try_into().map_err(io::Error::other)?;
                    if gcm.open(iv, &aad(number, iv), block, gcm_tag).is_err() {
                        data.fill(0);
                        return Err(tag_mismatch(number));
                    }
                }
                Ok(())
            }
        }
    }

    /// dm-crypt's authenc HMAC over sector number, IV and ciphertext,
    /// into `out` (the tag's length). A tag is no secret: it is stored
    /// beside the data, so it takes no locked allocation.
    fn hmac(&self, mac: &HmacKey, number: u64, ciphertext: &[u8], out: &mut [u8]) {
        let mut m = mac.mac();
        m.update(&number.to_le_bytes());
        m.update(&plain64(number.wrapping_add(self.iv_tweak)));
        m.update(ciphertext);
        m.finish_into(out);
    }
}

/// AES-GCM's associated data: the sector number, then the IV.
fn aad(number: u64, iv: &[u8; GCM_IV]) -> [u8; 8 + GCM_IV] {
    let mut aad = [0u8; 8 + GCM_IV];
    aad[..8].copy_from_slice(&number.to_le_bytes());
    aad[8..].copy_from_slice(iv);
    aad
}

/// The error a sector whose tag does not verify gives (callers map
/// `InvalidData` to EIO).
pub(crate) fn tag_mismatch(sector: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "sector {sector} (byte {}) failed its integrity check (tag mismatch)",
            sector.saturating_mul(512)
        ),
    )
}

/// Compares in time independent of where the bytes differ, so that a
/// forger learns nothing from how long a refusal takes.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
