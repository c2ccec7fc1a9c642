//! The two LUKS2 header copies on the device, as cryptsetup's
//! `luks2_disk_metadata.c` handles them: loading (the valid copy with the
//! higher seqid, a damaged or stale one reported and rewritten on the next
//! update) and crash-safe writing (one copy synced before the other, never
//! over a header another program changed since it was loaded).

use rampart_crypto::fill_random;

use super::binary::{self, BinaryHeader, Copy, RawCopy, BIN_SIZE, HDR_SIZES, SALT_LEN};
use super::json::{self, Metadata};
use super::layout::Layout;
use super::reencrypt;
use super::validate;
use super::Luks2;
use crate::io::MetadataIo;
use crate::{Error, LoadReport, Result};

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
        salts[from.index()] = Some(chosen.raw.header.salt);
        salts[from.other().index()] = other_salt;
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

    /// Fails unless the only requirement is the reencryption one.
    pub(super) fn check_reencrypt_requirements(&self) -> Result<()> {
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
    pub(super) fn check_unchanged(&self, io: &dyn MetadataIo) -> Result<()> {
        let dev_len = io.len()?;
        for copy in [Copy::Primary, Copy::Secondary] {
            let offset = copy.offset(self.bin.hdr_size);
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

    pub(super) fn write_meta(&mut self, io: &dyn MetadataIo, meta: &Metadata) -> Result<()> {
        let hdr_size = self.bin.hdr_size;
        let area = encode_area(meta, hdr_size)?;
        let seqid = self
            .bin
            .seqid
            .checked_add(1)
            .ok_or_else(|| Error::corrupt("the header sequence id cannot be increased"))?;
        let mut salts = self.salts;
        for copy in [self.loaded_from.other(), self.loaded_from] {
            let salt = match salts[copy.index()] {
                Some(salt) => salt,
                None => {
                    let mut salt = [0u8; SALT_LEN];
                    fill_random(&mut salt)?;
                    salt
                }
            };
            salts[copy.index()] = Some(salt);
            let header = BinaryHeader { seqid, salt, ..self.bin.clone() };
            let bin = binary::encode(&header, copy, &area)?;
            let offset = copy.offset(hdr_size);
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
    pub(super) fn update(
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

    pub(super) fn update_reencrypt(
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
}

/// Checks `meta` and encodes it into a JSON area of a `hdr_size` header:
/// what is written must load again, here and in cryptsetup.
pub(super) fn encode_area(meta: &Metadata, hdr_size: u64) -> Result<Vec<u8>> {
    validate::validate(meta, hdr_size)?;
    let text = meta.to_text()?;
    let area = binary::json_area(&text, hdr_size)?;
    let reparsed = Metadata::parse(&text)?;
    validate::validate(&reparsed, hdr_size)?;
    Ok(area)
}
