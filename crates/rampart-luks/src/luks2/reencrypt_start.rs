//! Starting a reencryption (the set-up half of cryptsetup's
//! `luks2_reencrypt.c`): re-encryption under a new key, encryption of
//! plaintext (with or without a data shift), decryption in place or with
//! the data moved down over the header. Each start is one header write
//! adding the backup segments, the reencrypt keyslot, its digest and the
//! requirement that keeps older tools out.

use rampart_crypto::SecretBytes;
use serde_json::Value;

use super::digest::{self, timed_digest_iterations};
use super::disk_metadata::encode_area;
use super::json::{self, DigestJson, IdRef, Keyslot, Metadata, U64Str};
use super::keyslot;
use super::layout::Layout;
use super::reencrypt;
use super::segment;
use super::token;
use super::Luks2;
use crate::io::MetadataIo;
use crate::pbkdf::{pbkdf_for_time, PbkdfChoice};
use crate::{Error, FormatOptions, Result};

/// What a new reencryption is to produce.
pub struct ReencryptPlan<'a> {
    pub new_key: &'a SecretBytes,
    pub cipher: crate::DataCipher,
    pub sector_size: u32,
    pub resilience: reencrypt::Resilience,
    pub pbkdf: &'a PbkdfChoice,
    pub passphrases: &'a [&'a [u8]],
    /// Tokens added in the same header write, naming new keyslots (a
    /// key-manager binding of each new keyslot that holds a wrapped secret).
    pub tokens: &'a [Value],
    /// The KDF of each new keyslot, in the order of `passphrases`, where
    /// it differs from `pbkdf` (a random secret needs no stretching).
    pub keyslot_pbkdfs: &'a [&'a PbkdfChoice],
}

/// What [`Luks2::format_encrypt`] sets up.
#[derive(Debug, Clone)]
pub struct EncryptPlan {
    pub resilience: reencrypt::Resilience,
    /// Bytes of the data device.
    pub device_len: u64,
    /// Encryption in place with a data shift of this many bytes (the
    /// header takes the first ones; the data offset equals it), backward,
    /// as cryptsetup's `--reduce-device-size` (twice the shift). The first
    /// `shift` bytes of data must already be copied to the last `shift`
    /// bytes of the device. With a detached header (`--reduce-device-size`
    /// with `--header`, the shift the whole reduction) the data stays
    /// where it is, at offset 0, and is encrypted backward in hotzones of
    /// the shift.
    pub shift: Option<u64>,
}

impl Luks2 {
    /// What every start on an existing header checks first: no
    /// requirement, no change on disk since loading, and the old key.
    fn check_start(&self, io: &dyn MetadataIo, old_key: &SecretBytes) -> Result<()> {
        self.check_requirements()?;
        self.check_unchanged(io)?;
        if !self.verify_volume_key(old_key)? {
            return Err(Error::invalid("the volume key does not match this volume's digest"));
        }
        Ok(())
    }

    /// Completes a decryption's start in `meta` (its segments laid out):
    /// the reencrypt keyslot `rks` over `area` bound to the old key, then
    /// the one header write.
    #[allow(clippy::too_many_arguments)]
    fn write_decrypt_start(
        &mut self,
        io: &dyn MetadataIo,
        mut meta: Metadata,
        (rks, area): (usize, json::Area),
        start: ReencryptStart<'_>,
        old_key: &SecretBytes,
        hash: rampart_crypto::HashAlg,
        forced_iterations: bool,
    ) -> Result<()> {
        add_reencrypt_keyslot(&mut meta, (rks, area), start, (Some(old_key), None), hash, |len| {
            timed_digest_iterations(hash, len, forced_iterations)
        })?;
        encode_area(&meta, self.bin.hdr_size)?;
        self.update_reencrypt(io, |m| {
            *m = meta;
            Ok(())
        })
    }

