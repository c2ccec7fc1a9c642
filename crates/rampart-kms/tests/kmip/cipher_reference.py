"""Reference encryptions for the key manager's Encrypt/Decrypt tests.

Reads one JSON object a line: alg (aes, 3des, chacha20, chacha20poly1305),
mode (ecb, cbc, ctr, gcm, xts, kw, kwp; none for the ChaCha20 ones), key,
iv, aad, data (hex), pad (PKCS #5 for ECB/CBC), tag_len, counter
(ChaCha20's first block). Prints for each the ciphertext and tag in hex,
space-separated, computed with pyca/cryptography.
"""

import json
import sys

from cryptography.hazmat.primitives import keywrap, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

try:
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
except ImportError:  # cryptography before 43
    from cryptography.hazmat.primitives.ciphers.algorithms import TripleDES


def run(case):
    key = bytes.fromhex(case["key"])
    iv = bytes.fromhex(case.get("iv", ""))
    aad = bytes.fromhex(case.get("aad", ""))
    data = bytes.fromhex(case["data"])
    alg, mode = case["alg"], case.get("mode", "none")
    if alg == "chacha20":
        counter = case.get("counter", 0)
        width = 16 - len(iv)
        nonce = counter.to_bytes(width, "little") + iv
        enc = Cipher(algorithms.ChaCha20(key, nonce), None).encryptor()
        return enc.update(data), b""
    if alg == "chacha20poly1305":
        out = ChaCha20Poly1305(key).encrypt(iv, data, aad or None)
        return out[:-16], out[-16:][: case.get("tag_len", 16)]
    if mode == "kw":
        return keywrap.aes_key_wrap(key, data), b""
    if mode == "kwp":
        return keywrap.aes_key_wrap_with_padding(key, data), b""
    cipher = algorithms.AES(key) if alg == "aes" else TripleDES(key)
    if case.get("pad"):
        padder = padding.PKCS7(cipher.block_size).padder()
        data = padder.update(data) + padder.finalize()
    chosen = {
        "ecb": lambda: modes.ECB(),
        "cbc": lambda: modes.CBC(iv),
        "ctr": lambda: modes.CTR(iv),
        "gcm": lambda: modes.GCM(iv),
        "xts": lambda: modes.XTS(iv),
    }[mode]()
    enc = Cipher(cipher, chosen).encryptor()
    if mode == "gcm":
        enc.authenticate_additional_data(aad)
    out = enc.update(data) + enc.finalize()
    tag = enc.tag[: case.get("tag_len", 16)] if mode == "gcm" else b""
    return out, tag


for line in sys.stdin:
    if line.strip():
        ct, tag = run(json.loads(line))
        print(ct.hex(), tag.hex() or "-")
