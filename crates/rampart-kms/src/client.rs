//! The admin client library: every request of the API (keys, clients,
//! audit, unseal, console), made over the client crate's transport
//! ([`rampart_kms_client::Transport`]: mutual TLS to the servers of a
//! [`Bundle`], kept-alive connections, failover across endpoints with
//! backoff, TLS refusals not retried). [`ClientError`] and
//! [`RetryPolicy`] are that crate's.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use rampart_crypto::SecretBytes;
pub use rampart_kms_client::transport::Body;
use rampart_kms_client::transport::{decode_secret_field, Method, Transport};
pub use rampart_kms_client::{ClientError, ConfigError, RetryPolicy};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::audit::VerifyReport;
use crate::bundle::Bundle;
use crate::error::KmsError;
use crate::model::{AuditEntry, ClientInfo, KeyInfo, KeyView};
use crate::store::KeyFilter;

/// A client of the key servers named in a bundle, for every API call:
/// the transport of [`rampart_kms_client::Transport`] (which it derefs to,
/// for [`Transport::unwrap`], [`Transport::get_json`] and the raw calls)
/// and the admin requests. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct KmsClient {
    transport: Transport,
}

impl std::fmt::Debug for KmsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let endpoints = self.transport.endpoints();
        f.debug_struct("KmsClient").field("endpoints", &endpoints).finish_non_exhaustive()
    }
}

impl std::ops::Deref for KmsClient {
    type Target = Transport;

    fn deref(&self) -> &Transport {
        &self.transport
    }
}

impl AsRef<Transport> for KmsClient {
    fn as_ref(&self) -> &Transport {
        &self.transport
    }
}

impl From<Transport> for KmsClient {
    fn from(transport: Transport) -> Self {
        Self { transport }
    }
}

impl KmsClient {
    /// A client for `bundle`'s endpoints, with its certificate.
    pub fn new(bundle: &Bundle) -> Result<Self, ClientError> {
        Transport::new(bundle).map(Self::from)
    }

    /// A client that talks only to `endpoint` (for unsealing one server).
    pub fn for_endpoint(bundle: &Bundle, endpoint: &str) -> Result<Self, ClientError> {
        Transport::for_endpoint(bundle, endpoint).map(Self::from)
    }

    pub fn with_policy(bundle: &Bundle, policy: RetryPolicy) -> Result<Self, ClientError> {
        Transport::with_policy(bundle, policy).map(Self::from)
    }

    /// A one-time sign-in code for the web console (admin): the server
    /// that answered is the one the code signs in to.
    pub async fn console_login_code(&self) -> Result<ConsoleLoginCode, ClientError> {
        self.call_json(Method::POST, "/v1/console/login-codes", Some(json!({}))).await
    }

    /// One page of the web console's open sessions on the server that
    /// answers (admin), newest first: `cursor` is the previous page's
    /// `next_cursor` (`None` for the first page); `limit` as the other lists.
    pub async fn console_session_page(
        &self,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<Page<Value>, ClientError> {
        #[derive(Deserialize)]
        struct List {
            sessions: Vec<Value>,
            next_cursor: Option<String>,
        }
        let mut q = Query::default();
        q.add("limit", limit.map(|n| n.to_string()));
        q.add("cursor", cursor);
        let list: List = self.call_json(Method::GET, &q.path("/v1/console/sessions"), None).await?;
        Ok(Page { items: list.sessions, next_cursor: list.next_cursor })
    }

    /// Ends web console session `id` (admin).
    pub async fn end_console_session(&self, id: &str) -> Result<(), ClientError> {
        if id.len() != 16 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(KmsError::invalid("a console session id is 16 hex digits").into());
        }
        let path = format!("/v1/console/sessions/{}/end", id.to_ascii_lowercase());
        let _: Value = self.call_json(Method::POST, &path, Some(json!({}))).await?;
        Ok(())
    }

    /// `GET /v1/health` on the first endpoint that answers (a sealed
    /// server answers 503, reported as an error).
    pub async fn health(&self) -> Result<Value, ClientError> {
        self.call_json(Method::GET, "/v1/health", None).await
    }

    pub async fn seal_status(&self) -> Result<Value, ClientError> {
        self.call_json(Method::GET, "/v1/sys/seal-status", None).await
    }