    /// Starts re-encryption under `plan.new_key`: new keyslots for each
    /// passphrase (their material written and synced first), then one
    /// header write adding the new digest, the backup segments, the
    /// reencrypt keyslot with its digest, and the requirement.
    pub(crate) fn reencrypt_init(
        &mut self,
        io: &dyn MetadataIo,
        old_key: &SecretBytes,
        plan: &ReencryptPlan<'_>,
    ) -> Result<Vec<usize>> {
        self.check_start(io, old_key)?;
        let (seg_id, seg) = segment::data_segment(&self.meta)?;
        if seg_id != 0 {
            return Err(Error::corrupt("the data segment is not segment 0"));
        }
        let seg = seg.clone();
        plan.cipher.check_key_bytes(plan.new_key.len())?;
        if !matches!(plan.sector_size, 512 | 1024 | 2048 | 4096) {
            return Err(Error::invalid(format!(
                "sector size {} must be 512, 1024, 2048 or 4096",
                plan.sector_size
            )));
        }
        if plan.passphrases.is_empty() {
            return Err(Error::invalid("no passphrase for the new volume key"));
        }
        let (old_digest, _) = self.segment_digest()?;
        let mut meta = self.meta.clone();
        let free_digest = |meta: &Metadata| {
            (0..=json::MAX_ID)
                .find(|d| !meta.digests.contains_key(d))
                .ok_or_else(|| Error::NoSpace("all LUKS2 digest ids are in use".into()))
        };
        let new_digest = free_digest(&meta)?;
        let digest_iterations = timed_digest_iterations(
            plan.pbkdf.hash,
            plan.new_key.len(),
            plan.pbkdf.forced_iterations.is_some(),
        )?;
        meta.digests.insert(
            new_digest,
            digest::create(
                plan.new_key.expose(),
                plan.pbkdf.hash,
                digest_iterations,
                Vec::new(),
                Vec::new(),
            )?,
        );
        let params = pbkdf_for_time(plan.pbkdf, plan.new_key.len())?;
        let mut stores = Vec::new();
        let mut new_slots = Vec::new();
        for (index, passphrase) in plan.passphrases.iter().enumerate() {
            let (params, hash) = match plan.keyslot_pbkdfs.get(index) {
                Some(own) => (pbkdf_for_time(own, plan.new_key.len())?, own.hash),
                None => (params, plan.pbkdf.hash),
            };
            let id = keyslot::free_id(&meta)
                .ok_or_else(|| Error::NoSpace("all 32 LUKS2 keyslots are in use".into()))?;
            let area = keyslot::find_area(&meta, &self.layout, plan.new_key.len())?;
            let ks = keyslot::new_keyslot(
                plan.new_key.len(),
                (plan.cipher, plan.new_key.len()),
                area,
                &params,
                hash,
            )?;
            meta.keyslots.insert(id, Keyslot::Luks2(Box::new(ks.clone())));
            if let Some(DigestJson::Pbkdf2(d)) = meta.digests.get_mut(&new_digest) {
                d.keyslots.push(IdRef(id));
            }
            stores.push((ks, *passphrase));
            new_slots.push(id);
        }
        // Segments: 0 stays; the backups describe before and after.
        let mut prev = seg.clone();
        prev.flags = Some(vec!["backup-previous".into()]);
        let mut fin = seg.clone();
        fin.encryption = plan.cipher.spec().into();
        fin.sector_size = plan.sector_size;
        fin.iv_tweak = U64Str(0);
        fin.integrity = None;
        fin.flags = Some(vec!["backup-final".into()]);
        fin.extra = serde_json::Map::new();
        prev.extra = serde_json::Map::new();
        meta.segments.insert(1, json::SegmentJson::Crypt(Box::new(prev)));
        meta.segments.insert(2, json::SegmentJson::Crypt(Box::new(fin)));
        for (d, list) in [(old_digest, vec![IdRef(0), IdRef(1)]), (new_digest, vec![IdRef(2)])] {
            if let Some(digest) = meta.digests.get_mut(&d) {
                digest.set_segments(list);
            }
        }
        let rks = keyslot::free_id(&meta)
            .ok_or_else(|| Error::NoSpace("all 32 LUKS2 keyslots are in use".into()))?;
        let area = keyslot::find_max_gap(&meta, &self.layout)?;
        add_reencrypt_keyslot(
            &mut meta,
            (rks, area),
            ReencryptStart {
                resilience: &plan.resilience,
                mode: reencrypt::ReencryptMode::Reencrypt,
                direction: reencrypt::ReencryptDirection::Forward,
                requirement: reencrypt::REQUIREMENT_V2,
            },
            (Some(old_key), Some(plan.new_key)),
            plan.pbkdf.hash,
            |_| Ok(digest_iterations),
        )?;
        for token in plan.tokens {
            token::check_new_token(token, &meta)?;
            let named_new = token.get("keyslots").and_then(Value::as_array).is_some_and(|list| {
                !list.is_empty()
                    && list.iter().all(|v| {
                        v.as_str()
                            .and_then(|s| s.parse::<usize>().ok())
                            .is_some_and(|id| new_slots.contains(&id))
                    })
            });
            if !named_new {
                return Err(Error::invalid(
                    "a token added with a reencryption must name only new keyslots",
                ));
            }
            let id = token::free_id(&meta)
                .ok_or_else(|| Error::NoSpace("all 32 LUKS2 tokens are in use".into()))?;
            meta.tokens.insert(id, token.clone());
        }
        encode_area(&meta, self.bin.hdr_size)?;
        for (ks, passphrase) in &stores {
            keyslot::store(io, ks, plan.new_key, passphrase)?;
        }
        self.update_reencrypt(io, |m| {
            *m = meta;
            Ok(())
        })?;
        Ok(new_slots)
    }

