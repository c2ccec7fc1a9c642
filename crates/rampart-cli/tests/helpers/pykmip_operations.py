#!/usr/bin/env python3
"""Drives every operation PyKMIP's client supports against a real
`rampart kms serve --kmip-listen`, checks the results against Python's
`cryptography` where there is something to compute, and prints what came
back as JSON for kms_kmip_interop.rs to assert on.

Usage: pykmip_operations.py HOST PORT CERT KEY CA PREFIX

PREFIX makes the object names of one run unique. PyKMIP builds its own
ssl.SSLContext from ssl_version, so TLS 1.2 is asked for (PyKMIP cannot
verify host names; the CA is still verified)."""
import hashlib
import hmac
import json
import os
import sys
import warnings

from cryptography.hazmat.primitives import keywrap
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from kmip.core import enums
from kmip.core.exceptions import OperationFailure
from kmip.core import objects as cobjects
from kmip.core.attributes import Name
from kmip.core.factories import attributes as attribute_factory
from kmip.pie import objects
from kmip.pie.client import ProxyKmipClient
from kmip.pie.exceptions import KmipOperationFailure

warnings.simplefilter("ignore", DeprecationWarning)

USAGE = [
    enums.CryptographicUsageMask.ENCRYPT,
    enums.CryptographicUsageMask.DECRYPT,
    enums.CryptographicUsageMask.WRAP_KEY,
    enums.CryptographicUsageMask.UNWRAP_KEY,
    enums.CryptographicUsageMask.MAC_GENERATE,
]


def failure(call):
    """[status, reason] of a call that must fail, or 'succeeded'."""
    try:
        call()
        return "succeeded"
    except (KmipOperationFailure, OperationFailure) as e:
        return [e.status.name, e.reason.name]


def attrs(client, uid, names=None):
    """The attributes of uid as {name: [values]} (enums by name)."""
    _, found = client.get_attributes(uid, names)
    out = {}
    for a in found:
        value = a.attribute_value
        if hasattr(value, "digest_value"):
            value = [value.hashing_algorithm.value.name, value.digest_value.value.hex(),
                     value.key_format_type.value.name]
        elif hasattr(value, "name_value"):
            value = value.name_value.value
        elif hasattr(value, "link_type"):
            value = [value.link_type.value.name, value.linked_object_identifier.value]
        elif hasattr(value, "value"):
            value = value.value
            if hasattr(value, "name"):
                value = value.name
        else:
            value = str(value)
        out.setdefault(a.attribute_name.value, []).append(value)
    return out


