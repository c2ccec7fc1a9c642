//! LUKS2: loading (with recovery from either header copy), crash-safe
//! writing, formatting and keyslot and token management.

pub(crate) mod binary;
mod digest;
mod dump;
pub(crate) mod json;
mod keyslot;
pub(crate) mod reencrypt;
mod segment;
mod token;
mod validate;

use rampart_crypto::{fill_random, SecretBytes};
use serde_json::Value;

use self::binary::{BinaryHeader, Copy, RawCopy, BIN_SIZE, HDR_SIZES, SALT_LEN};
use self::json::{Config, DigestJson, IdRef, Keyslot, Metadata, U64Str};
use self::validate::{Layout, MAX_KEYSLOTS_SIZE};
use crate::io::{write_random, write_zeros, MetadataIo};
use crate::pbkdf::{pbkdf2_iterations_for, pbkdf_for_time, PbkdfChoice};
use crate::{Error, FormatOptions, LoadReport, Result, Segment};

/// cryptsetup's `LUKS2_DEFAULT_HDR_SIZE`: header plus keyslots, 16 MiB.
const DEFAULT_HDR_AND_KEYSLOTS: u64 = 16 * 1024 * 1024;
/// Data is aligned to 1 MiB by default.
const DATA_ALIGNMENT: u64 = 1024 * 1024;
/// Time target of the volume key digest (cryptsetup's `LUKS_MKD_ITERATIONS_MS`).
const DIGEST_ITER_MS: u32 = 125;

/// A loaded, validated LUKS2 header.
#[derive(Debug, Clone)]
pub(crate) struct Luks2 {
    /// The binary header of the copy in use (its seqid is the current one).
    pub(crate) bin: BinaryHeader,
    /// Each copy's salt (primary, secondary); `None` for a copy that was
    /// unreadable, which gets a fresh salt when rewritten.
    salts: [Option<[u8; SALT_LEN]>; 2],
    pub(crate) meta: Metadata,
    pub(crate) layout: Layout,
    /// The copy the header was loaded from.
    loaded_from: Copy,
}

fn salt_index(copy: Copy) -> usize {
    match copy {
        Copy::Primary => 0,
        Copy::Secondary => 1,
    }
}

fn copy_offset(copy: Copy, hdr_size: u64) -> u64 {
    match copy {
        Copy::Primary => 0,
        Copy::Secondary => hdr_size,
    }
}

/// The message of an error without its "corrupt LUKS header" prefix.
fn reason(e: &Error) -> String {
    match e {
        Error::Corrupt(msg) => msg.clone(),
        other => other.to_string(),
    }
}

struct GoodCopy {
    raw: RawCopy,
    meta: Metadata,
    layout: Layout,
}

fn try_copy(io: &dyn MetadataIo, dev_len: u64, offset: u64, copy: Copy) -> Result<GoodCopy> {
    let raw = binary::read_copy(io, dev_len, offset, copy)?;
    let meta = Metadata::parse(&raw.json)
        .map_err(|e| Error::corrupt(format!("{} header: {}", copy.name(), reason(&e))))?;
    let layout = validate::validate(&meta, raw.header.hdr_size)
        .map_err(|e| Error::corrupt(format!("{} header: {}", copy.name(), reason(&e))))?;
    Ok(GoodCopy { raw, meta, layout })
}

/// The size field of a binary header at `offset`, if one decodes there
/// (used to find the secondary copy when the primary is damaged).
fn size_hint(io: &dyn MetadataIo, dev_len: u64) -> Option<u64> {
    if dev_len < BIN_SIZE as u64 {
        return None;
    }
    let mut bin = vec![0u8; BIN_SIZE];
    io.read_at(0, &mut bin).ok()?;
    binary::decode(&bin, Copy::Primary, 0).ok().map(|h| h.hdr_size)
}

/// Whether a LUKS2 secondary header can be found at one of the fixed
/// offsets (to recognise a device whose primary header is destroyed).
pub(crate) fn find_secondary(io: &dyn MetadataIo, dev_len: u64) -> bool {
    HDR_SIZES.iter().any(|&off| try_copy(io, dev_len, off, Copy::Secondary).is_ok())
}

