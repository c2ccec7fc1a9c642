//! A reencryption under way: its state, both volume keys opened and
//! checked against the reencryption digest (cryptsetup's
//! `luks2_reencrypt_digest.c`), each hotzone recorded crash-safely, the
//! resilience mode changed between runs, and the final header write.

use rampart_crypto::SecretBytes;

use super::digest::{self, timed_digest_iterations};
use super::disk_metadata::encode_area;
use super::json::{self, IdRef, Keyslot};
use super::keyslot;
use super::reencrypt;
use super::token;
use super::Luks2;
use crate::io::MetadataIo;
use crate::{Error, Result};

impl Luks2 {
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
        let iterations = timed_digest_iterations(hash, data.len(), forced_iterations)?;
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