    /// Writes a new header whose data is plaintext about to be encrypted
    /// under `volume_key` (mode encrypt, as `cryptsetup reencrypt
    /// --encrypt` initialises it): keyslot 0 for `passphrase`, the plain
    /// data as `linear` segments, the backups, the reencrypt keyslot and
    /// its digest, the requirement; one header write.
    pub(crate) fn format_encrypt(
        io: &dyn MetadataIo,
        opts: &FormatOptions,
        volume_key: &SecretBytes,
        passphrase: &[u8],
        plan: &EncryptPlan,
    ) -> Result<Self> {
        let hash = opts.pbkdf.hash;
        let forced = opts.pbkdf.forced_iterations.is_some();
        let adjust = |meta: &mut Metadata, layout: &Layout| -> Result<()> {
            let data_offset = meta.segments.get(&0).map_or(0, json::SegmentJson::offset);
            let final_seg =
                meta.segments.remove(&0).ok_or_else(|| Error::corrupt("format made no segment"))?;
            let json::SegmentJson::Crypt(mut fin) = final_seg else {
                return Err(Error::corrupt("format made no crypt segment"));
            };
            fin.flags = Some(vec!["backup-final".into()]);
            let (direction, resilience) = match plan.shift {
                // A detached header with a data shift, as cryptsetup
                // writes it for `--reduce-device-size` with `--header`:
                // the data stays in place (no moved segment), encrypted
                // backward in hotzones of the shift, the whole device one
                // fixed-size plaintext segment.
                Some(shift) if opts.detached_header => {
                    let dev_size = plan.device_len.saturating_sub(data_offset);
                    if shift == 0 || dev_size < shift {
                        return Err(Error::invalid(format!(
                            "a data shift of {shift} bytes with a detached header needs at least {shift} bytes of data"
                        )));
                    }
                    meta.segments
                        .insert(0, reencrypt::linear_segment(data_offset, Some(dev_size), None));
                    meta.segments.insert(
                        1,
                        reencrypt::linear_segment(
                            data_offset,
                            Some(dev_size),
                            Some(vec!["backup-previous".into()]),
                        ),
                    );
                    meta.segments.insert(2, json::SegmentJson::Crypt(fin));
                    (
                        reencrypt::ReencryptDirection::Backward,
                        reencrypt::Resilience::Datashift {
                            kind: "datashift".into(),
                            shift,
                            checksum: None,
                        },
                    )
                }
                Some(shift) => {
                    let dev_size = plan.device_len.saturating_sub(data_offset);
                    let data_size = dev_size.saturating_sub(shift);
                    if shift == 0 || data_offset != shift || data_size < shift {
                        return Err(Error::invalid(format!(
                            "a data shift of {shift} bytes needs a device of at least {} bytes with the data offset equal to the shift",
                            shift.saturating_mul(3)
                        )));
                    }
                    let first = reencrypt::linear_segment(dev_size, Some(shift), None);
                    meta.segments.insert(0, first);
                    let mut next = 1;
                    if data_size > shift {
                        meta.segments.insert(
                            1,
                            reencrypt::linear_segment(shift, Some(data_size - shift), None),
                        );
                        next = 2;
                    }
                    meta.segments.insert(
                        next,
                        reencrypt::linear_segment(
                            dev_size,
                            Some(shift),
                            Some(vec!["backup-moved-segment".into()]),
                        ),
                    );
                    meta.segments.insert(
                        next + 1,
                        reencrypt::linear_segment(
                            0,
                            Some(data_size),
                            Some(vec!["backup-previous".into()]),
                        ),
                    );
                    meta.segments.insert(next + 2, json::SegmentJson::Crypt(fin));
                    (
                        reencrypt::ReencryptDirection::Backward,
                        reencrypt::Resilience::Datashift {
                            kind: "datashift".into(),
                            shift,
                            checksum: None,
                        },
                    )
                }
                None => {
                    meta.segments.insert(0, reencrypt::linear_segment(data_offset, None, None));
                    meta.segments.insert(
                        1,
                        reencrypt::linear_segment(
                            data_offset,
                            None,
                            Some(vec!["backup-previous".into()]),
                        ),
                    );
                    meta.segments.insert(2, json::SegmentJson::Crypt(fin));
                    (reencrypt::ReencryptDirection::Forward, plan.resilience.clone())
                }
            };
            let fin_id = reencrypt::segment_by_flag(meta, "backup-final")
                .ok_or_else(|| Error::corrupt("no backup-final segment"))?;
            if let Some(d) = meta.digests.get_mut(&0) {
                d.set_segments(vec![IdRef(fin_id)]);
            }
            let rks = keyslot::free_id(meta)
                .ok_or_else(|| Error::NoSpace("all 32 LUKS2 keyslots are in use".into()))?;
            let mut area = keyslot::find_max_gap(meta, layout)?;
            match &resilience {
                // In place, the area keeps Rampart's record of each
                // hotzone's plaintext (see `in_place_shift_area`).
                reencrypt::Resilience::Datashift { shift, .. } if opts.detached_header => {
                    area.size = area.size.min(reencrypt::in_place_shift_area(*shift));
                }
                // cryptsetup's datashift area holds nothing: one block.
                reencrypt::Resilience::Datashift { .. } => area.size = area.size.min(4096),
                _ => {}
            }
            add_reencrypt_keyslot(
                meta,
                (rks, area),
                ReencryptStart {
                    resilience: &resilience,
                    mode: reencrypt::ReencryptMode::Encrypt,
                    direction,
                    requirement: reencrypt::REQUIREMENT_V2,
                },
                (None, Some(volume_key)),
                hash,
                |len| timed_digest_iterations(hash, len, forced),
            )
        };
        Self::format_with(io, opts, volume_key, passphrase, &adjust)
    }

