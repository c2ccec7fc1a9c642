#!/usr/bin/env python3
"""Drives a Rampart KMIP server with PyKMIP's client (the independent
reference implementation) and prints what came back as JSON, for
kms_kmip_pykmip.rs to check.

Usage: pykmip_driver.py HOST PORT CERT KEY CA

PyKMIP builds its own ssl.SSLContext from ssl_version, so a TLS 1.2
context is asked for (PyKMIP 0.11 cannot verify host names; the CA is
still verified)."""
import json
import sys
import warnings

from kmip.core import enums
from kmip.core.messages.contents import ProtocolVersion
from kmip.pie.client import ProxyKmipClient
from kmip.pie.exceptions import KmipOperationFailure
from kmip.services.kmip_client import KMIPProxy

warnings.simplefilter("ignore", DeprecationWarning)


def main():
    host, port, cert, key, ca = sys.argv[1:6]
    out = {}
    for name, version in [("1.2", enums.KMIPVersion.KMIP_1_2), ("1.4", enums.KMIPVersion.KMIP_1_4),
                          ("2.0", enums.KMIPVersion.KMIP_2_0)]:
        proxy = KMIPProxy(host=host, port=int(port), certfile=cert, keyfile=key, ca_certs=ca,
                          cert_reqs="CERT_REQUIRED", ssl_version="PROTOCOL_TLSv1_2",
                          config_file="/dev/null", kmip_version=version)
        proxy.open()
        try:
            tls = proxy.socket.version()
            discovered = proxy.discover_versions()
            asked = proxy.discover_versions(protocol_versions=[
                ProtocolVersion(1, 3), ProtocolVersion(1, 1),
            ])
            query = proxy.query(query_functions=[enums.QueryFunction.QUERY_OPERATIONS,
                                                 enums.QueryFunction.QUERY_OBJECTS,
                                                 enums.QueryFunction.QUERY_SERVER_INFORMATION])
            out[name] = {
                "tls": tls,
                "discover_status": discovered.result_status.value.name,
                "versions": [[v.major, v.minor] for v in discovered.protocol_versions],
                "asked_versions": [[v.major, v.minor] for v in asked.protocol_versions],
                "query_status": query.result_status.value.name,
                "operations": [op.name for op in (query.operations or [])],
                "object_types": [t.name for t in (query.object_types or [])],
                "vendor": query.vendor_identification,
            }
        finally:
            proxy.close()
    # Operations the server does not serve, and an unknown object: PyKMIP
    # gets well-formed failures with Result Reasons, and the connection
    # survives them.
    client = ProxyKmipClient(hostname=host, port=int(port), cert=cert, key=key, ca=ca,
                             ssl_version="PROTOCOL_TLSv1_2", config_file="/dev/null",
                             kmip_version=enums.KMIPVersion.KMIP_1_2)
    with client:
        failures = {}
        for op, call in [("derive_key", lambda: client.derive_key(
                             enums.ObjectType.SYMMETRIC_KEY, ["no-such-key/1"],
                             enums.DerivationMethod.HASH,
                             {"cryptographic_parameters": {
                                 "hashing_algorithm": enums.HashingAlgorithm.SHA_256}})),
                         ("get_unknown", lambda: client.get("no-such-key/1"))]:
            try:
                call()
                failures[op] = "succeeded"
            except KmipOperationFailure as e:
                failures[op] = [e.status.name, e.reason.name]
        out["unsupported"] = failures
        out["objects"] = every_object_type(client)
        out["derivation"] = derivation(client)
    out["templates"] = templates(host, port, cert, key, ca)
    print(json.dumps(out))


