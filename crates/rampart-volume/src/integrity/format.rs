//! A new segment's dm-integrity device, as `cryptsetup luksFormat
//! --integrity` leaves it: the kernel formats it on its first activation
//! (`initialize_superblock`, then `init_journal` under sequence 0), with
//! cryptsetup's defaults (the kernel's journal size and interleave, a
//! block of the LUKS sector size, the tag size of the segment's tag
//! layout, fixed padding).

use rampart_luks::integrity::journal::empty_section;
use rampart_luks::integrity::{BitmapLayout, FormatRequest, Geometry};
use rampart_luks::IntegritySegment;

use crate::{BlockDevice, VolumeError};

/// Empty journal sections are written this many bytes at a time.
const JOURNAL_WRITE_BYTES: usize = 4 << 20;

/// Writes the dm-integrity superblock and empty journal of `segment` at
/// its offset on `data` (the whole data device), journal first and the
/// superblock last, each flushed, as the kernel does. The data and tag
/// areas are left as they are: [`super::AuthenticatedDevice::wipe`] seals
/// zeros into them. Returns the geometry (the provided data sectors among
/// it).
pub fn format_integrity<D: BlockDevice>(
    data: &D,
    segment: &IntegritySegment,
) -> Result<Geometry, VolumeError> {
    format_integrity_with_journal(data, segment, 0)
}

/// [`format_integrity`] with a journal of about `journal_bytes` (whole
/// sections, at least one; 0 for the kernel's default), as `cryptsetup
/// --journal-size` asks.
pub fn format_integrity_with_journal<D: BlockDevice>(
    data: &D,
    segment: &IntegritySegment,
    journal_bytes: u64,
) -> Result<Geometry, VolumeError> {
    let tag_size = segment.integrity.tag_layout(&segment.encryption)?.tag_size();
    let tag_size = u16::try_from(tag_size)
        .map_err(|_| rampart_luks::Error::InvalidArgument(format!("a tag of {tag_size} bytes")))?;
    if segment.offset % 512 != 0 {
        return Err(rampart_luks::Error::InvalidArgument(format!(
            "a segment offset of {} bytes is not whole sectors",
            segment.offset
        ))
        .into());
    }
    let mut request =
        FormatRequest::new(tag_size, segment.sector_size, segment.offset / 512, data.len() / 512);
    request.journal_sectors = journal_bytes / 512;
    let (mut superblock, geometry) = Geometry::format(&request)?;
    // The kernel records the bitmap's granularity whatever the mode.
    superblock.log2_blocks_per_bitmap_bit =
        BitmapLayout::of(&geometry, 0).log2_blocks_per_bit(&geometry);
    if let Some(size) = segment.size {
        let provided = geometry.provided_data_sectors * 512;
        if size > provided {
            return Err(rampart_luks::Error::InvalidArgument(format!(
                "the segment's {size} bytes exceed the {provided} that dm-integrity provides"
            ))
            .into());
        }
    }
    let layout = geometry.journal;
    let per_write = (JOURNAL_WRITE_BYTES / layout.section_bytes()).max(1) as u32;
    let io = |what: &str, e| VolumeError::io(format!("dm-integrity format: {what}"), e);
    let mut first = 0;
    while first < layout.sections {
        let count = per_write.min(layout.sections - first);
        let mut bytes = Vec::with_capacity(count as usize * layout.section_bytes());
        for index in first..first + count {
            bytes.extend_from_slice(&empty_section(index, &layout, 0));
        }
        data.write_at(&bytes, geometry.journal_section_offset(first))
            .map_err(|e| io("writing the journal", e))?;
        first += count;
    }
    data.flush().map_err(|e| io("flushing the journal", e))?;
    data.write_at(&superblock.to_bytes()[..], geometry.superblock_offset())
        .map_err(|e| io("writing the superblock", e))?;
    data.flush().map_err(|e| io("flushing the superblock", e))?;
    Ok(geometry)
}