    /// Starts decrypting the data to plaintext in place (mode decrypt,
    /// backward, as `cryptsetup reencrypt --decrypt --header` initialises
    /// a detached header): the backups (the plaintext one `linear`), the
    /// reencrypt keyslot and its digest, the requirement; one header write.
    pub(crate) fn reencrypt_init_decrypt(
        &mut self,
        io: &dyn MetadataIo,
        old_key: &SecretBytes,
        resilience: reencrypt::Resilience,
        hash: rampart_crypto::HashAlg,
        forced_iterations: bool,
    ) -> Result<()> {
        self.check_start(io, old_key)?;
        let (seg_id, seg) = segment::data_segment(&self.meta)?;
        if seg_id != 0 {
            return Err(Error::corrupt("the data segment is not segment 0"));
        }
        let mut prev = seg.clone();
        let (old_digest, _) = self.segment_digest()?;
        let mut meta = self.meta.clone();
        prev.flags = Some(vec!["backup-previous".into()]);
        prev.extra = serde_json::Map::new();
        let fin = reencrypt::linear_segment(prev.offset.0, None, Some(vec!["backup-final".into()]));
        meta.segments.insert(1, json::SegmentJson::Crypt(Box::new(prev)));
        meta.segments.insert(2, fin);
        if let Some(digest) = meta.digests.get_mut(&old_digest) {
            digest.set_segments(vec![IdRef(0), IdRef(1)]);
        }
        let rks = keyslot::free_id(&meta)
            .ok_or_else(|| Error::NoSpace("all 32 LUKS2 keyslots are in use".into()))?;
        let area = keyslot::find_max_gap(&meta, &self.layout)?;
        let start = ReencryptStart {
            resilience: &resilience,
            mode: reencrypt::ReencryptMode::Decrypt,
            direction: reencrypt::ReencryptDirection::Backward,
            requirement: reencrypt::REQUIREMENT_V2,
        };
        self.write_decrypt_start(io, meta, (rks, area), start, old_key, hash, forced_iterations)
    }

