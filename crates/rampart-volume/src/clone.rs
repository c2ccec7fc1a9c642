//! Clones: a volume's plaintext written out again under a new volume key,
//! behind a new header, as one sequential stream (so the target can be a
//! file, a block device or a pipe). The clone shares no secret with its
//! source: the caller makes the new header and key.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use rampart_crypto::SecretBytes;
use rampart_luks::{DataCipher, FormatOptions, Luks, MemoryIo, PbkdfChoice};

use crate::integrity::{format_integrity, AuthenticatedDevice, IntegrityMode};
use crate::ordered::read_in_order;
use crate::segment::NO_JOURNAL_FLAG;
use crate::{
    check_range, sector_cipher_kind, BlockDevice, CryptDevice, CryptLayout, SectorCipher,
    VolumeError,
};

/// The largest source data offset a clone keeps (its header area is built
/// in memory); beyond it the clone gets the default layout.
pub const MAX_KEPT_OFFSET: u64 = 256 << 20;

/// A clone's new header, built in memory before anything is written: the
/// source's format, cipher, key size, sector size and labels, its data
/// offset when the source's header is attached (up to
/// [`MAX_KEPT_OFFSET`]), a new UUID and a new volume key.
#[derive(Debug)]
pub struct CloneHeader {
    luks: Luks,
    volume_key: SecretBytes,
    scratch: MemoryIo,
}

impl CloneHeader {
    /// Formats the header of a clone of `source` (whose header is
    /// attached to its data when `attached`), its first keyslot opened by
    /// `passphrase` under `pbkdf`.
    ///
    /// # Errors
    /// The source's segment cannot be read, or the header not formatted.
    pub fn format(
        source: &Luks,
        attached: bool,
        pbkdf: PbkdfChoice,
        passphrase: &[u8],
    ) -> Result<Self, VolumeError> {
        let (offset, cipher, key_bytes, sector_size, integrity) = match source
            .integrity_segment()?
        {
            Some(s) => {
                (s.offset, DataCipher::AesXtsPlain64, s.volume_key_bytes, s.sector_size, Some(s))
            }
            None => {
                let s = source.segment()?;
                (s.offset, s.cipher, s.key_bytes, s.sector_size, None)
            }
        };
        let data_offset =
            (attached && offset <= MAX_KEPT_OFFSET).then_some(offset).filter(|&o| o > 0);
        let options = FormatOptions {
            version: source.version(),
            cipher,
            key_bytes,
            sector_size,
            pbkdf,
            label: source.label().map(str::to_owned),
            subsystem: source.subsystem().map(str::to_owned),
            metadata_size: None,
            keyslots_size: None,
            detached_header: false,
            data_offset,
            uuid: None,
            integrity: integrity.map(|s| s.integrity.kind),
            integrity_no_journal: source.persistent_flags().iter().any(|f| f == NO_JOURNAL_FLAG),
        };
        // MAX_KEPT_OFFSET bounds the scratch area.
        let scratch_len = data_offset.unwrap_or(0).max(16 << 20) + (1 << 20);
        let scratch = MemoryIo::new(usize::try_from(scratch_len).map_err(|_| {
            VolumeError::io("the clone's header", io::Error::other("too large for memory"))
        })?);
        let (luks, volume_key) = Luks::format(&scratch, &options, passphrase)?;
        Ok(Self { luks, volume_key, scratch })
    }

    /// The header's metadata I/O, its header and its volume key, for
    /// changes before it is written out (a key-manager binding, a keyslot
    /// removed).
    pub fn parts(&mut self) -> (&MemoryIo, &mut Luks, &SecretBytes) {
        (&self.scratch, &mut self.luks, &self.volume_key)
    }

    /// The new volume's UUID.
    #[must_use]
    pub fn uuid(&self) -> &str {
        self.luks.uuid()
    }

    /// The header bytes up to the data offset, where [`write_clone`] puts
    /// `plaintext` bytes of data, and the cipher that encrypts them.
    ///
    /// # Errors
    /// The header's segment cannot be read or its cipher not keyed.
    pub fn into_image(
        self,
        plaintext: u64,
    ) -> Result<(Vec<u8>, CryptLayout, SectorCipher), VolumeError> {
        let segment = self.luks.segment()?;
        let mut header = self.scratch.into_vec();
        header.truncate(usize::try_from(segment.offset).unwrap_or(usize::MAX));
        let layout = CryptLayout {
            offset: segment.offset,
            size: plaintext,
            sector_size: segment.sector_size,
            iv_tweak: segment.iv_tweak,
        };
        let cipher = SectorCipher::new(sector_cipher_kind(segment.cipher), &self.volume_key)?;
        Ok((header, layout, cipher))
    }
}

impl CloneHeader {
    /// Writes a clone of `source`, a volume with integrity, onto `target`
    /// (a file or block device: dm-integrity's tags lie between the data,
    /// so the clone is written in place, not as a stream): the header,
    /// dm-integrity's superblock and journal for an area as large as the
    /// source's (`area_bytes`), then the plaintext of `source` sealed
    /// under the new key, flushed. `progress` is told each chunk's
    /// plaintext bytes.
    ///
    /// # Errors
    /// The header or the area cannot be written, the area is too small for
    /// the source, or the source cannot be read (a sector that fails its
    /// check stops the clone).
    pub fn write_integrity_clone<D: BlockDevice>(
        self,
        source: &(impl BlockDevice + ?Sized),
        target: D,
        workers: usize,
        mut progress: impl FnMut(u64),
    ) -> Result<(), VolumeError> {
        let segment = self.luks.integrity_segment()?.ok_or_else(|| {
            VolumeError::io("the clone's header", io::Error::other("it has no integrity"))
        })?;
        let mut header = self.scratch.into_vec();
        header.truncate(usize::try_from(segment.offset).unwrap_or(usize::MAX));
        let io = |e| VolumeError::io("cannot write the clone", e);
        target.write_at(&header, 0).map_err(io)?;
        format_integrity(&target, &segment)?;
        let device =
            AuthenticatedDevice::open(target, &segment, &self.volume_key, IntegrityMode::Direct)?;
        if device.len() < source.len() {
            return Err(VolumeError::io(
                "cannot write the clone",
                io::Error::other(format!(
                    "its integrity area holds {} bytes, the source {}",
                    device.len(),
                    source.len()
                )),
            ));
        }
        let mut position = 0u64;
        read_in_order(source, 0, source.len(), workers, |plaintext| {
            device.write_at(plaintext, position)?;
            position += plaintext.len() as u64;
            progress(plaintext.len() as u64);
            Ok(())
        })
        .map_err(io)?;
        // A larger area than the source's reads as zeros beyond it.
        device.write_zeroes(position, device.len() - position).map_err(io)?;
        device.close().map_err(io)
    }
}

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
