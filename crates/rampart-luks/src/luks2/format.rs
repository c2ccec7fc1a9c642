//! Formatting a new LUKS2 header (cryptsetup's `luks2_json_format.c`):
//! the geometry of header copies, keyslots area and data offset computed
//! as cryptsetup 2.6 does, then one keyslot and the volume key digest.

use rampart_crypto::SecretBytes;

use super::binary::{self, BinaryHeader, Copy, BIN_SIZE, HDR_SIZES, SALT_LEN};
use super::digest::{self, timed_digest_iterations};
use super::disk_metadata::encode_area;
use super::integrity::{IntegrityKind, SegmentIntegrity, AEAD_ENCRYPTION};
use super::json::{Config, IdRef, Keyslot, Metadata, U64Str};
use super::keyslot;
use super::layout::{Layout, MAX_KEYSLOTS_SIZE};
use super::segment;
use super::validate;
use super::Luks2;
use crate::io::{write_random, write_zeros, MetadataIo};
use crate::pbkdf::pbkdf_for_time;
use crate::{Error, FormatOptions, Result};

/// cryptsetup's `LUKS2_DEFAULT_HDR_SIZE`: header plus keyslots, 16 MiB.
const DEFAULT_HDR_AND_KEYSLOTS: u64 = 16 * 1024 * 1024;
/// Data is aligned to 1 MiB by default.
const DATA_ALIGNMENT: u64 = 1024 * 1024;

impl Luks2 {
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
        let digest_iterations = timed_digest_iterations(
            opts.pbkdf.hash,
            volume_key.len(),
            opts.pbkdf.forced_iterations.is_some(),
        )?;
        let layout = Layout { hdr_size: plan.hdr_size, keyslots_size: plan.keyslots_size };
        let mut meta = Metadata {
            keyslots: Default::default(),
            tokens: Default::default(),
            segments: Default::default(),
            digests: Default::default(),
            config: Config {
                json_size: U64Str(plan.hdr_size - BIN_SIZE as u64),
                keyslots_size: U64Str(plan.keyslots_size),
                flags: opts.integrity_no_journal.then(|| vec!["no-journal".to_owned()]),
                requirements: None,
                extra: serde_json::Map::new(),
            },
            extra: serde_json::Map::new(),
            odd_names: Default::default(),
            source: None,
        };
        let segment = match &opts.integrity {
            None => segment::new_crypt(plan.data_offset, opts.cipher.spec(), opts.sector_size),
            Some(kind) => segment::new_authenticated(
                plan.data_offset,
                segment_encryption(opts),
                &SegmentIntegrity::new(kind.clone()),
                opts.sector_size,
            ),
        };
        meta.segments.insert(0, segment);
        let encryption = keyslot::area_encryption(&meta, volume_key.len())?;
        let area = keyslot::find_area(&meta, &layout, volume_key.len())?;
        let ks =
            keyslot::new_keyslot(volume_key.len(), encryption, area, &params, opts.pbkdf.hash)?;
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

/// The segment's `encryption`: `aes-gcm-random` for `aead`, else the
/// cipher.
fn segment_encryption(opts: &FormatOptions) -> &'static str {
    match opts.integrity {
        Some(IntegrityKind::Aead) => AEAD_ENCRYPTION,
        _ => opts.cipher.spec(),
    }
}

struct Plan {
    hdr_size: u64,
    keyslots_size: u64,
    data_offset: u64,
    uuid: String,
}

/// The header geometry for `opts`, computed as cryptsetup 2.6 does.
fn plan_layout(opts: &FormatOptions, key_bytes: usize) -> Result<Plan> {
    if opts.integrity_no_journal && opts.integrity.is_none() {
        return Err(Error::invalid("no-journal applies only to volumes with integrity"));
    }
    match &opts.integrity {
        None => opts.cipher.check_key_bytes(key_bytes)?,
        Some(kind) => SegmentIntegrity::new(kind.clone())
            .check_volume_key(segment_encryption(opts), key_bytes)?,
    }
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
