//! Reading a device front to back with the work spread over cores: one
//! reader per core takes every n-th piece (decrypting it, when the device
//! is a crypt layer), and the pieces are handed on in order. Export and
//! clone stream a volume's plaintext this way.

use std::io;
use std::sync::mpsc;

use crate::BlockDevice;

/// Pieces small enough to stay in the L2 cache between the read and the
/// decryption.
const PIECE: u64 = 512 << 10;

/// Reads `start..end` of `device` and passes it to `consume` in order, in
/// pieces of at most 512 KiB, with `workers` readers (at least one).
pub fn read_in_order(
    device: &(impl BlockDevice + ?Sized),
    start: u64,
    end: u64,
    workers: usize,
    mut consume: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    if end <= start {
        return Ok(());
    }
    let pieces = (end - start).div_ceil(PIECE);
    let workers = workers.clamp(1, 8) as u64;
    std::thread::scope(|scope| {
        let mut full = Vec::new();
        let mut empty = Vec::new();
        for worker in 0..workers {
            let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<Vec<u8>>>(2);
            let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(3);
            full.push(full_rx);
            empty.push(empty_tx);
            scope.spawn(move || {
                let mut piece = worker;
                while piece < pieces {
                    let position = start + piece * PIECE;
                    // At most PIECE (512 KiB): fits in usize.
                    let len = (end - position).min(PIECE) as usize;
                    let mut buffer = empty_rx.try_recv().unwrap_or_default();
                    buffer.resize(len, 0);
                    let read =
                        device.read_at(&mut buffer, position).map(|()| buffer).map_err(|e| {
                            io::Error::new(
                                e.kind(),
                                format!("cannot read the volume at byte {position}: {e}"),
                            )
                        });
                    let failed = read.is_err();
                    if full_tx.send(read).is_err() || failed {
                        return;
                    }
                    piece += workers;
                }
            });
        }
        for piece in 0..pieces {
            // piece % workers < workers <= 8.
            let worker = (piece % workers) as usize;
            let buffer =
                full[worker].recv().map_err(|_| io::Error::other("a reader thread stopped"))??;
            consume(&buffer)?;
            let _ = empty[worker].try_send(buffer);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockDevice, MemDevice};

    #[test]
    fn pieces_arrive_in_order() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 31 + i / 7) as u8).collect();
        let device = MemDevice::new(data.len());
        device.write_at(&data, 0).unwrap();
        for workers in [1, 2, 3] {
            let mut out = Vec::new();
            read_in_order(&device, 1000, 2_900_001, workers, |piece| {
                out.extend_from_slice(piece);
                Ok(())
            })
            .unwrap();
            assert_eq!(out, &data[1000..2_900_001]);
        }
    }
}