    /// Starts a decryption that moves the data down over the header (mode
    /// decrypt, forward, `online-reencrypt-v3`), as `cryptsetup reencrypt
    /// --decrypt --header NEWFILE` initialises an attached header. `self`
    /// is loaded from NEWFILE, a copy of the attached header; the caller
    /// has already copied the first `shift` bytes of ciphertext (shift:
    /// the data offset) to the start of the data device, where the moved
    /// segment says they are. `resilience` is `datashift-checksum` (with
    /// its hash and block) or `datashift-journal`; `device_len` is the
    /// data device's size. One header write.
    pub(crate) fn reencrypt_init_decrypt_shift(
        &mut self,
        io: &dyn MetadataIo,
        old_key: &SecretBytes,
        resilience: reencrypt::Resilience,
        device_len: u64,
        hash: rampart_crypto::HashAlg,
        forced_iterations: bool,
    ) -> Result<()> {
        self.check_start(io, old_key)?;
        let (seg_id, seg) = segment::data_segment(&self.meta)?;
        if seg_id != 0 || !matches!(seg.size, json::SizeField::Dynamic) {
            return Err(Error::invalid(
                "decryption with a data shift needs one data segment 0 of dynamic size",
            ));
        }
        let shift = seg.offset.0;
        let unit = u64::from(seg.sector_size).max(4096);
        let data_size = device_len.saturating_sub(shift) / u64::from(seg.sector_size)
            * u64::from(seg.sector_size);
        if shift == 0 || shift % unit != 0 || data_size <= shift {
            return Err(Error::invalid(format!(
                "decryption with a data shift moves the data down by its offset ({shift} bytes): it needs an offset that is a non-zero multiple of {unit} bytes and more data than that ({data_size} bytes)"
            )));
        }
        let kind = match &resilience {
            reencrypt::Resilience::Datashift { kind, checksum, .. }
                if (kind == "datashift-checksum" && checksum.is_some())
                    || kind == "datashift-journal" =>
            {
                kind.clone()
            }
            other => {
                return Err(Error::invalid(format!(
                "resilience {} cannot protect a decryption with a data shift (checksum or journal)",
                other.name()
            )))
            }
        };
        let seg = seg.clone();
        let (old_digest, _) = self.segment_digest()?;
        let mut meta = self.meta.clone();
        let crypt = |offset: u64, size: Option<u64>, iv: u64, flag: Option<&str>| {
            let mut c = seg.clone();
            c.offset = U64Str(offset);
            c.size = size.map_or(json::SizeField::Dynamic, json::SizeField::Bytes);
            c.iv_tweak = U64Str(iv);
            c.flags = flag.map(|f| vec![f.to_owned()]);
            c.extra = serde_json::Map::new();
            json::SegmentJson::Crypt(Box::new(c))
        };
        let iv = seg.iv_tweak.0;
        meta.segments.clear();
        meta.segments.insert(0, crypt(0, Some(shift), iv, None));
        meta.segments.insert(1, crypt(2 * shift, None, iv + shift / 512, None));
        meta.segments.insert(2, crypt(0, Some(shift), iv, Some("backup-moved-segment")));
        meta.segments.insert(3, crypt(shift, None, iv, Some("backup-previous")));
        meta.segments
            .insert(4, reencrypt::linear_segment(0, None, Some(vec!["backup-final".into()])));
        if let Some(digest) = meta.digests.get_mut(&old_digest) {
            digest.set_segments(vec![IdRef(0), IdRef(1), IdRef(2), IdRef(3)]);
        }
        let rks = keyslot::free_id(&meta)
            .ok_or_else(|| Error::NoSpace("all 32 LUKS2 keyslots are in use".into()))?;
        let area = keyslot::find_max_gap(&meta, &self.layout)?;
        if kind == "datashift-journal" && area.size < shift {
            return Err(Error::invalid(format!(
                "the journal ({} bytes of free keyslots area) cannot hold the moved first {shift} bytes, as cryptsetup also finds: use --resilience checksum",
                area.size
            )));
        }
        let start = ReencryptStart {
            resilience: &resilience,
            mode: reencrypt::ReencryptMode::Decrypt,
            direction: reencrypt::ReencryptDirection::Forward,
            requirement: reencrypt::REQUIREMENT_V3,
        };
        self.write_decrypt_start(io, meta, (rks, area), start, old_key, hash, forced_iterations)
    }
}

