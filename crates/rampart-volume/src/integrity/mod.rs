//! LUKS2 volumes with authenticated encryption: dm-crypt over
//! dm-integrity, as `cryptsetup luksFormat --integrity hmac-sha256`,
//! `hmac-sha512` (with `aes-xts-plain64`) or `--cipher aes-gcm-random
//! --integrity aead` make them, read and written byte for byte as Linux
//! 6.1 does.
//!
//! * `store` — dm-integrity's engine over a [`crate::BlockDevice`]: the
//!   superblock, each block's data and tag, the journal (written,
//!   committed, copied home, replayed on open).
//! * `journal` — the journal sections being filled in memory.
//! * `sectors` — dm-crypt's sealing of each sector: XTS then HMAC, or
//!   AES-GCM with a random IV.
//! * `ranges` — block-range locks between concurrent requests.
//! * `device` — [`AuthenticatedDevice`], the plaintext view.
//! * `format` — [`format_integrity`]: the superblock and empty journal of a
//!   new volume.
//!
//! Crash promises, per [`IntegrityMode`]:
//!
//! * **Journal** (cryptsetup's default): every block goes to the journal
//!   with its tag, is committed there (made durable) and only then copied
//!   to its home location; the journal is replayed when the device is
//!   opened, by Rampart or by the kernel. A write completed by a flush
//!   survives a crash with its tag, and a write in flight at the crash
//!   leaves each of its blocks entirely old or entirely new.
//! * **Direct** (`--integrity-no-journal`): data and tags are written in
//!   place. A completed flush makes writes durable, but a block in flight
//!   at a crash may be left with data and tag that do not match and fail
//!   its check afterwards, exactly as with the kernel.
//!
//! A block whose tag does not verify is never returned as data: reads fail
//! with [`std::io::ErrorKind::InvalidData`] naming the sector, which
//! servers report as EIO, as dm-crypt does.

mod device;
mod format;
mod journal;
mod ranges;
mod sectors;
mod store;

pub use device::AuthenticatedDevice;
pub use format::{format_integrity, format_integrity_with_journal};
pub use store::IntegrityStats;

/// How writes reach the disk (dm-integrity's mode `J` or `D`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntegrityMode {
    /// Through the journal: crash-safe per block.
    Journal,
    /// In place: no promise for blocks in flight at a crash.
    Direct,
}
