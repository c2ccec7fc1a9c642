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


if __name__ == "__main__":
    main()
