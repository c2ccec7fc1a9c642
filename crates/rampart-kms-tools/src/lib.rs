//! Fleet-scale fill and load generators for the key manager, kept out of
//! the server library: [`bulk`] fills a store as servers would have
//! written it (`rampart kms populate`), [`load`] and [`bench`] measure a
//! running deployment over REST and KMIP (`rampart kms bench`).
#![forbid(unsafe_code)]

pub mod bench;
pub mod bulk;
pub mod load;
