//! The module's configuration: one `[slot]` section per key manager.
//!
//! ```text
//! # /etc/rampart/pkcs11.conf (or the file $RAMPART_PKCS11_CONFIG names)
//! [slot]
//! label = production                      # the token's label, 32 bytes at most
//! bundle = /etc/rampart/app.bundle        # the client bundle: the mTLS identity
//! kmip = kms1.example.com:5696 kms2.example.com:5696   # KMIP listeners, in order
//! pin = 1234                              # optional: C_Login must give it
//! ```
//!
//! Without a file, the environment can name one slot:
//! `RAMPART_PKCS11_BUNDLE`, `RAMPART_PKCS11_KMIP` (addresses separated by
//! spaces or commas) and optionally `RAMPART_PKCS11_PIN`; the token is
//! labelled with the bundle's client name.
//!
//! Lines are `key = value`; `#` starts a comment; blank lines are
//! ignored. An unknown key, a missing one or a slot without addresses is
//! an error naming the line, so a typo never leaves a slot half set up.

use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

/// Environment variables of a slot configured without a file.
pub const BUNDLE_ENV: &str = "RAMPART_PKCS11_BUNDLE";
pub const KMIP_ENV: &str = "RAMPART_PKCS11_KMIP";
pub const PIN_ENV: &str = "RAMPART_PKCS11_PIN";

/// Largest configuration file read.
const MAX_CONFIG: u64 = 64 * 1024;
/// Token labels are 32 bytes, blank-padded (`CK_TOKEN_INFO.label`).
pub const MAX_LABEL: usize = 32;

/// One slot: a key manager reached with one identity.
pub struct SlotConfig {
    /// The token label (`None`: the bundle's client name).
    pub label: Option<String>,
    pub bundle: PathBuf,
    /// KMIP listeners, `HOST:PORT`, tried in order.
    pub kmip: Vec<String>,
    /// The user PIN C_Login must be given; without one, the token needs
    /// no login.
    pub pin: Option<Zeroizing<String>>,
}

impl std::fmt::Debug for SlotConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the PIN.
        f.debug_struct("SlotConfig")
            .field("label", &self.label)
            .field("bundle", &self.bundle)
            .field("kmip", &self.kmip)
            .field("pin", &self.pin.as_ref().map(|_| "set"))
            .finish()
    }
}

/// Reads the configuration the environment points at: the slot of
/// [`BUNDLE_ENV`] when it is set, else the file of
/// [`CONFIG_ENV`](crate::CONFIG_ENV) or [`DEFAULT_CONFIG`](crate::DEFAULT_CONFIG).
pub fn from_environment() -> Result<Vec<SlotConfig>, String> {
    if let Some(bundle) = std::env::var_os(BUNDLE_ENV) {
        let kmip = std::env::var(KMIP_ENV).map_err(|_| {
            format!("{BUNDLE_ENV} is set but {KMIP_ENV} (the KMIP addresses) is not")
        })?;
        let slot = SlotConfig {
            label: None,
            bundle: PathBuf::from(bundle),
            kmip: addresses(&kmip),
            pin: std::env::var(PIN_ENV).ok().map(Zeroizing::new),
        };
        check(&slot, &format!("the {KMIP_ENV} environment variable"))?;
        return Ok(vec![slot]);
    }
    let path = std::env::var_os(crate::CONFIG_ENV)
        .map_or_else(|| PathBuf::from(crate::DEFAULT_CONFIG), PathBuf::from);
    read(&path)
}

/// Reads and parses the file at `path`.
pub fn read(path: &Path) -> Result<Vec<SlotConfig>, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_CONFIG + 1), &mut text)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if text.len() as u64 > MAX_CONFIG {
        return Err(format!("{shown} is larger than {MAX_CONFIG} bytes"));
    }
    parse(&text).map_err(|e| format!("{shown}: {e}"))
}

/// Parses a configuration's text.
pub fn parse(text: &str) -> Result<Vec<SlotConfig>, String> {
    let mut slots: Vec<(usize, SlotConfig)> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line_no = n + 1;
        let line = raw.split_once('#').map_or(raw, |(before, _)| before).trim();
        if line.is_empty() {
            continue;
        }
        if line == "[slot]" {
            slots.push((
                line_no,
                SlotConfig { label: None, bundle: PathBuf::new(), kmip: Vec::new(), pin: None },
            ));
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {line_no}: expected `key = value` or `[slot]`"));
        };
        let (key, value) = (key.trim(), value.trim());
        let Some((_, slot)) = slots.last_mut() else {
            return Err(format!("line {line_no}: `{key}` before the first `[slot]`"));
        };
        match key {
            "label" => {
                if value.is_empty() || value.len() > MAX_LABEL {
                    return Err(format!(
                        "line {line_no}: a label of 1 to {MAX_LABEL} bytes, not {}",
                        value.len()
                    ));
                }
                slot.label = Some(value.to_owned());
            }
            "bundle" => slot.bundle = PathBuf::from(value),
            "kmip" => slot.kmip = addresses(value),
            "pin" => slot.pin = Some(Zeroizing::new(value.to_owned())),
            other => {
                return Err(format!(
                    "line {line_no}: unknown key `{other}` (label, bundle, kmip, pin)"
                ))
            }
        }
    }
    if slots.is_empty() {
        return Err("no [slot] section".into());
    }
    for (line_no, slot) in &slots {
        check(slot, &format!("the [slot] of line {line_no}"))?;
    }
    Ok(slots.into_iter().map(|(_, s)| s).collect())
}

fn addresses(value: &str) -> Vec<String> {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect()
}

fn check(slot: &SlotConfig, what: &str) -> Result<(), String> {
    if slot.bundle.as_os_str().is_empty() {
        return Err(format!("{what} names no bundle"));
    }
    if slot.kmip.is_empty() {
        return Err(format!("{what} names no KMIP address"));
    }
    if let Some(bad) = slot.kmip.iter().find(|a| a.rsplit_once(':').is_none()) {
        return Err(format!("{what}: KMIP address `{bad}` is not HOST:PORT"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_read_with_their_keys() {
        let slots = parse(
            "# two key managers\n[slot]\nlabel = prod\nbundle = /a.bundle\n\
             kmip = k1:5696, k2:5696\npin = 1234 # the user PIN\n\n[slot]\n\
             bundle=/b.bundle\nkmip=k3:5696\n",
        )
        .expect("parses");
        assert_eq!(slots.len(), 2);
        assert_eq!(slots[0].label.as_deref(), Some("prod"));
        assert_eq!(slots[0].kmip, ["k1:5696", "k2:5696"]);
        assert_eq!(slots[0].pin.as_deref().map(String::as_str), Some("1234"));
        assert!(slots[1].label.is_none() && slots[1].pin.is_none());
        assert!(!format!("{:?}", slots[0]).contains("1234"), "Debug shows no PIN");
    }

    #[test]
    fn mistakes_name_their_line() {
        for (text, expected) in [
            ("bundle = /a\n", "line 1: `bundle` before the first `[slot]`"),
            ("[slot]\nbundel = /a\n", "line 2: unknown key `bundel`"),
            ("[slot]\nbundle = /a\n", "the [slot] of line 1 names no KMIP address"),
            ("[slot]\nkmip = k:1\n", "names no bundle"),
            ("[slot]\nbundle=/a\nkmip = nohost\n", "`nohost` is not HOST:PORT"),
            ("", "no [slot] section"),
        ] {
            let error = parse(text).err().unwrap_or_default();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
