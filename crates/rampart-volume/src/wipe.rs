//! Wiping: a volume's data area filled with zeros through its key, so
//! that it reads back as zeros while the ciphertext on disk looks random
//! (dm-crypt's zero-fill through the crypt layer); and a header area
//! overwritten with random bytes, so that no keyslot can ever be opened.

use std::fs::OpenOptions;
use std::io;

use rampart_luks::Luks;

use crate::{BlockDevice, FileDevice, VolumeError, VolumePaths};

/// Bytes per write: large enough for the crypt layer to spread one write
/// over all cores.
const PIECE: u64 = 8 << 20;

/// Writes zeros over all of `device` with `workers` writers at once (so
/// that encrypting one piece overlaps writing another), then flushes.
/// `progress` is told each piece's bytes, from any writer's thread.
pub fn wipe_data(
    device: &(impl BlockDevice + ?Sized),
    workers: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> io::Result<()> {
    let len = device.len();
    let pieces = len.div_ceil(PIECE);
    let workers = workers.clamp(1, 8) as u64;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                scope.spawn(move || -> io::Result<()> {
                    // At most PIECE (8 MiB): fits in usize.
                    let zeros = vec![0u8; len.min(PIECE) as usize];
                    let mut piece = worker;
                    while piece < pieces {
                        let position = piece * PIECE;
                        let size = (len - position).min(PIECE) as usize;
                        device.write_at(&zeros[..size], position)?;
                        progress(size as u64);
                        piece += workers;
                    }
                    Ok(())
                })
            })
            .collect();
        for handle in handles {
            handle.join().map_err(|_| io::Error::other("a wiping thread panicked"))??;
        }
        Ok::<(), io::Error>(())
    })?;
    device.flush()
}

/// Overwrites `offset..offset+len` of `device` with random bytes from the
/// DRBG and flushes.
pub fn wipe_random(device: &(impl BlockDevice + ?Sized), offset: u64, len: u64) -> io::Result<()> {
    let mut buffer = vec![0u8; len.min(PIECE) as usize];
    let mut done = 0;
    while done < len {
        let size = (len - done).min(PIECE) as usize;
        rampart_crypto::fill_random(&mut buffer[..size]).map_err(io::Error::other)?;
        device.write_at(&buffer[..size], offset + done)?;
        done += size as u64;
    }
    device.flush()
}

/// Where the header area ends: the data offset behind an attached header,
/// the header's own size in a detached header file.
#[must_use]
pub fn header_area_end(paths: &VolumePaths, luks: &Luks) -> u64 {
    let segment_offset = luks.segment().map(|s| s.offset).unwrap_or(0);
    if paths.header.is_some() || segment_offset == 0 {
        luks.metadata_end().max(luks.header_bytes())
    } else {
        segment_offset.max(luks.metadata_end())
    }
}

/// Random bytes over every byte before the data (attached header), or the
/// whole detached header file: both header copies, the keyslots area and
/// the padding, so the volume can never be opened again. The caller holds
/// the exclusive metadata lock of `luks`, the loaded header; refused while
/// anything writes the volume's data. Returns the bytes destroyed.
pub fn wipe_header_area(paths: &VolumePaths, luks: &Luks) -> Result<u64, VolumeError> {
    let header_path = paths.header_path();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(header_path)
        .map_err(|e| VolumeError::io(format!("cannot open {}", header_path.display()), e))?;
    // Refused while a server or an import writes the volume: the
    // data-writer lock of the data device, which a detached header file
    // shares with nothing.
    let data = FileDevice::open(&paths.data, false)
        .map_err(|e| VolumeError::io(format!("{} is in use", paths.data.display()), e))?;
    drop(data);
    let device = FileDevice::from_file(file, false).map_err(VolumeError::Os)?;
    let end = header_area_end(paths, luks).min(device.len());
    wipe_random(&device, 0, end).map_err(|e| {
        VolumeError::io(format!("cannot wipe the header of {}", header_path.display()), e)
    })?;
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CryptDevice, CryptLayout, MemDevice, SectorCipher, SectorCipherKind};
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn wiped_data_reads_as_zeros_and_is_stored_as_noise() {
        let len = 20 << 20;
        let raw = MemDevice::new(4096 + len);
        raw.write_at(&vec![0x5au8; 4096 + len], 0).unwrap();
        let key = rampart_crypto::SecretBytes::new((1..=64).collect());
        let layout = CryptLayout { offset: 4096, size: len as u64, sector_size: 512, iv_tweak: 0 };
        let cipher = SectorCipher::new(SectorCipherKind::AesXtsPlain64, &key).unwrap();
        let crypt = CryptDevice::new(raw, layout, cipher).unwrap();
        let done = AtomicU64::new(0);
        wipe_data(&crypt, 3, &|n| {
            done.fetch_add(n, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(done.load(Ordering::Relaxed), len as u64);
        let mut plain = vec![1u8; len];
        crypt.read_at(&mut plain, 0).unwrap();
        assert!(plain.iter().all(|&b| b == 0));
        let stored = crypt.inner().snapshot();
        assert!(stored[..4096].iter().all(|&b| b == 0x5a), "the header area was touched");
        let zero_sectors = stored[4096..].chunks(512).filter(|s| s.iter().all(|&b| b == 0)).count();
        assert_eq!(zero_sectors, 0);
    }

    #[test]
    fn random_wipe_covers_exactly_the_range() {
        let raw = MemDevice::new(1 << 20);
        wipe_random(&raw, 4096, 65536).unwrap();
        let bytes = raw.snapshot();
        assert!(bytes[..4096].iter().all(|&b| b == 0));
        assert!(bytes[4096 + 65536..].iter().all(|&b| b == 0));
        assert!(bytes[4096..4096 + 65536].chunks(16).all(|c| c.iter().any(|&b| b != 0)));
    }
}