impl Luks2 {
    /// Reads both copies, keeps the valid one with the higher seqid and
    /// reports any damaged copy.
    pub(crate) fn load(io: &dyn MetadataIo, dev_len: u64, report: &mut LoadReport) -> Result<Self> {
        let primary = try_copy(io, dev_len, 0, Copy::Primary);
        let offsets: Vec<u64> = match &primary {
            Ok(p) => vec![p.raw.header.hdr_size],
            Err(_) => {
                let hint = size_hint(io, dev_len);
                hint.into_iter().chain(HDR_SIZES.into_iter().filter(|&o| Some(o) != hint)).collect()
            }
        };
        let mut secondary: Result<GoodCopy> =
            Err(Error::corrupt("secondary header: not found at any LUKS2 offset"));
        for (i, &off) in offsets.iter().enumerate() {
            match try_copy(io, dev_len, off, Copy::Secondary) {
                Ok(copy) => {
                    secondary = Ok(copy);
                    break;
                }
                // Report why the expected copy failed, not the last probe.
                Err(e) if i == 0 => secondary = Err(e),
                Err(_) => {}
            }
        }
        if let (Ok(p), Ok(s)) = (&primary, &secondary) {
            if p.raw.header.uuid != s.raw.header.uuid {
                secondary = Err(Error::corrupt(format!(
                    "secondary header: it belongs to another volume (UUID {})",
                    s.raw.header.uuid
                )));
            }
        }
        let (chosen, from, other_salt) = match (primary, secondary) {
            (Ok(p), Ok(s)) => {
                if s.raw.header.seqid > p.raw.header.seqid {
                    report.warnings.push(format!(
                        "the secondary LUKS2 header is newer than the primary (seqid {} > {}); using the secondary copy",
                        s.raw.header.seqid, p.raw.header.seqid
                    ));
                    let salt = p.raw.header.salt;
                    (s, Copy::Secondary, Some(salt))
                } else {
                    if s.raw.header.seqid < p.raw.header.seqid {
                        report.warnings.push(format!(
                            "the secondary LUKS2 header is older than the primary (seqid {} < {}); it will be rewritten on the next update",
                            s.raw.header.seqid, p.raw.header.seqid
                        ));
                    }
                    let salt = s.raw.header.salt;
                    (p, Copy::Primary, Some(salt))
                }
            }
            (Ok(p), Err(e)) => {
                report.warnings.push(format!(
                    "the secondary LUKS2 header is unusable ({}); it will be rewritten on the next update",
                    reason(&e)
                ));
                (p, Copy::Primary, None)
            }
            (Err(e), Ok(s)) => {
                report.warnings.push(format!(
                    "primary LUKS2 header is corrupt ({}); using the secondary copy",
                    reason(&e).trim_start_matches("primary header: ")
                ));
                (s, Copy::Secondary, None)
            }
            (Err(e1), Err(e2)) => {
                return Err(Error::corrupt(format!(
                    "no valid LUKS2 header copy: {}; {}",
                    reason(&e1),
                    reason(&e2)
                )));
            }
        };
        report.used_secondary = from == Copy::Secondary;
        let needed = chosen.layout.metadata_end();
        if dev_len < needed {
            return Err(Error::DeviceTooSmall {
                what: "the LUKS2 header and keyslots area",
                required: needed,
                actual: dev_len,
            });
        }
        for req in chosen.meta.mandatory_requirements() {
            if reencrypt::is_reencrypt_requirement(&req) {
                report.warnings.push(
                    "a reencryption is in progress on this volume: finish it with `rampart reencrypt --resume-only` (or cryptsetup's)".into(),
                );
                continue;
            }
            report.warnings.push(format!(
                "the header has the mandatory requirement \"{}\", which Rampart does not implement: it can be inspected but not unlocked or modified",
                json::shorten(&req)
            ));
        }
        let mut salts = [None, None];
        salts[salt_index(from)] = Some(chosen.raw.header.salt);
        salts[salt_index(from.other())] = other_salt;
        Ok(Self {
            bin: chosen.raw.header,
            salts,
            meta: chosen.meta,
            layout: chosen.layout,
            loaded_from: from,
        })
    }

    /// Fails if the header lists a requirement Rampart does not implement.
    pub(crate) fn check_requirements(&self) -> Result<()> {
        let reqs = self.meta.mandatory_requirements();
        if let Some(req) = reqs.iter().find(|r| !reencrypt::is_reencrypt_requirement(r)) {
            return Err(Error::UnknownRequirement(json::shorten(req)));
        }
        if reqs.is_empty() {
            Ok(())
        } else {
            Err(Error::ReencryptionInProgress)
        }
    }

    /// Writes both header copies with the next seqid: first the copy that
    /// was not loaded (the secondary when both are valid), synced, then the
    /// other, synced. At every moment one valid copy holds either the old or
    /// the new metadata.
    pub(crate) fn write(&mut self, io: &dyn MetadataIo) -> Result<()> {
        self.check_requirements()?;
        self.check_unchanged(io)?;
        self.write_meta(io, &self.meta.clone())
    }

    /// Writes both copies with a new UUID (checked against the loaded one
    /// first, so that a concurrent change is not overwritten).
    pub(crate) fn set_uuid(&mut self, io: &dyn MetadataIo, uuid: String) -> Result<()> {
        self.check_requirements()?;
        self.check_unchanged(io)?;
        let previous = std::mem::replace(&mut self.bin.uuid, uuid);
        let written = self.write_meta(io, &self.meta.clone());
        if written.is_err() {
            self.bin.uuid = previous;
        }
        written
    }

    /// Refuses to overwrite a header another program updated since it was
    /// loaded (cryptsetup makes a similar check): no valid copy of this
    /// header on the device may carry a newer seqid than the one loaded.
    fn check_unchanged(&self, io: &dyn MetadataIo) -> Result<()> {
        let dev_len = io.len()?;
        for copy in [Copy::Primary, Copy::Secondary] {
            let offset = copy_offset(copy, self.bin.hdr_size);
            if let Ok(current) = binary::read_copy(io, dev_len, offset, copy) {
                if current.header.uuid == self.bin.uuid && current.header.seqid > self.bin.seqid {
                    return Err(Error::invalid(format!(
                        "the LUKS2 header was changed on disk since it was loaded (seqid {} instead of {}); load it again",
                        current.header.seqid, self.bin.seqid
                    )));
                }
            }
        }
        Ok(())
    }

