//! The KMIP front end end to end: an in-process server on 127.0.0.1 with
//! real TLS (1.2 and 1.3, client certificates from the deployment CA) and
//! a real SQLite store, driven with raw TTLV messages: version
//! negotiation, Query, batch semantics (Stop, Continue and Undo),
//! Maximum Response Size, asynchronous requests refused, unsupported
//! versions and operations answered with Result Reasons, malformed
//! messages answered without losing the connection (or, when unframable,
//! answered and closed), missing and unregistered certificates refused,
//! and every batch item in the hash-chained audit log, which still
//! verifies.

use std::sync::Arc;
use std::time::Duration;

use rampart_kmip::enums::{
    BatchErrorContinuationOption, Operation, QueryFunction, ResultReason, ResultStatus,
};
use rampart_kmip::message::{ProtocolVersion, RequestMessage};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item};
use rampart_kms::client::KmsClient;
use tokio::io::AsyncReadExt;

use crate::kmip_support as support;
use support::{connect, exchange, exchange_bytes, Deployment, Tls};

fn versions(payload: &Item) -> Vec<ProtocolVersion> {
    Fields::of(payload)
        .unwrap()
        .all(Tag::PROTOCOL_VERSION)
        .map(|v| ProtocolVersion::parse(v).unwrap())
        .collect()
}

fn discover(client: &[ProtocolVersion]) -> (Operation, Vec<Item>) {
    (Operation::DISCOVER_VERSIONS, client.iter().map(|v| v.to_item()).collect())
}

