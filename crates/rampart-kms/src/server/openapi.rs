//! The OpenAPI 3 document the server serves at `/v1/openapi.json`.

use serde_json::{json, Value};

/// The error responses of an operation: `codes`, and 429, which any
/// request may get when its client exceeds its rate limit.
fn error_responses(codes: &[u16]) -> Value {
    let mut out = serde_json::Map::new();
    for code in codes.iter().chain(&[429]) {
        let description = match code {
            400 => "Invalid request (bad field, bad JSON, a ciphertext that does not authenticate)",
            401 => "The client certificate is not registered",
            403 => "Not allowed (policy, admin certificate required, key revoked, unseal failed)",
            404 => "No such key, version or endpoint",
            405 => "Method not allowed",
            409 => "Already exists or concurrently changed",
            410 => "The key version was destroyed",
            413 => "Request body too large",
            429 => "The client certificate's rate limit is exceeded; retry after the Retry-After header's seconds",
            503 => "Sealed, or the store or audit log is unavailable",
            _ => "Error",
        };
        out.insert(
            code.to_string(),
            json!({ "description": description, "content": { "application/json": {
                "schema": { "$ref": "#/components/schemas/Error" } } } }),
        );
    }
    Value::Object(out)
}

fn ok(description: &str, schema: &str, extra: &[u16]) -> Value {
    let mut responses = error_responses(extra);
    if let Value::Object(map) = &mut responses {
        map.insert(
            "200".into(),
            json!({ "description": description, "content": { "application/json": {
                "schema": { "$ref": format!("#/components/schemas/{schema}") } } } }),
        );
    }
    responses
}

fn created(description: &str, schema: &str, extra: &[u16]) -> Value {
    let mut responses = error_responses(extra);
    if let Value::Object(map) = &mut responses {
        map.insert(
            "201".into(),
            json!({ "description": description, "content": { "application/json": {
                "schema": { "$ref": format!("#/components/schemas/{schema}") } } } }),
        );
    }
    responses
}

