//! The dm-integrity superblock: the first 4 KiB of the integrity area
//! (`struct superblock` of the kernel's `drivers/md/dm-integrity.c`,
//! versions 1 to 5, all that Linux 6.1 reads and writes).
//!
//! All numbers are little-endian. The kernel reads and writes the whole
//! 4 KiB (`SB_SECTORS`), of which the named fields take the first 64
//! bytes; with `SB_FLAG_FIXED_HMAC` and a journal MAC, the end of the first
//! 512-byte sector holds the superblock's MAC. [`Superblock`] keeps every
//! byte it was parsed from, so [`Superblock::to_bytes`] gives back exactly
//! what was read unless a field was changed.

use crate::reader::Reader;
use crate::{Error, Result};

/// The superblock area: `SB_SECTORS` (8) sectors of 512 bytes.
pub const SUPERBLOCK_BYTES: usize = 8 * 512;
/// `SB_SECTORS`: the superblock area in 512-byte sectors.
pub const SUPERBLOCK_SECTORS: u64 = 8;
/// The bytes the named fields take.
const FIELDS_BYTES: usize = 64;
/// `SB_MAGIC` with its terminating NUL.
pub const MAGIC: [u8; 8] = *b"integrt\0";
/// `SALT_SIZE`.
pub const SALT_BYTES: usize = 16;
/// `MAX_TAG_SIZE`: the largest tag the kernel accepts.
pub const MAX_TAG_SIZE: u16 = 255;
/// `MAX_SECTORS_PER_BLOCK`: blocks of at most 4096 bytes.
pub const MAX_LOG2_SECTORS_PER_BLOCK: u8 = 3;
/// `MIN_LOG2_INTERLEAVE_SECTORS` and `MAX_LOG2_INTERLEAVE_SECTORS`.
pub const LOG2_INTERLEAVE_RANGE: std::ops::RangeInclusive<u8> = 3..=31;
/// The newest superblock version Linux 6.1 knows (`SB_VERSION_5`).
pub const MAX_VERSION: u8 = 5;

/// The superblock flags (`SB_FLAG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u32);

impl Flags {
    /// `SB_FLAG_HAVE_JOURNAL_MAC`: journal sections carry a MAC.
    pub const JOURNAL_MAC: u32 = 0x1;
    /// `SB_FLAG_RECALCULATING`: tags from `recalc_sector` on are being
    /// recomputed.
    pub const RECALCULATING: u32 = 0x2;
    /// `SB_FLAG_DIRTY_BITMAP`: the journal area holds the bitmap of
    /// blocks whose tags may be stale (bitmap mode, device in use or
    /// not cleanly closed).
    pub const DIRTY_BITMAP: u32 = 0x4;
    /// `SB_FLAG_FIXED_PADDING`: the tag area of an interleave run is
    /// padded to 4 KiB, not to 128 KiB.
    pub const FIXED_PADDING: u32 = 0x8;
    /// `SB_FLAG_FIXED_HMAC`: the salt enters every tag, journal MAC and
    /// the superblock MAC.
    pub const FIXED_HMAC: u32 = 0x10;
    /// Every flag Linux 6.1 defines.
    pub const KNOWN: u32 = 0x1f;

    #[must_use]
    pub fn contains(self, flag: u32) -> bool {
        self.0 & flag == flag
    }

    /// The names `integritysetup dump` prints, in its order.
    #[must_use]
    pub fn names(self) -> Vec<&'static str> {
        [
            (Self::JOURNAL_MAC, "have_journal_mac"),
            (Self::RECALCULATING, "recalculating"),
            (Self::DIRTY_BITMAP, "dirty_bitmap"),
            (Self::FIXED_PADDING, "fix_padding"),
            (Self::FIXED_HMAC, "fix_hmac"),
        ]
        .into_iter()
        .filter(|(bit, _)| self.contains(*bit))
        .map(|(_, name)| name)
        .collect()
    }
}