    /// Gives one share; returns the seal status after it.
    pub async fn unseal(&self, share: &SecretBytes) -> Result<Value, ClientError> {
        let text = std::str::from_utf8(share.expose())
            .map_err(|_| ClientError::from(KmsError::invalid("the share is not text")))?;
        let body = SecretBytes::new(json!({ "share": text.trim() }).to_string().into_bytes());
        let bytes = self
            .call(Method::POST, "/v1/sys/unseal", Body::Json(Bytes::copy_from_slice(body.expose())))
            .await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol {
            endpoint: "unseal".into(),
            message: e.to_string(),
        })
    }

    /// Gives the HSM token's user PIN (a deployment whose root key is in
    /// an HSM); returns the seal status after it.
    pub async fn unseal_pin(&self, pin: &SecretBytes) -> Result<Value, ClientError> {
        let text = std::str::from_utf8(pin.expose())
            .map_err(|_| ClientError::from(KmsError::invalid("the PIN is not text")))?;
        let body = SecretBytes::new(json!({ "pin": text }).to_string().into_bytes());
        let bytes = self
            .call(Method::POST, "/v1/sys/unseal", Body::Json(Bytes::copy_from_slice(body.expose())))
            .await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol {
            endpoint: "unseal".into(),
            message: e.to_string(),
        })
    }

    pub async fn whoami(&self) -> Result<ClientInfo, ClientError> {
        self.call_json(Method::GET, "/v1/whoami", None).await
    }

    pub async fn openapi(&self) -> Result<Value, ClientError> {
        self.call_json(Method::GET, "/v1/openapi.json", None).await
    }

    /// The Prometheus text.
    pub async fn metrics(&self) -> Result<String, ClientError> {
        let bytes = self.call(Method::GET, "/metrics", Body::None).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub async fn create_key(
        &self,
        name: &str,
        allow: &[String],
        exportable: bool,
    ) -> Result<KeyInfo, ClientError> {
        self.call_json(
            Method::POST,
            "/v1/keys",
            Some(json!({ "name": name, "allow": allow, "exportable": exportable })),
        )
        .await
    }

    /// Creates key `name` of `key_type` (`aes-256`, `rsa-2048`, `ec-p256`,
    /// `ed25519`...; a pair's public key is `name`.pub); the key with
    /// its object type.
    pub async fn create_typed_key(
        &self,
        name: &str,
        key_type: &str,
        allow: &[String],
        exportable: bool,
    ) -> Result<KeyView, ClientError> {
        let body =
            json!({ "name": name, "type": key_type, "allow": allow, "exportable": exportable });
        self.call_json(Method::POST, "/v1/keys", Some(body)).await
    }

    /// Key `name` with its object type, algorithm and links.
    pub async fn describe_key(&self, name: &str) -> Result<KeyView, ClientError> {
        self.call_json(Method::GET, &format!("/v1/keys/{}", path_name(name)?), None).await
    }

    /// One page of the key list, each key with its object type.
    pub async fn key_view_page(
        &self,
        query: &KeyQuery,
        cursor: Option<&str>,
    ) -> Result<Page<KeyView>, ClientError> {
        self.keys_page(query, cursor).await
    }

    /// Signs `input` (a message, or with `digest` the caller's digest of
    /// one) with private key `name`; `algorithm` as the server names them
    /// (`ecdsa-sha256`, `rsa-pss-sha256`, `rsa-pkcs1-sha256`, `ed25519`...;
    /// `None`: the key's default). The answer: key, version, algorithm and
    /// `signature` (base64).
    pub async fn sign(
        &self,
        name: &str,
        input: &[u8],
        digest: bool,
        algorithm: Option<&str>,
    ) -> Result<Value, ClientError> {
        let body = signing_body(input, digest, algorithm);
        self.call_json(Method::POST, &format!("/v1/keys/{}/sign", path_name(name)?), Some(body))
            .await
    }

    /// Checks `signature` over `input` with key `name` (a public key, or a
    /// private key's linked public key). The answer's `valid` says
    /// whether it verifies.
    pub async fn verify(
        &self,
        name: &str,
        input: &[u8],
        digest: bool,
        algorithm: Option<&str>,
        signature: &[u8],
    ) -> Result<Value, ClientError> {
        let mut body = signing_body(input, digest, algorithm);
        body["signature"] = json!(B64.encode(signature));
        self.call_json(Method::POST, &format!("/v1/keys/{}/verify", path_name(name)?), Some(body))
            .await
    }

    /// The public key (PEM SubjectPublicKeyInfo) of key `name`: a public
    /// key, a private key's linked public key, or a certificate's key.
    pub async fn public_key(&self, name: &str) -> Result<String, ClientError> {
        let path = format!("/v1/keys/{}/public", path_name(name)?);
        let answer: Value = self.call_json(Method::GET, &path, None).await?;
        answer["public_key"].as_str().map(str::to_owned).ok_or_else(|| ClientError::Protocol {
            endpoint: path,
            message: "no public_key".into(),
        })
    }

    /// Registers an X.509 certificate (PEM, or base64 DER) as `name`
    /// (`None`: the server names it), allowed to `allow` (admin).
    pub async fn register_certificate(
        &self,
        name: Option<&str>,
        certificate: &str,
        allow: &[String],
    ) -> Result<KeyView, ClientError> {
        let mut body = json!({ "certificate": certificate, "allow": allow });
        if let Some(name) = name {
            body["name"] = json!(name);
        }
        self.call_json(Method::POST, "/v1/certificates", Some(body)).await
    }

    /// Certificate `name`: the key fields, `pem`, `subject`, `issuer` and
    /// `not_after`.
    pub async fn get_certificate(&self, name: &str) -> Result<Value, ClientError> {
        self.call_json(Method::GET, &format!("/v1/certificates/{}", path_name(name)?), None).await
    }

    /// One page of the key list: `cursor` is the previous page's
    /// `next_cursor` (`None` for the first page).
    pub async fn key_page(
        &self,
        query: &KeyQuery,
        cursor: Option<&str>,
    ) -> Result<Page<KeyInfo>, ClientError> {
        self.keys_page(query, cursor).await
    }

    /// `GET /v1/keys`, its items read as `T`.
    async fn keys_page<T: serde::de::DeserializeOwned>(
        &self,
        query: &KeyQuery,
        cursor: Option<&str>,
    ) -> Result<Page<T>, ClientError> {
        #[derive(Deserialize)]
        #[serde(bound = "T: serde::de::DeserializeOwned")]
        struct List<T> {
            keys: Vec<T>,
            next_cursor: Option<String>,
        }
        let mut q = Query::default();
        q.add("limit", query.limit.map(|n| n.to_string()));
        q.add("cursor", cursor);
        for (name, value) in query.filter_parameters() {
            q.add(name, value);
        }
        let list: List<T> = self.call_json(Method::GET, &q.path("/v1/keys"), None).await?;
        Ok(Page { items: list.keys, next_cursor: list.next_cursor })
    }

    /// Every key, paging through the list: for small deployments and
    /// tests (it holds them all); walk [`Self::key_page`] to stream.
    pub async fn list_keys(&self) -> Result<Vec<KeyInfo>, ClientError> {
        let query = KeyQuery { limit: Some(crate::store::MAX_PAGE), ..KeyQuery::default() };
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let page = self.key_page(&query, cursor.as_deref()).await?;
            out.extend(page.items);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(out),
            }
        }
    }

    pub async fn get_key(&self, name: &str) -> Result<KeyInfo, ClientError> {
        self.call_json(Method::GET, &format!("/v1/keys/{}", path_name(name)?), None).await
    }

    pub async fn rotate_key(&self, name: &str) -> Result<KeyInfo, ClientError> {
        self.call_json(
            Method::POST,
            &format!("/v1/keys/{}/rotate", path_name(name)?),
            Some(json!({})),
        )
        .await
    }

    pub async fn revoke_key(
        &self,
        name: &str,
        reason: &str,
        version: Option<u32>,
    ) -> Result<KeyInfo, ClientError> {
        let body = json!({ "reason": reason, "version": version });
        self.call_json(Method::POST, &format!("/v1/keys/{}/revoke", path_name(name)?), Some(body))
            .await
    }

    pub async fn destroy_key(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<KeyInfo, ClientError> {
        let body = json!({ "version": version });
        self.call_json(Method::POST, &format!("/v1/keys/{}/destroy", path_name(name)?), Some(body))
            .await
    }

    /// Wraps `plaintext` under the key's newest version; returns the
    /// ciphertext text.
    pub async fn wrap(
        &self,
        name: &str,
        plaintext: &[u8],
        context: &[u8],
    ) -> Result<String, ClientError> {
        #[derive(Deserialize)]
        struct Wrapped {
            ciphertext: String,
        }
        let encoded = SecretBytes::new(B64.encode(plaintext).into_bytes());
        let text = std::str::from_utf8(encoded.expose()).unwrap_or_default();
        let body = SecretBytes::new(
            json!({ "plaintext": text, "context": B64.encode(context) }).to_string().into_bytes(),
        );
        let path = format!("/v1/keys/{}/wrap", path_name(name)?);
        let bytes = self
            .call(Method::POST, &path, Body::Json(Bytes::copy_from_slice(body.expose())))
            .await?;
        let wrapped: Wrapped = serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::Protocol { endpoint: path, message: e.to_string() })?;
        Ok(wrapped.ciphertext)
    }

    /// The raw material of an exportable key version (the newest when
    /// `None`).
    pub async fn export_key(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<(u32, SecretBytes), ClientError> {
        let path = format!("/v1/keys/{}/export", path_name(name)?);
        let bytes = self
            .call(
                Method::POST,
                &path,
                Body::Json(Bytes::from(json!({ "version": version }).to_string())),
            )
            .await?;
        let version = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v["version"].as_u64())
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| ClientError::Protocol {
                endpoint: path.clone(),
                message: "no version".into(),
            })?;
        Ok((version, decode_secret_field(&bytes, "material", &path)?))
    }

    /// Issues a bundle for a new client: the key pair is made here, only
    /// the CSR goes to the server. The bundle lists this client's
    /// endpoints.
    pub async fn issue_client(
        &self,
        name: &str,
        labels: &crate::model::Labels,
        admin: bool,
        days: Option<u32>,
        endpoints: Vec<String>,
    ) -> Result<Bundle, ClientError> {
        #[derive(Deserialize)]
        struct Issued {
            certificate: String,
            ca_certificate: String,
        }
        crate::model::check_name("client name", name)?;
        let (csr, key) = crate::pki::client_request(name)?;
        let body =
            json!({ "name": name, "labels": labels, "admin": admin, "csr": csr, "days": days });
        let issued: Issued = self.call_json(Method::POST, "/v1/clients", Some(body)).await?;
        Ok(Bundle {
            format: crate::bundle::BUNDLE_FORMAT.into(),
            name: name.to_owned(),
            endpoints,
            ca_cert: issued.ca_certificate,
            cert: issued.certificate,
            key,
        })
    }

    /// Revokes client `name`: its certificate is refused from then on.
    pub async fn revoke_client(&self, name: &str, reason: &str) -> Result<ClientInfo, ClientError> {
        crate::model::check_name("client name", name)?;
        self.call_json(
            Method::POST,
            &format!("/v1/clients/{name}/revoke"),
            Some(json!({ "reason": reason })),
        )
        .await
    }

    /// Replaces client `name`'s labels.
    pub async fn relabel_client(
        &self,
        name: &str,
        labels: &crate::model::Labels,
    ) -> Result<ClientInfo, ClientError> {
        crate::model::check_name("client name", name)?;
        self.call_json(
            Method::POST,
            &format!("/v1/clients/{name}/labels"),
            Some(json!({ "labels": labels })),
        )
        .await
    }

    /// Asks whether this client may still hold `keys` (a serving host's
    /// heartbeat); one verdict per key.
    pub async fn heartbeat(
        &self,
        keys: &[crate::model::HeldKey],
    ) -> Result<Vec<crate::model::HeartbeatVerdict>, ClientError> {
        #[derive(Deserialize)]
        struct Answer {
            keys: Vec<crate::model::HeartbeatVerdict>,
        }
        let answer: Answer =
            self.call_json(Method::POST, "/v1/heartbeat", Some(json!({ "keys": keys }))).await?;
        Ok(answer.keys)
    }

    /// One page of the client list.
    pub async fn client_page(
        &self,
        query: &ClientQuery,
        cursor: Option<&str>,
    ) -> Result<Page<ClientInfo>, ClientError> {
        #[derive(Deserialize)]
        struct List {
            clients: Vec<ClientInfo>,
            next_cursor: Option<String>,
        }
        let flag = |b: Option<bool>| b.map(|b| if b { "true" } else { "false" });
        let mut q = Query::default();
        q.add("limit", query.limit.map(|n| n.to_string()));
        q.add("cursor", cursor);
        q.add("prefix", query.prefix.as_deref());
        q.add("label", query.label.as_deref());
        q.add("admin", flag(query.admin));
        q.add("revoked", flag(query.revoked));
        let list: List = self.call_json(Method::GET, &q.path("/v1/clients"), None).await?;
        Ok(Page { items: list.clients, next_cursor: list.next_cursor })
    }

    /// Every client, paging through the list (it holds them all); walk
    /// [`Self::client_page`] to stream.
    pub async fn list_clients(&self) -> Result<Vec<ClientInfo>, ClientError> {
        let query = ClientQuery { limit: Some(crate::store::MAX_PAGE), ..ClientQuery::default() };
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let page = self.client_page(&query, cursor.as_deref()).await?;
            out.extend(page.items);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(out),
            }
        }
    }

    /// One page of the audit list.
    pub async fn audit_list_page(
        &self,
        query: &AuditQuery,
        cursor: Option<&str>,
    ) -> Result<Page<AuditEntry>, ClientError> {
        #[derive(Deserialize)]
        struct List {
            entries: Vec<AuditEntry>,
            next_cursor: Option<String>,
        }
        let mut q = Query::default();
        q.add("limit", query.limit.map(|n| n.to_string()));
        q.add("cursor", cursor);
        q.add("since_ms", query.since_ms.map(|t| t.to_string()));
        q.add("until_ms", query.until_ms.map(|t| t.to_string()));
        q.add("client", query.client.as_deref());
        q.add("key", query.key.as_deref());
        q.add("operation", query.operation.as_deref());
        q.add("outcome", query.outcome.as_deref());
        let list: List = self.call_json(Method::GET, &q.path("/v1/audit"), None).await?;
        Ok(Page { items: list.entries, next_cursor: list.next_cursor })
    }

    /// Every audit entry after `after_seq` (and at or after `since_ms`).
    pub async fn audit(&self, since_ms: Option<i64>) -> Result<Vec<AuditEntry>, ClientError> {
        #[derive(Deserialize)]
        struct Page {
            entries: Vec<AuditEntry>,
        }
        const PAGE: usize = 5000;
        let mut out = Vec::new();
        let mut after = 0u64;
        loop {
            let mut path = format!("/v1/audit?after_seq={after}&limit={PAGE}");
            if let Some(since) = since_ms {
                path.push_str(&format!("&since_ms={since}"));
            }
            let page: Page = self.call_json(Method::GET, &path, None).await?;
            // Each page request is audited too: stop at a short page
            // rather than chase the entries our own requests add.
            let full = page.entries.len() >= PAGE;
            let Some(last) = page.entries.last() else { break };
            after = last.seq;
            out.extend(page.entries);
            if !full {
                break;
            }
        }
        Ok(out)
    }

    pub async fn audit_verify(&self) -> Result<VerifyReport, ClientError> {
        self.call_json(Method::POST, "/v1/audit/verify", None).await
    }

    /// Verifies only what follows the last checkpoint (the anchor, or the
    /// first entry, when there is none).
    pub async fn audit_verify_from_checkpoint(&self) -> Result<VerifyReport, ClientError> {
        self.call_json(Method::POST, "/v1/audit/verify?from=checkpoint", None).await
    }

    /// One page of an export: entries after `after_seq` (the anchor when
    /// `None`) up to `until`.
    pub async fn audit_export_page(
        &self,
        until: AuditUntil,
        after_seq: Option<u64>,
        limit: u32,
    ) -> Result<AuditExportPage, ClientError> {
        let mut path = match until {
            AuditUntil::Seq(seq) => format!("/v1/audit/export?until_seq={seq}&limit={limit}"),
            AuditUntil::TimeMs(ms) => format!("/v1/audit/export?until_ms={ms}&limit={limit}"),
        };
        if let Some(after) = after_seq {
            path.push_str(&format!("&after_seq={after}"));
        }
        self.call_json(Method::GET, &path, None).await
    }

    /// Records a completed export of the entries after `after_seq` up to
    /// `until_seq` (whose hash is `until_hash`): pruning needs one.
    pub async fn audit_exported(
        &self,
        after_seq: u64,
        until_seq: u64,
        until_hash: &str,
    ) -> Result<Value, ClientError> {
        let body =
            json!({ "after_seq": after_seq, "until_seq": until_seq, "until_hash": until_hash });
        self.call_json(Method::POST, "/v1/audit/exports", Some(body)).await
    }

    /// Writes the entries from the anchor up to `until` to `out` as an
    /// export (see [`crate::audit::verify_export`] for the format), page
    /// by page, so memory does not grow with the log. The export is not
    /// recorded: once `out` is safely stored, call [`Self::audit_exported`]
    /// with the summary.
    pub async fn audit_export(
        &self,
        until: AuditUntil,
        out: &mut impl std::io::Write,
    ) -> Result<AuditExportSummary, ClientError> {
        const PAGE: u32 = 5000;
        let io = |e: std::io::Error| {
            ClientError::from(KmsError::Store(format!("cannot write the export: {e}")))
        };
        let first = self.audit_export_page(until, None, PAGE).await?;
        let header = crate::audit::ExportHeader {
            format: crate::audit::EXPORT_FORMAT.into(),
            version: 1,
            anchor_seq: first.anchor_seq,
            anchor_hash: first.anchor_hash.clone(),
            first_seq: first.anchor_seq + 1,
            last_seq: first.until_seq,
            exported_ms: crate::model::now_ms(),
        };
        let line = |value: &dyn erased::Line| value.line();
        out.write_all(&line(&header)).map_err(io)?;
        let until = AuditUntil::Seq(first.until_seq);
        let mut summary = AuditExportSummary {
            anchor_seq: first.anchor_seq,
            anchor_hash: first.anchor_hash.clone(),
            until_seq: first.until_seq,
            until_hash: first.until_hash.clone(),
            entries: 0,
        };
        let mut last: Option<(u64, String)> = None;
        let mut page = first;
        loop {
            for entry in &page.entries {
                out.write_all(&line(entry)).map_err(io)?;
                summary.entries += 1;
                last = Some((entry.seq, entry.hash.clone()));
            }
            match page.next_after_seq {
                Some(after) if !page.entries.is_empty() => {
                    page = self.audit_export_page(until, Some(after), PAGE).await?;
                }
                _ => break,
            }
        }
        if last.as_ref().map(|(seq, hash)| (*seq, hash.as_str()))
            != Some((summary.until_seq, summary.until_hash.as_str()))
        {
            return Err(ClientError::Protocol {
                endpoint: "/v1/audit/export".into(),
                message: format!(
                    "the export ended at entry {} instead of {}",
                    last.map_or(summary.anchor_seq, |(seq, _)| seq),
                    summary.until_seq
                ),
            });
        }
        Ok(summary)
    }

    /// Removes the entries up to `until_seq` (exported before); returns
    /// how many went and the new anchor.
    pub async fn audit_prune(&self, until_seq: u64) -> Result<AuditPruned, ClientError> {
        let body = json!({ "until_seq": until_seq });
        self.call_json(Method::POST, "/v1/audit/prune", Some(body)).await
    }
}

