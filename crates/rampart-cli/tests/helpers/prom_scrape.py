"""Scrapes a Prometheus endpoint and prints its samples as JSON, parsed by
the official client library's parser (prometheus_client), as Prometheus
reads them: [{"name", "labels", "value"}, ...], plus the metric families'
types under "types". A response that is not valid exposition text fails.

Usage: prom_scrape.py URL [CA CERT KEY]   (the last three for mutual TLS)
"""

import json
import ssl
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    url = sys.argv[1]
    context = None
    if len(sys.argv) == 5:
        context = ssl.create_default_context(cafile=sys.argv[2])
        context.load_cert_chain(certfile=sys.argv[3], keyfile=sys.argv[4])
    with urllib.request.urlopen(url, context=context, timeout=20) as response:
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}")
        content_type = response.headers.get("Content-Type", "")
        if not content_type.startswith("text/plain"):
            raise SystemExit(f"Content-Type {content_type!r}")
        text = response.read().decode("utf-8")
    samples = []
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples.append({"name": sample.name, "labels": sample.labels, "value": sample.value})
    json.dump({"samples": samples, "types": types}, sys.stdout)


main()
