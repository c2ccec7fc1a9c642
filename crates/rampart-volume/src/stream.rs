//! Whole-volume plaintext streams, as `qemu-img convert` copies them: a
//! range of a device written out in order (read on every core), and a
//! stream written into a device with reading and writing overlapped on
//! two threads. Ranges are checked before a byte moves.

use std::io::{self, Read, Write};
use std::ops::Range;
use std::sync::mpsc;

use crate::{read_in_order, BlockDevice};

/// The size of each piece read from an import's input.
const CHUNK: usize = 8 << 20;

/// Why a stream stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The range or the input does not fit the device: the user's to fix.
    #[error("{0}")]
    Refused(String),
    #[error("cannot read the input")]
    Input(#[source] io::Error),
    #[error("cannot write the volume at byte {at}")]
    Device {
        at: u64,
        #[source]
        source: io::Error,
    },
    /// Reading the device (an I/O error, a sector that fails its
    /// integrity check).
    #[error(transparent)]
    Read(io::Error),
    /// Writing the output (a reader that went away, a full disk).
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The range `offset..offset+length` (`length` default: to the end) of a
/// device of `size` bytes, checked to lie within it.
///
/// # Errors
/// Refused: a range beyond the device.
pub fn export_range(
    size: u64,
    offset: u64,
    length: Option<u64>,
) -> Result<Range<u64>, StreamError> {
    if offset > size {
        return Err(StreamError::Refused(format!(
            "--offset {offset} lies beyond the volume ({size} bytes)"
        )));
    }
    let length = length.unwrap_or(size - offset);
    let end = offset.checked_add(length).filter(|&end| end <= size).ok_or_else(|| {
        StreamError::Refused(format!("--offset/--length reach beyond the volume ({size} bytes)"))
    })?;
    Ok(offset..end)
}

/// Writes `range` of `device` (see [`export_range`]) to `out` in order,
/// read by `workers` threads; `progress` is told each piece's length.
/// Returns the bytes written.
///
/// # Errors
/// Refused: a range beyond the device. Read: reading the device failed.
/// Io: writing `out` failed.
pub fn export(
    device: &(impl BlockDevice + ?Sized),
    range: Range<u64>,
    out: &mut dyn Write,
    workers: usize,
    mut progress: impl FnMut(u64),
) -> Result<u64, StreamError> {
    let range =
        export_range(device.len(), range.start, Some(range.end.saturating_sub(range.start)))?;
    let mut output_error = None;
    let read = read_in_order(device, range.start, range.end, workers, |data| {
        if let Err(e) = out.write_all(data) {
            let kind = e.kind();
            output_error = Some(e);
            return Err(kind.into());
        }
        progress(data.len() as u64);
        Ok(())
    });
    match (read, output_error) {
        (Ok(()), _) => {}
        (Err(_), Some(e)) => return Err(StreamError::Io(e)),
        (Err(e), None) => return Err(StreamError::Read(e)),
    }
    out.flush()?;
    Ok(range.end - range.start)
}

/// Writes all of `input` (called `name` in messages) into `device` from
/// `offset`, then flushes the device; `input_len`, when known (a file),
/// is checked to fit first.
/// `progress` is told each piece's length. Returns the bytes written.
///
/// # Errors
/// Refused: an offset beyond the device, an input that does not fit (an
/// input of unknown length is refused at the first piece that does not
/// fit, the pieces before it written). Input, Device: reading the input or
/// writing the device failed.
pub fn import(
    input: &mut (dyn Read + Send),
    name: &str,
    input_len: Option<u64>,
    device: &(impl BlockDevice + ?Sized),
    offset: u64,
    mut progress: impl FnMut(u64),
) -> Result<u64, StreamError> {
    let size = device.len();
    if offset > size {
        return Err(StreamError::Refused(format!(
            "--offset {offset} lies beyond the volume ({size} bytes)"
        )));
    }
    let room = size - offset;
    if let Some(len) = input_len.filter(|&len| len > room) {
        return Err(StreamError::Refused(format!(
            "{name} ({len} bytes) does not fit in the volume ({room} bytes from offset {offset})"
        )));
    }
    let produce = |buffer: &mut Vec<u8>| -> Result<bool, StreamError> {
        buffer.resize(CHUNK, 0);
        let mut filled = 0;
        while filled < CHUNK {
            match input.read(&mut buffer[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(StreamError::Input(e)),
            }
        }
        buffer.truncate(filled);
        Ok(filled > 0)
    };
    let mut position = offset;
    pipeline(produce, |data| {
        if data.len() as u64 > size - position {
            return Err(StreamError::Refused(format!(
                "the input is larger than the volume ({room} bytes from offset {offset}); the first {} bytes were written",
                position - offset
            )));
        }
        device
            .write_at(data, position)
            .map_err(|source| StreamError::Device { at: position, source })?;
        position += data.len() as u64;
        progress(data.len() as u64);
        Ok(())
    })?;
    device.flush()?;
    Ok(position - offset)
}

/// Runs `produce` on a helper thread and `consume` here, with two buffers
/// in flight so reading and writing overlap. `produce` fills the buffer it
/// is given and returns `false` at the end.
fn pipeline<E: Send>(
    mut produce: impl FnMut(&mut Vec<u8>) -> Result<bool, E> + Send,
    mut consume: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = mpsc::sync_channel::<Result<Vec<u8>, E>>(1);
        let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(2);
        for _ in 0..2 {
            let _ = empty_tx.send(Vec::with_capacity(CHUNK));
        }
        scope.spawn(move || {
            while let Ok(mut buffer) = empty_rx.recv() {
                match produce(&mut buffer) {
                    Ok(true) => {
                        if full_tx.send(Ok(buffer)).is_err() {
                            return;
                        }
                    }
                    Ok(false) => return,
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        for buffer in full_rx {
            let buffer = buffer?;
            consume(&buffer)?;
            if empty_tx.send(buffer).is_err() {
                break;
            }
        }
        Ok(())
    })
}
