//! Obtain Lease (KMIP 1.4 §4.17, 2.1 §6.1.35): a new lease of
//! [`LEASE_SECONDS`] on an object a client may use, with its Last Change
//! Date so the client can tell whether its cached attributes are stale.
//! The lease is what the Lease Time attribute says; a destroyed object
//! gets none.

use rampart_kmip::enums::State as KState;
use rampart_kmip::payload::ObjectRequest;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};
use rampart_kmip::KmipError;

use super::errors::R;
use super::server_attributes::LEASE_SECONDS;
use super::session::Session;
use crate::model::now_ms;

impl Session<'_> {
    pub(super) async fn obtain_lease(&mut self, request: &ObjectRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load(&uid).await?;
        self.require_use(&obj)?;
        let now = now_ms();
        if matches!(obj.state(now), KState::DESTROYED | KState::DESTROYED_COMPROMISED) {
            return Err(KmipError::WrongKeyLifecycleState(format!(
                "object {uid} is destroyed: no lease"
            )));
        }
        let last = obj
            .attributes(now)
            .into_iter()
            .find(|a| a.name == "Last Change Date")
            .and_then(|a| a.value)
            .and_then(|v| v.as_date_time().ok())
            .ok_or_else(|| KmipError::GeneralFailure(format!("object {uid} has no dates")))?;
        Ok(vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            Item::new(Tag::LEASE_TIME, Value::Interval(LEASE_SECONDS)),
            Item::date_time(Tag::LAST_CHANGE_DATE, last),
        ])
    }
}