    fn write_meta(&mut self, io: &dyn MetadataIo, meta: &Metadata) -> Result<()> {
        let hdr_size = self.bin.hdr_size;
        let area = encode_area(meta, hdr_size)?;
        let seqid = self
            .bin
            .seqid
            .checked_add(1)
            .ok_or_else(|| Error::corrupt("the header sequence id cannot be increased"))?;
        let mut salts = self.salts;
        for copy in [self.loaded_from.other(), self.loaded_from] {
            let salt = match salts[salt_index(copy)] {
                Some(salt) => salt,
                None => {
                    let mut salt = [0u8; SALT_LEN];
                    fill_random(&mut salt)?;
                    salt
                }
            };
            salts[salt_index(copy)] = Some(salt);
            let header = BinaryHeader { seqid, salt, ..self.bin.clone() };
            let bin = binary::encode(&header, copy, &area)?;
            let offset = copy_offset(copy, hdr_size);
            io.write_at(offset + BIN_SIZE as u64, &area)?;
            io.write_at(offset, &bin)?;
            io.sync()?;
        }
        self.bin.seqid = seqid;
        self.bin.salt = salts[0].unwrap_or(self.bin.salt);
        self.salts = salts;
        self.loaded_from = Copy::Primary;
        self.meta = meta.clone();
        Ok(())
    }

    /// Applies `change` to a copy of the metadata, checks the result and
    /// writes it; the in-memory header changes only if the write succeeds.
    fn update(
        &mut self,
        io: &dyn MetadataIo,
        change: impl FnOnce(&mut Metadata) -> Result<()>,
    ) -> Result<()> {
        self.check_requirements()?;
        let mut meta = self.meta.clone();
        change(&mut meta)?;
        self.check_unchanged(io)?;
        self.write_meta(io, &meta)
    }

    pub(crate) fn uuid(&self) -> &str {
        &self.bin.uuid
    }

    pub(crate) fn label(&self) -> Option<&str> {
        if self.bin.label.is_empty() {
            None
        } else {
            std::str::from_utf8(&self.bin.label).ok()
        }
    }

    pub(crate) fn subsystem(&self) -> Option<&str> {
        if self.bin.subsystem.is_empty() {
            None
        } else {
            std::str::from_utf8(&self.bin.subsystem).ok()
        }
    }

    pub(crate) fn segment(&self) -> Result<Segment> {
        self.check_requirements()?;
        segment::describe(&self.meta)
    }

    pub(crate) fn metadata_end(&self) -> u64 {
        self.layout.metadata_end()
    }

    /// The data offset of the first segment (0 with a detached header).
    pub(crate) fn data_offset(&self) -> u64 {
        self.meta.segments.values().next().map_or(0, json::SegmentJson::offset)
    }

    pub(crate) fn header_bytes(&self) -> u64 {
        self.data_offset().max(self.metadata_end())
    }

    pub(crate) fn active_keyslots(&self) -> Vec<usize> {
        self.meta.keyslots.keys().copied().collect()
    }

    pub(crate) fn tokens(&self) -> Vec<(usize, Value)> {
        self.meta.tokens.iter().map(|(id, t)| (*id, t.clone())).collect()
    }

    /// The digest of the volume key: that of the default segment
    /// (cryptsetup's: the `backup-final` segment during a reencryption,
    /// else segment 0). A decryption's final side is plaintext (a `linear`
    /// segment, no digest): then it is the old key's (`backup-previous`),
    /// the only key cryptsetup's activation and `--test-passphrase` open
    /// during a decryption.
    fn segment_digest(&self) -> Result<(usize, &DigestJson)> {
        let mut seg_id = segment::default_segment(&self.meta);
        if !matches!(self.meta.segments.get(&seg_id), Some(json::SegmentJson::Crypt(_))) {
            if let Some(previous) = reencrypt::segment_by_flag(&self.meta, "backup-previous") {
                seg_id = previous;
            }
        }
        let (id, digest) = self
            .meta
            .digest_of_segment(seg_id)
            .ok_or_else(|| Error::corrupt(format!("segment {seg_id} has no digest")))?;
        if !self.meta.reachable(json::Section::Digests, id) {
            // cryptsetup finds the digest by iteration, then fails to look
            // it up by id: the volume loads but opens in neither tool.
            return Err(Error::corrupt(format!(
                "digest {id} is not named by its id (\"{id}\"), so it cannot be used"
            )));
        }
        Ok((id, digest))
    }

    pub(crate) fn verify_volume_key(&self, key: &SecretBytes) -> Result<bool> {
        let (id, digest) = self.segment_digest()?;
        digest::verify(digest, id, key.expose())
    }

