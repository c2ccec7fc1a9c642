//! One client's KMIP session over a batch: loading objects, the access
//! checks (the service's, shared with the REST API), the store writes and
//! the key material every operation needs.

use std::sync::Arc;

use rampart_crypto::SecretBytes;
use rampart_kmip::message::ProtocolVersion;
use rampart_kmip::KmipError;

use super::errors::{kms, R};
use super::object::{parse_uid, Obj};
use super::stream_table::Streams;
use super::undo::UndoLog;
use crate::model::{ClientInfo, KeyVersionInfo};
use crate::server::service::access;
use crate::server::state::State;
use crate::store::KmipObject;

/// One client's KMIP session over one batch: whom it acts for, and what
/// the audit entry of the current batch item names.
pub(crate) struct Session<'a> {
    pub state: &'a State,
    pub client: &'a ClientInfo,
    pub version: ProtocolVersion,
    /// The ID Placeholder: the object the previous batch item named.
    pub placeholder: Option<String>,
    /// The key and version the current batch item touched, for its audit entry.
    pub touched: Option<(String, Option<u32>)>,
    /// What the audit entry of the current batch item records instead of
    /// its bare outcome (a client's Log Message, an Interop test step).
    pub note: Option<String>,
    /// The connection's open Hash and MAC streams.
    pub streams: &'a mut Streams,
    /// Under Batch Error Continuation Undo: what undoing the batch restores.
    pub undo: Option<UndoLog>,
}

impl Session<'_> {
    pub(super) fn uid(&self, given: Option<&String>) -> R<String> {
        given.cloned().or_else(|| self.placeholder.clone()).ok_or_else(|| {
            KmipError::MissingData("Unique Identifier (and no ID Placeholder)".into())
        })
    }

    /// The object `uid`, without its stored attributes (what Get and the
    /// life-cycle operations need: one store read fewer).
    pub(super) async fn load(&mut self, uid: &str) -> R<Obj> {
        self.load_object(uid, false).await
    }

    /// The object `uid` with its stored attributes.
    pub(super) async fn load_with_attributes(&mut self, uid: &str) -> R<Obj> {
        self.load_object(uid, true).await
    }

    pub(super) async fn load_object(&mut self, uid: &str, with_attributes: bool) -> R<Obj> {
        let result = self.load_found(uid, with_attributes).await;
        match result {
            // KMIP 2.x names a missing object Object Not Found (2.1 §11).
            Err(KmipError::ItemNotFound(why)) => Err(KmipError::ObjectNotFound(why)),
            other => other,
        }
    }

    async fn load_found(&mut self, uid: &str, with_attributes: bool) -> R<Obj> {
        let (name, version) = parse_uid(uid)?;
        self.touched = Some((name.clone(), Some(version)));
        self.remember(&name).await?;
        let view = self
            .state
            .store
            .kmip_view(name, version, with_attributes)
            .await
            .map_err(kms)?
            .ok_or_else(|| KmipError::ItemNotFound(format!("object {uid}")))?;
        let key = view.key.clone();
        let version_info = key
            .versions
            .iter()
            .find(|v| v.version == version)
            .cloned()
            .ok_or_else(|| KmipError::ItemNotFound(format!("object {uid}")))?;
        let mut kmip = view.object.clone();
        let source = kmip.as_ref().map(|k| k.version);
        if let Some(k) = kmip.as_mut() {
            inherit_object(k, &version_info);
        }
        let stored = if source.is_some() { view.attributes.clone() } else { Vec::new() };
        let sealed = Some(view.material.clone());
        Ok(Obj { key, version: version_info, kmip, source, stored, sealed })
    }

    /// Under Undo, before the batch first changes key `name`: its state.
    pub(super) async fn remember(&mut self, name: &str) -> R<()> {
        match self.undo.as_mut() {
            Some(log) => log.remember(self.state.store.as_ref(), name).await,
            None => Ok(()),
        }
    }

    /// Under Undo, the batch made key `name`: undoing removes it.
    pub(super) fn made(&mut self, name: &str) {
        if let Some(log) = self.undo.as_mut() {
            log.made(name);
        }
    }

    /// Puts back what the batch changed and removes what it made
    /// (Batch Error Continuation Undo; nothing without it).
    pub(crate) async fn undo(&mut self) -> R<()> {
        match self.undo.take() {
            Some(log) => log.undo(self.state.store.as_ref()).await,
            None => Ok(()),
        }
    }

    pub(super) fn require_visible(&self, obj: &Obj) -> R<()> {
        access::require_visible(self.client, &obj.key.name, &obj.key.allow).map_err(kms)
    }

    pub(super) fn require_use(&self, obj: &Obj) -> R<()> {
        access::require_use(self.client, &obj.key.name, &obj.key.allow).map_err(kms)
    }

    pub(super) fn require_manage(&self, obj: &Obj) -> R<()> {
        access::require_manage(self.client, &obj.key.name, &obj.key.allow, obj.owner()).map_err(kms)
    }

    /// Adds `links` to `obj`'s Link attribute, after those it has.
    pub(super) async fn add_links(&self, obj: &Obj, links: Vec<String>) -> R<()> {
        let mut all: Vec<String> =
            obj.stored.iter().filter(|a| a.name == "Link").map(|a| a.value.clone()).collect();
        all.extend(links);
        let version = obj.version.version;
        let inherit = obj.source.filter(|s| *s != version);
        self.state
            .store
            .kmip_set_attribute(obj.key.name.clone(), version, "Link".into(), all, inherit)
            .await
            .map_err(kms)
    }

    /// Stores `obj`'s KMIP object; a version that showed an older one's
    /// attributes (a REST rotation added it) keeps a copy of them.
    pub(super) async fn put_object(&self, obj: &Obj, kmip: KmipObject) -> R<()> {
        let inherit = obj.source.filter(|s| *s != kmip.version);
        self.state.store.kmip_put_object(kmip, inherit).await.map_err(kms)
    }

    /// The key version's material (policy and destruction checked by the
    /// store read and here).
    pub(super) async fn material(&self, obj: &Obj) -> R<SecretBytes> {
        let root = self.state.require_root().map_err(kms)?;
        let sealed = self.sealed_material(obj).await?;
        root.open_material(&obj.key.name, obj.version.version, &sealed).map_err(kms)
    }

    /// The key version's material sealed, as the store holds it: as read
    /// with the object, else read now. A destroyed version has none.
    pub(super) async fn sealed_material(&self, obj: &Obj) -> R<Arc<[u8]>> {
        let sealed = match &obj.sealed {
            Some(sealed) => sealed.clone(),
            None => self
                .state
                .store
                .key_material(obj.key.name.clone(), Some(obj.version.version))
                .await
                .map_err(kms)?
                .ok_or_else(|| KmipError::ItemNotFound(format!("object {}", obj.uid())))?
                .material
                .as_deref()
                .map(Arc::from),
        };
        sealed.ok_or_else(|| KmipError::ObjectDestroyed(format!("object {}", obj.uid())))
    }
}

/// A version added by a REST rotation shows the KMIP object of the newest
/// older version that has one: its type and owner, active from its own
/// creation.
pub(super) fn inherit_object(object: &mut KmipObject, version: &KeyVersionInfo) {
    if object.version != version.version {
        object.version = version.version;
        object.activation_ms = Some(version.created_ms);
        object.deactivation_ms = None;
        object.compromise_occurrence_ms = None;
        object.compromised = false;
    }
}