/// A parsed dm-integrity superblock.
#[derive(Clone, PartialEq, Eq)]
pub struct Superblock {
    /// 1 to 5: the kernel sets it from the features in use
    /// ([`Superblock::version_for`]).
    pub version: u8,
    /// Data sectors per interleave run, log2 (3..=31 with tags on the
    /// same device).
    pub log2_interleave_sectors: u8,
    /// Tag bytes per block (1..=255).
    pub tag_size: u16,
    /// Journal sections (at least 1).
    pub journal_sections: u32,
    /// The size of the integrity device in 512-byte sectors.
    pub provided_data_sectors: u64,
    pub flags: Flags,
    /// Block size in 512-byte sectors, log2 (0..=3: 512 to 4096 bytes).
    pub log2_sectors_per_block: u8,
    /// Blocks per bit of the bitmap (bitmap mode), log2.
    pub log2_blocks_per_bitmap_bit: u8,
    /// With [`Flags::RECALCULATING`]: the first sector whose tag is not
    /// yet recomputed.
    pub recalc_sector: u64,
    /// With [`Flags::FIXED_HMAC`]: the salt hashed into tags and MACs.
    pub salt: [u8; SALT_BYTES],
    /// Every byte of the area as read (padding, the MAC, the unused
    /// sectors), so that writing back changes only what was changed.
    raw: Box<[u8; SUPERBLOCK_BYTES]>,
}

impl std::fmt::Debug for Superblock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Superblock")
            .field("version", &self.version)
            .field("log2_interleave_sectors", &self.log2_interleave_sectors)
            .field("tag_size", &self.tag_size)
            .field("journal_sections", &self.journal_sections)
            .field("provided_data_sectors", &self.provided_data_sectors)
            .field("flags", &self.flags.names())
            .field("log2_sectors_per_block", &self.log2_sectors_per_block)
            .field("log2_blocks_per_bitmap_bit", &self.log2_blocks_per_bitmap_bit)
            .field("recalc_sector", &self.recalc_sector)
            .finish_non_exhaustive()
    }
}

const WHAT: &str = "dm-integrity superblock";

impl Superblock {
    /// Whether `bytes` starts with the superblock magic.
    #[must_use]
    pub fn has_magic(bytes: &[u8]) -> bool {
        bytes.get(..MAGIC.len()) == Some(&MAGIC[..])
    }

    /// Parses the superblock area (at least its first 64 bytes; a shorter
    /// area than 4 KiB is taken as zero-padded). Refuses what the 6.1
    /// kernel refuses when it reads a superblock whatever its table says:
    /// a wrong magic, version 0 or above 5, journal sections 0, a tag
    /// size of 0 or above 255, a block larger than 4096 bytes, an
    /// interleave outside 2^3..2^31 sectors.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, WHAT);
        let magic: [u8; 8] = r.array("magic")?;
        if magic != MAGIC {
            return Err(Error::corrupt(format!("{WHAT}: no \"integrt\" magic")));
        }
        let version = r.u8("version")?;
        let log2_interleave_sectors = r.u8("log2_interleave_sectors")?;
        let tag_size = r.u16_le("integrity_tag_size")?;
        let journal_sections = r.u32_le("journal_sections")?;
        let provided_data_sectors = r.u64_le("provided_data_sectors")?;
        let flags = Flags(r.u32_le("flags")?);
        let log2_sectors_per_block = r.u8("log2_sectors_per_block")?;
        let log2_blocks_per_bitmap_bit = r.u8("log2_blocks_per_bitmap_bit")?;
        r.take(2, "pad")?;
        let recalc_sector = r.u64_le("recalc_sector")?;
        r.take(8, "pad2")?;
        let salt: [u8; SALT_BYTES] = r.array("salt")?;
        debug_assert_eq!(r.position(), FIELDS_BYTES);

        if version == 0 || version > MAX_VERSION {
            return Err(Error::UnsupportedCipher(format!(
                "{WHAT}: version {version} (Linux 6.1 reads versions 1 to {MAX_VERSION})"
            )));
        }
        if tag_size == 0 || tag_size > MAX_TAG_SIZE {
            return Err(Error::corrupt(format!(
                "{WHAT}: tag size {tag_size} (1 to {MAX_TAG_SIZE} bytes)"
            )));
        }
        if log2_sectors_per_block > MAX_LOG2_SECTORS_PER_BLOCK {
            return Err(Error::corrupt(format!(
                "{WHAT}: block of 2^{log2_sectors_per_block} sectors (at most 4096 bytes)"
            )));
        }
        if journal_sections == 0 {
            return Err(Error::corrupt(format!("{WHAT}: journal_sections is 0")));
        }
        if !LOG2_INTERLEAVE_RANGE.contains(&log2_interleave_sectors) {
            return Err(Error::corrupt(format!(
                "{WHAT}: interleave of 2^{log2_interleave_sectors} sectors (2^3 to 2^31)"
            )));
        }

