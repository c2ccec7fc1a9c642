//! Where dm-integrity puts everything, computed as Linux 6.1's
//! `drivers/md/dm-integrity.c` computes it (`calculate_journal_section_size`,
//! `calculate_device_limits`, `get_provided_data_sectors`,
//! `get_area_and_offset`, `get_data_sector`,
//! `get_metadata_sector_and_offset`), for tags on the data device (as LUKS2
//! and a standalone `integritysetup format` without `--data-device` put
//! them).
//!
//! From `start` (the LUKS2 data offset; 0 for a standalone device) the
//! device holds: the superblock (8 sectors), the journal
//! (`journal_sections` sections of `journal_section_sectors`; in bitmap
//! mode its first sectors hold the bitmap), then interleave runs, each
//! `metadata_run` sectors of tags followed by `2^log2_interleave_sectors`
//! sectors of data. All positions are in 512-byte sectors unless named
//! `_bytes` or `_offset` (bytes from the start of the underlying device).

use super::superblock::{Flags, Superblock, SUPERBLOCK_SECTORS};
use crate::{Error, Result};

const SECTOR: u64 = 512;
/// `JOURNAL_BLOCK_SECTORS`: the metadata sectors that start a section.
pub const JOURNAL_BLOCK_SECTORS: u32 = 8;
/// `JOURNAL_SECTOR_DATA`: a journal sector less its commit id.
const JOURNAL_SECTOR_DATA: u32 = 512 - 8;
/// `JOURNAL_MAC_PER_SECTOR`.
pub const JOURNAL_MAC_PER_SECTOR: u32 = 8;
/// `METADATA_PADDING_SECTORS`.
const METADATA_PADDING_SECTORS: u64 = 8;
/// `DEFAULT_BUFFER_SECTORS`: the tag buffer the kernel uses unless the
/// table says `buffer_sectors:` (cryptsetup never does by default).
pub const DEFAULT_BUFFER_SECTORS: u32 = 128;
/// `DEFAULT_INTERLEAVE_SECTORS`.
pub const DEFAULT_INTERLEAVE_SECTORS: u32 = 32768;
/// `DEFAULT_MAX_JOURNAL_SECTORS` (64-bit kernels).
pub const DEFAULT_MAX_JOURNAL_SECTORS: u64 = 131_072;
/// `DEFAULT_JOURNAL_SIZE_FACTOR`: the default journal is 1/128 of the
/// device.
const DEFAULT_JOURNAL_SIZE_FACTOR: u32 = 7;
/// `DEFAULT_SECTORS_PER_BITMAP_BIT`.
pub const DEFAULT_SECTORS_PER_BITMAP_BIT: u64 = 32768;
/// `BITMAP_BLOCK_SIZE`: the bitmap is read and written in 4 KiB blocks.
pub const BITMAP_BLOCK_BYTES: u64 = 4096;

/// The layout of journal sections and entries (`calculate_journal_section_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalLayout {
    pub sections: u32,
    /// An entry: the logical sector (8 bytes), the last 8 bytes of each
    /// 512-byte sector of the block, the tag; rounded up to 8 bytes.
    pub entry_size: u32,
    pub entries_per_sector: u32,
    pub section_entries: u32,
    /// The 8 metadata sectors and a block of data per entry.
    pub section_sectors: u32,
    pub log2_sectors_per_block: u8,
    pub tag_size: u32,
    /// Each metadata sector ends with 8 bytes of the section's MAC.
    pub mac: bool,
}