/// Where an export ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditUntil {
    /// At this entry.
    Seq(u64),
    /// At the newest entry stamped at or before this time (Unix ms).
    TimeMs(i64),
}

/// A page of `GET /v1/audit/export`.
#[derive(Debug, Clone, Deserialize)]
pub struct AuditExportPage {
    pub anchor_seq: u64,
    pub anchor_hash: String,
    pub until_seq: u64,
    pub until_hash: String,
    pub entries: Vec<crate::audit::ExportedEntry>,
    pub next_after_seq: Option<u64>,
}

/// What [`KmsClient::audit_export`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AuditExportSummary {
    pub anchor_seq: u64,
    pub anchor_hash: String,
    pub until_seq: u64,
    pub until_hash: String,
    pub entries: u64,
}

/// One JSON line of an export.
mod erased {
    pub(super) trait Line {
        fn line(&self) -> Vec<u8>;
    }

    impl<T: serde::Serialize> Line for T {
        fn line(&self) -> Vec<u8> {
            // Plain structs of strings and numbers always serialise.
            let mut bytes = serde_json::to_vec(self).unwrap_or_default();
            bytes.push(b'\n');
            bytes
        }
    }
}

/// The answer of `POST /v1/audit/prune`.
#[derive(Debug, Clone, Deserialize)]
pub struct AuditPruned {
    pub removed: u64,
    pub anchor: crate::audit::Mark,
}