/// The responses of a paged list: the 400 names what a list refuses.
fn list_ok(description: &str, schema: &str) -> Value {
    let mut responses = ok(description, schema, &[400, 401, 403, 405, 503]);
    if let Value::Object(map) = &mut responses {
        map.insert(
            "400".into(),
            json!({ "description": "A limit out of 1 to 10000, a cursor that is malformed, altered, from another list or given with other filters, or a bad filter value",
                    "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }),
        );
    }
    responses
}

/// `limit` and `cursor`, which every list takes, then its filters.
fn list_params(filters: Value) -> Value {
    let mut params = vec![
        json!({ "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 10000, "default": 100 },
                "description": "Items in this page" }),
        json!({ "name": "cursor", "in": "query", "schema": { "type": "string", "maxLength": 512 },
                "description": "The next_cursor of the previous page, unchanged, with the same filters; absent for the first page. Pages are in a fixed order and stable under concurrent changes: a walk returns every item that exists throughout exactly once" }),
    ];
    if let Value::Array(filters) = filters {
        params.extend(filters);
    }
    Value::Array(params)
}

fn prefix_param() -> Value {
    json!({ "name": "prefix", "in": "query", "schema": { "type": "string", "pattern": "^[A-Za-z0-9._-]{0,128}$" },
            "description": "Only names starting with this" })
}

fn body(schema: &str, required: bool) -> Value {
    json!({ "required": required, "content": { "application/json": {
        "schema": { "$ref": format!("#/components/schemas/{schema}") } } } })
}

fn name_param() -> Value {
    json!([{ "name": "name", "in": "path", "required": true,
             "schema": { "$ref": "#/components/schemas/Name" } }])
}

/// The document.
#[must_use]
pub fn openapi_document() -> Value {
    const ADMIN: &[u16] = &[400, 401, 403, 404, 405, 413, 503];
    const DATA: &[u16] = &[400, 401, 403, 404, 405, 410, 413, 503];
    json!({
      "openapi": "3.0.3",
      "info": {
        "title": "Rampart KMS",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Rampart's key management server. HTTPS with TLS 1.3 only; every request needs a client certificate issued by the deployment CA and registered with the server. Admin operations need an admin certificate; wrap, unwrap and export need a client matching one of the key's `allow` selectors. Every request that reveals a key, is refused, or changes a policy or a state, and every admin request, is appended to a hash-chained audit log; health checks, status reads and unchanged heartbeats are only counted. A sealed server answers only /v1/health, /v1/sys/seal-status and /v1/sys/unseal."
      },
      "servers": [{ "url": "https://127.0.0.1:8443" }],
      "paths": {
        "/v1/health": { "get": { "operationId": "health", "summary": "Liveness for load balancers (200 unsealed, 503 sealed)",
            "responses": {
              "200": { "description": "Serving", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Health" } } } },
              "429": error_responses(&[])["429"],
              "503": { "description": "Sealed", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Health" } } } } } } },
        "/v1/openapi.json": { "get": { "operationId": "openapi", "summary": "This document",
            "responses": { "200": { "description": "OpenAPI 3 document", "content": { "application/json": { "schema": { "type": "object" } } } },
                           "429": error_responses(&[])["429"],
                           "503": error_responses(&[503])["503"] } } },
        "/metrics": { "get": { "operationId": "metrics", "summary": "Prometheus metrics: requests by operation and outcome, latency histograms, operations per client and per key, heartbeats of serving hosts (docs/src/metrics.md)",
            "responses": { "200": { "description": "Prometheus text format 0.0.4", "content": { "text/plain": { "schema": { "type": "string" } } } },
                           "429": error_responses(&[])["429"],
                           "503": error_responses(&[503])["503"] } } },
        "/v1/sys/seal-status": { "get": { "operationId": "sealStatus", "summary": "Whether the server is sealed, and unseal progress",
            "responses": ok("Seal status", "SealStatus", &[401, 503]) } },
        "/v1/sys/unseal": { "post": { "operationId": "unseal", "summary": "Give one Shamir share, or the HSM token's user PIN (admin)",
            "requestBody": body("UnsealRequest", true),
            "responses": ok("Seal status after this share", "SealStatus", ADMIN) } },
        "/v1/whoami": { "get": { "operationId": "whoami", "summary": "The calling client's registration",
            "responses": ok("The client", "Client", &[401, 503]) } },
        "/v1/keys": {
          "get": { "operationId": "listKeys", "summary": "A page of keys in name order (admin)",
            "parameters": list_params(json!([
              prefix_param(),
              { "name": "state", "in": "query", "schema": { "type": "string", "enum": ["active", "revoked", "destroyed"] }, "description": "Only keys whose newest version is in this state" },
              { "name": "selector", "in": "query", "schema": { "$ref": "#/components/schemas/Selector" }, "description": "Only keys whose policy holds this selector" } ])),
            "responses": list_ok("A page of keys", "KeyList") },
          "post": { "operationId": "createKey", "summary": "Create a key with version 1 (admin)",
            "requestBody": body("CreateKeyRequest", true), "responses": created("The new key (for a key pair, the private key, linked to its public key NAME.pub)", "Key", &[400, 401, 403, 405, 409, 413, 503]) } },
        "/v1/keys/{name}": { "parameters": name_param(),
          "get": { "operationId": "showKey", "summary": "A key, its object type and algorithm, and its versions (admin)", "responses": ok("The key", "Key", ADMIN) } },
        "/v1/keys/{name}/sign": { "parameters": name_param(),
          "post": { "operationId": "sign", "summary": "Sign a message (or its digest) with a private key: the key's allow rules, usage mask, state and dates are checked as for KMIP Sign (policy)",
            "requestBody": body("SignRequest", true), "responses": ok("The signature", "SignResponse", DATA) } },
        "/v1/keys/{name}/verify": { "parameters": name_param(),
          "post": { "operationId": "verify", "summary": "Check a signature with a public key, or with a private key's linked public key; a signature that does not verify is a 200 with valid false (policy)",
            "requestBody": body("VerifyRequest", true), "responses": ok("The verdict", "VerifyResponse", DATA) } },
        "/v1/keys/{name}/public": { "parameters": name_param(),
          "get": { "operationId": "publicKey", "summary": "The public key (PEM SubjectPublicKeyInfo) of a public key, of a private key's linked public key, or of a certificate (admin, or a client the key allows)",
            "responses": ok("The public key", "PublicKeyResponse", DATA) } },
        "/v1/certificates": {
          "post": { "operationId": "registerCertificate", "summary": "Register an X.509 certificate as a key object of type certificate, active from now; listed and shown by /v1/keys (admin)",
            "requestBody": body("CertificateRequest", true), "responses": created("The certificate as a key", "Key", &[400, 401, 403, 405, 409, 413, 503]) } },
        "/v1/certificates/{name}": { "parameters": name_param(),
          "get": { "operationId": "showCertificate", "summary": "A registered certificate, PEM, with its subject, issuer and expiry (admin, or a client the certificate allows)",
            "responses": ok("The certificate", "CertificateResponse", DATA) } },
        "/v1/keys/{name}/rotate": { "parameters": name_param(),
          "post": { "operationId": "rotateKey", "summary": "Add a new version; new wraps use it, old versions still unwrap (admin)",
            "requestBody": body("Empty", false), "responses": ok("The key", "Key", &[400, 401, 403, 404, 405, 409, 413, 503]) } },
        "/v1/keys/{name}/revoke": { "parameters": name_param(),
          "post": { "operationId": "revokeKey", "summary": "Revoke one or all versions: no more wrap or unwrap (admin)",
            "requestBody": body("RevokeRequest", true), "responses": ok("The key", "Key", ADMIN) } },
        "/v1/keys/{name}/destroy": { "parameters": name_param(),
          "post": { "operationId": "destroyKey", "summary": "Erase the material of one or all versions, irreversibly (admin)",
            "requestBody": body("VersionRequest", false), "responses": ok("The key", "Key", ADMIN) } },
        "/v1/keys/{name}/wrap": { "parameters": name_param(),
          "post": { "operationId": "wrap", "summary": "Encrypt up to 64 KiB under the newest version (policy)",
            "requestBody": body("WrapRequest", true), "responses": ok("The ciphertext", "WrapResponse", DATA) } },
        "/v1/keys/{name}/unwrap": { "parameters": name_param(),
          "post": { "operationId": "unwrap", "summary": "Decrypt a ciphertext of any active version (policy)",
            "requestBody": body("UnwrapRequest", true), "responses": ok("The plaintext", "UnwrapResponse", DATA) } },
        "/v1/keys/{name}/export": { "parameters": name_param(),
          "post": { "operationId": "exportKey", "summary": "The material of an exportable key in its stored form (a private key's PKCS#8, a public key's SubjectPublicKeyInfo, a certificate's DER, with PEM; the raw bytes of the rest; split keys are refused) (policy)",
            "requestBody": body("VersionRequest", false), "responses": ok("The material", "ExportResponse", DATA) } },
        "/v1/clients": {
          "get": { "operationId": "listClients", "summary": "A page of registered clients in name order (admin)",
            "parameters": list_params(json!([
              prefix_param(),
              { "name": "label", "in": "query", "schema": { "type": "string", "pattern": "^[a-z0-9._-]{1,64}=[A-Za-z0-9._-]{0,128}$" }, "description": "Only clients carrying this label, KEY=VALUE" },
              { "name": "admin", "in": "query", "schema": { "type": "boolean" }, "description": "Only admin (true) or only non-admin (false) clients" },
              { "name": "revoked", "in": "query", "schema": { "type": "boolean" }, "description": "Only revoked (true) or only unrevoked (false) clients" } ])),
            "responses": list_ok("A page of clients", "ClientList") },
          "post": { "operationId": "issueClient", "summary": "Sign a client certificate from a CSR and register the client (admin)",
            "requestBody": body("IssueClientRequest", true), "responses": created("The certificate", "IssueClientResponse", &[400, 401, 403, 405, 409, 413, 503]) } },
        "/v1/clients/{name}/revoke": { "parameters": name_param(),
          "post": { "operationId": "revokeClient", "summary": "Revoke a client: its certificate is refused at every later TLS handshake, request and heartbeat; irreversible (admin)",
            "requestBody": body("ClientRevokeRequest", true), "responses": ok("The client", "Client", &[400, 401, 403, 404, 405, 409, 413, 503]) } },
        "/v1/clients/{name}/labels": { "parameters": name_param(),
          "post": { "operationId": "relabelClient", "summary": "Replace a client's labels (admin)",
            "requestBody": body("RelabelRequest", true), "responses": ok("The client", "Client", ADMIN) } },
        "/v1/heartbeat": { "post": { "operationId": "heartbeat", "summary": "A serving host asks whether it may still hold the key versions it unwrapped: the policy is evaluated again (key state, allow rule against the client's current labels, client revocation and certificate validity) and audited",
            "requestBody": body("HeartbeatRequest", true), "responses": ok("One verdict per key", "HeartbeatResponse", &[400, 401, 403, 405, 413, 503]) } },
        "/v1/audit": { "get": { "operationId": "listAudit", "summary": "A page of audit entries in sequence order (admin)",
            "parameters": list_params(json!([
              { "name": "after_seq", "in": "query", "schema": { "type": "integer", "minimum": 0, "maximum": 9223372036854775807i64 }, "description": "Entries after this sequence number (older paging; not with cursor)" },
              { "name": "since_ms", "in": "query", "schema": { "type": "integer", "minimum": 0, "maximum": 9223372036854775807i64 }, "description": "Entries at or after this Unix time in milliseconds" },
              { "name": "until_ms", "in": "query", "schema": { "type": "integer", "minimum": 0, "maximum": 9223372036854775807i64 }, "description": "Entries before this Unix time in milliseconds" },
              { "name": "client", "in": "query", "schema": { "type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$" }, "description": "Entries of this client (its name, or cert:FINGERPRINT-PREFIX before it was known)" },
              { "name": "key", "in": "query", "schema": { "$ref": "#/components/schemas/Name" }, "description": "Entries about this key" },
              { "name": "operation", "in": "query", "schema": { "type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$" }, "description": "Entries of this operation (key.unwrap, client.issue...)" },
              { "name": "outcome", "in": "query", "schema": { "type": "string", "enum": ["ok", "denied", "invalid", "unavailable", "error"] }, "description": "Entries with this outcome" } ])),
            "responses": list_ok("A page of entries", "AuditPage") } },
        "/v1/audit/verify": { "post": { "operationId": "verifyAudit", "summary": "Check the hash chain and MACs from the anchor (the whole log), or only after the last checkpoint (admin)",
            "parameters": [
              { "name": "from", "in": "query", "schema": { "type": "string", "enum": ["anchor", "checkpoint"] }, "description": "Where the walk starts (default: anchor)" } ],
            "responses": ok("The verification report", "VerifyReport", ADMIN) } },
        "/v1/audit/export": { "get": { "operationId": "exportAudit", "summary": "A page of the entries from the anchor up to until_seq and/or the newest stamped at or before until_ms (the earlier of the two; the newest entry when neither is given), each with its link (admin)",
            "parameters": [
              { "name": "until_seq", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 9223372036854775807i64 } },
              { "name": "until_ms", "in": "query", "schema": { "type": "integer", "minimum": 0, "maximum": 9223372036854775807i64 } },
              { "name": "after_seq", "in": "query", "schema": { "type": "integer", "minimum": 0, "maximum": 9223372036854775807i64 }, "description": "Entries after this one (default: the anchor)" },
              { "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 10000 } } ],
            "responses": ok("A page of the export", "AuditExportPage", &[400, 401, 403, 404, 405, 409, 413, 503]) } },
        "/v1/audit/exports": { "post": { "operationId": "recordAuditExport", "summary": "Record that the entries after after_seq up to until_seq were archived; pruning needs it (admin)",
            "requestBody": body("AuditExportedRequest", true),
            "responses": ok("The range recorded", "AuditExported", &[400, 401, 403, 404, 405, 409, 413, 503]) } },
        "/v1/audit/prune": { "post": { "operationId": "pruneAudit", "summary": "Remove the entries up to until_seq (covered by a recorded export, and verified first), keeping the last one's hash as the anchor (admin)",
            "requestBody": body("AuditPruneRequest", true),
            "responses": ok("What was removed, and the new anchor", "AuditPruned", &[400, 401, 403, 404, 405, 409, 413, 503]) } },
        "/v1/console/login-codes": { "post": { "operationId": "createConsoleLoginCode", "summary": "A one-time code that signs the calling admin in to the web console at /ui/: 256 random bits, valid for 2 minutes and once; the server keeps only its hash (admin)",
            "requestBody": body("Empty", false),
            "responses": created("The code and the URL to open", "ConsoleLoginCode", &[400, 401, 403, 405, 409, 413, 503]) } },
        "/v1/console/sessions": { "get": { "operationId": "listConsoleSessions", "summary": "A page of the web console's open sessions on this server, newest first (admin)",
            "parameters": list_params(json!([])),
            "responses": list_ok("A page of sessions", "ConsoleSessions") } },
        "/v1/console/sessions/{id}/end": {
          "parameters": [ { "name": "id", "in": "path", "required": true, "schema": { "type": "string", "pattern": "^[0-9a-f]{16}$" }, "description": "The session's id, as listed" } ],
          "post": { "operationId": "endConsoleSession", "summary": "End a web console session on this server: its cookie is refused from now on (admin)",
            "requestBody": body("Empty", false),
            "responses": ok("The session ended", "ConsoleSessionEnded", &[400, 401, 403, 404, 405, 413, 503]) } }
      },
      "components": { "schemas": {
        "Name": { "type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$" },
        "Selector": { "type": "string", "pattern": "^(client:[A-Za-z0-9][A-Za-z0-9._-]{0,127}|label:[a-z0-9._-]{1,64}=[A-Za-z0-9._-]{0,128})$" },
        "Error": { "type": "object", "required": ["error"], "properties": { "error": { "type": "object", "required": ["code", "message"],
            "properties": { "code": { "type": "string" }, "message": { "type": "string" } } } } },
        "Health": { "type": "object", "required": ["status", "sealed", "store", "version"], "properties": {
            "status": { "type": "string", "enum": ["ok", "sealed"] }, "sealed": { "type": "boolean" },
            "store": { "type": "string", "enum": ["sqlite", "postgresql"] }, "version": { "type": "string" } } },
        "SealStatus": { "type": "object", "required": ["sealed", "scheme"], "properties": {
            "sealed": { "type": "boolean" }, "scheme": { "type": "string", "enum": ["file", "shamir", "hsm"] },
            "shares": { "type": "integer" }, "threshold": { "type": "integer" }, "progress": { "type": "integer" },
            "module": { "type": "string" }, "token": { "type": "string" }, "key_label": { "type": "string" } } },
        "UnsealRequest": { "type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": false,
            "properties": { "share": { "type": "string", "pattern": "^([0-9a-fA-F]{2}){3,66}$", "description": "One share as printed by kms init" },
                            "pin": { "type": "string", "minLength": 1, "maxLength": 256, "description": "The user PIN of the HSM token holding the root key (deployments made with --hsm-module)" } } },
        "Empty": { "type": "object", "additionalProperties": false },
        "CreateKeyRequest": { "type": "object", "required": ["name"], "additionalProperties": false, "properties": {
            "name": { "$ref": "#/components/schemas/Name" },
            "type": { "$ref": "#/components/schemas/KeyType" },
            "allow": { "type": "array", "maxItems": 64, "items": { "$ref": "#/components/schemas/Selector" } },
            "exportable": { "type": "boolean", "default": false } } },
        "RevokeRequest": { "type": "object", "required": ["reason"], "additionalProperties": false, "properties": {
            "reason": { "type": "string", "minLength": 1, "maxLength": 1024, "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$", "description": "Printable text, not only spaces" },
            "version": { "type": "integer", "minimum": 1, "maximum": 4294967295u64, "nullable": true, "description": "Only this version (default: all)" } } },
        "VersionRequest": { "type": "object", "additionalProperties": false, "properties": {
            "version": { "type": "integer", "minimum": 1, "maximum": 4294967295u64, "nullable": true } } },
        "KeyVersion": { "type": "object", "required": ["version", "state", "created_ms"], "properties": {
            "version": { "type": "integer" }, "state": { "type": "string", "enum": ["active", "revoked", "destroyed"] },
            "reason": { "type": "string" }, "created_ms": { "type": "integer" }, "changed_ms": { "type": "integer" } } },
        "KeyType": { "type": "string", "enum": ["aes-256", "rsa-2048", "rsa-3072", "rsa-4096", "ec-p256", "ec-p384", "ec-p521", "ed25519"], "default": "aes-256",
            "description": "aes-256: a key that wraps and unwraps. Any other: a key pair, its private key named as asked and its public key NAME.pub (so NAME is at most 124 characters), KMIP Private Key and Public Key objects linked to each other, both under the allow rules given, active from now" },
        "ObjectType": { "type": "string", "enum": ["symmetric-key", "private-key", "public-key", "certificate", "secret-data", "opaque-object", "split-key", "pgp-key", "other"] },
        "Key": { "type": "object", "required": ["name", "exportable", "allow", "created_ms", "versions", "type"], "properties": {
            "name": { "$ref": "#/components/schemas/Name" }, "exportable": { "type": "boolean" },
            "allow": { "type": "array", "items": { "$ref": "#/components/schemas/Selector" } },
            "created_ms": { "type": "integer" },
            "versions": { "type": "array", "items": { "$ref": "#/components/schemas/KeyVersion" } },
            "type": { "$ref": "#/components/schemas/ObjectType" },
            "algorithm": { "type": "string", "description": "The KMIP Cryptographic Algorithm, lowercase (aes, rsa, ec, ed25519, hmac-sha256...); a certificate's is its public key's" },
            "length": { "type": "integer", "description": "Bits" },
            "curve": { "type": "string", "enum": ["P-256", "P-384", "P-521"] },
            "key_type": { "$ref": "#/components/schemas/KeyType" },
            "public_key": { "type": "string", "description": "A private key's public key (KMIP Public Key Link)" },
            "private_key": { "type": "string", "description": "A public key's private key (KMIP Private Key Link)" },
            "certificate": { "type": "string", "description": "The linked certificate (KMIP Certificate Link)" } } },
        "SignatureAlgorithm": { "type": "string", "enum": ["ecdsa-sha256", "ecdsa-sha384", "ecdsa-sha512", "rsa-pss-sha256", "rsa-pss-sha384", "rsa-pss-sha512", "rsa-pkcs1-sha256", "rsa-pkcs1-sha384", "rsa-pkcs1-sha512", "ed25519"],
            "description": "Default: ECDSA with the curve's hash (SHA-256 for P-256, SHA-384 for P-384, SHA-512 for P-521), rsa-pss-sha256 (MGF1 with the same hash, salt of the hash's length), ed25519. ECDSA signatures are DER (RFC 3279)" },
        "SignRequest": { "type": "object", "additionalProperties": false, "minProperties": 1, "properties": {
            "message": { "type": "string", "format": "byte", "maxLength": 174764, "description": "Base64 of the message, at most 128 KiB decoded; give it or digest" },
            "digest": { "type": "string", "format": "byte", "maxLength": 88, "description": "Base64 of the message's digest by the algorithm's hash (not for ed25519); give it or message" },
            "algorithm": { "$ref": "#/components/schemas/SignatureAlgorithm" } } },
        "SignResponse": { "type": "object", "required": ["key", "version", "algorithm", "signature"], "properties": {
            "key": { "type": "string" }, "version": { "type": "integer" },
            "algorithm": { "$ref": "#/components/schemas/SignatureAlgorithm" },
            "signature": { "type": "string", "format": "byte" } } },
        "VerifyRequest": { "type": "object", "required": ["signature"], "additionalProperties": false, "properties": {
            "message": { "type": "string", "format": "byte", "maxLength": 174764, "description": "Base64 of the message; give it or digest" },
            "digest": { "type": "string", "format": "byte", "maxLength": 88, "description": "Base64 of the message's digest; give it or message" },
            "algorithm": { "$ref": "#/components/schemas/SignatureAlgorithm" },
            "signature": { "type": "string", "format": "byte", "maxLength": 1368, "description": "Base64 of the signature, at most 1 KiB decoded" } } },
        "VerifyResponse": { "type": "object", "required": ["key", "version", "algorithm", "verified_with", "valid"], "properties": {
            "key": { "type": "string" }, "version": { "type": "integer" },
            "algorithm": { "$ref": "#/components/schemas/SignatureAlgorithm" },
            "verified_with": { "type": "string", "description": "The public key used, NAME/VERSION" },
            "valid": { "type": "boolean" } } },
        "PublicKeyResponse": { "type": "object", "required": ["key", "version", "object", "public_key"], "properties": {
            "key": { "type": "string" }, "version": { "type": "integer" },
            "object": { "type": "string", "description": "The object holding the public key, NAME/VERSION" },
            "public_key": { "type": "string", "description": "PEM SubjectPublicKeyInfo (-----BEGIN PUBLIC KEY-----)" } } },
        "CertificateRequest": { "type": "object", "required": ["certificate"], "additionalProperties": false, "properties": {
            "name": { "$ref": "#/components/schemas/Name" },
            "certificate": { "type": "string", "minLength": 1, "description": "The X.509 certificate: PEM (-----BEGIN CERTIFICATE-----) or base64 of its DER" },
            "allow": { "type": "array", "maxItems": 64, "items": { "$ref": "#/components/schemas/Selector" } } } },
        "CertificateResponse": { "allOf": [ { "$ref": "#/components/schemas/Key" },
            { "type": "object", "required": ["pem", "subject", "issuer", "not_after"], "properties": {
              "pem": { "type": "string" }, "subject": { "type": "string" }, "issuer": { "type": "string" },
              "not_after": { "type": "string" } } } ] },
        "KeyList": { "type": "object", "required": ["keys", "next_cursor"], "properties": { "keys": { "type": "array", "items": { "$ref": "#/components/schemas/Key" } },
            "next_cursor": { "$ref": "#/components/schemas/NextCursor" } } },
        "NextCursor": { "type": "string", "nullable": true, "description": "The cursor of the next page; null on the last page" },
        "WrapRequest": { "type": "object", "required": ["plaintext"], "additionalProperties": false, "properties": {
            "plaintext": { "type": "string", "format": "byte", "maxLength": 87384, "description": "Base64, at most 64 KiB decoded" },
            "context": { "type": "string", "format": "byte", "maxLength": 5464, "description": "Base64 caller context bound as associated data, at most 4 KiB" } } },
        "WrapResponse": { "type": "object", "required": ["key", "version", "ciphertext"], "properties": {
            "key": { "type": "string" }, "version": { "type": "integer" },
            "ciphertext": { "type": "string", "description": "rampart:v1:NAME:VERSION:BASE64URL(nonce || ciphertext || tag)" } } },
        "UnwrapRequest": { "type": "object", "required": ["ciphertext"], "additionalProperties": false, "properties": {
            "ciphertext": { "type": "string", "pattern": "^rampart:v1:[A-Za-z0-9][A-Za-z0-9._-]{0,127}:[1-9][0-9]{0,8}:[A-Za-z0-9_-]{38,}$", "description": "A ciphertext of wrap, for the key named in the path" },
            "context": { "type": "string", "format": "byte", "maxLength": 5464 } } },
        "UnwrapResponse": { "type": "object", "required": ["key", "version", "plaintext"], "properties": {
            "key": { "type": "string" }, "version": { "type": "integer" }, "plaintext": { "type": "string", "format": "byte" } } },
        "ExportResponse": { "type": "object", "required": ["key", "version", "material", "type", "format"], "properties": {
            "key": { "type": "string" }, "version": { "type": "integer" }, "material": { "type": "string", "format": "byte" },
            "type": { "$ref": "#/components/schemas/ObjectType" },
            "format": { "type": "string", "enum": ["raw", "pkcs8", "spki", "x509"], "description": "The material's form: raw bytes, PKCS#8 DER, SubjectPublicKeyInfo DER, X.509 DER" },
            "pem": { "type": "string", "nullable": true, "description": "The material as PEM (PKCS#8, public key or certificate); null for raw material" } } },
        "Client": { "type": "object", "required": ["name", "labels", "admin", "serial", "fingerprint", "created_ms", "not_after_ms"], "properties": {
            "name": { "$ref": "#/components/schemas/Name" },
            "labels": { "type": "object", "additionalProperties": { "type": "string" } },
            "admin": { "type": "boolean" }, "serial": { "type": "string" },
            "fingerprint": { "type": "string", "description": "SHA-256 of the certificate DER, hex" },
            "created_ms": { "type": "integer" }, "not_after_ms": { "type": "integer" },
            "revoked": { "$ref": "#/components/schemas/ClientRevocation" } } },
        "ClientRevocation": { "type": "object", "required": ["revoked_ms", "reason"], "properties": {
            "revoked_ms": { "type": "integer" }, "reason": { "type": "string" } } },
        "ClientRevokeRequest": { "type": "object", "required": ["reason"], "additionalProperties": false, "properties": {
            "reason": { "type": "string", "minLength": 1, "maxLength": 1024, "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$", "description": "Printable text, not only spaces" } } },
        "RelabelRequest": { "type": "object", "required": ["labels"], "additionalProperties": false, "properties": {
            "labels": { "type": "object", "maxProperties": 32,
              "description": "Label keys are 1 to 64 characters of a-z, 0-9, '.', '_', '-' (a constraint on property names, which OpenAPI 3.0 cannot state)",
              "additionalProperties": { "type": "string", "pattern": "^[A-Za-z0-9._-]{0,128}$" } } } },
        "HeldKey": { "type": "object", "required": ["name", "version"], "additionalProperties": false, "properties": {
            "name": { "$ref": "#/components/schemas/Name" },
            "version": { "type": "integer", "minimum": 0, "maximum": 4294967295u64 } } },
        "HeartbeatRequest": { "type": "object", "required": ["keys"], "additionalProperties": false, "properties": {
            "keys": { "type": "array", "maxItems": 256, "items": { "$ref": "#/components/schemas/HeldKey" } } } },
        "HeartbeatVerdict": { "type": "object", "required": ["name", "version", "allowed"], "properties": {
            "name": { "type": "string" }, "version": { "type": "integer" }, "allowed": { "type": "boolean" },
            "reason": { "type": "string", "description": "Why the key may no longer be held" } } },
        "HeartbeatResponse": { "type": "object", "required": ["client", "keys"], "properties": {
            "client": { "type": "string" },
            "keys": { "type": "array", "items": { "$ref": "#/components/schemas/HeartbeatVerdict" } } } },
        "ClientList": { "type": "object", "required": ["clients", "next_cursor"], "properties": { "clients": { "type": "array", "items": { "$ref": "#/components/schemas/Client" } },
            "next_cursor": { "$ref": "#/components/schemas/NextCursor" } } },
        "IssueClientRequest": { "type": "object", "required": ["name", "csr"], "additionalProperties": false, "properties": {
            "name": { "$ref": "#/components/schemas/Name" },
            "labels": { "type": "object", "maxProperties": 32, "additionalProperties": { "type": "string", "pattern": "^[A-Za-z0-9._-]{0,128}$" } },
            "admin": { "type": "boolean", "default": false },
            "csr": { "type": "string", "description": "PEM PKCS#10 request; only its public key is used" },
            "days": { "type": "integer", "minimum": 1, "maximum": 3650, "default": 365 } } },
        "IssueClientResponse": { "type": "object", "required": ["client", "certificate", "ca_certificate"], "properties": {
            "client": { "$ref": "#/components/schemas/Client" },
            "certificate": { "type": "string" }, "ca_certificate": { "type": "string" } } },
        "AuditEntry": { "type": "object", "required": ["seq", "time_ms", "client", "operation", "outcome", "detail", "hash"], "properties": {
            "seq": { "type": "integer" }, "time_ms": { "type": "integer" }, "client": { "type": "string" },
            "operation": { "type": "string" }, "key": { "type": "string" }, "version": { "type": "integer" },
            "outcome": { "type": "string", "enum": ["ok", "denied", "invalid", "unavailable", "error"] },
            "detail": { "type": "string" },
            "hash": { "type": "string", "description": "SHA-256(previous hash || canonical entry), hex" },
            "mac": { "type": "string", "description": "HMAC-SHA-256 of the hash under a root-derived key, hex" } } },
        "AuditPage": { "type": "object", "required": ["entries", "next_cursor"], "properties": {
            "entries": { "type": "array", "items": { "$ref": "#/components/schemas/AuditEntry" } },
            "next_cursor": { "$ref": "#/components/schemas/NextCursor" },
            "next_after_seq": { "type": "integer", "nullable": true, "description": "The last entry's sequence number (for after_seq paging)" } } },
        "VerifyReport": { "type": "object", "required": ["ok", "entries", "unauthenticated", "head_seq", "head_hash"], "properties": {
            "ok": { "type": "boolean" }, "entries": { "type": "integer" }, "unauthenticated": { "type": "integer" },
            "start_seq": { "type": "integer" }, "start_hash": { "type": "string" },
            "start": { "type": "string", "enum": ["genesis", "anchor", "checkpoint"] }, "macs_checked": { "type": "boolean" },
            "head_seq": { "type": "integer" }, "head_hash": { "type": "string" },
            "first_bad_seq": { "type": "integer" }, "problem": { "type": "string" } } },
        "ExportedEntry": { "type": "object", "required": ["seq", "prev_hash", "time_ms", "client", "operation", "outcome", "detail", "hash"], "properties": {
            "seq": { "type": "integer" }, "prev_hash": { "type": "string" }, "time_ms": { "type": "integer" }, "client": { "type": "string" },
            "operation": { "type": "string" }, "key": { "type": "string" }, "version": { "type": "integer" },
            "outcome": { "type": "string" }, "detail": { "type": "string" }, "hash": { "type": "string" }, "mac": { "type": "string" } } },
        "AuditExportPage": { "type": "object", "required": ["anchor_seq", "anchor_hash", "until_seq", "until_hash", "entries"], "properties": {
            "anchor_seq": { "type": "integer" }, "anchor_hash": { "type": "string" }, "until_seq": { "type": "integer" }, "until_hash": { "type": "string" },
            "entries": { "type": "array", "items": { "$ref": "#/components/schemas/ExportedEntry" } },
            "next_after_seq": { "type": "integer", "nullable": true } } },
        "AuditExportedRequest": { "type": "object", "required": ["after_seq", "until_seq", "until_hash"], "additionalProperties": false, "properties": {
            "after_seq": { "type": "integer", "minimum": 0 }, "until_seq": { "type": "integer", "minimum": 1 }, "until_hash": { "type": "string" } } },
        "AuditExported": { "type": "object", "required": ["after_seq", "until_seq"], "properties": {
            "after_seq": { "type": "integer" }, "until_seq": { "type": "integer" } } },
        "AuditPruneRequest": { "type": "object", "required": ["until_seq"], "additionalProperties": false, "properties": {
            "until_seq": { "type": "integer", "minimum": 1, "maximum": 9223372036854775807i64 } } },
        "ConsoleLoginCode": { "type": "object", "required": ["code", "id", "path", "expires_ms"], "properties": {
            "code": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
            "id": { "type": "string", "description": "A short public name of the code, as the audit log shows it" },
            "url": { "type": "string", "description": "https://HOST/ui/login?code=CODE, HOST from the request's Host header" },
            "path": { "type": "string", "description": "/ui/login?code=CODE" },
            "expires_ms": { "type": "integer", "description": "Unix milliseconds after which the code is refused" } } },
        "ConsoleSessions": { "type": "object", "required": ["sessions", "next_cursor"], "properties": {
            "next_cursor": { "$ref": "#/components/schemas/NextCursor" },
            "sessions": { "type": "array", "items": { "type": "object", "required": ["id", "admin", "peer", "created_ms", "last_ms", "ends_ms"], "properties": {
              "id": { "type": "string" }, "admin": { "type": "string" }, "peer": { "type": "string", "description": "The browser's address and port at sign-in" },
              "created_ms": { "type": "integer" }, "last_ms": { "type": "integer", "description": "The last request" },
              "ends_ms": { "type": "integer", "description": "When it ends without another request" } } } } } },
        "ConsoleSessionEnded": { "type": "object", "required": ["ended"], "properties": { "ended": { "type": "string" } } },
        "AuditPruned": { "type": "object", "required": ["removed", "anchor"], "properties": {
            "removed": { "type": "integer" },
            "anchor": { "type": "object", "required": ["seq", "hash", "time_ms", "mac"], "properties": {
              "seq": { "type": "integer" }, "hash": { "type": "string" }, "time_ms": { "type": "integer" }, "mac": { "type": "string" } } } } }
      } }
    })
}