impl JournalLayout {
    /// The journal layout of a superblock.
    #[must_use]
    pub fn of(sb: &Superblock) -> Self {
        let spb = sb.sectors_per_block();
        let tag_size = u32::from(sb.tag_size);
        let entry_size = (8 + 8 * spb + tag_size).div_ceil(8) * 8;
        let mac = sb.flags.contains(Flags::JOURNAL_MAC);
        let space = JOURNAL_SECTOR_DATA - if mac { JOURNAL_MAC_PER_SECTOR } else { 0 };
        // tag_size <= 255 and spb <= 8: entry_size <= 328 < space.
        let entries_per_sector = space / entry_size;
        let section_entries = entries_per_sector * JOURNAL_BLOCK_SECTORS;
        let section_sectors =
            (section_entries << sb.log2_sectors_per_block) + JOURNAL_BLOCK_SECTORS;
        Self {
            sections: sb.journal_sections,
            entry_size,
            entries_per_sector,
            section_entries,
            section_sectors,
            log2_sectors_per_block: sb.log2_sectors_per_block,
            tag_size,
            mac,
        }
    }

    /// Bytes of one section.
    #[must_use]
    pub fn section_bytes(&self) -> usize {
        self.section_sectors as usize * SECTOR as usize
    }

    /// Sectors of the whole journal.
    #[must_use]
    pub fn sectors(&self) -> u64 {
        u64::from(self.section_sectors) * u64::from(self.sections)
    }

    /// Entry `n` of a section: (metadata sector 0..8, byte offset in it).
    /// Entries are spread over the 8 metadata sectors in turn
    /// (`access_journal_entry`).
    #[must_use]
    pub fn entry_position(&self, n: u32) -> (u32, u32) {
        (n % JOURNAL_BLOCK_SECTORS, (n / JOURNAL_BLOCK_SECTORS) * self.entry_size)
    }

    /// The first sector of entry `n`'s data in its section
    /// (`access_journal_data`).
    #[must_use]
    pub fn data_sector(&self, n: u32) -> u32 {
        (n << self.log2_sectors_per_block) + JOURNAL_BLOCK_SECTORS
    }
}

/// The complete geometry of a dm-integrity device whose tags are on the
/// data device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Where the superblock is, in sectors of the underlying device (the
    /// table's `offset`; LUKS2: the data segment offset).
    pub start: u64,
    /// The underlying device's size in sectors (the whole device, `start`
    /// included, as the kernel's `meta_device_sectors`).
    pub device_sectors: u64,
    pub journal: JournalLayout,
    /// `initial_sectors`: superblock and journal.
    pub initial_sectors: u64,
    /// Sectors of tags before each interleave run of data.
    pub metadata_run: u64,
    pub log2_interleave_sectors: u8,
    pub log2_sectors_per_block: u8,
    pub tag_size: u32,
    /// The sectors the integrity device provides (from the superblock).
    pub provided_data_sectors: u64,
    /// The kernel's tag buffer, log2 sectors (`log2_buffer_sectors` after
    /// it is capped by the metadata run); it decides where tags go when
    /// interleave runs are shorter than the buffer.
    pub log2_buffer_sectors: u8,
}

/// What a new dm-integrity device is formatted with: the table's tag
/// size, block size, features, offset and options, on a zeroed
/// superblock area (`initialize_superblock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatRequest {
    pub tag_size: u16,
    pub log2_sectors_per_block: u8,
    /// The features asked for: journal MAC, fixed padding, fixed HMAC
    /// (with `salt`).
    pub flags: Flags,
    pub salt: [u8; super::superblock::SALT_BYTES],
    /// The superblock's sector (LUKS2: the data offset).
    pub start: u64,
    /// The whole underlying device, in sectors.
    pub device_sectors: u64,
    /// The table's `journal_sectors:` (0: 1/128 of the device, at most
    /// 64 MiB).
    pub journal_sectors: u64,
    /// The table's `interleave_sectors:` (0: 32768).
    pub interleave_sectors: u32,
}

impl FormatRequest {
    /// cryptsetup 2.6's request for a LUKS2 segment or an
    /// `integritysetup format` with default options: fixed padding, the
    /// kernel's default journal and interleave.
    #[must_use]
    pub fn new(tag_size: u16, block_bytes: u32, start: u64, device_sectors: u64) -> Self {
        Self {
            tag_size,
            log2_sectors_per_block: (block_bytes.max(512) / 512).trailing_zeros() as u8,
            flags: Flags(Flags::FIXED_PADDING),
            salt: [0; super::superblock::SALT_BYTES],
            start,
            device_sectors,
            journal_sectors: 0,
            interleave_sectors: 0,
        }
    }
}