    pub(crate) fn unlock(
        &self,
        io: &dyn MetadataIo,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(usize, SecretBytes)> {
        // Testing a passphrase needs no requirement: mapping and writing
        // refuse headers with requirements Rampart does not implement.
        let (digest_id, digest) = self.segment_digest()?;
        let bound: Vec<usize> = digest.keyslots().iter().map(|k| k.0).collect();
        let candidates: Vec<usize> = match slot {
            Some(s) => {
                if !self.meta.keyslots.contains_key(&s) {
                    return Err(Error::invalid(format!("keyslot {s} is not active")));
                }
                if bound.contains(&s) {
                    vec![s]
                } else {
                    Vec::new()
                }
            }
            None => {
                // cryptsetup: 2 preferred, 1 normal, 0 ignored unless asked
                // for; any other value makes the keyslot unusable.
                let priority = |s: &usize| match &self.meta.keyslots.get(s) {
                    Some(Keyslot::Luks2(ks)) => match ks.priority.unwrap_or(1) {
                        p @ 0..=2 => p,
                        _ => 0,
                    },
                    _ => 0,
                };
                let mut list: Vec<usize> =
                    bound.iter().copied().filter(|s| priority(s) > 0).collect();
                list.sort_by_key(|s| (std::cmp::Reverse(priority(s)), *s));
                list
            }
        };
        // As cryptsetup: a wrong passphrase moves on to the next keyslot,
        // and so does a keyslot whose algorithms Rampart lacks (cryptsetup
        // might run them); a keyslot no implementation can use ends the
        // search with its error, as it ends cryptsetup's.
        let mut first_error = None;
        for id in candidates {
            let Some(Keyslot::Luks2(ks)) = self.meta.keyslots.get(&id) else {
                continue;
            };
            if let Some(e) = keyslot::unusable_anywhere(id, ks) {
                return Err(first_error.unwrap_or(e));
            }
            let candidate = match keyslot::open(io, id, ks, passphrase) {
                Ok(key) => key,
                Err(e @ Error::Io(_)) => return Err(e),
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            if digest::verify(digest, digest_id, candidate.expose())? {
                return Ok((id, candidate));
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Err(Error::NoKey),
        }
    }

    pub(crate) fn add_keyslot(
        &mut self,
        io: &dyn MetadataIo,
        volume_key: &SecretBytes,
        passphrase: &[u8],
        pbkdf: &PbkdfChoice,
        slot: Option<usize>,
    ) -> Result<usize> {
        self.check_requirements()?;
        self.check_unchanged(io)?;
        if !self.verify_volume_key(volume_key)? {
            return Err(Error::invalid("the volume key does not match this volume's digest"));
        }
        let (digest_id, _) = self.segment_digest()?;
        let (_, seg) = segment::data_segment(&self.meta)?;
        let cipher = crate::DataCipher::from_spec(&seg.encryption)?;
        cipher.check_key_bytes(volume_key.len())?;
        let id = match slot {
            Some(s) if s > json::MAX_ID => {
                return Err(Error::invalid(format!(
                    "keyslot {s} is out of range (0..={})",
                    json::MAX_ID
                )))
            }
            Some(s) if self.meta.keyslots.contains_key(&s) => {
                return Err(Error::invalid(format!("keyslot {s} is already in use")))
            }
            Some(s) => s,
            None => keyslot::free_id(&self.meta)
                .ok_or_else(|| Error::NoSpace("all 32 LUKS2 keyslots are in use".into()))?,
        };
        let area = keyslot::find_area(&self.meta, &self.layout, volume_key.len())?;
        let params = pbkdf_for_time(pbkdf, volume_key.len())?;
        let ks = keyslot::new_keyslot(volume_key.len(), cipher, area, &params, pbkdf.hash)?;
        let mut meta = self.meta.clone();
        meta.keyslots.insert(id, Keyslot::Luks2(Box::new(ks.clone())));
        if let Some(DigestJson::Pbkdf2(d)) = meta.digests.get_mut(&digest_id) {
            // Appended, as cryptsetup does.
            d.keyslots.push(IdRef(id));
        }
        // Check the new header before touching the device.
        encode_area(&meta, self.bin.hdr_size)?;
        keyslot::store(io, &ks, volume_key, passphrase)?;
        self.update(io, |m| {
            *m = meta;
            Ok(())
        })?;
        Ok(id)
    }

    pub(crate) fn remove_keyslot(&mut self, io: &dyn MetadataIo, slot: usize) -> Result<()> {
        self.check_requirements()?;
        self.check_unchanged(io)?;
        let Some(ks) = self.meta.keyslots.get(&slot) else {
            return Err(Error::invalid(format!("keyslot {slot} is not active")));
        };
        let area = ks.area();
        let mut meta = self.meta.clone();
        meta.keyslots.remove(&slot);
        for digest in meta.digests.values_mut() {
            digest.remove_keyslot(slot);
        }
        meta.digests.retain(|_, d| !d.keyslots().is_empty() || !d.segments().is_empty());
        token::unassign_keyslot(&mut meta, slot);
        encode_area(&meta, self.bin.hdr_size)?;
        keyslot::wipe_area(io, area)?;
        self.update(io, |m| {
            *m = meta;
            Ok(())
        })
    }

    pub(crate) fn add_token(
        &mut self,
        io: &dyn MetadataIo,
        token: Value,
        id: Option<usize>,
    ) -> Result<usize> {
        self.check_requirements()?;
        token::check_new_token(&token, &self.meta)?;
        let id = match id {
            Some(i) if i > json::MAX_ID => {
                return Err(Error::invalid(format!(
                    "token {i} is out of range (0..={})",
                    json::MAX_ID
                )))
            }
            Some(i) if self.meta.tokens.contains_key(&i) => {
                return Err(Error::invalid(format!("token {i} is already in use")))
            }
            Some(i) => i,
            None => token::free_id(&self.meta)
                .ok_or_else(|| Error::NoSpace("all 32 LUKS2 tokens are in use".into()))?,
        };
        self.update(io, |m| {
            m.tokens.insert(id, token);
            Ok(())
        })?;
        Ok(id)
    }

    /// Replaces token `id` with `token` in one header update, so a crash
    /// leaves either the old token or the new one, never neither.
    pub(crate) fn replace_token(
        &mut self,
        io: &dyn MetadataIo,
        id: usize,
        token: Value,
    ) -> Result<()> {
        self.check_requirements()?;
        if !self.meta.tokens.contains_key(&id) {
            return Err(Error::invalid(format!("token {id} does not exist")));
        }
        token::check_new_token(&token, &self.meta)?;
        self.update(io, |m| {
            m.tokens.insert(id, token);
            Ok(())
        })
    }

    pub(crate) fn remove_token(&mut self, io: &dyn MetadataIo, id: usize) -> Result<()> {
        if !self.meta.tokens.contains_key(&id) {
            return Err(Error::invalid(format!("token {id} does not exist")));
        }
        self.update(io, |m| {
            m.tokens.remove(&id);
            Ok(())
        })
    }

    pub(crate) fn to_json(&self) -> Value {
        dump::to_json(self)
    }

    pub(crate) fn dump_text(&self) -> String {
        dump::dump_text(self)
    }

    /// Formats a new LUKS2 header holding `volume_key` in keyslot 0.
    pub(crate) fn format(
        io: &dyn MetadataIo,
        opts: &FormatOptions,
        volume_key: &SecretBytes,
        passphrase: &[u8],
    ) -> Result<Self> {
        Self::format_with(io, opts, volume_key, passphrase, &|_, _| Ok(()))
    }

    /// [`Self::format`], with `adjust` changing the metadata (given the
    /// layout) before anything is written.
    pub(crate) fn format_with(
        io: &dyn MetadataIo,
        opts: &FormatOptions,
        volume_key: &SecretBytes,
        passphrase: &[u8],
        adjust: &dyn Fn(&mut Metadata, &Layout) -> Result<()>,
    ) -> Result<Self> {
        let plan = plan_layout(opts, volume_key.len())?;
        let dev_len = io.len()?;
        if !opts.detached_header && dev_len < plan.data_offset {
            return Err(Error::DeviceTooSmall {
                what: "the LUKS2 header, keyslots and data offset",
                required: plan.data_offset,
                actual: dev_len,
            });
        }
        let params = pbkdf_for_time(&opts.pbkdf, volume_key.len())?;
        let digest_iterations = match opts.pbkdf.forced_iterations {
            Some(_) => crate::pbkdf::MIN_PBKDF2_ITERATIONS,
            None => pbkdf2_iterations_for(opts.pbkdf.hash, volume_key.len(), DIGEST_ITER_MS)?,
        };
        let layout = Layout { hdr_size: plan.hdr_size, keyslots_size: plan.keyslots_size };
        let mut meta = Metadata {
            keyslots: Default::default(),
            tokens: Default::default(),
            segments: Default::default(),
            digests: Default::default(),
            config: Config {
                json_size: U64Str(plan.hdr_size - BIN_SIZE as u64),
                keyslots_size: U64Str(plan.keyslots_size),
                flags: None,
                requirements: None,
                extra: serde_json::Map::new(),
            },
            extra: serde_json::Map::new(),
            odd_names: Default::default(),
            source: None,
        };
        meta.segments
            .insert(0, segment::new_crypt(plan.data_offset, opts.cipher, opts.sector_size));
        let area = keyslot::find_area(&meta, &layout, volume_key.len())?;
        let ks =
            keyslot::new_keyslot(volume_key.len(), opts.cipher, area, &params, opts.pbkdf.hash)?;
        meta.keyslots.insert(0, Keyslot::Luks2(Box::new(ks.clone())));
        meta.digests.insert(
            0,
            digest::create(
                volume_key.expose(),
                opts.pbkdf.hash,
                digest_iterations,
                vec![IdRef(0)],
                segment::refs(0),
            )?,
        );
        adjust(&mut meta, &layout)?;
        validate::validate(&meta, plan.hdr_size)?;
        encode_area(&meta, plan.hdr_size)?;

        // Header area as cryptsetup leaves it: zeros up to the data (just
        // the header copies with a detached header), random keyslots area.
        if !opts.detached_header && plan.data_offset > layout.metadata_end() {
            write_zeros(io, layout.metadata_end(), plan.data_offset - layout.metadata_end())?;
        }
        write_random(io, layout.keyslots_offset(), layout.keyslots_size)?;
        keyslot::store(io, &ks, volume_key, passphrase)?;

        let mut header = Self {
            bin: BinaryHeader {
                hdr_size: plan.hdr_size,
                seqid: 0,
                label: opts.label.clone().unwrap_or_default().into_bytes(),
                csum_alg: rampart_crypto::HashAlg::Sha256,
                salt: [0; SALT_LEN],
                uuid: plan.uuid,
                subsystem: opts.subsystem.clone().unwrap_or_default().into_bytes(),
            },
            salts: [None, None],
            meta: meta.clone(),
            layout,
            loaded_from: Copy::Primary,
        };
        header.write_meta(io, &meta)?;
        Ok(header)
    }
}

/// Checks `meta` and encodes it into a JSON area of a `hdr_size` header:
/// what is written must load again, here and in cryptsetup.
fn encode_area(meta: &Metadata, hdr_size: u64) -> Result<Vec<u8>> {
    validate::validate(meta, hdr_size)?;
    let text = meta.to_text()?;
    let area = binary::json_area(&text, hdr_size)?;
    let reparsed = Metadata::parse(&text)?;
    validate::validate(&reparsed, hdr_size)?;
    Ok(area)
}

struct Plan {
    hdr_size: u64,
    keyslots_size: u64,
    data_offset: u64,
    uuid: String,
}

/// The header geometry for `opts`, computed as cryptsetup 2.6 does.
fn plan_layout(opts: &FormatOptions, key_bytes: usize) -> Result<Plan> {
    opts.cipher.check_key_bytes(key_bytes)?;
    let sector = opts.sector_size;
    if !(512..=4096).contains(&sector) || !sector.is_power_of_two() {
        return Err(Error::invalid(format!(
            "sector size {sector} must be a power of two from 512 to 4096"
        )));
    }
    let hdr_size = opts.metadata_size.unwrap_or(HDR_SIZES[0]);
    if !HDR_SIZES.contains(&hdr_size) {
        return Err(Error::invalid(format!(
            "metadata size {hdr_size} must be a power of two from 16 KiB to 4 MiB"
        )));
    }
    for (name, value) in [("label", &opts.label), ("subsystem", &opts.subsystem)] {
        if let Some(v) = value {
            if v.len() >= binary::LABEL_LEN || v.contains('\0') {
                return Err(Error::invalid(format!(
                    "the {name} must be at most 47 bytes without NUL characters"
                )));
            }
        }
    }
    let min_offset = 2 * hdr_size;
    if let Some(off) = opts.data_offset {
        if off % 512 != 0 || off % u64::from(sector) != 0 {
            return Err(Error::invalid(format!(
                "data offset {off} must be a multiple of 512 bytes and of the sector size"
            )));
        }
        if off == 0 && !opts.detached_header {
            return Err(Error::invalid("a data offset of 0 requires a detached header"));
        }
        if off != 0 && off < min_offset {
            return Err(Error::invalid(format!(
                "data offset {off} is smaller than the two header copies ({min_offset} bytes)"
            )));
        }
    }
    let data_offset_req = opts.data_offset.filter(|&o| o != 0);
    let mut keyslots_size = match (opts.keyslots_size, data_offset_req) {
        (Some(size), _) => {
            if size == 0 || size % 4096 != 0 || size > MAX_KEYSLOTS_SIZE {
                return Err(Error::invalid(format!(
                    "keyslots size {size} must be a non-zero multiple of 4096 up to 128 MiB"
                )));
            }
            size
        }
        (None, Some(off)) => {
            let size = off - min_offset;
            (size - size % 4096).min(MAX_KEYSLOTS_SIZE)
        }
        (None, None) => DEFAULT_HDR_AND_KEYSLOTS - min_offset,
    };
    if let Some(off) = data_offset_req {
        if min_offset + keyslots_size > off {
            keyslots_size = off - min_offset;
            keyslots_size -= keyslots_size % 4096;
        }
    }
    let need = keyslot::area_size_for(key_bytes)?;
    if keyslots_size < need {
        return Err(Error::NoSpace(format!(
            "a keyslots area of {keyslots_size} bytes cannot hold one {need}-byte keyslot"
        )));
    }
    let data_offset = match opts.data_offset {
        Some(off) => off,
        None if opts.detached_header => 0,
        None => (min_offset + keyslots_size).div_ceil(DATA_ALIGNMENT) * DATA_ALIGNMENT,
    };
    let uuid = match &opts.uuid {
        Some(u) => crate::uuid::parse(u)?,
        None => crate::uuid::generate()?,
    };
    Ok(Plan { hdr_size, keyslots_size, data_offset, uuid })
}

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

impl Luks2 {
    /// Fails unless the only requirement is the reencryption one.
    fn check_reencrypt_requirements(&self) -> Result<()> {
        match self
            .meta
            .mandatory_requirements()
            .into_iter()
            .find(|r| !reencrypt::is_reencrypt_requirement(r))
        {
            Some(req) => Err(Error::UnknownRequirement(json::shorten(&req))),
            None => Ok(()),
        }
    }

    fn update_reencrypt(
        &mut self,
        io: &dyn MetadataIo,
        change: impl FnOnce(&mut Metadata) -> Result<()>,
    ) -> Result<()> {
        self.check_reencrypt_requirements()?;
        let mut meta = self.meta.clone();
        change(&mut meta)?;
        self.check_unchanged(io)?;
        self.write_meta(io, &meta)
    }

    pub(crate) fn reencrypt_state(&self) -> Result<Option<reencrypt::ReencryptState>> {
        reencrypt::state(&self.meta)
    }

    /// Recovers both volume keys of a reencryption with one passphrase, as
    /// cryptsetup does (`LUKS2_keyslot_open_all_segments`).
    pub(crate) fn reencrypt_unlock(
        &self,
        io: &dyn MetadataIo,
        passphrase: &[u8],
        slot: Option<usize>,
    ) -> Result<(SecretBytes, SecretBytes)> {
        self.reencrypt_open(io, |slots| match slot {
            Some(s) if slots.contains(&s) => vec![(s, passphrase)],
            _ => slots.iter().map(|&id| (id, passphrase)).collect(),
        })
    }

    /// Recovers both volume keys of a reencryption from secrets of given
    /// keyslots (a key-manager binding holds one keyslot's secret, so each
    /// key may come from a different keyslot): each key from the first
    /// candidate keyslot of its side that opens and matches its digest.
    pub(crate) fn reencrypt_unlock_slots(
        &self,
        io: &dyn MetadataIo,
        candidates: &[(usize, &[u8])],
    ) -> Result<(SecretBytes, SecretBytes)> {
        self.reencrypt_open(io, |slots| {
            candidates.iter().filter(|(id, _)| slots.contains(id)).copied().collect()
        })
    }

    /// Opens each side's key from the first of `candidates(side's keyslots)`
    /// (keyslot, secret) that opens and matches its digest; a plaintext side
    /// (encryption, decryption) has no key and gets an empty one.
    fn reencrypt_open<'s>(
        &self,
        io: &dyn MetadataIo,
        candidates: impl Fn(&[usize]) -> Vec<(usize, &'s [u8])>,
    ) -> Result<(SecretBytes, SecretBytes)> {
        let state = self
            .reencrypt_state()?
            .ok_or_else(|| Error::invalid("the volume is not being re-encrypted"))?;
        let open_side = |slots: &[usize]| -> Result<SecretBytes> {
            let mut first_error = None;
            for (id, secret) in candidates(slots) {
                let Some(Keyslot::Luks2(ks)) = self.meta.keyslots.get(&id) else {
                    continue;
                };
                let Some((digest_id, digest)) = self.meta.digest_of_keyslot(id) else {
                    continue;
                };
                match keyslot::open(io, id, ks, secret) {
                    Ok(key) => {
                        if digest::verify(digest, digest_id, key.expose())? {
                            return Ok(key);
                        }
                    }
                    Err(e @ Error::Io(_)) => return Err(e),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            Err(first_error.unwrap_or(Error::NoKey))
        };
        let old = if state.old.cipher.is_some() {
            open_side(&state.old_keyslots)?
        } else {
            SecretBytes::new(Vec::new())
        };
        let new = if state.new.cipher.is_some() {
            open_side(&state.new_keyslots)?
        } else {
            SecretBytes::new(Vec::new())
        };
        Ok((old, new))
    }

    /// Checks both keys against their digests and the reencryption digest
    /// (cryptsetup refuses metadata that fails this).
    pub(crate) fn reencrypt_verify(&self, old: &SecretBytes, new: &SecretBytes) -> Result<()> {
        // A plaintext side (encryption, decryption) has no key: an empty one.
        let check = |flag: &str, key: &SecretBytes| -> Result<bool> {
            let seg = reencrypt::segment_by_flag(&self.meta, flag)
                .ok_or_else(|| Error::corrupt(format!("no {flag} segment")))?;
            if !matches!(self.meta.segments.get(&seg), Some(json::SegmentJson::Crypt(_))) {
                return Ok(false);
            }
            let (id, d) = self
                .meta
                .digest_of_segment(seg)
                .ok_or_else(|| Error::corrupt(format!("the {flag} segment has no digest")))?;
            if digest::verify(d, id, key.expose())? {
                Ok(true)
            } else {
                Err(Error::NoKey)
            }
        };
        let has_old = check("backup-previous", old)?;
        let has_new = check("backup-final", new)?;
        let (ks_id, _) = reencrypt::reencrypt_keyslot(&self.meta)?
            .ok_or_else(|| Error::invalid("the volume is not being re-encrypted"))?;
        let (id, d) = self.meta.digest_of_keyslot(ks_id).ok_or_else(|| {
            Error::corrupt("the reencryption digest is missing (cryptsetup repair adds it)")
        })?;
        let data = reencrypt::verification_data(
            &self.meta,
            has_old.then_some(old),
            has_new.then_some(new),
        )?;
        if digest::verify(d, id, data.expose())? {
            Ok(())
        } else {
            Err(Error::corrupt("the reencryption metadata does not match its digest"))
        }
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
        self.check_requirements()?;
        self.check_unchanged(io)?;
        if !self.verify_volume_key(old_key)? {
            return Err(Error::invalid("the volume key does not match this volume's digest"));
        }
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
        let digest_iterations = match plan.pbkdf.forced_iterations {
            Some(_) => crate::pbkdf::MIN_PBKDF2_ITERATIONS,
            None => pbkdf2_iterations_for(plan.pbkdf.hash, plan.new_key.len(), DIGEST_ITER_MS)?,
        };
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
            let ks = keyslot::new_keyslot(plan.new_key.len(), plan.cipher, area, &params, hash)?;
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

    /// One step of the reencryption, crash-safe: `area_data` (the
    /// hotzone's checksums or journal) is written to the resilience area
    /// and synced first, then the header records the layout with the
    /// hotzone `zone` (data offset, length) in progress (`hot`) or done.
    pub(crate) fn reencrypt_checkpoint(
        &mut self,
        io: &dyn MetadataIo,
        size: u64,
        zone: (u64, u64),
        hot: bool,
        area_data: Option<&[u8]>,
    ) -> Result<()> {
        let state = self
            .reencrypt_state()?
            .ok_or_else(|| Error::invalid("the volume is not being re-encrypted"))?;
        if let Some(data) = area_data {
            if data.len() as u64 > state.area_size {
                return Err(Error::invalid("resilience data larger than its area"));
            }
            self.check_unchanged(io)?;
            io.write_at(state.area_offset, data)?;
            io.sync()?;
        }
        self.update_reencrypt(io, |m| reencrypt::set_layout(m, size, zone, hot))
    }

    /// Ends a finished reencryption in one header write: the new key's
    /// segment alone, without the old keyslots and digest, the backups,
    /// the reencrypt keyslot, its digest and the requirement; then the old
    /// keyslot areas and the resilience area are overwritten.
    pub(crate) fn reencrypt_finish(&mut self, io: &dyn MetadataIo) -> Result<()> {
        let state = self
            .reencrypt_state()?
            .ok_or_else(|| Error::invalid("the volume is not being re-encrypted"))?;
        let mut areas = Vec::new();
        let orphans_before = token::orphaned_bindings(&self.meta);
        self.update_reencrypt(io, |m| {
            reencrypt::set_final(m)?;
            // Drop the backup segments (the last two ids or more).
            let backups: Vec<usize> = m
                .segments
                .iter()
                .filter(|(_, s)| s.flags().iter().any(|f| f.starts_with("backup-")))
                .map(|(id, _)| *id)
                .collect();
            for id in &backups {
                m.segments.remove(id);
            }
            for d in m.digests.values_mut() {
                let keep: Vec<IdRef> =
                    d.segments().iter().copied().filter(|s| !backups.contains(&s.0)).collect();
                d.set_segments(keep);
            }
            let mut remove = state.old_keyslots.clone();
            remove.retain(|s| !state.new_keyslots.contains(s));
            remove.push(state.keyslot);
            for slot in remove {
                if let Some(ks) = m.keyslots.remove(&slot) {
                    areas.push(ks.area());
                }
                for digest in m.digests.values_mut() {
                    digest.remove_keyslot(slot);
                }
                token::unassign_keyslot(m, slot);
            }
            token::drop_orphaned_bindings(m, &orphans_before);
            m.digests.retain(|_, d| !d.keyslots().is_empty() || !d.segments().is_empty());
            if let Some(reqs) = m.config.requirements.as_mut() {
                if let Some(list) = reqs.mandatory.as_mut() {
                    list.retain(|r| !reencrypt::is_reencrypt_requirement(r));
                    if list.is_empty() {
                        reqs.mandatory = None;
                    }
                }
                if reqs.mandatory.is_none() && reqs.extra.is_empty() {
                    m.config.requirements = None;
                }
            }
            Ok(())
        })?;
        for area in areas {
            keyslot::wipe_area(io, area)?;
        }
        Ok(())
    }
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
        self.check_requirements()?;
        self.check_unchanged(io)?;
        if !self.verify_volume_key(old_key)? {
            return Err(Error::invalid("the volume key does not match this volume's digest"));
        }
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
        add_reencrypt_keyslot(
            &mut meta,
            (rks, area),
            ReencryptStart {
                resilience: &resilience,
                mode: reencrypt::ReencryptMode::Decrypt,
                direction: reencrypt::ReencryptDirection::Backward,
                requirement: reencrypt::REQUIREMENT_V2,
            },
            (Some(old_key), None),
            hash,
            |len| timed_digest_iterations(hash, len, forced_iterations),
        )?;
        encode_area(&meta, self.bin.hdr_size)?;
        self.update_reencrypt(io, |m| {
            *m = meta;
            Ok(())
        })
    }
}

impl Luks2 {
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
        self.check_requirements()?;
        self.check_unchanged(io)?;
        if !self.verify_volume_key(old_key)? {
            return Err(Error::invalid("the volume key does not match this volume's digest"));
        }
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
        add_reencrypt_keyslot(
            &mut meta,
            (rks, area),
            ReencryptStart {
                resilience: &resilience,
                mode: reencrypt::ReencryptMode::Decrypt,
                direction: reencrypt::ReencryptDirection::Forward,
                requirement: reencrypt::REQUIREMENT_V3,
            },
            (Some(old_key), None),
            hash,
            |len| timed_digest_iterations(hash, len, forced_iterations),
        )?;
        encode_area(&meta, self.bin.hdr_size)?;
        self.update_reencrypt(io, |m| {
            *m = meta;
            Ok(())
        })
    }
}

impl Luks2 {
    /// Changes the resilience mode of a reencryption in a clean state
    /// (no interrupted hotzone), as cryptsetup 2.6 does when resumed with
    /// another `--resilience`: among checksum, journal and none (never to
    /// or from a data shift), in the same area, with the reencryption
    /// digest computed again; one header write.
    pub(crate) fn reencrypt_set_resilience(
        &mut self,
        io: &dyn MetadataIo,
        old: &SecretBytes,
        new: &SecretBytes,
        resilience: &reencrypt::Resilience,
        hash: rampart_crypto::HashAlg,
        forced_iterations: bool,
    ) -> Result<()> {
        self.reencrypt_verify(old, new)?;
        let state = self
            .reencrypt_state()?
            .ok_or_else(|| Error::invalid("the volume is not being re-encrypted"))?;
        if state.hotzone.is_some() {
            return Err(Error::invalid(
                "an interrupted hotzone must be recovered before the resilience mode changes",
            ));
        }
        let shifted =
            |r: &reencrypt::Resilience| matches!(r, reencrypt::Resilience::Datashift { .. });
        if shifted(&state.resilience) || shifted(resilience) {
            return Err(Error::invalid(format!(
                "the resilience mode cannot change from {} to {} (a data shift is kept to the end, as in cryptsetup)",
                state.resilience.name(),
                resilience.name()
            )));
        }
        let mut meta = self.meta.clone();
        let rks = state.keyslot;
        let fresh = reencrypt::new_keyslot(
            state.area_offset,
            state.area_size,
            resilience,
            state.mode,
            state.direction,
        );
        match meta.keyslots.get_mut(&rks) {
            Some(Keyslot::Other { raw, .. }) => {
                if let (Some(obj), Some(area)) = (raw.as_object_mut(), fresh.get("area")) {
                    obj.insert("area".into(), area.clone());
                }
            }
            _ => return Err(Error::corrupt("the reencrypt keyslot is missing")),
        }
        let plain = |k: &SecretBytes| k.is_empty();
        let data = reencrypt::verification_data(
            &meta,
            (!plain(old)).then_some(old),
            (!plain(new)).then_some(new),
        )?;
        let iterations = if forced_iterations {
            crate::pbkdf::MIN_PBKDF2_ITERATIONS
        } else {
            pbkdf2_iterations_for(hash, data.len(), DIGEST_ITER_MS)?
        };
        let id = meta
            .digest_of_keyslot(rks)
            .map(|(id, _)| id)
            .ok_or_else(|| Error::corrupt("the reencryption digest is missing"))?;
        meta.digests.insert(
            id,
            digest::create(data.expose(), hash, iterations, vec![IdRef(rks)], Vec::new())?,
        );
        encode_area(&meta, self.bin.hdr_size)?;
        self.update_reencrypt(io, |m| {
            *m = meta;
            Ok(())
        })
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

/// PBKDF2 iterations of a digest over `len` bytes: the minimum when the
/// user forced the KDF cost (tests, scripts), else timed as cryptsetup does.
fn timed_digest_iterations(hash: rampart_crypto::HashAlg, len: usize, forced: bool) -> Result<u32> {
    if forced {
        Ok(crate::pbkdf::MIN_PBKDF2_ITERATIONS)
    } else {
        pbkdf2_iterations_for(hash, len, DIGEST_ITER_MS)
    }
}