/// One page of a list, and the cursor of the next (`None` at the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// Filters and page size of the key list; `None` fields do not filter.
/// The filters are the text of a [`KeyFilter`] (which says what they
/// mean), sent as given so that the server judges them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyQuery {
    /// Names starting with this.
    pub prefix: Option<String>,
    /// One of [`KeyFilter::STATES`]: the newest version's state.
    pub state: Option<String>,
    /// Keys whose policy holds this selector (`client:NAME`, `label:K=V`).
    pub selector: Option<String>,
    /// Items per page (server default 100, at most 10,000).
    pub limit: Option<u32>,
}

impl KeyQuery {
    /// The query for the keys `filter` lets through, `limit` per page.
    #[must_use]
    pub fn from_filter(filter: &KeyFilter, limit: Option<u32>) -> Self {
        Self {
            prefix: filter.prefix.clone(),
            state: filter.state.map(str::to_owned),
            selector: filter.selector.as_ref().map(ToString::to_string),
            limit,
        }
    }

    /// The filter parameters this query sends ([`KeyFilter::PARAMETERS`]).
    fn filter_parameters(&self) -> [(&'static str, Option<&str>); 3] {
        let [prefix, state, selector] = KeyFilter::PARAMETERS;
        [
            (prefix, self.prefix.as_deref()),
            (state, self.state.as_deref()),
            (selector, self.selector.as_deref()),
        ]
    }
}

/// Filters and page size of the client list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientQuery {
    pub prefix: Option<String>,
    /// `KEY=VALUE`: clients carrying this label.
    pub label: Option<String>,
    pub admin: Option<bool>,
    pub revoked: Option<bool>,
    pub limit: Option<u32>,
}