def main():
    host, port, cert, key, ca, prefix = sys.argv[1:7]
    factory = attribute_factory.AttributeFactory()
    out = {}
    client = ProxyKmipClient(hostname=host, port=int(port), cert=cert, key=key, ca=ca,
                             ssl_version="PROTOCOL_TLSv1_2", config_file="/dev/null",
                             kmip_version=enums.KMIPVersion.KMIP_1_2)
    with client:
        # Create: a Pre-Active AES-256 key, named.
        uid = client.create(enums.CryptographicAlgorithm.AES, 256,
                            name=prefix + "-aes", cryptographic_usage_mask=USAGE)
        out["create_uid"] = uid
        out["created_state"] = attrs(client, uid, ["State"])["State"]
        out["encrypt_pre_active"] = failure(lambda: client.encrypt(
            b"x" * 16, uid=uid, cryptographic_parameters={
                "block_cipher_mode": enums.BlockCipherMode.CBC,
                "padding_method": enums.PaddingMethod.PKCS5}))
        client.activate(uid)
        out["activated_state"] = attrs(client, uid, ["State"])["State"]
        out["activate_again"] = failure(lambda: client.activate(uid))

        # Get: the key's bytes, used below to check the server's crypto.
        key_bytes = client.get(uid).value
        out["key_len"] = len(key_bytes)

        # Get Attributes, Get Attribute List. PyKMIP's client cannot read
        # every attribute a KMIP 1.4 server holds (Random Number Generator,
        # Alternative Name...), so it asks for those it reads.
        all_attrs = attrs(client, uid, [
            "Name", "Object Type", "Cryptographic Algorithm", "Cryptographic Length",
            "Cryptographic Usage Mask", "State", "Unique Identifier", "Initial Date",
            "Activation Date", "Last Change Date", "Digest", "Fresh", "Sensitive",
            "Extractable", "Lease Time", "Original Creation Date"])
        out["served_attributes"] = {k: all_attrs.get(k) for k in (
            "Fresh", "Sensitive", "Extractable", "Lease Time")}
        out["digest"] = all_attrs.get("Digest")
        out["digest_of_key"] = hashlib.sha256(key_bytes).hexdigest()
        out["original_is_initial"] = (all_attrs.get("Original Creation Date")
                                      == all_attrs.get("Initial Date"))
        out["attributes"] = {k: v for k, v in all_attrs.items()
                             if k in ("Name", "Object Type", "Cryptographic Algorithm",
                                      "Cryptographic Length", "Cryptographic Usage Mask",
                                      "State", "Unique Identifier")}
        out["has_dates"] = all(n in all_attrs for n in ("Initial Date", "Activation Date",
                                                        "Last Change Date"))
        names = client.get_attribute_list(uid)
        out["attribute_list"] = sorted(names)

        # Register a symmetric key and secret data; Get returns the bytes.
        registered = os.urandom(32)
        uid_reg = client.register(objects.SymmetricKey(
            enums.CryptographicAlgorithm.AES, 256, registered, masks=USAGE,
            name=prefix + "-registered"))
        out["register_get_matches"] = client.get(uid_reg).value == registered
        secret = b"correct horse battery staple"
        uid_secret = client.register(objects.SecretData(
            secret, enums.SecretDataType.PASSWORD, name=prefix + "-secret"))
        got = client.get(uid_secret)
        out["secret_get_matches"] = got.value == secret
        out["secret_type"] = got.data_type.name
        out["duplicate_name"] = failure(lambda: client.create(
            enums.CryptographicAlgorithm.AES, 128, name=prefix + "-aes"))

        # Locate: by Name, by Object Type, by State; paging.
        by_name = client.locate(attributes=[
            factory.create_attribute(enums.AttributeType.NAME, prefix + "-aes")])
        out["locate_name"] = by_name == [uid]
        secrets = client.locate(attributes=[
            factory.create_attribute(enums.AttributeType.OBJECT_TYPE,
                                     enums.ObjectType.SECRET_DATA)])
        out["locate_secret_data"] = uid_secret in secrets and uid not in secrets
        pre_active = client.locate(attributes=[
            factory.create_attribute(enums.AttributeType.STATE, enums.State.PRE_ACTIVE)])
        out["locate_pre_active"] = uid_reg in pre_active and uid not in pre_active
        everything = client.locate()
        first = client.locate(maximum_items=1)
        second = client.locate(maximum_items=1, offset_items=1)
        out["locate_paging"] = (len(first) == 1 and len(second) == 1 and first != second
                                and first[0] in everything and second[0] in everything)

        # Modify and delete an attribute (Name, KMIP 1.x shapes).
        renamed = prefix + "-renamed"
        client.modify_attribute(uid_reg, attribute=cobjects.Attribute(
            attribute_name=cobjects.Attribute.AttributeName("Name"),
            attribute_index=cobjects.Attribute.AttributeIndex(0),
            attribute_value=Name.create(renamed, enums.NameType.UNINTERPRETED_TEXT_STRING)))
        out["modified_name"] = attrs(client, uid_reg, ["Name"]).get("Name")
        out["locate_renamed"] = client.locate(attributes=[
            factory.create_attribute(enums.AttributeType.NAME, renamed)]) == [uid_reg]
        _, deleted = client.delete_attribute(uid_reg, attribute_name="Name", attribute_index=0)
        out["deleted_name"] = deleted.attribute_value.name_value.value
        out["name_after_delete"] = attrs(client, uid_reg, ["Name"]).get("Name")
        out["delete_out_of_bounds"] = failure(lambda: client.delete_attribute(
            uid_reg, attribute_name="Name", attribute_index=5))

        # Encrypt/Decrypt: CBC with PKCS5 padding and a given IV; CTR with a
        # server-chosen counter block. Checked with `cryptography`.
        data = b"rampart kmip interop: forty-three bytes..."
        iv = os.urandom(16)
        cbc = {"block_cipher_mode": enums.BlockCipherMode.CBC,
               "padding_method": enums.PaddingMethod.PKCS5}
        ct, _ = client.encrypt(data, uid=uid, cryptographic_parameters=cbc,
                               iv_counter_nonce=iv)
        dec = Cipher(algorithms.AES(key_bytes), modes.CBC(iv)).decryptor()
        padded = dec.update(ct) + dec.finalize()
        out["cbc_matches_cryptography"] = padded[:-padded[-1]] == data
        out["cbc_round_trip"] = client.decrypt(ct, uid=uid, cryptographic_parameters=cbc,
                                               iv_counter_nonce=iv) == data
        ctr = {"block_cipher_mode": enums.BlockCipherMode.CTR}
        ct, counter = client.encrypt(data, uid=uid, cryptographic_parameters=ctr)
        out["ctr_counter_len"] = len(counter or b"")
        enc = Cipher(algorithms.AES(key_bytes), modes.CTR(counter)).encryptor()
        out["ctr_matches_cryptography"] = enc.update(data) + enc.finalize() == ct
        out["ctr_round_trip"] = client.decrypt(ct, uid=uid, cryptographic_parameters=ctr,
                                               iv_counter_nonce=counter) == data
        # A ciphertext whose last block decrypts to a pad byte of 0, never
        # valid PKCS#7 (random bytes pass about one time in 256).
        enc = Cipher(algorithms.AES(key_bytes), modes.CBC(iv)).encryptor()
        bad_pad = enc.update(os.urandom(31) + b"\x00") + enc.finalize()
        out["bad_padding"] = failure(lambda: client.decrypt(
            bad_pad, uid=uid, cryptographic_parameters=cbc, iv_counter_nonce=iv))

        # MAC (HMAC-SHA256), checked with Python's hmac.
        _, mac = client.mac(data, uid=uid,
                            algorithm=enums.CryptographicAlgorithm.HMAC_SHA256)
        out["mac_matches"] = mac == hmac.new(key_bytes, data, hashlib.sha256).digest()
        # MAC under keys of each HMAC algorithm, as PyKMIP creates them.
        hmac_ok = []
        for alg, digest in [(enums.CryptographicAlgorithm.HMAC_SHA1, hashlib.sha1),
                            (enums.CryptographicAlgorithm.HMAC_SHA384, hashlib.sha384),
                            (enums.CryptographicAlgorithm.HMAC_SHA512, hashlib.sha512)]:
            hkey = client.create(alg, 256, name=prefix + "-" + alg.name.lower(),
                                 cryptographic_usage_mask=[
                                     enums.CryptographicUsageMask.MAC_GENERATE])
            client.activate(hkey)
            hkey_bytes = client.get(hkey).value
            _, hmac_value = client.mac(data, uid=hkey, algorithm=alg)
            hmac_ok.append(hmac_value == hmac.new(hkey_bytes, data, digest).digest())
        out["hmac_keys_match"] = all(hmac_ok) and len(hmac_ok) == 3

        # Get wrapped by another key (AES key wrap, RFC 3394), unwrapped
        # here with the wrapping key's bytes.
        kek = client.create(enums.CryptographicAlgorithm.AES, 256,
                            name=prefix + "-kek", cryptographic_usage_mask=USAGE)
        client.activate(kek)
        kek_bytes = client.get(kek).value
        wrapped = client.get(uid, key_wrapping_specification={
            "wrapping_method": enums.WrappingMethod.ENCRYPT,
            "encryption_key_information": {
                "unique_identifier": kek,
                "cryptographic_parameters": {
                    "block_cipher_mode": enums.BlockCipherMode.NIST_KEY_WRAP}},
            "encoding_option": enums.EncodingOption.NO_ENCODING}).value
        out["wrapped_unwraps"] = keywrap.aes_key_unwrap(kek_bytes, wrapped) == key_bytes

        # Check.
        out["check"] = client.check(uid, cryptographic_usage_mask=[
            enums.CryptographicUsageMask.ENCRYPT]) == uid

        # Re-key: a new version, linked both ways; the Name moves to it.
        new_uid = client.rekey(uid=uid)
        out["rekey_uid"] = new_uid
        # (PyKMIP cannot decode Link values; kms_kmip_objects.rs checks them.)
        out["rekey_links"] = ("Link" in client.get_attribute_list(new_uid)
                              and "Link" in client.get_attribute_list(uid))
        out["locate_after_rekey"] = client.locate(attributes=[
            factory.create_attribute(enums.AttributeType.NAME, prefix + "-aes")]) == [new_uid]
        out["rekey_new_key_differs"] = client.get(new_uid).value != key_bytes

        # Revoke, then Destroy.
        out["destroy_active"] = failure(lambda: client.destroy(uid))
        client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, uid,
                      revocation_message="retired by the interop test")
        out["revoked_state"] = attrs(client, uid, ["State"])["State"]
        out["encrypt_revoked"] = failure(lambda: client.encrypt(
            data, uid=uid, cryptographic_parameters=cbc, iv_counter_nonce=iv))
        client.destroy(uid)
        out["destroyed_state"] = attrs(client, uid, ["State"])["State"]
        out["get_destroyed"] = failure(lambda: client.get(uid))
        client.revoke(enums.RevocationReasonCode.KEY_COMPROMISE, uid_secret)
        out["compromised_state"] = attrs(client, uid_secret, ["State"])["State"]

        # Errors: an unknown object is answered.
        out["get_unknown"] = failure(lambda: client.get(prefix + "-nothing/1"))
        # A key pair: made, signed with, the signature checked by cryptography.
        public_uid, private_uid = client.create_key_pair(
            enums.CryptographicAlgorithm.RSA, 2048,
            public_name=prefix + "-rsa-public", private_name=prefix + "-rsa-private",
            public_usage_mask=[enums.CryptographicUsageMask.VERIFY],
            private_usage_mask=[enums.CryptographicUsageMask.SIGN])
        client.activate(private_uid)
        client.activate(public_uid)
        signing = {"cryptographic_algorithm": enums.CryptographicAlgorithm.RSA,
                   "padding_method": enums.PaddingMethod.PKCS1v15,
                   "hashing_algorithm": enums.HashingAlgorithm.SHA_256}
        signature = client.sign(b"signed over KMIP", uid=private_uid,
                                cryptographic_parameters=signing)
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding
        public = serialization.load_der_public_key(client.get(public_uid).value)
        public.verify(signature, b"signed over KMIP", padding.PKCS1v15(), hashes.SHA256())
        out["key_pair_signature_verified"] = True
        out["key_pair"] = [public_uid, private_uid]
        # Derive Key: PBKDF2 over a key made for it, checked with cryptography.
        from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC
        base = client.create(enums.CryptographicAlgorithm.AES, 256, name=prefix + "-kdf-base",
                             cryptographic_usage_mask=[enums.CryptographicUsageMask.DERIVE_KEY])
        client.activate(base)
        derived = client.derive_key(
            enums.ObjectType.SYMMETRIC_KEY, [base], enums.DerivationMethod.PBKDF2,
            {"cryptographic_parameters": {"hashing_algorithm": enums.HashingAlgorithm.SHA_256},
             "salt": b"rampart-salt", "iteration_count": 1000},
            cryptographic_length=128, cryptographic_algorithm=enums.CryptographicAlgorithm.AES)
        expected = PBKDF2HMAC(algorithm=hashes.SHA256(), length=16, salt=b"rampart-salt",
                              iterations=1000).derive(client.get(base).value)
        out["derived_matches_cryptography"] = client.get(derived).value == expected
        out["ids"] = {"kek": kek, "registered": uid_reg, "secret": uid_secret}

    # Query and Discover Versions on a KMIP 1.4 connection.
    client = ProxyKmipClient(hostname=host, port=int(port), cert=cert, key=key, ca=ca,
                             ssl_version="PROTOCOL_TLSv1_2", config_file="/dev/null",
                             kmip_version=enums.KMIPVersion.KMIP_1_4)
    with client:
        proxy = client.proxy
        query = proxy.query(query_functions=[enums.QueryFunction.QUERY_OPERATIONS,
                                             enums.QueryFunction.QUERY_OBJECTS])
        out["query_operations"] = sorted(op.name for op in query.operations)
        out["query_objects"] = sorted(t.name for t in query.object_types)
        versions = proxy.discover_versions()
        out["versions"] = [[v.major, v.minor] for v in versions.protocol_versions]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
