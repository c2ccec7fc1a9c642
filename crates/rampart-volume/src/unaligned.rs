//! Byte ranges over a layer that works in whole sectors: a partial first
//! and last sector go through one sector-sized bounce buffer (read), or
//! are patched into their sector (write); the whole sectors between go
//! straight through.

use std::io;

/// The largest sector any layer uses.
pub(crate) const MAX_SECTOR: usize = 4096;

/// How `len` bytes at `offset` split over sectors of `sector` bytes: the
/// bytes before the first sector boundary (`head`, 0 when aligned) and
/// the whole sectors after them (`middle`); the rest is the tail.
pub(crate) fn split(offset: u64, len: usize, sector: usize) -> (usize, usize) {
    let misalign = (offset % sector as u64) as usize;
    let head = if misalign == 0 { 0 } else { (sector - misalign).min(len) };
    let middle = (len - head) / sector * sector;
    (head, middle)
}

/// Fills `buf` from `offset`: `partial` reads the one sector a head or
/// tail lies in (into a sector-sized buffer, at the sector's offset),
/// `whole` the aligned sectors between.
pub(crate) fn read(
    buf: &mut [u8],
    offset: u64,
    sector: usize,
    mut partial: impl FnMut(&mut [u8], u64) -> io::Result<()>,
    whole: impl FnOnce(&mut [u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    let (head, middle) = split(offset, buf.len(), sector);
    let (head_buf, rest) = buf.split_at_mut(head);
    let (middle_buf, tail_buf) = rest.split_at_mut(middle);
    let mut block = [0u8; MAX_SECTOR];
    let block = &mut block[..sector];
    if head > 0 {
        let within = (offset % sector as u64) as usize;
        partial(block, offset - within as u64)?;
        head_buf.copy_from_slice(&block[within..within + head]);
    }
    let middle_offset = offset + head as u64;
    if middle > 0 {
        whole(middle_buf, middle_offset)?;
    }
    if !tail_buf.is_empty() {
        partial(block, middle_offset + middle as u64)?;
        tail_buf.copy_from_slice(&block[..tail_buf.len()]);
    }
    Ok(())
}

/// Writes `buf` at `offset`: `patch(sector_offset, within, bytes)` puts a
/// head or tail into its sector, `whole` writes the aligned sectors
/// between (after the head and the tail).
pub(crate) fn write(
    buf: &[u8],
    offset: u64,
    sector: usize,
    mut patch: impl FnMut(u64, usize, &[u8]) -> io::Result<()>,
    whole: impl FnOnce(&[u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    let (head, middle) = split(offset, buf.len(), sector);
    if head > 0 {
        let within = (offset % sector as u64) as usize;
        patch(offset - within as u64, within, &buf[..head])?;
    }
    let middle_offset = offset + head as u64;
    let tail = &buf[head + middle..];
    if !tail.is_empty() {
        patch(middle_offset + middle as u64, 0, tail)?;
    }
    if middle > 0 {
        whole(&buf[head..head + middle], middle_offset)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_into_head_whole_sectors_and_tail() {
        assert_eq!(split(0, 4096, 512), (0, 4096));
        assert_eq!(split(100, 1000, 512), (412, 512));
        assert_eq!(split(100, 10, 512), (10, 0));
        assert_eq!(split(512, 700, 512), (0, 512));
    }
}