/// Where a block lives on the underlying device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Byte offset of the block's data.
    pub data_offset: u64,
    /// Byte offset of the block's tag (`tag_size` bytes).
    pub tag_offset: u64,
    /// The interleave run (`area`) and the sector within it.
    pub area: u64,
    pub sector_in_area: u64,
    /// Sectors from this one to the end of its run: data and tags are
    /// contiguous on the device up to there.
    pub sectors_left_in_area: u64,
}

/// The padding of each tag area (`calculate_device_limits`): 4 KiB with
/// `SB_FLAG_FIXED_PADDING`, else the 128 KiB older kernels used.
fn metadata_run(tag_size: u32, log2_interleave: u8, log2_spb: u8, fixed_padding: bool) -> u64 {
    let padding: u64 = if fixed_padding { METADATA_PADDING_SECTORS * SECTOR } else { SECTOR << 8 };
    let tag_bytes = u64::from(tag_size) << (log2_interleave - log2_spb);
    tag_bytes.div_ceil(padding) * padding / SECTOR
}

/// `calculate_device_limits` on the data device: whether `provided`
/// sectors fit, and the metadata run.
fn limits(
    journal: &JournalLayout,
    sb: &Superblock,
    start: u64,
    device_sectors: u64,
    provided: u64,
) -> Option<(u64, u64)> {
    let initial = SUPERBLOCK_SECTORS.checked_add(journal.sectors())?;
    if initial.checked_add(METADATA_PADDING_SECTORS)? >= device_sectors
        || initial > u64::from(u32::MAX)
    {
        return None;
    }
    let run = metadata_run(
        journal.tag_size,
        sb.log2_interleave_sectors,
        sb.log2_sectors_per_block,
        sb.flags.contains(Flags::FIXED_PADDING),
    );
    // The last provided sector must be on the device.
    let last = provided.checked_sub(1)?;
    let area = last >> sb.log2_interleave_sectors;
    let offset = last & ((1u64 << sb.log2_interleave_sectors) - 1);
    let sector = data_sector(start, initial, run, sb.log2_interleave_sectors, area, offset)?;
    (sector >= start && sector < device_sectors).then_some((initial, run))
}

/// `get_data_sector`, with overflow checks.
fn data_sector(
    start: u64,
    initial: u64,
    run: u64,
    log2_interleave: u8,
    area: u64,
    offset: u64,
) -> Option<u64> {
    area.checked_shl(u32::from(log2_interleave))
        .filter(|s| s >> log2_interleave == area)?
        .checked_add(area.checked_add(1)?.checked_mul(run)?)?
        .checked_add(initial)?
        .checked_add(offset)?
        .checked_add(start)
}

impl Geometry {
    /// The geometry of a device whose superblock `sb` is at sector
    /// `start` of an underlying device of `device_sectors` sectors.
    /// Refuses, as the kernel's table constructor does, a superblock
    /// whose journal or provided sectors do not fit the device.
    pub fn new(sb: &Superblock, start: u64, device_sectors: u64) -> Result<Self> {
        Self::with_buffer_sectors(sb, start, device_sectors, DEFAULT_BUFFER_SECTORS)
    }

