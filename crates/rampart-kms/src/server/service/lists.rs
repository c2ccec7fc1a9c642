//! The paged lists (keys, clients, audit entries, console sessions): one
//! page for a typed list request (see [`crate::server::paging`]), and the
//! cursor of the next page. The store is asked for one item more than the
//! page holds, to know whether a next page exists.

use crate::error::{KmsError, Result};
use crate::keys::RootKey;
use crate::model::{check_name, AuditEntry, ClientInfo, KeyInfo};
use crate::server::console::sessions::{Session, SessionPosition};
use crate::server::paging::{self, ListKind, ListRequest};
use crate::server::state::State;
use crate::store::{AuditFilter, ClientFilter, KeyFilter, StoreFuture};

/// One page of keys, and the cursor of the next page.
pub(crate) async fn key_page(
    state: &State,
    request: ListRequest<KeyFilter>,
) -> Result<(Vec<KeyInfo>, Option<String>)> {
    named_page(
        state,
        ListKind::Keys,
        request,
        |after, filter, limit| state.store.key_page(after, filter, limit),
        |k| &k.name,
    )
    .await
}

/// One page of clients, and the cursor of the next page.
pub(crate) async fn client_page(
    state: &State,
    request: ListRequest<ClientFilter>,
) -> Result<(Vec<ClientInfo>, Option<String>)> {
    named_page(
        state,
        ListKind::Clients,
        request,
        |after, filter, limit| state.store.client_page(after, filter, limit),
        |c| &c.name,
    )
    .await
}

/// One page of a list in name order: `fetch` asks the store for the items
/// after a name.
async fn named_page<'s, F, T>(
    state: &'s State,
    kind: ListKind,
    request: ListRequest<F>,
    fetch: impl FnOnce(String, F, u32) -> StoreFuture<'s, Vec<T>>,
    name: impl Fn(&T) -> &str,
) -> Result<(Vec<T>, Option<String>)> {
    let root = state.require_root()?;
    let after = match &request.cursor {
        Some(text) => cursor_name(&root, kind, &request.binding, text)?,
        None => String::new(),
    };
    let mut items = fetch(after, request.filter, request.limit + 1).await?;
    let next = next_cursor(&root, kind, &request.binding, &mut items, request.limit, |item| {
        name(item).as_bytes().to_vec()
    });
    Ok((items, next))
}

/// One page of audit entries after the cursor (or, paging the older way,
/// after entry `after_seq`), and the cursor of the next page.
pub(crate) async fn audit_page(
    state: &State,
    request: ListRequest<AuditFilter>,
    after_seq: Option<u64>,
) -> Result<(Vec<AuditEntry>, Option<String>)> {
    let root = state.require_root()?;
    let after = match (&request.cursor, after_seq) {
        (Some(text), _) => {
            let position = paging::decode_cursor(&root, ListKind::Audit, &request.binding, text)?;
            let bytes: [u8; 8] = position
                .as_slice()
                .try_into()
                .map_err(|_| KmsError::invalid("cursor does not hold an audit position"))?;
            u64::from_be_bytes(bytes)
        }
        (None, after) => after.unwrap_or(0),
    };
    let mut entries = state.store.audit_list(after, request.filter, request.limit + 1).await?;
    let next =
        next_cursor(&root, ListKind::Audit, &request.binding, &mut entries, request.limit, |e| {
            e.seq.to_be_bytes().to_vec()
        });
    Ok((entries, next))
}

/// One page of this server's console sessions, and the cursor of the
/// next page.
pub(crate) fn console_session_page(
    state: &State,
    request: &ListRequest<()>,
) -> Result<(Vec<Session>, Option<String>)> {
    let root = state.require_root()?;
    let kind = ListKind::ConsoleSessions;
    let after = match &request.cursor {
        Some(text) => {
            let position = paging::decode_cursor(&root, kind, &request.binding, text)?;
            Some(
                SessionPosition::from_bytes(&position)
                    .ok_or_else(|| KmsError::invalid("cursor does not hold a session"))?,
            )
        }
        None => None,
    };
    let mut sessions = state.console.sessions(after.as_ref(), request.limit as usize + 1);
    let next = next_cursor(&root, kind, &request.binding, &mut sessions, request.limit, |s| {
        s.position().to_bytes()
    });
    Ok((sessions, next))
}

fn cursor_name(root: &RootKey, kind: ListKind, binding: &str, text: &str) -> Result<String> {
    let position = paging::decode_cursor(root, kind, binding, text)?;
    String::from_utf8(position)
        .ok()
        .filter(|name| check_name("name", name).is_ok())
        .ok_or_else(|| KmsError::invalid("cursor does not hold a name"))
}

/// Cuts `items` (at most `limit + 1` long) to `limit` and returns the
/// cursor after the last one kept, when more followed.
fn next_cursor<T>(
    root: &RootKey,
    kind: ListKind,
    binding: &str,
    items: &mut Vec<T>,
    limit: u32,
    position: impl Fn(&T) -> Vec<u8>,
) -> Option<String> {
    if items.len() <= limit as usize {
        return None;
    }
    items.truncate(limit as usize);
    items.last().map(|last| paging::encode_cursor(root, kind, binding, &position(last)))
}
