"""Google Tink's StreamingAead (AES-GCM-HKDF, SHA-256, 32-byte derived key)
as the reference for Rampart's file bodies.

usage: tink_stream.py encrypt|decrypt KEY_HEX SEGMENT_SIZE AD_FILE IN OUT
"""
import sys

import tink
from tink import cleartext_keyset_handle, streaming_aead
from tink.proto import aes_gcm_hkdf_streaming_pb2, common_pb2, tink_pb2


def primitive(key_hex, segment_size):
    key = aes_gcm_hkdf_streaming_pb2.AesGcmHkdfStreamingKey(
        version=0,
        key_value=bytes.fromhex(key_hex),
        params=aes_gcm_hkdf_streaming_pb2.AesGcmHkdfStreamingParams(
            ciphertext_segment_size=segment_size,
            derived_key_size=32,
            hkdf_hash_type=common_pb2.SHA256,
        ),
    )
    keyset = tink_pb2.Keyset(
        primary_key_id=1,
        key=[
            tink_pb2.Keyset.Key(
                key_data=tink_pb2.KeyData(
                    type_url="type.googleapis.com/google.crypto.tink.AesGcmHkdfStreamingKey",
                    value=key.SerializeToString(),
                    key_material_type=tink_pb2.KeyData.SYMMETRIC,
                ),
                status=tink_pb2.ENABLED,
                key_id=1,
                output_prefix_type=tink_pb2.RAW,
            )
        ],
    )
    return cleartext_keyset_handle.from_keyset(keyset).primitive(streaming_aead.StreamingAead)


def main():
    op, key_hex, segment_size, ad_file, src, dst = sys.argv[1:]
    streaming_aead.register()
    aead = primitive(key_hex, int(segment_size))
    with open(ad_file, "rb") as f:
        ad = f.read()
    if op == "encrypt":
        with open(src, "rb") as plain, open(dst, "wb") as out:
            with aead.new_encrypting_stream(out, ad) as stream:
                stream.write(plain.read())
    else:
        with open(src, "rb") as cipher, open(dst, "wb") as out:
            with aead.new_decrypting_stream(cipher, ad) as stream:
                out.write(stream.read())


if __name__ == "__main__":
    try:
        main()
    except tink.TinkError as e:
        print(f"tink: {e}", file=sys.stderr)
        sys.exit(3)
