//! Known-answer tests of the general ciphers the key manager's Encrypt and
//! Decrypt serve: AES-GCM with any IV length and truncated tags, ChaCha20
//! and ChaCha20-Poly1305 (RFC 8439), Triple DES (SP 800-67) and AES in
//! ECB/CBC with PKCS #5 padding.

use rampart_crypto::{
    chacha20, chacha20_poly1305_open, chacha20_poly1305_seal, gcm_open, gcm_seal, pkcs5_pad,
    pkcs5_unpadded_len, BlockAlg, BlockCipher, BlockMode, CryptoError, GcmStream,
};

use crate::kat::load;

#[test]
fn gcm_with_8_and_60_byte_ivs_and_truncated_tags() {
    let mut vectors = load("gcm_any_iv.txt");
    assert!(vectors.len() >= 10);
    // The 96-bit, full-tag vectors run through the same general path.
    vectors.extend(load("gcm.txt"));
    for v in &vectors {
        let (key, iv, aad, plain) = (v.hex("Key"), v.hex("IV"), v.hex("AAD"), v.hex("PT"));
        let tag_len = v.hex("Tag").len();
        let mut data = plain.clone();
        let tag = gcm_seal(&key, &iv, &aad, &mut data, tag_len).unwrap();
        assert_eq!(hex::encode(&data), v.text("CT"), "line {}", v.line);
        assert_eq!(hex::encode(&tag), v.text("Tag"), "line {}", v.line);

        // The same message in two parts.
        let mut stream = GcmStream::new(&key, &iv, true).unwrap();
        stream.aad(&aad).unwrap();
        let mut parts = plain.clone();
        let (first, second) = parts.split_at_mut(plain.len() / 2);
        stream.update(first).unwrap();
        stream.update(second).unwrap();
        assert_eq!(stream.finish_encrypt(tag_len).unwrap(), tag);
        assert_eq!(parts, data);

        let mut opened = data.clone();
        gcm_open(&key, &iv, &aad, &mut opened, &tag).unwrap();
        assert_eq!(opened, plain);
        let mut bad = tag.clone();
        bad[0] ^= 1;
        let mut copy = data.clone();
        assert_eq!(
            gcm_open(&key, &iv, &aad, &mut copy, &bad),
            Err(CryptoError::AuthenticationFailed)
        );
        assert!(copy.iter().all(|&b| b == 0), "no unauthenticated plaintext is left behind");
        let mut other_iv = iv.clone();
        other_iv[0] ^= 1;
        let mut copy = data.clone();
        assert!(gcm_open(&key, &other_iv, &aad, &mut copy, &tag).is_err());
    }
}

#[test]
fn gcm_refuses_empty_ivs_and_tags_past_16_bytes() {
    let mut data = [0u8; 16];
    assert!(gcm_seal(&[0; 16], &[], &[], &mut data, 16).is_err());
    assert!(gcm_seal(&[0; 16], &[0; 12], &[], &mut data, 17).is_err());
    assert!(gcm_seal(&[0; 16], &[0; 12], &[], &mut data, 0).is_err());
    assert!(gcm_seal(&[0; 20], &[0; 12], &[], &mut data, 16).is_err());
    assert!(gcm_open(&[0; 16], &[0; 12], &[], &mut data, &[]).is_err());
}

/// RFC 8439 §2.4.2's plaintext ("Ladies and Gentlemen of the class of
/// '99...").
const SUNSCREEN: &str = "4c616469657320616e642047656e746c656d656e206f662074686520636c617373206f66202739393a204966204920636f756c64206f6666657220796f75206f6e6c79206f6e652074697020666f7220746865206675747572652c2073756e73637265656e20776f756c642062652069742e";

#[test]
fn chacha20_rfc8439_2_4_2() {
    let key: Vec<u8> = (0u8..32).collect();
    let nonce = hex::decode("000000000000004a00000000").unwrap();
    let mut data = hex::decode(SUNSCREEN).unwrap();
    chacha20(&key, &nonce, 1, &mut data).unwrap();
    assert_eq!(
        hex::encode(&data),
        "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0bf91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d807ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab77937365af90bbf74a35be6b40b8eedf2785e42874d"
    );
    chacha20(&key, &nonce, 1, &mut data).unwrap();
    assert_eq!(hex::encode(&data), SUNSCREEN);
}

#[test]
fn chacha20_with_a_64_bit_nonce_is_the_original_construction() {
    // RFC 8439 Appendix A.1 test vector #1 (all-zero key and nonce): the
    // 8-byte nonce form gives the same key stream.
    let mut data = [0u8; 64];
    chacha20(&[0; 32], &[0; 8], 0, &mut data).unwrap();
    assert_eq!(
        hex::encode(data),
        "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"
    );
    let mut twelve = [0u8; 64];
    chacha20(&[0; 32], &[0; 12], 0, &mut twelve).unwrap();
    assert_eq!(data, twelve);
    // A counter that would wrap is refused, as are other nonce lengths.
    assert!(chacha20(&[0; 32], &[0; 12], u32::MAX, &mut [0u8; 128]).is_err());
    assert!(chacha20(&[0; 32], &[0; 16], 0, &mut [0u8; 1]).is_err());
    assert!(chacha20(&[0; 31], &[0; 12], 0, &mut [0u8; 1]).is_err());
}

