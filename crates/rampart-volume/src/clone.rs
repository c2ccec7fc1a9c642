//! Clones: a volume's plaintext written out again under a new volume key,
//! behind a new header, as one sequential stream (so the target can be a
//! file, a block device or a pipe). The clone shares no secret with its
//! source: the caller makes the new header and key.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use crate::ordered::read_in_order;
use crate::{check_range, BlockDevice, CryptDevice, CryptLayout, SectorCipher};

/// Writes the clone image to `out`: `header` (every byte before the data
/// area: the new header, its keyslots and the padding up to the data
/// offset), then the plaintext of `source` encrypted with `cipher` where
/// `layout` places it (`layout.offset` must equal `header.len()` and
/// `layout.size` the source's length). `progress` is told each chunk's
/// plaintext bytes. Ends with a flush of `out`.
pub fn write_clone(
    source: &(impl BlockDevice + ?Sized),
    header: &[u8],
    layout: CryptLayout,
    cipher: SectorCipher,
    out: &mut (dyn Write + Send),
    workers: usize,
    mut progress: impl FnMut(u64),
) -> io::Result<()> {
    if layout.offset != header.len() as u64 || layout.size != source.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the clone's layout does not match its header and source",
        ));
    }
    let total = layout.offset.checked_add(layout.size).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "the clone is larger than 2^64 bytes")
    })?;
    let sink = Arc::new(SequentialSink { out: Mutex::new(Sink { out, position: 0 }), len: total });
    sink.write_at(header, 0)?;
    // Checks that the layout holds whole sectors, so every piece read
    // (512 KiB from the start, or the end) does too.
    let crypt = CryptDevice::new(Arc::clone(&sink), layout, cipher)?;
    // The readers on every core decrypt and encrypt; the stream only writes.
    let encrypting = Encrypting { source, crypt: &crypt };
    let mut position = 0u64;
    read_in_order(&encrypting, 0, layout.size, workers, |ciphertext| {
        sink.write_at(ciphertext, layout.offset + position)?;
        position += ciphertext.len() as u64;
        progress(ciphertext.len() as u64);
        Ok(())
    })?;
    sink.flush()
}

/// The source's plaintext, read as the clone's ciphertext.
struct Encrypting<'a, S: ?Sized, D> {
    source: &'a S,
    crypt: &'a CryptDevice<D>,
}

impl<S: BlockDevice + ?Sized, D: BlockDevice> BlockDevice for Encrypting<'_, S, D> {
    fn len(&self) -> u64 {
        self.source.len()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.source.read_at(buf, offset)?;
        self.crypt.transform_here(buf, offset, true)
    }

    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "a clone's source is not written"))
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn discard(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "a clone's source is not written"))
    }

    fn write_zeroes(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "a clone's source is not written"))
    }
}

struct Sink<'a> {
    out: &'a mut (dyn Write + Send),
    position: u64,
}

/// A write-only device over a stream: writes must come in order, each
/// where the last one ended.
struct SequentialSink<'a> {
    out: Mutex<Sink<'a>>,
    len: u64,
}

impl BlockDevice for SequentialSink<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "a clone stream cannot be read"))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        let mut sink = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if offset != sink.position {
            // The crypt layer writes whole sectors in order here: anything
            // else is a bug in the caller.
            return Err(io::Error::other(format!(
                "clone stream written at byte {offset}, expected {}",
                sink.position
            )));
        }
        sink.out.write_all(buf)?;
        sink.position += buf.len() as u64;
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner).out.flush()
    }

    fn discard(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        let zeros = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
        self.write_at(&zeros, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemDevice, SectorCipherKind};

    #[test]
    fn a_clone_decrypts_to_the_source_under_its_own_key() {
        let plain: Vec<u8> = (0..3u32 << 20).map(|i| (i ^ (i >> 9)) as u8).collect();
        let source = MemDevice::new(plain.len());
        source.write_at(&plain, 0).unwrap();
        let key = rampart_crypto::SecretBytes::new((1..=64).collect());
        let layout =
            CryptLayout { offset: 8192, size: plain.len() as u64, sector_size: 4096, iv_tweak: 0 };
        let header = vec![0xa5u8; 8192];
        let mut image = Vec::new();
        let cipher = SectorCipher::new(SectorCipherKind::AesXtsPlain64, &key).unwrap();
        let mut seen = 0;
        write_clone(&source, &header, layout, cipher, &mut image, 2, |n| seen += n).unwrap();
        assert_eq!(seen, plain.len() as u64);
        assert_eq!(image.len(), 8192 + plain.len());
        assert_eq!(&image[..8192], &header[..]);
        assert_ne!(&image[8192..8192 + 4096], &plain[..4096]);
        let copy = MemDevice::new(image.len());
        copy.write_at(&image, 0).unwrap();
        let cipher = SectorCipher::new(SectorCipherKind::AesXtsPlain64, &key).unwrap();
        let opened = CryptDevice::new(copy, layout, cipher).unwrap();
        let mut back = vec![0u8; plain.len()];
        opened.read_at(&mut back, 0).unwrap();
        assert!(back == plain);
    }
}
