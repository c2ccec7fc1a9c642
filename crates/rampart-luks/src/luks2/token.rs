//! LUKS2 tokens: opaque JSON objects bound to keyslots, kept exactly as
//! they are except for the keyslot references Rampart must update; and
//! the header operations that add, replace and remove them.

use serde_json::Value;

use super::json::{self, parse_id, shorten, Metadata};
use super::Luks2;
use crate::io::MetadataIo;
use crate::{Error, Result};

/// The reserved prefix of cryptsetup's built-in token types.
const BUILTIN_PREFIX: &str = "luks2-";

/// Checks the fields every token must have: a `type` string and a
/// `keyslots` array of ids of existing keyslots.
pub(crate) fn check_token(token: &Value, meta: &Metadata, what: &str) -> Result<()> {
    let Some(obj) = token.as_object() else {
        return Err(Error::invalid(format!("{what} is not a JSON object")));
    };
    if obj.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(Error::invalid(format!("{what} has no \"type\" string")));
    }
    let Some(list) = obj.get("keyslots").and_then(Value::as_array) else {
        return Err(Error::invalid(format!("{what} has no \"keyslots\" array")));
    };
    for item in list {
        let Some(s) = item.as_str() else {
            return Err(Error::invalid(format!("{what}: \"keyslots\" must hold strings")));
        };
        let id = parse_id(s).map_err(|e| Error::invalid(format!("{what}: keyslot {e}")))?;
        if !meta.keyslots.contains_key(&id) {
            return Err(Error::invalid(format!("{what} refers to missing keyslot {id}")));
        }
    }
    Ok(())
}

/// Checks a token a caller wants to add, as `cryptsetup token import` would.
pub(crate) fn check_new_token(token: &Value, meta: &Metadata) -> Result<()> {
    check_token(token, meta, "the token")?;
    let kind = token.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind.starts_with(BUILTIN_PREFIX) {
        let keyring_ok =
            kind == "luks2-keyring" && token.get("key_description").is_some_and(Value::is_string);
        if !keyring_ok {
            return Err(Error::invalid(format!(
                "token type \"{}\" uses the reserved \"luks2-\" prefix",
                shorten(kind)
            )));
        }
    }
    Ok(())
}

/// Removes references to `slot` from every token.
pub(crate) fn unassign_keyslot(meta: &mut Metadata, slot: usize) {
    let name = slot.to_string();
    for token in meta.tokens.values_mut() {
        if let Some(list) = token.get_mut("keyslots").and_then(Value::as_array_mut) {
            list.retain(|v| v.as_str() != Some(name.as_str()));
        }
    }
}

/// Token types that hold the secret of exactly the keyslots they name (a
/// key-manager binding): once those keyslots are gone such a token opens
/// nothing, and every unlock would try it in vain.
const KEYSLOT_SECRET_TYPES: &[&str] = &["rampart-kms"];

/// The ids of tokens of [`KEYSLOT_SECRET_TYPES`] that name no keyslot.
pub(crate) fn orphaned_bindings(meta: &Metadata) -> Vec<usize> {
    meta.tokens
        .iter()
        .filter(|(_, t)| {
            t.get("type").and_then(Value::as_str).is_some_and(|k| KEYSLOT_SECRET_TYPES.contains(&k))
                && t.get("keyslots").and_then(Value::as_array).is_none_or(Vec::is_empty)
        })
        .map(|(id, _)| *id)
        .collect()
}

/// Removes the bindings that lost all their keyslots since `before` was
/// taken (the old key's keyslots at the end of a reencryption); other
/// token types are kept, as cryptsetup keeps them.
pub(crate) fn drop_orphaned_bindings(meta: &mut Metadata, before: &[usize]) {
    for id in orphaned_bindings(meta) {
        if !before.contains(&id) {
            meta.tokens.remove(&id);
        }
    }
}

/// The lowest unused token id.
pub(crate) fn free_id(meta: &Metadata) -> Option<usize> {
    (0..=super::json::MAX_ID).find(|id| !meta.tokens.contains_key(id))
}

impl Luks2 {
    pub(crate) fn tokens(&self) -> Vec<(usize, Value)> {
        self.meta.tokens.iter().map(|(id, t)| (*id, t.clone())).collect()
    }

    pub(crate) fn add_token(
        &mut self,
        io: &dyn MetadataIo,
        token: Value,
        id: Option<usize>,
    ) -> Result<usize> {
        self.check_requirements()?;
        check_new_token(&token, &self.meta)?;
        let id = match id {
            Some(i) if i > json::MAX_ID => {
                return Err(Error::invalid(format!(
                    "token {i} is out of range (0..={})",
                    json::MAX_ID
                )))
            }
            Some(i) if self.meta.tokens.contains_key(&i) => {
                return Err(Error::invalid(format!("token {i} is already in use")))
            }
            Some(i) => i,
            None => free_id(&self.meta)
                .ok_or_else(|| Error::NoSpace("all 32 LUKS2 tokens are in use".into()))?,
        };
        self.update(io, |m| {
            m.tokens.insert(id, token);
            Ok(())
        })?;
        Ok(id)
    }

    /// Replaces token `id` with `token` in one header update, so a crash
    /// leaves either the old token or the new one, never neither.
    pub(crate) fn replace_token(
        &mut self,
        io: &dyn MetadataIo,
        id: usize,
        token: Value,
    ) -> Result<()> {
        self.check_requirements()?;
        if !self.meta.tokens.contains_key(&id) {
            return Err(Error::invalid(format!("token {id} does not exist")));
        }
        check_new_token(&token, &self.meta)?;
        self.update(io, |m| {
            m.tokens.insert(id, token);
            Ok(())
        })
    }

    pub(crate) fn remove_token(&mut self, io: &dyn MetadataIo, id: usize) -> Result<()> {
        if !self.meta.tokens.contains_key(&id) {
            return Err(Error::invalid(format!("token {id} does not exist")));
        }
        self.update(io, |m| {
            m.tokens.remove(&id);
            Ok(())
        })
    }
}
