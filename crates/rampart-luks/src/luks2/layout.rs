//! The geometry of a LUKS2 header: two copies of `hdr_size` bytes (binary
//! header and JSON area), then the keyslots area.

/// cryptsetup's `LUKS2_MAX_KEYSLOTS_SIZE` (128 MiB).
pub(crate) const MAX_KEYSLOTS_SIZE: u64 = 128 * 1024 * 1024;

/// The header geometry implied by validated metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Size of one binary header plus its JSON area.
    pub(crate) hdr_size: u64,
    pub(crate) keyslots_size: u64,
}

impl Layout {
    /// Where the keyslots area starts (after both header copies).
    pub(crate) fn keyslots_offset(&self) -> u64 {
        2 * self.hdr_size
    }

    /// The end of the keyslots area: everything LUKS2 metadata occupies.
    pub(crate) fn metadata_end(&self) -> u64 {
        // Both terms are bounded (4 MiB and 128 MiB) when validated.
        2 * self.hdr_size + self.keyslots_size
    }
}