/// What a reencryption start records in its reencrypt keyslot.
struct ReencryptStart<'a> {
    resilience: &'a reencrypt::Resilience,
    mode: reencrypt::ReencryptMode,
    direction: reencrypt::ReencryptDirection,
    /// `online-reencrypt-v2`, or `-v3` where cryptsetup 2.6 writes it.
    requirement: &'static str,
}

/// Adds what every reencryption start writes beside its segments: the
/// reencrypt keyslot `rks` over `area`, the requirement that keeps older
/// tools out, and the digest binding the metadata to the (old, new) keys
/// (cryptsetup's reencryption verification digest) with `iterations` for
/// the length of what it covers.
fn add_reencrypt_keyslot(
    meta: &mut Metadata,
    (rks, area): (usize, json::Area),
    start: ReencryptStart<'_>,
    (old_key, new_key): (Option<&SecretBytes>, Option<&SecretBytes>),
    hash: rampart_crypto::HashAlg,
    iterations: impl FnOnce(usize) -> Result<u32>,
) -> Result<()> {
    let raw = reencrypt::new_keyslot(
        area.offset,
        area.size,
        start.resilience,
        start.mode,
        start.direction,
    );
    meta.keyslots.insert(rks, Keyslot::Other { kind: "reencrypt".into(), area, raw });
    let reqs = meta.config.requirements.get_or_insert_with(|| json::Requirements {
        mandatory: None,
        extra: serde_json::Map::new(),
    });
    reqs.mandatory.get_or_insert_with(Vec::new).push(start.requirement.into());
    let data = reencrypt::verification_data(meta, old_key, new_key)?;
    let iterations = iterations(data.len())?;
    let id = (0..=json::MAX_ID)
        .find(|d| !meta.digests.contains_key(d))
        .ok_or_else(|| Error::NoSpace("all LUKS2 digest ids are in use".into()))?;
    meta.digests
        .insert(id, digest::create(data.expose(), hash, iterations, vec![IdRef(rks)], Vec::new())?);
    Ok(())
}