def templates(host, port, cert, key, ca):
    """A KMIP 1.4 Template registered with PyKMIP's low-level client, read
    back, and named by a Create whose key takes its attributes."""
    from kmip.core import attributes as kattrs
    from kmip.core import objects as kobjects
    from kmip.core import secrets
    from kmip.core.factories.attributes import AttributeFactory

    f = AttributeFactory()
    proxy = KMIPProxy(host=host, port=int(port), certfile=cert, keyfile=key, ca_certs=ca,
                      cert_reqs="CERT_REQUIRED", ssl_version="PROTOCOL_TLSv1_2",
                      config_file="/dev/null", kmip_version=enums.KMIPVersion.KMIP_1_4)
    proxy.open()
    try:
        content = [
            f.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_ALGORITHM,
                               enums.CryptographicAlgorithm.AES),
            f.create_attribute(enums.AttributeType.CRYPTOGRAPHIC_LENGTH, 192),
            f.create_attribute(enums.AttributeType.OBJECT_GROUP, "pykmip-group"),
        ]
        own = kobjects.TemplateAttribute(
            attributes=[f.create_attribute(enums.AttributeType.NAME, "pykmip-template")])
        registered = proxy.register(enums.ObjectType.TEMPLATE, own,
                                    secrets.Template(attributes=content))
        template_uid = registered.uuid
        got = proxy.get(uuid=template_uid)
        names = [kattrs.Name.create("pykmip-template",
                                    enums.NameType.UNINTERPRETED_TEXT_STRING)]
        created = proxy.create(enums.ObjectType.SYMMETRIC_KEY,
                               kobjects.TemplateAttribute(names=names))
        attributes = proxy.get_attributes(uuid=created.uuid,
                                          attribute_names=["Cryptographic Length",
                                                           "Object Group"])
        found = {a.attribute_name.value: a.attribute_value.value
                 for a in attributes.attributes}
        missing = proxy.create(enums.ObjectType.SYMMETRIC_KEY, kobjects.TemplateAttribute(
            names=[kattrs.Name.create("no-such-template",
                                      enums.NameType.UNINTERPRETED_TEXT_STRING)]))
        return {
            "register": registered.result_status.value.name,
            "get_type": type(got.secret).__name__,
            "get_attributes": sorted(a.attribute_name.value for a in got.secret.attributes),
            "create": created.result_status.value.name,
            "key_attributes": found,
            "missing_template": [missing.result_status.value.name,
                                 missing.result_reason.value.name],
        }
    finally:
        proxy.close()


def derivation(client):
    """Derive Key by SP 800-108 feedback mode and by ENCRYPT, sent by
    PyKMIP, each checked here against a computation with `hmac` and
    `cryptography`."""
    import hashlib
    import hmac
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from kmip.pie import objects

    got = {}
    key = bytes(range(32, 64))
    base = client.register(objects.SymmetricKey(
        enums.CryptographicAlgorithm.HMAC_SHA256, 256, key,
        masks=[enums.CryptographicUsageMask.DERIVE_KEY], name="pykmip-hmac-base"))
    client.activate(base)
    iv, fixed = bytes(32), b"pykmip\0feedback"
    derived = client.derive_key(
        enums.ObjectType.SECRET_DATA, [base], enums.DerivationMethod.NIST800_108_F,
        {"cryptographic_parameters": {"hashing_algorithm": enums.HashingAlgorithm.SHA_256},
         "initialization_vector": iv, "derivation_data": fixed},
        cryptographic_length=256)
    suffix = (256).to_bytes(4, "big")
    want = hmac.new(key, iv + (1).to_bytes(4, "big") + fixed + suffix, hashlib.sha256).digest()
    got["nist800_108_f"] = client.get(derived).value == want

    aes = bytes(range(16))
    base = client.register(objects.SymmetricKey(
        enums.CryptographicAlgorithm.AES, 128, aes,
        masks=[enums.CryptographicUsageMask.DERIVE_KEY], name="pykmip-aes-base"))
    client.activate(base)
    data = bytes(range(100, 132))
    derived = client.derive_key(
        enums.ObjectType.SYMMETRIC_KEY, [base], enums.DerivationMethod.ENCRYPT,
        {"cryptographic_parameters": {"block_cipher_mode": enums.BlockCipherMode.ECB},
         "derivation_data": data},
        cryptographic_length=128, cryptographic_algorithm=enums.CryptographicAlgorithm.AES)
    enc = Cipher(algorithms.AES(aes), modes.ECB()).encryptor()
    want = (enc.update(data) + enc.finalize())[:16]
    got["encrypt"] = client.get(derived).value == want
    return got