    /// [`Geometry::new`] for a table with `buffer_sectors:` set.
    pub fn with_buffer_sectors(
        sb: &Superblock,
        start: u64,
        device_sectors: u64,
        buffer_sectors: u32,
    ) -> Result<Self> {
        let journal = JournalLayout::of(sb);
        let provided = sb.provided_data_sectors;
        if device_sectors > u64::MAX / SECTOR {
            return Err(Error::invalid(format!("a device of {device_sectors} sectors")));
        }
        if provided == 0 {
            return Err(Error::corrupt("dm-integrity superblock: provided_data_sectors is 0"));
        }
        if provided & u64::from(sb.sectors_per_block() - 1) != 0 {
            return Err(Error::corrupt(format!(
                "dm-integrity superblock: {provided} provided sectors are not whole {}-byte blocks",
                sb.block_bytes()
            )));
        }
        let (initial, run) = limits(&journal, sb, start, device_sectors, provided).ok_or_else(|| {
            Error::corrupt(format!(
                "dm-integrity superblock: {} journal sections and {provided} data sectors do not fit \
                 {device_sectors} sectors from sector {start}",
                sb.journal_sections
            ))
        })?;
        // `log2_buffer_sectors = min(__fls(buffer_sectors), 31 - 9)`, then
        // capped by the lowest set bit of the metadata run.
        let log2_buffer = (31 - buffer_sectors.max(1).leading_zeros()).min(22) as u8;
        let log2_buffer = log2_buffer.min(run.trailing_zeros() as u8);
        Ok(Self {
            start,
            device_sectors,
            journal,
            initial_sectors: initial,
            metadata_run: run,
            log2_interleave_sectors: sb.log2_interleave_sectors,
            log2_sectors_per_block: sb.log2_sectors_per_block,
            tag_size: u32::from(sb.tag_size),
            provided_data_sectors: provided,
            log2_buffer_sectors: log2_buffer,
        })
    }

    /// `get_provided_data_sectors`: the most data sectors the device can
    /// provide with this superblock's journal, tag size and interleave
    /// (what the kernel writes into a new superblock); 0 if none fit.
    #[must_use]
    pub fn provided_data_sectors_for(sb: &Superblock, start: u64, device_sectors: u64) -> u64 {
        let journal = JournalLayout::of(sb);
        let mut provided = 0u64;
        if device_sectors == 0 {
            return 0;
        }
        let top = 63 - device_sectors.leading_zeros();
        for bit in (3..=top).rev() {
            let candidate = provided | (1u64 << bit);
            if limits(&journal, sb, start, device_sectors, candidate).is_some() {
                provided = candidate;
            }
        }
        provided
    }

    /// The journal size the kernel picks when the table names none:
    /// 1/128 of the underlying device, at most 64 MiB.
    #[must_use]
    pub fn default_journal_sectors(device_sectors: u64) -> u64 {
        DEFAULT_MAX_JOURNAL_SECTORS.min(device_sectors >> DEFAULT_JOURNAL_SIZE_FACTOR)
    }

    /// A new superblock as the kernel's `initialize_superblock` makes it
    /// on a zeroed area, with the geometry it gives.
    pub fn format(request: &FormatRequest) -> Result<(Superblock, Self)> {
        let FormatRequest {
            tag_size,
            log2_sectors_per_block,
            flags,
            salt,
            start,
            device_sectors,
            ..
        } = *request;
        if tag_size == 0 || tag_size > super::superblock::MAX_TAG_SIZE {
            return Err(Error::invalid(format!("tag size {tag_size} (1 to 255 bytes)")));
        }
        if log2_sectors_per_block > super::superblock::MAX_LOG2_SECTORS_PER_BLOCK {
            return Err(Error::invalid("block size above 4096 bytes"));
        }
        let journal_sectors = if request.journal_sectors == 0 {
            Self::default_journal_sectors(device_sectors)
        } else {
            request.journal_sectors
        };
        let interleave = if request.interleave_sectors == 0 {
            DEFAULT_INTERLEAVE_SECTORS
        } else {
            request.interleave_sectors
        };
        let log2_interleave = (31 - interleave.leading_zeros()) as u8;
        let log2_interleave = log2_interleave.clamp(
            *super::superblock::LOG2_INTERLEAVE_RANGE.start(),
            *super::superblock::LOG2_INTERLEAVE_RANGE.end(),
        );
        let mut sb =
            Superblock::new(tag_size, log2_sectors_per_block, log2_interleave, 1, flags, salt);
        let section_sectors = u64::from(JournalLayout::of(&sb).section_sectors);
        sb.journal_sections =
            u32::try_from(journal_sectors / section_sectors).unwrap_or(u32::MAX).max(1);
        sb.provided_data_sectors = Self::provided_data_sectors_for(&sb, start, device_sectors);
        if sb.provided_data_sectors == 0 {
            return Err(Error::invalid(format!(
                "{device_sectors} sectors from sector {start} hold no dm-integrity data"
            )));
        }
        sb.version = sb.version_for(false);
        let geometry = Self::new(&sb, start, device_sectors)?;
        Ok((sb, geometry))
    }

