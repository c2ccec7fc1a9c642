//! Option haggling from a raw client: what is refused politely (the
//! connection goes on), what ends the connection, and what each
//! negotiated option changes.

use std::io;
use std::sync::Arc;

use rampart_nbd::proto::*;
use rampart_nbd::{ServerConfig, TlsMode};

use crate::client::*;

/// After a refused option, `NBD_OPT_GO` still enters transmission and a
/// read is served.
async fn still_serves(mut client: Client) {
    let (size, _) = client.go("").await;
    assert_eq!(size, SIZE);
    let data = client.simple_read(1, 4096, 512).await.unwrap();
    assert_eq!(data, (4096..4608u64).map(|i| (i % 251) as u8).collect::<Vec<_>>());
}

fn invalid_data(ended: io::Result<()>) {
    let error = ended.expect_err("the server ended the connection cleanly");
    assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
}

#[tokio::test]
async fn an_option_over_the_limit_is_refused_and_the_connection_goes_on() {
    let mut client = Client::haggle(patterned()).await;
    let oversize = vec![0u8; MAX_OPTION as usize + 1];
    client.option(OPT_INFO, &oversize).await;
    let reply = client.option_reply().await;
    assert_eq!((reply.option, reply.kind), (OPT_INFO, REP_ERR_TOO_BIG), "{reply:?}");
    still_serves(client).await;
}

#[tokio::test]
async fn an_option_too_long_to_skip_ends_the_connection() {
    let mut client = Client::haggle(patterned()).await;
    let mut header = IHAVEOPT.to_be_bytes().to_vec();
    header.extend_from_slice(&OPT_GO.to_be_bytes());
    header.extend_from_slice(&u32::MAX.to_be_bytes());
    client.send(&header).await;
    invalid_data(client.closed().await);
}

#[tokio::test]
async fn unknown_options_are_unsupported_and_the_connection_goes_on() {
    let mut client = Client::haggle(patterned()).await;
    client.option(0x7777, b"whatever").await;
    let reply = client.option_reply().await;
    assert_eq!((reply.option, reply.kind), (0x7777, REP_ERR_UNSUP), "{reply:?}");
    still_serves(client).await;
}

#[tokio::test]
async fn malformed_info_and_list_are_invalid() {
    let mut client = Client::haggle(patterned()).await;
    // The name claims 10 bytes; 3 follow.
    let mut truncated = 10u32.to_be_bytes().to_vec();
    truncated.extend_from_slice(b"abc");
    client.option(OPT_INFO, &truncated).await;
    assert_eq!(client.option_reply().await.kind, REP_ERR_INVALID);
    let mut trailing = info_payload("", &[]);
    trailing.push(0);
    client.option(OPT_GO, &trailing).await;
    assert_eq!(client.option_reply().await.kind, REP_ERR_INVALID);
    client.option(OPT_LIST, b"x").await;
    assert_eq!(client.option_reply().await.kind, REP_ERR_INVALID);
    still_serves(client).await;
}

#[tokio::test]
async fn go_and_info_for_an_unknown_export_are_refused_and_the_connection_goes_on() {
    let mut client = Client::haggle(patterned()).await;
    for option in [OPT_GO, OPT_INFO] {
        client.option(option, &info_payload("nope", &[])).await;
        let reply = client.option_reply().await;
        assert_eq!((reply.option, reply.kind), (option, REP_ERR_UNKNOWN), "{reply:?}");
        assert!(String::from_utf8_lossy(&reply.data).contains("nope"), "{reply:?}");
    }
    still_serves(client).await;
}

#[tokio::test]
async fn export_name_of_an_unknown_export_ends_the_connection() {
    let mut client = Client::haggle(patterned()).await;
    client.option(OPT_EXPORT_NAME, b"nope").await;
    invalid_data(client.closed().await);
}

#[tokio::test]
async fn export_name_enters_transmission_with_size_and_flags() {
    let mut client = Client::haggle(patterned()).await;
    client.option(OPT_EXPORT_NAME, b"").await;
    // No zero padding: NO_ZEROES was sent.
    let answer = client.read(10).await;
    assert_eq!(u64::from_be_bytes(answer[..8].try_into().unwrap()), SIZE);
    let flags = u16::from_be_bytes([answer[8], answer[9]]);
    assert_eq!(flags & FLAG_HAS_FLAGS, FLAG_HAS_FLAGS);
    assert_eq!(flags & FLAG_READ_ONLY, 0);
    assert_eq!(client.simple_read(1, 0, 16).await.unwrap(), (0..16).collect::<Vec<u8>>());
}

#[tokio::test]
async fn export_name_pads_with_zeroes_unless_the_client_declines_them() {
    let config = ServerConfig::new(vec![export("", patterned())]);
    let mut client = Client::connect(config).await;
    client.send_flags(FLAG_C_FIXED_NEWSTYLE).await;
    client.option(OPT_EXPORT_NAME, b"").await;
    let answer = client.read(10 + 124).await;
    assert_eq!(u64::from_be_bytes(answer[..8].try_into().unwrap()), SIZE);
    assert!(answer[10..].iter().all(|&b| b == 0));
    assert_eq!(client.simple_read(1, 0, 16).await.unwrap(), (0..16).collect::<Vec<u8>>());
}

