//! Client operations: issuing a certificate, revoking and relabelling a
//! client, finding one by name, and the heartbeat's verdicts.

use std::collections::BTreeMap;

use crate::error::{KmsError, Result};
use crate::model::{
    check_name, now_ms, ClientInfo, HeartbeatVerdict, HeldKey, KeyState, Labels, MAX_HEARTBEAT_KEYS,
};
use crate::server::state::State;
use crate::store::ClientFilter;

use super::check_reason;

/// A change an admin makes to a registered client.
pub(crate) enum ClientChange {
    Revoke(String),
    Relabel(BTreeMap<String, String>),
}

/// Revokes or relabels client `name` on behalf of `admin`.
pub(crate) async fn change_client(
    state: &State,
    admin: &ClientInfo,
    name: String,
    change: ClientChange,
) -> Result<ClientInfo> {
    check_name("client name", &name)?;
    let changed = match change {
        ClientChange::Revoke(reason) => {
            check_reason(&reason)?;
            if name == admin.name {
                return Err(KmsError::Conflict(
                    "a client cannot revoke its own certificate (use another admin bundle)".into(),
                ));
            }
            state.store.revoke_client(name, reason, now_ms()).await?
        }
        ClientChange::Relabel(labels) => {
            let labels = Labels::new(labels)?;
            state.store.set_client_labels(name, labels).await?
        }
    };
    state.client_changed(&changed);
    Ok(changed)
}

/// Certificate validity in days: 1 to 3650, 365 when not given.
pub(crate) fn check_days(days: Option<u32>) -> Result<u32> {
    let days = days.unwrap_or(365);
    if !(1..=3650).contains(&days) {
        return Err(KmsError::invalid("days must be 1 to 3650"));
    }
    Ok(days)
}

/// Signs a client certificate from `csr` and registers the client: the
/// client, its certificate and the CA certificate, PEM.
pub(crate) async fn issue_client(
    state: &State,
    name: String,
    labels: BTreeMap<String, String>,
    admin: bool,
    csr: &str,
    days: Option<u32>,
) -> Result<(ClientInfo, String, String)> {
    check_name("client name", &name)?;
    let labels = Labels::new(labels)?;
    let days = check_days(days)?;
    let (ca, ca_pem) = super::certificates::authority(state).await?;
    let issued = ca.issue_client_days(csr, &name, i64::from(days))?;
    let client = ClientInfo {
        name,
        labels,
        admin,
        serial: issued.serial,
        fingerprint: issued.fingerprint,
        created_ms: now_ms(),
        not_after_ms: issued.not_after_ms,
        revoked: None,
    };
    state.store.add_client(client.clone()).await?;
    Ok((client, issued.cert_pem, ca_pem))
}

/// Registered client `name`, or a not-found error.
pub(crate) async fn client_by_name(state: &State, name: &str) -> Result<ClientInfo> {
    let filter = ClientFilter { prefix: Some(name.to_owned()), ..ClientFilter::default() };
    state
        .store
        .client_page(String::new(), filter, 1)
        .await?
        .into_iter()
        .find(|c| c.name == name)
        .ok_or_else(|| KmsError::NotFound(format!("client {name}")))
}

/// The keys a heartbeat names: at most [`MAX_HEARTBEAT_KEYS`], each a
/// valid key name.
pub(crate) fn check_held_keys(keys: &[HeldKey]) -> Result<()> {
    if keys.len() > MAX_HEARTBEAT_KEYS {
        return Err(KmsError::invalid(format!(
            "a heartbeat names at most {MAX_HEARTBEAT_KEYS} keys"
        )));
    }
    for held in keys {
        check_name("key name", &held.name)?;
    }
    Ok(())
}

/// Re-evaluates the policy for every key version a host holds: the key
/// must exist, its version be active, and the client (as the store knows
/// it now: labels, revocation, certificate validity) match its allow
/// rule. The verdicts, and how many of the keys exist.
pub(crate) async fn heartbeat_verdicts(
    state: &State,
    client: &ClientInfo,
    keys: &[HeldKey],
) -> Result<(Vec<HeartbeatVerdict>, usize)> {
    let now = now_ms();
    let expired = client.not_after_ms <= now;
    let mut verdicts = Vec::with_capacity(keys.len());
    let mut known = 0;
    for held in keys {
        let row = state.store.key_material(held.name.clone(), Some(held.version)).await?;
        let (name, version) = (&held.name, held.version);
        let reason = match &row {
            _ if expired => Some(format!("the certificate of client {} has expired", client.name)),
            None => Some(format!("key {name} version {version} does not exist")),
            Some(row) if !super::access::may_use(client, &row.allow) => {
                Some(format!("client {} is no longer allowed to use key {name}", client.name))
            }
            Some(row) => match &row.version.state {
                KeyState::Active => None,
                KeyState::Revoked { reason } => {
                    Some(format!("key {name} version {version} was revoked: {reason}"))
                }
                _ => Some(format!("key {name} version {version} was destroyed")),
            },
        };
        known += usize::from(row.is_some());
        verdicts.push(HeartbeatVerdict {
            name: name.clone(),
            version,
            allowed: reason.is_none(),
            reason,
        });
    }
    Ok((verdicts, known))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_last_one_to_ten_years_a_year_by_default() {
        assert_eq!(check_days(None).unwrap(), 365);
        assert_eq!(check_days(Some(1)).unwrap(), 1);
        assert_eq!(check_days(Some(3650)).unwrap(), 3650);
        for bad in [0, 3651] {
            let error = check_days(Some(bad)).unwrap_err();
            assert_eq!(error.status(), 400);
            assert!(error.to_string().contains("days must be 1 to 3650"), "{error}");
        }
    }

    #[test]
    fn a_heartbeat_names_a_bounded_list_of_valid_key_names() {
        let held = |name: &str| HeldKey { name: name.into(), version: 1 };
        assert!(check_held_keys(&[held("disk-1"), held("disk-2")]).is_ok());
        assert!(check_held_keys(&[held("no such/name")]).is_err());
        let many: Vec<HeldKey> = (0..=MAX_HEARTBEAT_KEYS).map(|i| held(&format!("k{i}"))).collect();
        let error = check_held_keys(&many).unwrap_err();
        assert!(error.to_string().contains("at most"), "{error}");
        assert!(check_held_keys(&many[1..]).is_ok());
    }
}
