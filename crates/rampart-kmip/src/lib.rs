//! The OASIS Key Management Interoperability Protocol (KMIP), protocol only:
//! no I/O, no store, no crypto.
//!
//! * [`ttlv`] — the binary Tag-Type-Length-Value encoding: one bounded
//!   [`ttlv::Reader`] for untrusted bytes (total length, nesting depth and
//!   item count capped before anything is allocated) into typed
//!   [`ttlv::Item`]s, and the writer. A leaf: it fails with its own
//!   [`ttlv::TtlvError`].
//! * [`tag`] and [`enums`] — the tags and enumerations of KMIP 1.0–1.4 and
//!   2.0/2.1 that Rampart reads or writes; unknown values are kept, not
//!   refused, so a newer client's message still parses.
//! * [`message`] — request and response messages: header, batch items,
//!   Batch Error Continuation Option, Maximum Response Size, Asynchronous
//!   Indicator.
//! * [`xml`] — the TTLV-XML encoding of the KMIP Profiles' test cases:
//!   a bounded reader and a writer, with the names of every tag,
//!   enumeration and mask of KMIP 1.0–2.1.
//! * [`json`] — the JSON encoding of the same (KMIP Additional Message
//!   Encodings), with the same names and bounds.
//! * [`error::KmipError`] — every failure (a codec failure wrapped as
//!   [`error::KmipError::Ttlv`]), mapped to a KMIP Result Reason in one
//!   place ([`error::KmipError::result_reason`]).
//!
//! Byte strings (which carry key material) are zeroized on drop and never
//! shown by `Debug`.
#![forbid(unsafe_code)]

pub mod enums;
pub mod error;
pub mod json;
pub mod message;
pub mod object_parts;
pub mod payload;
pub mod tag;
pub mod ttlv;
pub mod xml;

pub use error::KmipError;
pub use ttlv::{Item, Limits, TtlvError, Value};
