//! LUKS2, one file per concept as cryptsetup's `lib/luks2/` is split:
//!
//! * `binary` — one binary header sector and its checksum; `json` —
//!   the JSON metadata as it is on disk; `layout` — where the copies and
//!   the keyslots area lie; `validate` — the checks run on every read
//!   and before every write.
//! * `disk_metadata` — loading both copies (recovering from a damaged or
//!   stale one) and crash-safe writing.
//! * `format` — a new header's geometry, first keyslot and digest.
//! * `keyslot`, `token`, `digest`, `segment` — each section of the
//!   metadata, with the [`Luks2`] operations on it (unlock, add and remove
//!   keyslots and tokens, which digest checks the volume key).
//! * `reencrypt` — the reencryption metadata and its states;
//!   `reencrypt_start` — starting one (re-encryption, encryption,
//!   decryption); `reencrypt_progress` — a run under way (keys, hotzone
//!   checkpoints, resilience, finish).
//! * `integrity` — a segment's `"integrity"` object, and how the volume
//!   key and each sector's tag are split (the dm-integrity format itself
//!   is `crate::integrity`).
//! * `dump` — the `luksDump`-like and JSON views.
//!
//! This file holds only the header type and what it is made of.

pub(crate) mod binary;
mod digest;
mod disk_metadata;
mod dump;
mod format;
pub(crate) mod integrity;
pub(crate) mod json;
mod keyslot;
mod layout;
pub(crate) mod reencrypt;
mod reencrypt_progress;
mod reencrypt_start;
mod segment;
mod token;
mod validate;

pub(crate) use self::disk_metadata::find_secondary;
pub use self::reencrypt_start::{EncryptPlan, ReencryptPlan};

use self::binary::{BinaryHeader, Copy, SALT_LEN};
use self::json::{Metadata, SegmentJson};
use self::layout::Layout;

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

impl Luks2 {
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

    pub(crate) fn metadata_end(&self) -> u64 {
        self.layout.metadata_end()
    }

    /// The data offset of the first segment (0 with a detached header).
    pub(crate) fn data_offset(&self) -> u64 {
        self.meta.segments.values().next().map_or(0, SegmentJson::offset)
    }

    pub(crate) fn header_bytes(&self) -> u64 {
        self.data_offset().max(self.metadata_end())
    }
}