    /// Byte offset of the superblock.
    #[must_use]
    pub fn superblock_offset(&self) -> u64 {
        self.start * SECTOR
    }

    /// Byte offset of journal section `section` (of the bitmap's first
    /// block for section 0 in bitmap mode).
    #[must_use]
    pub fn journal_section_offset(&self, section: u32) -> u64 {
        (self.start
            + SUPERBLOCK_SECTORS
            + u64::from(section) * u64::from(self.journal.section_sectors))
            * SECTOR
    }

    /// Bytes of the superblock and journal from the superblock on.
    #[must_use]
    pub fn initial_bytes(&self) -> u64 {
        self.initial_sectors * SECTOR
    }

    /// Block size in bytes.
    #[must_use]
    pub fn block_bytes(&self) -> u32 {
        512 << self.log2_sectors_per_block
    }

    /// Where logical sector `sector` (the first of a block) of the
    /// integrity device has its data and its tag.
    pub fn locate(&self, sector: u64) -> Result<Location> {
        if sector >= self.provided_data_sectors {
            return Err(Error::invalid(format!(
                "sector {sector} is beyond the {} sectors of the integrity device",
                self.provided_data_sectors
            )));
        }
        let spb_mask = (1u64 << self.log2_sectors_per_block) - 1;
        if sector & spb_mask != 0 {
            return Err(Error::invalid(format!(
                "sector {sector} is not the first of a {}-byte block",
                self.block_bytes()
            )));
        }
        let li = u32::from(self.log2_interleave_sectors);
        let area = sector >> li;
        let in_area = sector & ((1u64 << li) - 1);
        // Bounded by `new`: the last provided sector is on the device.
        let data = data_sector(
            self.start,
            self.initial_sectors,
            self.metadata_run,
            self.log2_interleave_sectors,
            area,
            in_area,
        )
        .ok_or_else(|| Error::corrupt("dm-integrity data position overflows"))?;
        // `get_metadata_sector_and_offset`, in the kernel's units: the run's
        // first tag sector counted in whole buffers, then the tag's buffer
        // and its offset within it.
        let lbs = u32::from(self.log2_buffer_sectors);
        let buffer_bytes = SECTOR << lbs;
        let block = in_area >> self.log2_sectors_per_block;
        let tag_bytes = block * u64::from(self.tag_size);
        let buffers = ((area << li) + area * self.metadata_run) >> lbs;
        let buffers = buffers + (tag_bytes >> (9 + lbs));
        let tag = (self.start + self.initial_sectors) * SECTOR
            + buffers * buffer_bytes
            + (tag_bytes & (buffer_bytes - 1));
        let run_end = ((area + 1) << li).min(self.provided_data_sectors);
        Ok(Location {
            data_offset: data * SECTOR,
            tag_offset: tag,
            area,
            sector_in_area: in_area,
            sectors_left_in_area: run_end - sector,
        })
    }

    /// The end of the last run of data, in bytes of the underlying
    /// device.
    #[must_use]
    pub fn end_offset(&self) -> u64 {
        let last = self.provided_data_sectors - 1;
        let li = self.log2_interleave_sectors;
        let sector = data_sector(
            self.start,
            self.initial_sectors,
            self.metadata_run,
            li,
            last >> li,
            last & ((1u64 << li) - 1),
        )
        .unwrap_or(self.device_sectors - 1);
        (sector + 1) * SECTOR
    }
}

