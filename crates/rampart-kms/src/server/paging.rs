//! Paged lists: the query parameters every list takes (`limit`,
//! `cursor` and its filters) and the cursors themselves.
//!
//! A page is a keyset query: the items after the last one the previous
//! page returned, in the list's order, so a walk neither repeats nor skips
//! an item that exists throughout, whatever is inserted or deleted
//! meanwhile, and no page costs more than its own size.
//!
//! A cursor is `BASE64URL(version || list || position || tag)`, the tag
//! being the first 16 bytes of HMAC-SHA-256 under a key derived from the
//! root key over the list, the filters and the position: every server of
//! a deployment accepts it, and a cursor that was altered, made up, made
//! by another deployment, taken from another list or given with other
//! filters is refused with a 400 rather than silently walking elsewhere.

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::error::{KmsError, Result};
use crate::keys::RootKey;
use crate::model::{check_name, Labels};
use crate::store::{parse_prefix, AuditFilter, ClientFilter, KeyFilter, MAX_PAGE};

/// Items per page when the request names no `limit`.
pub const DEFAULT_PAGE: u32 = 100;

const CURSOR_VERSION: u8 = 1;
const TAG_BYTES: usize = 16;
/// Longest cursor text accepted: a 128-character name's cursor is 195.
const MAX_CURSOR_TEXT: usize = 512;

/// The lists of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    Keys = 1,
    Clients = 2,
    Audit = 3,
    ConsoleSessions = 4,
}

impl ListKind {
    fn name(self) -> &'static str {
        match self {
            Self::Keys => "key list",
            Self::Clients => "client list",
            Self::Audit => "audit list",
            Self::ConsoleSessions => "console session list",
        }
    }

    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Self::Keys),
            2 => Some(Self::Clients),
            3 => Some(Self::Audit),
            4 => Some(Self::ConsoleSessions),
            _ => None,
        }
    }
}

fn tag(root: &RootKey, kind: ListKind, binding: &str, position: &[u8]) -> Vec<u8> {
    let mut data = b"rampart-kms cursor v1\0".to_vec();
    data.push(kind as u8);
    data.extend_from_slice(&(binding.len() as u64).to_be_bytes());
    data.extend_from_slice(binding.as_bytes());
    data.extend_from_slice(position);
    let mut mac = root.cursor_mac(&data);
    mac.truncate(TAG_BYTES);
    mac
}

/// The cursor of the page after the one ending at `position`.
pub(crate) fn encode_cursor(
    root: &RootKey,
    kind: ListKind,
    binding: &str,
    position: &[u8],
) -> String {
    let mut bytes = vec![CURSOR_VERSION, kind as u8];
    bytes.extend_from_slice(position);
    bytes.extend_from_slice(&tag(root, kind, binding, position));
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The position a cursor of list `kind` with filters `binding` holds.
pub(crate) fn decode_cursor(
    root: &RootKey,
    kind: ListKind,
    binding: &str,
    text: &str,
) -> Result<Vec<u8>> {
    let malformed = || {
        KmsError::invalid(format!(
            "cursor is malformed: pass the next_cursor of a {} page unchanged",
            kind.name()
        ))
    };
    if text.is_empty() || text.len() > MAX_CURSOR_TEXT {
        return Err(malformed());
    }
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| malformed())?;
    if bytes.len() < 2 + TAG_BYTES || bytes[0] != CURSOR_VERSION {
        return Err(malformed());
    }
    match ListKind::from_byte(bytes[1]) {
        Some(other) if other != kind => {
            return Err(KmsError::invalid(format!(
                "cursor belongs to the {}, not the {}",
                other.name(),
                kind.name()
            )))
        }
        Some(_) => {}
        None => return Err(malformed()),
    }
    let (body, given) = bytes.split_at(bytes.len() - TAG_BYTES);
    let position = &body[2..];
    let want = tag(root, kind, binding, position);
    // Constant time: the tag is a MAC.
    if !rampart_crypto::constant_time_eq(&want, given) {
        return Err(KmsError::invalid(format!(
            "cursor does not authenticate: it was altered, issued by another deployment, \
             or given with other filters than the {} page it came from",
            kind.name()
        )));
    }
    Ok(position.to_vec())
}

