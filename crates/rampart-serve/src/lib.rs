//! What `rampart serve` is made of, apart from its arguments and its
//! output: unlocked LUKS volumes exported over NBD, the control socket
//! through which `rampart reencrypt` re-encrypts a served volume online,
//! and the heartbeat that closes exports whose keys the key manager no
//! longer lets this host hold.
//!
//! * [`protocol`]: the control socket's wire format (request line, keys,
//!   event lines) and its bounds.
//! * [`control`]: the server side of the control socket, over any
//!   [`control::ControlTarget`]; [`remote`]: the requester's side.
//! * [`served`]: a served volume, the target of control requests.
//! * [`heartbeat`]: the revocation and grace policy, over any
//!   [`heartbeat::KeyManager`] and [`heartbeat::Exports`].
//! * [`open`]: a volume's layers opened through a [`open::VolumeKeys`];
//!   [`serve`]: all of it put together.
//! * [`error`]: the crate's one error type, [`ServeError`].
//!
//! No key is ever logged, put in an error or shown by `Debug`.
#![forbid(unsafe_code)]

pub mod control;
pub mod error;
pub mod heartbeat;
pub mod open;
pub mod protocol;
pub mod remote;
pub mod serve;
pub mod served;

pub use error::{chain, ServeError};