/// The bitmap of bitmap mode, kept in the journal area from its first
/// sector (`block_bitmap_op`, `dm_integrity_ctr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitmapLayout {
    /// Sectors of the integrity device per bit, log2.
    pub log2_sectors_per_bit: u8,
    pub bits: u64,
    /// 4 KiB blocks the bitmap takes at the start of the journal.
    pub blocks: u64,
}

impl BitmapLayout {
    /// The bitmap as the kernel sizes it when it activates the device
    /// with `sectors_per_bit` (the table's `sectors_per_bit:`, 0 for the
    /// default 32768): doubled until the journal area holds one bit per
    /// span. The superblock records the result
    /// (`log2_blocks_per_bitmap_bit`).
    #[must_use]
    pub fn of(geometry: &Geometry, sectors_per_bit: u64) -> Self {
        let spb_log2 = geometry.log2_sectors_per_block;
        let requested =
            if sectors_per_bit == 0 { DEFAULT_SECTORS_PER_BITMAP_BIT } else { sectors_per_bit };
        let mut log2 = (63 - requested.leading_zeros()) as u8;
        log2 = log2.max(spb_log2);
        let bits_in_journal = (geometry.journal.sectors() << 12).min(u64::from(u32::MAX));
        let provided = geometry.provided_data_sectors;
        while log2 < 63 && bits_in_journal < provided.div_ceil(1u64 << log2) {
            log2 += 1;
        }
        Self::with_log2(geometry, log2)
    }

    /// The bitmap of a superblock's `log2_blocks_per_bitmap_bit`.
    #[must_use]
    pub fn from_superblock(geometry: &Geometry, sb: &Superblock) -> Self {
        Self::with_log2(
            geometry,
            sb.log2_blocks_per_bitmap_bit.saturating_add(geometry.log2_sectors_per_block).min(63),
        )
    }

    fn with_log2(geometry: &Geometry, log2_sectors_per_bit: u8) -> Self {
        let blocks_per_bit_log2 = log2_sectors_per_bit - geometry.log2_sectors_per_block;
        let blocks = geometry.provided_data_sectors >> geometry.log2_sectors_per_block;
        let bits = blocks.div_ceil(1u64 << blocks_per_bit_log2);
        Self { log2_sectors_per_bit, bits, blocks: bits.div_ceil(BITMAP_BLOCK_BYTES * 8) }
    }

    /// `log2_blocks_per_bitmap_bit` as the superblock stores it.
    #[must_use]
    pub fn log2_blocks_per_bit(&self, geometry: &Geometry) -> u8 {
        self.log2_sectors_per_bit - geometry.log2_sectors_per_block
    }