/// The query parameters of a request, percent-decoded; a repeated
/// parameter, bad escape or non-UTF-8 value is refused.
pub(crate) fn query_params(query: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(k)?;
        let value = percent_decode(v)?;
        if out.contains_key(&key) {
            return Err(KmsError::invalid(format!("query parameter '{key}' is repeated")));
        }
        out.insert(key, value);
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Result<String> {
    let bad = || KmsError::invalid("a query parameter has a bad %-escape or is not UTF-8");
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Refuses a parameter the list does not take (a misspelt filter would
/// otherwise list everything).
pub(crate) fn only(params: &BTreeMap<String, String>, known: &[&str], list: &str) -> Result<()> {
    match params.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(KmsError::invalid(format!(
            "the {list} takes no query parameter '{}' (it takes {})",
            k.chars().take(64).collect::<String>(),
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// `limit`: 1 to [`MAX_PAGE`], [`DEFAULT_PAGE`] when absent.
pub(crate) fn limit(params: &BTreeMap<String, String>) -> Result<u32> {
    let Some(text) = params.get("limit") else { return Ok(DEFAULT_PAGE) };
    let bad = || KmsError::invalid(format!("limit must be a whole number from 1 to {MAX_PAGE}"));
    let n: u64 = text.parse().map_err(|_| bad())?;
    match u32::try_from(n) {
        Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        _ => Err(bad()),
    }
}

fn prefix(params: &BTreeMap<String, String>) -> Result<Option<String>> {
    parse_prefix(params.get("prefix").map(String::as_str))
}

fn boolean(params: &BTreeMap<String, String>, name: &str) -> Result<Option<bool>> {
    match params.get(name).map(String::as_str) {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(KmsError::invalid(format!("{name} must be true or false"))),
    }
}

/// A list request: its filters, their canonical text (bound into the
/// cursors), and the page size.
pub(crate) struct ListRequest<F> {
    pub filter: F,
    pub binding: String,
    pub limit: u32,
    pub cursor: Option<String>,
}

fn cursor(params: &BTreeMap<String, String>) -> Option<String> {
    params.get("cursor").filter(|c| !c.is_empty()).cloned()
}

pub(crate) fn key_request(params: &BTreeMap<String, String>) -> Result<ListRequest<KeyFilter>> {
    let [prefix, state, selector] = KeyFilter::PARAMETERS;
    only(params, &["limit", "cursor", prefix, state, selector], "key list")?;
    let text = |name: &str| params.get(name).map(String::as_str);
    let filter = KeyFilter::parse(text(prefix), text(state), text(selector))?;
    let binding = filter.binding();
    Ok(ListRequest { filter, binding, limit: limit(params)?, cursor: cursor(params) })
}

pub(crate) fn client_request(
    params: &BTreeMap<String, String>,
) -> Result<ListRequest<ClientFilter>> {
    only(params, &["limit", "cursor", "prefix", "label", "admin", "revoked"], "client list")?;
    let label = match params.get("label") {
        None => None,
        Some(text) => {
            let (k, v) =
                text.split_once('=').ok_or_else(|| KmsError::invalid("label must be KEY=VALUE"))?;
            Labels::new(BTreeMap::from([(k.to_owned(), v.to_owned())]))?;
            Some((k.to_owned(), v.to_owned()))
        }
    };
    let filter = ClientFilter {
        prefix: prefix(params)?,
        label,
        admin: boolean(params, "admin")?,
        revoked: boolean(params, "revoked")?,
    };
    let flag = |b: Option<bool>| b.map_or("", |b| if b { "true" } else { "false" });
    let binding = format!(
        "prefix={}&label={}&admin={}&revoked={}",
        filter.prefix.as_deref().unwrap_or(""),
        filter.label.as_ref().map(|(k, v)| format!("{k}={v}")).unwrap_or_default(),
        flag(filter.admin),
        flag(filter.revoked)
    );
    Ok(ListRequest { filter, binding, limit: limit(params)?, cursor: cursor(params) })
}

/// The console session list takes no filter.
pub(crate) fn console_session_request(
    params: &BTreeMap<String, String>,
) -> Result<ListRequest<()>> {
    only(params, &["limit", "cursor"], "console session list")?;
    Ok(ListRequest {
        filter: (),
        binding: String::new(),
        limit: limit(params)?,
        cursor: cursor(params),
    })
}

/// Audit operations and client fields are bounded short text without
/// control characters.
fn audit_text(params: &BTreeMap<String, String>, name: &str) -> Result<Option<String>> {
    match params.get(name) {
        None => Ok(None),
        Some(v) if v.is_empty() || v.chars().count() > 200 || v.chars().any(char::is_control) => {
            Err(KmsError::invalid(format!(
                "{name} must be 1 to 200 characters without control characters"
            )))
        }
        Some(v) => Ok(Some(v.clone())),
    }
}

fn time_param(params: &BTreeMap<String, String>, name: &str) -> Result<Option<i64>> {
    params
        .get(name)
        .map(|v| {
            v.parse::<i64>().ok().filter(|t| *t >= 0).ok_or_else(|| {
                KmsError::invalid(format!("{name} must be Unix milliseconds, 0 to 2^63-1"))
            })
        })
        .transpose()
}

/// The audit list's request; `after_seq` (the older way to page) is
/// still taken, but not together with a cursor.
pub(crate) fn audit_request(
    params: &BTreeMap<String, String>,
) -> Result<(ListRequest<AuditFilter>, Option<u64>)> {
    only(
        params,
        &[
            "limit",
            "cursor",
            "after_seq",
            "since_ms",
            "until_ms",
            "client",
            "key",
            "operation",
            "outcome",
        ],
        "audit list",
    )?;
    let after_seq = params
        .get("after_seq")
        .map(|v| {
            v.parse::<u64>().ok().filter(|s| i64::try_from(*s).is_ok()).ok_or_else(|| {
                KmsError::invalid("after_seq must be a sequence number, 0 to 2^63-1")
            })
        })
        .transpose()?;
    if after_seq.is_some() && cursor(params).is_some() {
        return Err(KmsError::invalid("give cursor or after_seq, not both"));
    }
    let key = params.get("key").map(|k| check_name("key", k).map(|()| k.clone())).transpose()?;
    let outcome = match params.get("outcome").map(String::as_str) {
        None => None,
        Some(o @ ("ok" | "denied" | "invalid" | "unavailable" | "error")) => Some(o.to_owned()),
        Some(_) => {
            return Err(KmsError::invalid(
                "outcome must be ok, denied, invalid, unavailable or error",
            ))
        }
    };
    let filter = AuditFilter {
        since_ms: time_param(params, "since_ms")?,
        until_ms: time_param(params, "until_ms")?,
        client: audit_text(params, "client")?,
        key,
        operation: audit_text(params, "operation")?,
        outcome,
    };
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    let time = |v: Option<i64>| v.map(|t| t.to_string()).unwrap_or_default();
    // Lengths first: the free-text fields cannot be confused by an `&`.
    let binding = format!(
        "since={}&until={}&client={}:{}&key={}&operation={}:{}&outcome={}",
        time(filter.since_ms),
        time(filter.until_ms),
        opt(&filter.client).len(),
        opt(&filter.client),
        opt(&filter.key),
        opt(&filter.operation).len(),
        opt(&filter.operation),
        opt(&filter.outcome)
    );
    Ok((ListRequest { filter, binding, limit: limit(params)?, cursor: cursor(params) }, after_seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> RootKey {
        RootKey::generate().unwrap().0
    }

    #[test]
    fn cursors_round_trip_and_refuse_tampering() {
        let root = root();
        let c = encode_cursor(&root, ListKind::Keys, "b", b"key-7");
        assert_eq!(decode_cursor(&root, ListKind::Keys, "b", &c).unwrap(), b"key-7");
        let err = |r: Result<Vec<u8>>| r.unwrap_err().to_string();
        assert!(err(decode_cursor(&root, ListKind::Clients, "b", &c)).contains("key list"));
        assert!(err(decode_cursor(&root, ListKind::Keys, "other", &c)).contains("authenticate"));
        assert!(err(decode_cursor(&RootKey::generate().unwrap().0, ListKind::Keys, "b", &c))
            .contains("authenticate"));
        assert!(err(decode_cursor(&root, ListKind::Keys, "b", &c[..c.len() - 3]))
            .contains("authenticate"));
        assert!(err(decode_cursor(&root, ListKind::Keys, "b", "!!")).contains("malformed"));
        assert!(err(decode_cursor(&root, ListKind::Keys, "b", "AQ")).contains("malformed"));
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let p = query_params("selector=label%3Aregion%3Deu&limit=5").unwrap();
        assert_eq!(p["selector"], "label:region=eu");
        assert!(query_params("a=%zz").is_err());
        assert!(query_params("a=%c3").is_err());
        assert!(query_params("a=1&a=2").is_err());
    }

    #[test]
    fn limits_are_bounded() {
        let p = |v: &str| query_params(&format!("limit={v}")).unwrap();
        assert_eq!(limit(&BTreeMap::new()).unwrap(), DEFAULT_PAGE);
        assert_eq!(limit(&p("10000")).unwrap(), 10_000);
        for bad in ["0", "10001", "-1", "x", "", "99999999999999999999"] {
            assert!(limit(&p(bad)).is_err(), "{bad}");
        }
    }
}