#[tokio::test]
async fn unknown_client_flags_end_the_connection() {
    let config = ServerConfig::new(vec![export("", patterned())]);
    let mut client = Client::connect(config).await;
    client.send_flags(FLAG_C_FIXED_NEWSTYLE | 1 << 7).await;
    invalid_data(client.closed().await);
}

#[tokio::test]
async fn a_bad_option_magic_ends_the_connection() {
    let mut client = Client::haggle(patterned()).await;
    client.send(b"NOT-IHAVEOPT....").await;
    invalid_data(client.closed().await);
}

#[tokio::test]
async fn abort_is_acknowledged_and_ends_cleanly() {
    let mut client = Client::haggle(patterned()).await;
    client.option(OPT_ABORT, &[]).await;
    assert_eq!(client.option_reply().await.kind, REP_ACK);
    client.closed().await.unwrap();
}

#[tokio::test]
async fn info_describes_the_export_and_haggling_goes_on() {
    let mut client = Client::haggle(patterned()).await;
    client.option(OPT_INFO, &info_payload("", &[INFO_NAME, INFO_DESCRIPTION])).await;
    let mut seen = Vec::new();
    loop {
        let reply = client.option_reply().await;
        assert_eq!(reply.option, OPT_INFO, "{reply:?}");
        if reply.kind == REP_ACK {
            break;
        }
        assert_eq!(reply.kind, REP_INFO, "{reply:?}");
        let kind = u16::from_be_bytes([reply.data[0], reply.data[1]]);
        let body = &reply.data[2..];
        match kind {
            INFO_EXPORT => {
                assert_eq!(body.len(), 10);
                assert_eq!(u64::from_be_bytes(body[..8].try_into().unwrap()), SIZE);
            }
            INFO_NAME => assert_eq!(body, b""),
            INFO_DESCRIPTION => assert_eq!(body, b" in memory"),
            INFO_BLOCK_SIZE => {
                let sizes: Vec<u32> = body
                    .chunks(4)
                    .map(|word| u32::from_be_bytes(word.try_into().unwrap()))
                    .collect();
                assert_eq!(sizes[0], 512, "minimum");
                assert!(sizes[1] >= 512, "preferred {}", sizes[1]);
                assert_eq!(sizes[2], MAX_REQUEST, "maximum");
            }
            other => panic!("unexpected information {other}"),
        }
        seen.push(kind);
    }
    seen.sort_unstable();
    assert_eq!(seen, [INFO_EXPORT, INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE]);
    still_serves(client).await;
}

#[tokio::test]
async fn list_names_every_export() {
    let exports = vec![export("a", patterned()), export("b", patterned())];
    let mut client = Client::connect(ServerConfig::new(exports)).await;
    client.send_flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    client.option(OPT_LIST, &[]).await;
    let mut names = Vec::new();
    loop {
        let reply = client.option_reply().await;
        if reply.kind == REP_ACK {
            break;
        }
        assert_eq!(reply.kind, REP_SERVER, "{reply:?}");
        let len = u32::from_be_bytes(reply.data[..4].try_into().unwrap()) as usize;
        names.push(String::from_utf8(reply.data[4..4 + len].to_vec()).unwrap());
        assert!(reply.data[4 + len..].ends_with(b"in memory"), "{reply:?}");
    }
    assert_eq!(names, ["a", "b"]);
}

#[tokio::test]
async fn structured_replies_are_negotiated_by_an_empty_option() {
    // Without them: no DF flag.
    let mut plain = Client::haggle(patterned()).await;
    let (_, flags) = plain.go("").await;
    assert_eq!(flags & FLAG_SEND_DF, 0);

    let mut client = Client::haggle(patterned()).await;
    client.option(OPT_STRUCTURED_REPLY, b"x").await;
    assert_eq!(client.option_reply().await.kind, REP_ERR_INVALID, "a payload is invalid");
    client.option(OPT_STRUCTURED_REPLY, &[]).await;
    let reply = client.option_reply().await;
    assert_eq!((reply.option, reply.kind, reply.data.len()), (OPT_STRUCTURED_REPLY, REP_ACK, 0));
    let (_, flags) = client.go("").await;
    assert_eq!(flags & FLAG_SEND_DF, FLAG_SEND_DF);
    // A read is answered in a chunk.
    client.request(0, CMD_READ, 1, 0, 16).await;
    let chunk = client.chunk().await;
    assert_eq!((chunk.kind, chunk.handle), (REPLY_TYPE_OFFSET_DATA, 1), "{chunk:?}");
}