    /// The bit covering `sector`: (byte in the bitmap, bit in the byte).
    /// The kernel's bitmap is an array of little-endian machine words, so
    /// bit `n` is bit `n % 8` of byte `n / 8`.
    #[must_use]
    pub fn bit_of(&self, sector: u64) -> (u64, u8) {
        let bit = sector >> self.log2_sectors_per_bit;
        (bit / 8, (bit % 8) as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(tag: u16, log2_spb: u8, flags: u32) -> Superblock {
        Superblock::new(tag, log2_spb, 15, 1, Flags(flags), [0; 16])
    }

    #[test]
    fn journal_layouts() {
        // crc32c, 512-byte blocks: entries of 8 + 8 + 4 -> 24 bytes, 21 a
        // sector, 168 a section of 8 + 168 sectors.
        let j = JournalLayout::of(&sb(4, 0, 0));
        assert_eq!(
            (j.entry_size, j.entries_per_sector, j.section_entries, j.section_sectors),
            (24, 21, 168, 176)
        );
        // HMAC-SHA256 in 4 KiB blocks: 8 + 64 + 32 = 104 bytes, 4 a sector.
        let j = JournalLayout::of(&sb(32, 3, 0));
        assert_eq!(
            (j.entry_size, j.entries_per_sector, j.section_entries, j.section_sectors),
            (104, 4, 32, 264)
        );
        // A journal MAC takes 8 bytes of each metadata sector.
        let j = JournalLayout::of(&sb(32, 0, Flags::JOURNAL_MAC));
        assert_eq!((j.entry_size, j.entries_per_sector), (48, 10));
        assert_eq!(j.entry_position(9), (1, 48));
        assert_eq!(j.data_sector(9), 17);
    }

    #[test]
    fn runs_and_locations() {
        let (sb, g) = Geometry::format(&FormatRequest::new(32, 512, 0, 49152)).unwrap();
        // 32768 data sectors of 32-byte tags: 1 MiB of tags, 2048 sectors.
        assert_eq!(g.metadata_run, 2048);
        // The default journal: 1/128 of the device, in sections of 8 + 80 sectors.
        assert_eq!(g.journal.sections, 384 / 88);
        assert_eq!(sb.provided_data_sectors, Geometry::provided_data_sectors_for(&sb, 0, 49152));
        let first = g.locate(0).unwrap();
        assert_eq!(first.tag_offset, g.initial_sectors * 512);
        assert_eq!(first.data_offset, (g.initial_sectors + 2048) * 512);
        let next = g.locate(1).unwrap();
        assert_eq!(next.tag_offset, first.tag_offset + 32);
        assert_eq!(next.data_offset, first.data_offset + 512);
        if g.provided_data_sectors > 32768 {
            let second = g.locate(32768).unwrap();
            assert_eq!(second.data_offset, (g.initial_sectors + 2048 * 2 + 32768) * 512);
            assert_eq!(second.tag_offset, (g.initial_sectors + 2048 + 32768) * 512);
        }
        assert!(g.end_offset() <= 49152 * 512);
        assert!(g.locate(g.provided_data_sectors).is_err());
        // Legacy padding rounds each tag area up to 128 KiB.
        let legacy = sb_with(&sb, |s| s.flags = Flags(0));
        assert_eq!(Geometry::new(&legacy, 0, 49152).map(|g| g.metadata_run).unwrap_or(0) % 256, 0);
    }

    fn sb_with(sb: &Superblock, f: impl FnOnce(&mut Superblock)) -> Superblock {
        let mut s = sb.clone();
        f(&mut s);
        s.provided_data_sectors = Geometry::provided_data_sectors_for(&s, 0, 49152);
        s
    }

    #[test]
    fn refuses_superblocks_that_do_not_fit() {
        let (mut sb, _) = Geometry::format(&FormatRequest::new(4, 512, 0, 8192)).unwrap();
        assert!(Geometry::new(&sb, 0, 8192).is_ok());
        assert!(Geometry::new(&sb, 0, 4096).is_err());
        sb.provided_data_sectors += 8;
        assert!(Geometry::new(&sb, 0, 8192).is_err());
        sb.provided_data_sectors = !7;
        assert!(Geometry::new(&sb, 0, u64::MAX / 512).is_err());
        assert!(Geometry::new(&sb, 0, u64::MAX).is_err());
        sb.journal_sections = u32::MAX;
        assert!(Geometry::new(&sb, 0, u64::MAX / 512).is_err());
    }

    #[test]
    fn bitmap_bits() {
        let (_, g) = Geometry::format(&FormatRequest::new(4, 512, 0, 49152)).unwrap();
        let b = BitmapLayout::of(&g, 0);
        assert_eq!(b.log2_sectors_per_bit, 15);
        assert_eq!(b.bits, g.provided_data_sectors.div_ceil(32768));
        assert_eq!(b.blocks, 1);
        assert_eq!(b.bit_of(32768 * 9), (1, 1));
    }
}
