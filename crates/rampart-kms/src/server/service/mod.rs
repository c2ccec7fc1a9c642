//! The key manager's operations, typed: creating, reading, rotating,
//! revoking and destroying keys, the checks before a key is used, client
//! changes, the paged lists and the seal status. The REST API, the web
//! console and KMIP parse their requests into these arguments and call
//! the same functions, so a rule holds on every front end at once.

pub(crate) mod access;
pub(crate) mod audit;
pub(crate) mod certificates;
pub(crate) mod clients;
pub(crate) mod key_pairs;
pub(crate) mod keys;
pub(crate) mod lists;
pub(crate) mod objects;

use serde_json::{json, Value};

use super::state::State;
use crate::deployment::SealConfig;
use crate::error::{KmsError, Result};
use crate::model::MAX_REASON;

/// The seal scheme and whether the root key is held (`GET
/// /v1/sys/seal-status`, and the console's health page).
pub(crate) fn seal_status(state: &State) -> Value {
    let sealed = state.root().is_none();
    match state.seal {
        SealConfig::Shamir { shares, threshold } => json!({
            "sealed": sealed, "scheme": "shamir", "shares": shares, "threshold": threshold,
            "progress": state.share_progress(),
        }),
        SealConfig::Hsm => match &state.hsm {
            Some((config, _)) => json!({
                "sealed": sealed, "scheme": "hsm", "module": config.module.display().to_string(),
                "token": config.token, "key_label": config.key_label,
            }),
            None => json!({ "sealed": sealed, "scheme": "hsm" }),
        },
        SealConfig::File => json!({ "sealed": sealed, "scheme": "file" }),
    }
}

/// A revocation reason: 1 to [`MAX_REASON`] characters, no control
/// characters.
pub(crate) fn check_reason(reason: &str) -> Result<()> {
    if reason.trim().is_empty() || reason.len() > MAX_REASON {
        return Err(KmsError::invalid(format!("the reason must be 1 to {MAX_REASON} characters")));
    }
    if reason.chars().any(char::is_control) {
        return Err(KmsError::invalid("the reason may not hold control characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_short_printable_text() {
        assert!(check_reason("compromised laptop").is_ok());
        assert!(check_reason(&"x".repeat(MAX_REASON)).is_ok());
        for bad in [String::new(), "   ".into(), "x".repeat(MAX_REASON + 1), "line\nbreak".into()] {
            let error = check_reason(&bad).unwrap_err();
            assert_eq!(error.status(), 400, "{bad:?}");
        }
    }
}