#[tokio::test]
async fn meta_contexts_need_structured_replies_and_a_known_export() {
    let mut client = Client::haggle(patterned()).await;
    let query = meta_context_payload("", BASE_ALLOCATION);
    client.option(OPT_SET_META_CONTEXT, &query).await;
    assert_eq!(client.option_reply().await.kind, REP_ERR_INVALID, "before structured replies");
    client.option(OPT_STRUCTURED_REPLY, &[]).await;
    assert_eq!(client.option_reply().await.kind, REP_ACK);
    client.option(OPT_SET_META_CONTEXT, &meta_context_payload("nope", BASE_ALLOCATION)).await;
    assert_eq!(client.option_reply().await.kind, REP_ERR_UNKNOWN);
    // Listing names the context with id 0; setting gives it its id.
    for (option, id) in [(OPT_LIST_META_CONTEXT, 0), (OPT_SET_META_CONTEXT, BASE_ALLOCATION_ID)] {
        client.option(option, &query).await;
        let reply = client.option_reply().await;
        assert_eq!((reply.option, reply.kind), (option, REP_META_CONTEXT), "{reply:?}");
        assert_eq!(u32::from_be_bytes(reply.data[..4].try_into().unwrap()), id);
        assert_eq!(&reply.data[4..], BASE_ALLOCATION.as_bytes());
        assert_eq!(client.option_reply().await.kind, REP_ACK);
    }
    // A query for another context selects nothing, and the last SET
    // wins: block status is then refused.
    client.option(OPT_SET_META_CONTEXT, &meta_context_payload("", "x-other:thing")).await;
    assert_eq!(client.option_reply().await.kind, REP_ACK);
    client.go("").await;
    client.request(0, CMD_BLOCK_STATUS, 1, 0, 4096).await;
    let chunk = client.chunk().await;
    assert_eq!((chunk.kind, chunk.handle), (REPLY_TYPE_ERROR, 1), "{chunk:?}");
    assert_eq!(u32::from_be_bytes(chunk.payload[..4].try_into().unwrap()), EINVAL);
}

#[tokio::test]
async fn starttls_is_refused_by_a_server_without_tls() {
    let mut client = Client::haggle(patterned()).await;
    client.option(OPT_STARTTLS, &[]).await;
    let reply = client.option_reply().await;
    assert_eq!((reply.option, reply.kind), (OPT_STARTTLS, REP_ERR_POLICY), "{reply:?}");
    still_serves(client).await;
}

/// A server that requires TLS, with a throwaway self-signed certificate
/// for `localhost`, and that certificate.
fn tls_required() -> (ServerConfig, rustls_pki_types::CertificateDer<'static>) {
    use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let mut config = ServerConfig::new(vec![export("", patterned())]);
    config.tls = Some(Arc::new(tls));
    config.tls_mode = TlsMode::Required;
    (config, cert.der().clone())
}

#[tokio::test]
async fn a_tls_only_server_refuses_every_option_but_starttls_and_abort() {
    let mut client = Client::connect(tls_required().0).await;
    client.send_flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    for option in [OPT_GO, OPT_INFO, OPT_LIST, OPT_STRUCTURED_REPLY] {
        client.option(option, &info_payload("", &[])).await;
        let reply = client.option_reply().await;
        assert_eq!((reply.option, reply.kind), (option, REP_ERR_TLS_REQD), "{reply:?}");
    }
    client.option(OPT_STARTTLS, b"x").await;
    assert_eq!(client.option_reply().await.kind, REP_ERR_INVALID, "STARTTLS takes no data");
    client.option(OPT_STARTTLS, &[]).await;
    let reply = client.option_reply().await;
    assert_eq!((reply.option, reply.kind), (OPT_STARTTLS, REP_ACK), "{reply:?}");

    let mut client = Client::connect(tls_required().0).await;
    client.send_flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    client.option(OPT_EXPORT_NAME, b"").await;
    invalid_data(client.closed().await);

    let mut client = Client::connect(tls_required().0).await;
    client.send_flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    client.option(OPT_ABORT, &[]).await;
    assert_eq!(client.option_reply().await.kind, REP_ACK);
    client.closed().await.unwrap();
}

/// After `NBD_OPT_STARTTLS` the whole session runs over TLS: options the
/// server refused in clear are served, `NBD_OPT_GO` enters transmission,
/// and reads and writes go through.
#[tokio::test]
async fn starttls_then_go_serves_the_export_over_tls() {
    let (config, root) = tls_required();
    let mut client = Client::connect(config).await;
    client.send_flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    let mut client = client.starttls(root).await;
    client.option(OPT_LIST, &[]).await;
    let reply = client.option_reply().await;
    assert_eq!((reply.option, reply.kind), (OPT_LIST, REP_SERVER), "a list over TLS: {reply:?}");
    assert_eq!(client.option_reply().await.kind, REP_ACK);
    let (size, _) = client.go("").await;
    assert_eq!(size, SIZE);
    let data = client.simple_read(1, 4096, 512).await.unwrap();
    let expected: Vec<u8> = (4096..4096 + 512).map(|i: u64| (i % 251) as u8).collect();
    assert_eq!(data, expected);
    assert_eq!(client.simple_write(2, 0, &[7; 512], CMD_FLAG_FUA).await, 0);
    assert_eq!(client.simple_read(3, 0, 512).await.unwrap(), vec![7; 512]);
}
