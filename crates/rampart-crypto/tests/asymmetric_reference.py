"""pyca/cryptography's side of tests/asymmetric.rs: one JSON request a
line on stdin, one JSON answer a line on stdout."""

import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

HASHES = {
    "sha1": hashes.SHA1,
    "sha224": hashes.SHA224,
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}


def rsa_sig_padding(req):
    if req["scheme"] == "pkcs1":
        return padding.PKCS1v15()
    salt = req.get("salt")
    return padding.PSS(
        mgf=padding.MGF1(HASHES[req["mgf1"]]()),
        salt_length=padding.PSS.AUTO if salt is None and req["op"] == "verify" else
        (padding.PSS.DIGEST_LENGTH if salt is None else salt),
    )


def enc_padding(req):
    if req["padding"] == "pkcs1":
        return padding.PKCS1v15()
    return padding.OAEP(
        mgf=padding.MGF1(HASHES[req["mgf1"]]()),
        algorithm=HASHES[req["hash"]](),
        label=None,
    )


def algorithm(req):
    alg = HASHES[req["hash"]]()
    return utils.Prehashed(alg) if req.get("prehashed") else alg


def sign(req):
    key = serialization.load_der_private_key(bytes.fromhex(req["key"]), None)
    data = bytes.fromhex(req["data"])
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(data)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(data, ec.ECDSA(algorithm(req)))
    return key.sign(data, rsa_sig_padding(req), algorithm(req))


def verify(req):
    key = serialization.load_der_public_key(bytes.fromhex(req["key"]))
    data = bytes.fromhex(req["data"])
    sig = bytes.fromhex(req["sig"])
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(sig, data)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(sig, data, ec.ECDSA(algorithm(req)))
        else:
            key.verify(sig, data, rsa_sig_padding(req), algorithm(req))
        return b"\x01"
    except InvalidSignature:
        return b"\x00"


def recover(req):
    """The input of a raw RSA PKCS#1 v1.5 signature (no DigestInfo)."""
    key = serialization.load_der_public_key(bytes.fromhex(req["key"]))
    return key.recover_data_from_signature(bytes.fromhex(req["sig"]), padding.PKCS1v15(), None)


def generate(req):
    kind = req["kind"]
    if kind == "rsa":
        key = rsa.generate_private_key(65537, req["bits"])
    elif kind == "ed25519":
        key = ed25519.Ed25519PrivateKey.generate()
    else:
        key = ec.generate_private_key({"p256": ec.SECP256R1(), "p384": ec.SECP384R1(),
                                       "p521": ec.SECP521R1()}[kind])
    return key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public(req):
    key = serialization.load_der_private_key(bytes.fromhex(req["key"]), None)
    return key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def encrypt(req):
    key = serialization.load_der_public_key(bytes.fromhex(req["key"]))
    return key.encrypt(bytes.fromhex(req["data"]), enc_padding(req))


def decrypt(req):
    key = serialization.load_der_private_key(bytes.fromhex(req["key"]), None)
    return key.decrypt(bytes.fromhex(req["data"]), enc_padding(req))


OPS = {"sign": sign, "verify": verify, "generate": generate, "public": public, "recover": recover,
       "encrypt": encrypt, "decrypt": decrypt}


def main():
    for line in sys.stdin:
        req = json.loads(line)
        out = OPS[req["op"]](req)
        sys.stdout.write(json.dumps({"out": out.hex()}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
