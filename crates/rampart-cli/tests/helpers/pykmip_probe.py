#!/usr/bin/env python3
"""One PyKMIP client session running the steps named on the command
line, printing {step: result} as JSON (a failure as [status, reason]),
for kms_kmip_interop.rs: a client's view of keys made elsewhere.

Usage: pykmip_probe.py HOST PORT CERT KEY CA STEP...
Steps: get:UID, locate-name:NAME, encrypt-cbc:UID, activate:UID,
type:UID (the object's type, as Get returns it)."""
import json
import os
import sys
import warnings

from kmip.core import enums
from kmip.core.factories import attributes as attribute_factory
from kmip.pie.client import ProxyKmipClient
from kmip.pie.exceptions import KmipOperationFailure

warnings.simplefilter("ignore", DeprecationWarning)


def main():
    host, port, cert, key, ca = sys.argv[1:6]
    factory = attribute_factory.AttributeFactory()
    out = {}
    client = ProxyKmipClient(hostname=host, port=int(port), cert=cert, key=key, ca=ca,
                             ssl_version="PROTOCOL_TLSv1_2", config_file="/dev/null",
                             kmip_version=enums.KMIPVersion.KMIP_1_2)
    with client:
        for step in sys.argv[6:]:
            action, arg = step.split(":", 1)
            try:
                if action == "get":
                    out[step] = len(client.get(arg).value)
                elif action == "locate-name":
                    out[step] = client.locate(attributes=[
                        factory.create_attribute(enums.AttributeType.NAME, arg)])
                elif action == "encrypt-cbc":
                    data, iv = client.encrypt(os.urandom(20), uid=arg, cryptographic_parameters={
                        "block_cipher_mode": enums.BlockCipherMode.CBC,
                        "padding_method": enums.PaddingMethod.PKCS5})
                    out[step] = len(data)
                elif action == "type":
                    out[step] = client.get(arg).object_type.name
                elif action == "activate":
                    out[step] = client.activate(arg) is None
                else:
                    raise SystemExit("unknown step " + step)
            except KmipOperationFailure as e:
                out[step] = [e.status.name, e.reason.name]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
