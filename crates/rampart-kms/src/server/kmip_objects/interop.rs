//! Log (KMIP 2.1 §6.1.29): a client's message recorded in the key
//! manager's audit chain, as the entry of its own `kmip.log` operation;
//! and Interop (2.1 §6.1.26): the Begin, End and Reset of an interop test,
//! answered only by a server started for interop testing (the
//! specification forbids it on a production server) and audited the
//! same way.

use rampart_kmip::enums::Operation;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item};
use rampart_kmip::KmipError;

use super::errors::R;
use super::session::Session;

/// Most characters of a Log Message or Interop Identifier the audit entry
/// keeps: the chain holds what happened, not a client's bulk data.
pub(super) const MAX_NOTE: usize = 1024;

const TAG_LOG_MESSAGE: Tag = Tag(0x420141);
const TAG_INTEROP_FUNCTION: Tag = Tag(0x420160);
const TAG_INTEROP_IDENTIFIER: Tag = Tag(0x420161);

/// The text as an audit entry keeps it: no control characters (a line of
/// the log stays one line), at most [`MAX_NOTE`] characters.
fn clean(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(MAX_NOTE).collect()
}

impl Session<'_> {
    pub(super) fn log(&mut self, payload: &Item) -> R<Vec<Item>> {
        let f = Fields::of(payload)?;
        let message = f.required(TAG_LOG_MESSAGE)?.as_text()?;
        self.note = Some(format!("Log Message: {}", clean(message)));
        Ok(Vec::new())
    }

    pub(super) fn interop(&mut self, payload: &Item) -> R<Vec<Item>> {
        // `run` refused it already unless interop testing is on; this
        // keeps the rule beside the operation.
        if !self.state.kmip_interop {
            return Err(KmipError::OperationNotSupported(Operation::INTEROP));
        }
        let f = Fields::of(payload)?;
        let function = match f.required(TAG_INTEROP_FUNCTION)?.as_enum()? {
            1 => "Begin",
            2 => "End",
            3 => "Reset",
            other => {
                return Err(KmipError::InvalidField(format!("Interop Function 0x{other:08X}")))
            }
        };
        let identifier = f.required(TAG_INTEROP_IDENTIFIER)?.as_text()?;
        self.note = Some(format!("Interop {function}: {}", clean(identifier)));
        Ok(Vec::new())
    }
}