async fn closed(tls: &mut Tls) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_versions_and_query_over_tls_1_2_and_1_3() {
    let d = Deployment::new("versions").await;
    for tls_version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let mut tls = connect(&d.admin, &d.kmip, tls_version).await;
        assert_eq!(
            tls.get_ref().1.protocol_version(),
            Some(tls_version.version),
            "negotiated the TLS version asked for"
        );
        // Several messages on one connection.
        let all =
            exchange(&mut tls, &RequestMessage::new(ProtocolVersion::V1_2, vec![discover(&[])]))
                .await;
        assert_eq!(all.header.protocol_version, ProtocolVersion::V1_2);
        let item = &all.batch_items[0];
        assert_eq!(item.result_status, ResultStatus::SUCCESS);
        assert_eq!(item.operation, Some(Operation::DISCOVER_VERSIONS));
        assert_eq!(
            versions(item.payload.as_ref().unwrap()),
            [(2, 1), (2, 0), (1, 4), (1, 3), (1, 2), (1, 1), (1, 0)]
                .map(|(a, b)| ProtocolVersion::new(a, b))
        );
        let some = exchange(
            &mut tls,
            &RequestMessage::new(
                ProtocolVersion::V1_4,
                vec![discover(&[
                    ProtocolVersion::new(1, 9),
                    ProtocolVersion::V1_1,
                    ProtocolVersion::V2_0,
                ])],
            ),
        )
        .await;
        assert_eq!(
            versions(some.batch_items[0].payload.as_ref().unwrap()),
            [ProtocolVersion::V2_0, ProtocolVersion::V1_1]
        );
        let query = exchange(
            &mut tls,
            &RequestMessage::new(
                ProtocolVersion::V2_1,
                vec![(
                    Operation::QUERY,
                    vec![
                        Item::enumeration(Tag::QUERY_FUNCTION, QueryFunction::OPERATIONS.0),
                        Item::enumeration(Tag::QUERY_FUNCTION, QueryFunction::SERVER_INFORMATION.0),
                    ],
                )],
            ),
        )
        .await;
        assert_eq!(query.header.protocol_version, ProtocolVersion::V2_1);
        let payload = query.batch_items[0].payload.clone().unwrap();
        let f = Fields::of(&payload).unwrap();
        let ops: Vec<u32> = f.all(Tag::OPERATION).map(|o| o.as_enum().unwrap()).collect();
        // Interop only on a server started for interop testing.
        let served: Vec<u32> = rampart_kms::server::kmip::OPERATIONS
            .iter()
            .filter(|o| **o != Operation::INTEROP)
            .map(|o| o.0)
            .collect();
        assert_eq!(ops, served);
        assert!(ops.contains(&Operation::ENCRYPT.0) && ops.contains(&Operation::RE_KEY.0));
        assert!(!ops.contains(&Operation::GET_USAGE_ALLOCATION.0));
        assert_eq!(f.required(Tag::VENDOR_IDENTIFICATION).unwrap().as_text().unwrap(), "Rampart");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_stop_or_continue_and_every_item_is_audited() {
    let d = Deployment::new("batches").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let ops = || {
        vec![
            discover(&[]),
            (Operation::GET_USAGE_ALLOCATION, vec![Item::text(Tag::UNIQUE_IDENTIFIER, "k/1")]),
            (Operation(0x77), vec![]),
            discover(&[ProtocolVersion::V1_4]),
        ]
    };
    // Stop (the default): the items after the failure are not run.
    let mut request = RequestMessage::new(ProtocolVersion::V1_4, ops());
    for (i, item) in request.batch_items.iter_mut().enumerate() {
        item.unique_batch_item_id = Some(vec![u8::try_from(i).unwrap()]);
    }
    let stop = exchange(&mut tls, &request).await;
    let summary: Vec<_> = stop
        .batch_items
        .iter()
        .map(|b| (b.unique_batch_item_id.clone().unwrap()[0], b.result_status, b.result_reason))
        .collect();
    assert_eq!(
        summary,
        [
            (0, ResultStatus::SUCCESS, None),
            (1, ResultStatus::OPERATION_FAILED, Some(ResultReason::OPERATION_NOT_SUPPORTED)),
            (
                2,
                ResultStatus::OPERATION_FAILED,
                Some(ResultReason::OPERATION_CANCELED_BY_REQUESTER)
            ),
            (
                3,
                ResultStatus::OPERATION_FAILED,
                Some(ResultReason::OPERATION_CANCELED_BY_REQUESTER)
            ),
        ]
    );
    // Continue: each item is answered on its own.
    let mut request = RequestMessage::new(ProtocolVersion::V1_4, ops());
    request.header.batch_error_continuation = BatchErrorContinuationOption::CONTINUE;
    let cont = exchange(&mut tls, &request).await;
    let reasons: Vec<_> = cont.batch_items.iter().map(|b| b.result_reason).collect();
    assert_eq!(
        reasons,
        [
            None,
            Some(ResultReason::OPERATION_NOT_SUPPORTED),
            Some(ResultReason::OPERATION_NOT_SUPPORTED),
            None
        ]
    );
    assert_eq!(versions(cont.batch_items[3].payload.as_ref().unwrap()), [ProtocolVersion::V1_4]);
    // Undo: the item before the failure is undone, those after it not run
    // (kms_kmip_crypto_ops undoes items that change objects).
    request.header.batch_error_continuation = BatchErrorContinuationOption::UNDO;
    let undo = exchange(&mut tls, &request).await;
    let summary: Vec<_> =
        undo.batch_items.iter().map(|b| (b.result_status, b.result_reason)).collect();
    let canceled = Some(ResultReason::OPERATION_CANCELED_BY_REQUESTER);
    assert_eq!(
        summary,
        [
            (ResultStatus::OPERATION_UNDONE, None),
            (ResultStatus::OPERATION_FAILED, Some(ResultReason::OPERATION_NOT_SUPPORTED)),
            (ResultStatus::OPERATION_FAILED, canceled),
            (ResultStatus::OPERATION_FAILED, canceled),
        ]
    );

    let audit = d.audit_ops().await;
    let kmip: Vec<_> = audit.iter().filter(|(_, op, _)| op.starts_with("kmip.")).collect();
    // Four items each batch, and the Undo batch's undone item once more.
    assert_eq!(kmip.len(), 13, "{kmip:?}");
    assert!(kmip.iter().all(|(client, _, _)| client == "admin"));
    assert!(kmip.iter().any(|(_, op, outcome)| op == "kmip.discover_versions" && outcome == "ok"));
    assert!(kmip
        .iter()
        .any(|(_, op, outcome)| op == "kmip.get_usage_allocation" && outcome == "invalid"));
    assert!(kmip.iter().any(|(_, op, _)| op == "kmip.0x00000077"));
    let admin = KmsClient::new(&d.admin).unwrap();
    assert!(
        admin.audit_verify().await.unwrap().ok,
        "the audit chain verifies after a KMIP session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_options_versions_and_malformed_messages_are_answered() {
    let d = Deployment::new("malformed").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS12).await;
    // Maximum Response Size: the full answer does not fit 120 bytes.
    let mut request = RequestMessage::new(ProtocolVersion::V1_4, vec![discover(&[])]);
    request.header.maximum_response_size = Some(120);
    let small = exchange(&mut tls, &request).await;
    assert_eq!(small.batch_items[0].result_reason, Some(ResultReason::RESPONSE_TOO_LARGE));
    // Asynchronous Indicator: refused per item.
    let mut request =
        RequestMessage::new(ProtocolVersion::V1_4, vec![discover(&[]), discover(&[])]);
    request.header.asynchronous_indicator = true;
    let refused = exchange(&mut tls, &request).await;
    assert_eq!(refused.batch_items.len(), 2);
    assert!(refused
        .batch_items
        .iter()
        .all(|b| b.result_reason == Some(ResultReason::FEATURE_NOT_SUPPORTED)));
    // An unsupported protocol version.
    let future =
        exchange(&mut tls, &RequestMessage::new(ProtocolVersion::new(3, 0), vec![discover(&[])]))
            .await;
    assert_eq!(future.batch_items[0].result_reason, Some(ResultReason::INVALID_MESSAGE));
    assert_eq!(future.header.protocol_version, ProtocolVersion::V2_1);
    // A framed structure that is not valid TTLV inside (bad padding), and
    // one that is TTLV but no request: answered, connection kept.
    let bad_padding = [
        0x42, 0x00, 0x78, 0x01, 0, 0, 0, 0x10, 0x42, 0x00, 0x20, 0x02, 0, 0, 0, 4, 0, 0, 0, 8, 0,
        0, 0, 1,
    ];
    let answer = exchange_bytes(&mut tls, &bad_padding).await;
    assert_eq!(answer.batch_items[0].result_reason, Some(ResultReason::INVALID_MESSAGE));
    let not_request = Item::structure(Tag::RESPONSE_MESSAGE, vec![]).encode().unwrap();
    let answer = exchange_bytes(&mut tls, &not_request).await;
    assert_eq!(answer.batch_items[0].result_reason, Some(ResultReason::INVALID_MESSAGE));
    let missing = RequestMessage::new(ProtocolVersion::V1_4, vec![(Operation::QUERY, vec![])]);
    let mut item = missing.to_item();
    if let rampart_kmip::Value::Structure(items) = &mut item.value {
        items.truncate(1); // the header says one batch item; none follows
    }
    let answer = exchange_bytes(&mut tls, &item.encode().unwrap()).await;
    assert_eq!(answer.batch_items[0].result_reason, Some(ResultReason::MISSING_DATA));
    let ok =
        exchange(&mut tls, &RequestMessage::new(ProtocolVersion::V1_0, vec![discover(&[])])).await;
    assert_eq!(ok.batch_items[0].result_status, ResultStatus::SUCCESS);
    // A 4 GiB length: answered without reading it, then closed.
    let answer = exchange_bytes(&mut tls, &[0x42, 0x00, 0x78, 0x01, 0xFF, 0xFF, 0xFF, 0xF8]).await;
    assert_eq!(answer.batch_items[0].result_reason, Some(ResultReason::INVALID_MESSAGE));
    assert!(closed(&mut tls).await, "the connection closes after an unframable message");
    // Not a structure: the same.
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let answer = exchange_bytes(&mut tls, &[0x42, 0x00, 0x78, 0x07, 0, 0, 0, 0]).await;
    assert_eq!(answer.batch_items[0].result_reason, Some(ResultReason::INVALID_MESSAGE));
    assert!(closed(&mut tls).await);
    let invalid = d
        .audit_ops()
        .await
        .into_iter()
        .filter(|(_, op, o)| op == "kmip.message" && o == "invalid")
        .count();
    assert_eq!(invalid, 6, "every refused message is audited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_without_a_client_certificate_are_refused_and_audited() {
    use rustls_pki_types::pem::PemObject;
    let d = Deployment::new("nocert").await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(d.admin.ca_cert.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(&d.kmip).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    // TLS 1.2 fails in the handshake itself.
    assert!(connector.connect("127.0.0.1".try_into().unwrap(), tcp).await.is_err());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let audit = d.audit_ops().await;
    assert!(
        audit.iter().any(|(_, op, outcome)| op == "kmip.tls.handshake" && outcome == "denied"),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unregistered_certificate_gets_authentication_not_successful() {
    use rampart_kms::deployment::{files, read_unseal_key};
    use rampart_kms::keys::RootKey;
    use rampart_kms::pki::{client_request, Authority};
    use rampart_kms::store::meta;
    let d = Deployment::new("rogue").await;
    // Signed by the deployment CA (opened as someone holding the data
    // directory could), never registered as a client.
    let root = RootKey::new(&read_unseal_key(&d.dir.join("data").join(files::UNSEAL_KEY)).unwrap())
        .unwrap();
    let ca_pem =
        String::from_utf8(d.store.get_meta(meta::CA_CERT).await.unwrap().unwrap()).unwrap();
    let ca_key = root.open_ca_key(&d.store.get_meta(meta::CA_KEY).await.unwrap().unwrap()).unwrap();
    let ca = Authority::load(&ca_pem, &ca_key).unwrap();
    let (csr, key) = client_request("rogue").unwrap();
    let mut bundle = d.admin.clone();
    bundle.cert = ca.issue_client_days(&csr, "rogue", 1).unwrap().cert_pem;
    bundle.key = key;
    let mut tls = connect(&bundle, &d.kmip, &rustls::version::TLS13).await;
    let answer =
        exchange(&mut tls, &RequestMessage::new(ProtocolVersion::V1_4, vec![discover(&[])])).await;
    assert_eq!(
        answer.batch_items[0].result_reason,
        Some(ResultReason::AUTHENTICATION_NOT_SUCCESSFUL)
    );
    assert!(answer.batch_items[0].payload.is_none());
    assert!(closed(&mut tls).await, "the connection closes after the refusal");
    let audit = d.audit_ops().await;
    assert!(
        audit
            .iter()
            .any(|(c, op, o)| c.starts_with("cert:") && op == "kmip.message" && o == "denied"),
        "{audit:?}"
    );
}

/// `curl` as a KMIP-over-HTTPS client (KMIP Additional Message Encodings
/// §2): `POST /kmip` on the KMIP port in each encoding, answered 200 in
/// the same one with the headers §2.5 requires; what is not a KMIP
/// request gets an HTTP error, a malformed message a KMIP one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kmip_over_https_answers_curl_in_ttlv_xml_and_json() {
    use rampart_kmip::xml::{self, XmlLimits};
    let d = Deployment::new("https").await;
    let files = d.dir.join("curl");
    support::write_pem_files(&d.admin, &files);
    let port = d.kmip.rsplit_once(':').unwrap().1.to_owned();
    let curl_with = |extra: &[&str], method: &str, path: &str, content_type: &str, body: &[u8]| {
        std::fs::write(files.join("request"), body).unwrap();
        let out = std::process::Command::new("curl")
            .current_dir(&files)
            .args(extra)
            .args(["-sS", "--cacert", "ca.pem", "--cert", "cert.pem", "--key", "key.pem"])
            .args(["--resolve", &format!("localhost:{port}:127.0.0.1"), "-X", method])
            .args(["-H", &format!("Content-Type: {content_type}"), "-H", "Cache-Control: no-cache"])
            .args(["--data-binary", "@request", "-D", "headers", "-o", "response"])
            .arg(format!("https://localhost:{port}{path}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
        let headers = std::fs::read_to_string(files.join("headers")).unwrap().to_ascii_lowercase();
        (headers, std::fs::read(files.join("response")).unwrap())
    };
    let curl = |method: &str, path: &str, content_type: &str, body: &[u8]| {
        curl_with(&[], method, path, content_type, body)
    };
    let query = r#"<RequestMessage><RequestHeader><ProtocolVersion>
        <ProtocolVersionMajor type="Integer" value="1"/><ProtocolVersionMinor type="Integer" value="4"/>
        </ProtocolVersion><BatchCount type="Integer" value="1"/></RequestHeader>
        <BatchItem><Operation type="Enumeration" value="Query"/><RequestPayload>
        <QueryFunction type="Enumeration" value="QueryOperations"/></RequestPayload></BatchItem>
        </RequestMessage>"#;
    let (headers, body) = curl("POST", "/kmip", "text/xml", query.as_bytes());
    assert!(headers.starts_with("http/1.1 200"), "{headers}");
    assert!(headers.contains("content-type: text/xml\r\n"), "{headers}");
    assert!(headers.contains("cache-control: no-cache\r\n"), "{headers}");
    assert!(headers.contains(&format!("content-length: {}\r\n", body.len())), "{headers}");
    let text = String::from_utf8(body).unwrap();
    let top = xml::parse_document(&text, &XmlLimits::default()).unwrap();
    let response = xml::to_item(&top[0]).unwrap();
    let batch = Fields::of(&response).unwrap().all(Tag::BATCH_ITEM).next().unwrap().clone();
    let payload = Fields::of(&batch).unwrap().required(Tag::RESPONSE_PAYLOAD).unwrap().clone();
    let operations: Vec<_> = Fields::of(&payload)
        .unwrap()
        .all(Tag::OPERATION)
        .map(|o| Operation(o.as_enum().unwrap()))
        .collect();
    assert!(operations.contains(&Operation::CREATE), "{text}");
    // §2.5: HTTP/1.0 too.
    let (headers, old) = curl_with(&["--http1.0"], "POST", "/kmip", "text/xml", query.as_bytes());
    assert!(headers.starts_with("http/1.0 200"), "{headers}");
    assert!(String::from_utf8(old).unwrap().contains("ResponseMessage"));

    // JSON: a Create, whose key the TTLV encoding then gets on the same port.
    let create = r#"{"tag":"RequestMessage","value":[
        {"tag":"RequestHeader","value":[{"tag":"ProtocolVersion","value":[
            {"tag":"ProtocolVersionMajor","type":"Integer","value":2},
            {"tag":"ProtocolVersionMinor","type":"Integer","value":1}]},
            {"tag":"BatchCount","type":"Integer","value":1}]},
        {"tag":"BatchItem","value":[{"tag":"Operation","type":"Enumeration","value":"Create"},
            {"tag":"RequestPayload","value":[
                {"tag":"ObjectType","type":"Enumeration","value":"SymmetricKey"},
                {"tag":"Attributes","value":[
                    {"tag":"CryptographicAlgorithm","type":"Enumeration","value":"AES"},
                    {"tag":"CryptographicLength","type":"Integer","value":256},
                    {"tag":"CryptographicUsageMask","type":"Integer","value":"Encrypt|Decrypt"}]}]}]}]}"#;
    let (headers, body) = curl("POST", "/kmip", "application/json", create.as_bytes());
    assert!(headers.contains("content-type: application/json\r\n"), "{headers}");
    let text = String::from_utf8(body).unwrap();
    let response = rampart_kmip::json::from_json(&text, &XmlLimits::default()).unwrap();
    let mut ids = Vec::new();
    fn find<'a>(item: &'a Item, tag: Tag, out: &mut Vec<&'a Item>) {
        if item.tag == tag {
            out.push(item);
        }
        if let rampart_kmip::Value::Structure(c) = &item.value {
            c.iter().for_each(|c| find(c, tag, out));
        }
    }
    find(&response, Tag::UNIQUE_IDENTIFIER, &mut ids);
    let uid =
        ids.first().unwrap_or_else(|| panic!("no Unique Identifier: {text}")).as_text().unwrap();
    let get = RequestMessage::new(
        ProtocolVersion::V2_1,
        vec![(Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])],
    );
    let (headers, body) =
        curl("POST", "/kmip", "application/octet-stream", &get.to_item().encode().unwrap());
    assert!(headers.contains("content-type: application/octet-stream\r\n"), "{headers}");
    let got = rampart_kmip::ttlv::decode(&body, &rampart_kmip::Limits::default()).unwrap();
    let answer = rampart_kmip::message::ResponseMessage::parse(&got).unwrap();
    assert_eq!(answer.batch_items[0].result_status, ResultStatus::SUCCESS);

    // A malformed message is a KMIP error (Invalid Message) in a 200.
    let (headers, body) = curl("POST", "/kmip", "application/json", b"{\"tag\":\"NoSuchTag\"}");
    assert!(headers.starts_with("http/1.1 200"), "{headers}");
    let response =
        rampart_kmip::json::from_json(std::str::from_utf8(&body).unwrap(), &XmlLimits::default())
            .unwrap();
    let answer = rampart_kmip::message::ResponseMessage::parse(&response).unwrap();
    assert_eq!(answer.batch_items[0].result_reason, Some(ResultReason::INVALID_MESSAGE));
    // Not KMIP requests: HTTP errors.
    assert!(curl("POST", "/other", "text/xml", query.as_bytes()).0.starts_with("http/1.1 404"));
    let (headers, _) = curl("PUT", "/kmip", "text/xml", query.as_bytes());
    assert!(headers.starts_with("http/1.1 405") && headers.contains("allow: post"), "{headers}");
    assert!(curl("POST", "/kmip", "text/plain", query.as_bytes()).0.starts_with("http/1.1 415"));
    let audit = d.audit_ops().await;
    for op in ["kmip.query", "kmip.create", "kmip.get"] {
        assert!(
            audit.iter().any(|(c, o, r)| c == "admin" && o == op && r == "ok"),
            "{op}: {audit:?}"
        );
    }
    assert!(audit.iter().any(|(_, o, r)| o == "kmip.message" && r == "invalid"), "{audit:?}");
}