#[test]
fn chacha20_poly1305_rfc8439_2_8_2() {
    let key: Vec<u8> = (0x80u8..0xa0).collect();
    let nonce = hex::decode("070000004041424344454647").unwrap();
    let aad = hex::decode("50515253c0c1c2c3c4c5c6c7").unwrap();
    let plain = hex::decode(SUNSCREEN).unwrap();
    let mut data = plain.clone();
    let tag = chacha20_poly1305_seal(&key, &nonce, &aad, &mut data, 16).unwrap();
    assert_eq!(
        hex::encode(&data),
        "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116"
    );
    assert_eq!(hex::encode(&tag), "1ae10b594f09e26a7e902ecbd0600691");
    let mut opened = data.clone();
    chacha20_poly1305_open(&key, &nonce, &aad, &mut opened, &tag).unwrap();
    assert_eq!(opened, plain);
    // A 12-byte tag is the full tag's prefix and opens too.
    let short = chacha20_poly1305_seal(&key, &nonce, &aad, &mut plain.clone(), 12).unwrap();
    assert_eq!(short, tag[..12]);
    let mut opened = data.clone();
    chacha20_poly1305_open(&key, &nonce, &aad, &mut opened, &short).unwrap();
    assert_eq!(opened, plain);
    let mut bad = tag.clone();
    bad[15] ^= 1;
    let mut copy = data.clone();
    assert_eq!(
        chacha20_poly1305_open(&key, &nonce, &aad, &mut copy, &bad),
        Err(CryptoError::AuthenticationFailed)
    );
    assert!(copy.iter().all(|&b| b == 0));
    assert!(chacha20_poly1305_seal(&key, &nonce[..8], &aad, &mut [0u8; 4], 16).is_err());
}

#[test]
fn triple_des_sp800_67_example() {
    // SP 800-67 Rev. 1 Appendix B: three keys, "The qufck brown fox jump".
    let key = hex::decode("0123456789abcdef23456789abcdef01456789abcdef0123").unwrap();
    let plain = hex::decode("54686520717566636b2062726f776e20666f78206a756d70").unwrap();
    let mut data = plain.clone();
    BlockCipher::new(BlockAlg::TripleDes, BlockMode::Ecb, &key, true)
        .unwrap()
        .apply(&[], &mut data)
        .unwrap();
    assert_eq!(hex::encode(&data), "a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900");
    BlockCipher::new(BlockAlg::TripleDes, BlockMode::Ecb, &key, false)
        .unwrap()
        .apply(&[], &mut data)
        .unwrap();
    assert_eq!(data, plain);

    // Keying option 2 (16 bytes) is option 1 with K3 = K1.
    let two = &key[..16];
    let mut three = two.to_vec();
    three.extend_from_slice(&key[..8]);
    let iv = [7u8; 8];
    let mut a = plain.clone();
    let mut b = plain.clone();
    BlockCipher::new(BlockAlg::TripleDes, BlockMode::Cbc, two, true)
        .unwrap()
        .apply(&iv, &mut a)
        .unwrap();
    BlockCipher::new(BlockAlg::TripleDes, BlockMode::Cbc, &three, true)
        .unwrap()
        .apply(&iv, &mut b)
        .unwrap();
    assert_eq!(a, b);
    assert_ne!(a, plain);

    // Wrong key, IV and data lengths are typed errors.
    assert!(matches!(
        BlockCipher::new(BlockAlg::TripleDes, BlockMode::Cbc, &[0; 8], true),
        Err(CryptoError::InvalidKeyLength { .. })
    ));
    let mut cbc = BlockCipher::new(BlockAlg::TripleDes, BlockMode::Cbc, &key, true).unwrap();
    assert!(cbc.apply(&[0; 16], &mut [0u8; 8]).is_err());
    assert!(cbc.apply(&iv, &mut [0u8; 12]).is_err());
}

#[test]
fn aes_ecb_fips197_and_cbc_sp800_38a_through_the_block_cipher() {
    for v in load("aes_ecb.txt") {
        let mut data = v.hex("PT");
        BlockCipher::new(BlockAlg::Aes, BlockMode::Ecb, &v.hex("Key"), true)
            .unwrap()
            .apply(&[], &mut data)
            .unwrap();
        assert_eq!(hex::encode(&data), v.text("CT"), "line {}", v.line);
    }
    for v in load("aes_cbc.txt") {
        let mut data = v.hex("CT");
        BlockCipher::new(BlockAlg::Aes, BlockMode::Cbc, &v.hex("Key"), false)
            .unwrap()
            .apply(&v.hex("IV"), &mut data)
            .unwrap();
        assert_eq!(data, v.hex("PT"), "line {}", v.line);
    }
}

#[test]
fn pkcs5_padding_round_trips_and_rejects_malformed_padding() {
    for len in 0..40 {
        let data = vec![0xAB; len];
        let padded = pkcs5_pad(&data, 16);
        assert_eq!(padded.len() % 16, 0);
        assert!(padded.len() > len);
        assert_eq!(pkcs5_unpadded_len(padded.expose(), 16).unwrap(), len);
    }
    let mut block = [4u8; 16];
    assert_eq!(pkcs5_unpadded_len(&block, 16).unwrap(), 12);
    block[13] = 3;
    assert!(pkcs5_unpadded_len(&block, 16).is_err());
    assert!(pkcs5_unpadded_len(&[0u8; 16], 16).is_err());
    assert!(pkcs5_unpadded_len(&[17u8; 16], 16).is_err());
    assert!(pkcs5_unpadded_len(&[9u8; 8], 8).is_err());
    assert!(pkcs5_unpadded_len(&[], 16).is_err());
}
