use std::io;

use rampart_luks::{Luks, LuksVersion, MetadataIo};

/// Copies the first `len` bytes of a header backup (`backup`, whose header
/// is `restored`) over the header area of `target`, in the order that
/// keeps one loadable LUKS2 header copy at every moment: the region of the
/// copy `target` does not load from first (its secondary copy and keyslots
/// area when its primary is good, else its primary), synced, then the
/// other, synced. A LUKS1 header, a single record, is copied and synced
/// at once. Key material is copied as it is: a backup whose keyslots
/// differ from the volume's is, as with cryptsetup, not restored
/// atomically.
pub fn restore_header(
    backup: &dyn MetadataIo,
    restored: &Luks,
    target: &dyn MetadataIo,
    len: u64,
) -> io::Result<()> {
    let primary_end = match restored.version() {
        LuksVersion::Luks1 => len,
        LuksVersion::Luks2 => restored
            .to_json()
            .get("metadata_size")
            .and_then(serde_json::Value::as_u64)
            .map_or(len, |size| size.min(len)),
    };
    let primary_is_good = Luks::load(target).is_ok_and(|(_, report)| !report.used_secondary);
    let (first, second) = if primary_is_good {
        ((primary_end, len), (0, primary_end))
    } else {
        ((0, primary_end), (primary_end, len))
    };
    for (start, end) in [first, second] {
        copy_range(backup, target, start, end)?;
        target.sync()?;
    }
    Ok(())
}

/// Copies `[start, end)` of `from` to `to`, 1 MiB at a time (a header area
/// can be as large as the data offset).
fn copy_range(from: &dyn MetadataIo, to: &dyn MetadataIo, start: u64, end: u64) -> io::Result<()> {
    let mut buffer = vec![0u8; 1 << 20];
    let mut offset = start;
    while offset < end {
        let n = usize::try_from(end - offset).map_or(buffer.len(), |left| left.min(buffer.len()));
        let chunk = &mut buffer[..n];
        from.read_at(offset, chunk)?;
        to.write_at(offset, chunk)?;
        offset += n as u64;
    }
    Ok(())
}