        let mut raw = Box::new([0u8; SUPERBLOCK_BYTES]);
        let n = bytes.len().min(SUPERBLOCK_BYTES);
        raw[..n].copy_from_slice(&bytes[..n]);
        Ok(Self {
            version,
            log2_interleave_sectors,
            tag_size,
            journal_sections,
            provided_data_sectors,
            flags,
            log2_sectors_per_block,
            log2_blocks_per_bitmap_bit,
            recalc_sector,
            salt,
            raw,
        })
    }

    /// A new superblock as the kernel's `initialize_superblock` fills it
    /// (every other byte zero). The geometry (journal sections, provided
    /// data sectors) comes from [`super::geometry`].
    #[must_use]
    pub fn new(
        tag_size: u16,
        log2_sectors_per_block: u8,
        log2_interleave_sectors: u8,
        journal_sections: u32,
        flags: Flags,
        salt: [u8; SALT_BYTES],
    ) -> Self {
        let mut sb = Self {
            version: 1,
            log2_interleave_sectors,
            tag_size,
            journal_sections,
            provided_data_sectors: 0,
            flags,
            log2_sectors_per_block,
            log2_blocks_per_bitmap_bit: 0,
            recalc_sector: 0,
            salt,
            raw: Box::new([0u8; SUPERBLOCK_BYTES]),
        };
        sb.version = sb.version_for(false);
        sb
    }

    /// The version the kernel's `sb_set_version` writes for these flags
    /// (`bitmap_mode`: the device is active in bitmap mode; tags on a
    /// separate metadata device, which LUKS2 never uses, are not modelled).
    #[must_use]
    pub fn version_for(&self, bitmap_mode: bool) -> u8 {
        if self.flags.contains(Flags::FIXED_HMAC) {
            5
        } else if self.flags.contains(Flags::FIXED_PADDING) {
            4
        } else if bitmap_mode || self.flags.contains(Flags::DIRTY_BITMAP) {
            3
        } else if self.flags.contains(Flags::RECALCULATING) {
            2
        } else {
            1
        }
    }

    /// Block size in bytes (512 to 4096).
    #[must_use]
    pub fn block_bytes(&self) -> u32 {
        512 << self.log2_sectors_per_block
    }

    /// Sectors of 512 bytes per block (1 to 8).
    #[must_use]
    pub fn sectors_per_block(&self) -> u32 {
        1 << self.log2_sectors_per_block
    }

    /// The superblock's MAC as the kernel computes it with a journal MAC
    /// and [`Flags::FIXED_HMAC`] (`sb_mac`): the journal MAC key's MAC,
    /// `mac_len` bytes, of the first 512 - `mac_len` bytes, stored after
    /// them. Returns (what is MACed, the MAC stored); `None` when the MAC
    /// does not fit beside the fields.
    #[must_use]
    pub fn mac_parts(&self, mac_len: usize) -> Option<(Vec<u8>, Vec<u8>)> {
        let split = 512usize.checked_sub(mac_len).filter(|&s| s >= FIELDS_BYTES)?;
        let bytes = self.to_bytes();
        Some((bytes[..split].to_vec(), bytes[split..512].to_vec()))
    }

    /// The superblock area as it goes on disk: the bytes it was read from
    /// with the named fields set to their current values.
    #[must_use]
    pub fn to_bytes(&self) -> Box<[u8; SUPERBLOCK_BYTES]> {
        let mut out = self.raw.clone();
        out[0..8].copy_from_slice(&MAGIC);
        out[8] = self.version;
        out[9] = self.log2_interleave_sectors;
        out[10..12].copy_from_slice(&self.tag_size.to_le_bytes());
        out[12..16].copy_from_slice(&self.journal_sections.to_le_bytes());
        out[16..24].copy_from_slice(&self.provided_data_sectors.to_le_bytes());
        out[24..28].copy_from_slice(&self.flags.0.to_le_bytes());
        out[28] = self.log2_sectors_per_block;
        out[29] = self.log2_blocks_per_bitmap_bit;
        out[32..40].copy_from_slice(&self.recalc_sector.to_le_bytes());
        out[48..64].copy_from_slice(&self.salt);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut b = vec![0u8; SUPERBLOCK_BYTES];
        b[..8].copy_from_slice(&MAGIC);
        b[8] = 5;
        b[9] = 15;
        b[10..12].copy_from_slice(&4u16.to_le_bytes());
        b[12..16].copy_from_slice(&3u32.to_le_bytes());
        b[16..24].copy_from_slice(&40_000u64.to_le_bytes());
        b[24..28].copy_from_slice(&(Flags::FIXED_PADDING | Flags::FIXED_HMAC).to_le_bytes());
        b[29] = 12;
        b[48..64].copy_from_slice(&[7; 16]);
        b[500] = 0xaa; // where a superblock MAC would be
        b
    }

    #[test]
    fn parses_and_writes_back_byte_for_byte() {
        let bytes = sample();
        let sb = Superblock::parse(&bytes).unwrap();
        assert_eq!(sb.version, 5);
        assert_eq!(sb.tag_size, 4);
        assert_eq!(sb.journal_sections, 3);
        assert_eq!(sb.provided_data_sectors, 40_000);
        assert_eq!(sb.flags.names(), ["fix_padding", "fix_hmac"]);
        assert_eq!(sb.log2_blocks_per_bitmap_bit, 12);
        assert_eq!(sb.salt, [7; 16]);
        assert_eq!(sb.version_for(false), 5);
        assert_eq!(&sb.to_bytes()[..], &bytes[..]);
        let mut changed = sb.clone();
        changed.provided_data_sectors = 1;
        let out = changed.to_bytes();
        assert_eq!(out[16], 1);
        assert_eq!(out[500], 0xaa);
        let (input, mac) = sb.mac_parts(32).unwrap();
        assert_eq!((input.len(), mac[20]), (480, 0xaa));
        assert!(sb.mac_parts(449).is_none());
    }

    /// Superblocks the kernel wrote (the fuzz seeds, from the images of
    /// `kernel_integrity_format`): LUKS2 (version 4, fixed padding) and
    /// `integritysetup` with a journal MAC (version 5, salted).
    #[test]
    fn kernel_superblocks_are_written_back_byte_for_byte() {
        let luks =
            include_bytes!("../../../../fuzz/corpus/integrity_metadata/luks-hmac256-superblock");
        let sb = Superblock::parse(luks).unwrap();
        assert_eq!((sb.version, sb.tag_size, sb.flags.names()), (4, 32, vec!["fix_padding"]));
        assert_eq!(&sb.to_bytes()[..], &luks[..]);
        let jmac = include_bytes!("../../../../fuzz/corpus/integrity_metadata/int-jmac-superblock");
        let sb = Superblock::parse(jmac).unwrap();
        assert_eq!(sb.flags.names(), ["have_journal_mac", "fix_padding", "fix_hmac"]);
        assert_eq!(sb.version, 5);
        assert_ne!(sb.salt, [0; SALT_BYTES]);
        assert_eq!(&sb.to_bytes()[..], &jmac[..]);
    }

    #[test]
    fn refuses_what_the_kernel_refuses() {
        let cases: [(usize, u8, &str); 6] = [
            (0, b'x', "magic"),
            (8, 0, "version 0"),
            (8, 6, "version 6"),
            (9, 2, "interleave"),
            (28, 4, "block of 2^4"),
            (12, 0, "journal_sections is 0"),
        ];
        for (at, value, needle) in cases {
            let mut b = sample();
            b[at] = value;
            let err = Superblock::parse(&b).unwrap_err().to_string();
            assert!(err.contains(needle), "{needle}: {err}");
        }
        let mut b = sample();
        b[10..12].copy_from_slice(&256u16.to_le_bytes());
        assert!(Superblock::parse(&b).is_err());
        for len in 0..FIELDS_BYTES {
            assert!(Superblock::parse(&sample()[..len]).is_err());
        }
        assert!(Superblock::parse(&sample()[..FIELDS_BYTES]).is_ok());
    }

    #[test]
    fn versions_follow_the_flags() {
        let sb = |flags| Superblock::new(32, 0, 15, 1, Flags(flags), [0; 16]);
        assert_eq!(sb(0).version, 1);
        assert_eq!(sb(Flags::RECALCULATING).version, 2);
        assert_eq!(sb(0).version_for(true), 3);
        assert_eq!(sb(Flags::FIXED_PADDING).version, 4);
        assert_eq!(sb(Flags::FIXED_PADDING | Flags::FIXED_HMAC).version, 5);
    }
}