/// Filters and page size of the audit list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// At or after (Unix milliseconds).
    pub since_ms: Option<i64>,
    /// Before (Unix milliseconds).
    pub until_ms: Option<i64>,
    pub client: Option<String>,
    pub key: Option<String>,
    pub operation: Option<String>,
    pub outcome: Option<String>,
    pub limit: Option<u32>,
}

/// A query string, values percent-encoded.
#[derive(Default)]
struct Query(String);

impl Query {
    fn add<V: AsRef<str>>(&mut self, name: &str, value: Option<V>) {
        let Some(value) = value else { return };
        self.0.push(if self.0.is_empty() { '?' } else { '&' });
        self.0.push_str(name);
        self.0.push('=');
        for b in value.as_ref().bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                self.0.push(char::from(b));
            } else {
                self.0.push_str(&format!("%{b:02X}"));
            }
        }
    }

    fn path(&self, base: &str) -> String {
        format!("{base}{}", self.0)
    }
}

fn path_name(name: &str) -> Result<&str, ClientError> {
    crate::model::check_name("key name", name)?;
    Ok(name)
}

/// A one-time sign-in code for the web console.
#[derive(Debug, Clone, Deserialize)]
pub struct ConsoleLoginCode {
    /// The URL to open in a browser (from the `Host` the server was
    /// asked under).
    #[serde(default)]
    pub url: Option<String>,
    /// The URL's path, to put after `https://HOST:PORT`.
    pub path: String,
    /// A short public name of the code (in the audit log).
    pub id: String,
    /// Unix milliseconds after which the code is refused.
    pub expires_ms: i64,
}

/// The body of a sign or verify request: the message (or, with `digest`,
/// the caller's digest of one) in base64, and the algorithm if named.
fn signing_body(input: &[u8], digest: bool, algorithm: Option<&str>) -> Value {
    let field = if digest { "digest" } else { "message" };
    let mut body = json!({ field: B64.encode(input) });
    if let Some(a) = algorithm {
        body["algorithm"] = json!(a);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signing_body_names_the_message_or_the_digest() {
        let body = signing_body(b"hi", false, Some("ed25519"));
        assert_eq!(body, json!({ "message": "aGk=", "algorithm": "ed25519" }));
        assert_eq!(signing_body(b"hi", true, None), json!({ "digest": "aGk=" }));
    }
}
