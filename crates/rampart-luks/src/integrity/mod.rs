//! The dm-integrity on-disk format, as Linux 6.1 reads and writes it
//! (`drivers/md/dm-integrity.c`) and cryptsetup 2.6 lays it out under a
//! LUKS2 segment with `"integrity"` (at the segment's offset, tags on the
//! data device) or alone (`integritysetup format`).
//!
//! * `superblock` — the superblock: fields, flags, versions; parsed from
//!   untrusted bytes and written back byte for byte.
//! * `geometry` — where the journal, the tag areas and each block's data
//!   and tag are, and the bitmap of bitmap mode.
//! * `journal` — journal sections and entries, and what a replay applies.
//!
//! No I/O happens here: callers read the bytes (the superblock area,
//! one journal section at a time) and hand them over.

pub mod geometry;
pub mod journal;
pub mod superblock;

pub use geometry::{BitmapLayout, FormatRequest, Geometry, JournalLayout, Location};
pub use journal::{
    commit_id, commit_section, put_entry, put_unused, replay_plan, ClearJournal, ClearReason,
    EntryState, JournalEntry, JournalSection, Mode, ReplayPlan, ReplayWrite, SectionSummary,
};
pub use superblock::{Flags, Superblock, SUPERBLOCK_BYTES};