def every_object_type(client):
    """Each managed object type the server keeps, made or registered by
    PyKMIP and read back; a signature made by the server and checked here
    with `cryptography`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from kmip.pie import objects
    import datetime

    got = {}
    public_uid, private_uid = client.create_key_pair(
        enums.CryptographicAlgorithm.RSA, 2048,
        public_usage_mask=[enums.CryptographicUsageMask.VERIFY],
        private_usage_mask=[enums.CryptographicUsageMask.SIGN])
    client.activate(private_uid)
    client.activate(public_uid)
    public = client.get(public_uid)
    private = client.get(private_uid)
    got["key_pair"] = [type(public).__name__, type(private).__name__,
                       public.key_format_type.name, private.key_format_type.name]
    params = {"cryptographic_algorithm": enums.CryptographicAlgorithm.RSA,
              "padding_method": enums.PaddingMethod.PSS,
              "hashing_algorithm": enums.HashingAlgorithm.SHA_256}
    message = b"signed by the key manager"
    signature = client.sign(message, uid=private_uid, cryptographic_parameters=params)
    loaded = serialization.load_der_public_key(public.value)
    loaded.verify(signature, message,
                  padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32),
                  hashes.SHA256())
    got["signature_verified_by_cryptography"] = True
    got["signature_verify"] = client.signature_verify(
        message, signature, uid=public_uid, cryptographic_parameters=params).name
    got["signature_verify_tampered"] = client.signature_verify(
        message + b"!", signature, uid=public_uid, cryptographic_parameters=params).name

    # Re-key Key Pair through PyKMIP's KMIPProxy (its ProxyKmipClient has
    # no call for it): the replacement pair is each key's next version and
    # signs what `cryptography` verifies with the new public key.
    from kmip.core import attributes
    rekeyed = client.proxy.rekey_key_pair(
        private_key_uuid=attributes.PrivateKeyUniqueIdentifier(private_uid))
    new_private, new_public = rekeyed.private_key_uuid, rekeyed.public_key_uuid
    got["rekey_key_pair"] = [rekeyed.result_status.value.name,
                             new_private == private_uid[:-2] + "/2",
                             new_public == public_uid[:-2] + "/2"]
    signature = client.sign(message, uid=new_private, cryptographic_parameters=params)
    serialization.load_der_public_key(client.get(new_public).value).verify(
        signature, message, padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32),
        hashes.SHA256())
    got["rekeyed_signature_verified_by_cryptography"] = True

    ec_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "pykmip-cert")])
    now = datetime.datetime(2026, 1, 1)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(ec_key.public_key()).serial_number(7)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=365))
            .sign(ec_key, hashes.SHA256()))
    der = cert.public_bytes(serialization.Encoding.DER)
    uid = client.register(objects.X509Certificate(der))
    got["certificate"] = client.get(uid).value == der

    pkcs8 = ec_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    uid = client.register(objects.PrivateKey(enums.CryptographicAlgorithm.EC, 256, pkcs8,
                                             enums.KeyFormatType.PKCS_8))
    got["private_key"] = client.get(uid).value == pkcs8
    spki = ec_key.public_key().public_bytes(serialization.Encoding.DER,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
    uid = client.register(objects.PublicKey(enums.CryptographicAlgorithm.EC, 256, spki,
                                            enums.KeyFormatType.X_509))
    got["public_key"] = client.get(uid).value == spki

    uid = client.register(objects.SecretData(b"a shared secret", enums.SecretDataType.PASSWORD))
    got["secret_data"] = client.get(uid).value == b"a shared secret"
    uid = client.register(objects.OpaqueObject(b"opaque bytes", enums.OpaqueDataType.NONE))
    got["opaque_object"] = client.get(uid).value == b"opaque bytes"
    part = bytes(range(16))
    uid = client.register(objects.SplitKey(
        cryptographic_algorithm=enums.CryptographicAlgorithm.AES, cryptographic_length=128,
        key_value=part, key_format_type=enums.KeyFormatType.RAW, split_key_parts=3,
        key_part_identifier=1, split_key_threshold=2,
        split_key_method=enums.SplitKeyMethod.XOR))
    split = client.get(uid)
    got["split_key"] = [split.value == part, split.split_key_parts, split.key_part_identifier,
                        split.split_key_threshold, split.split_key_method.name]
    return got


if __name__ == "__main__":
    main()
