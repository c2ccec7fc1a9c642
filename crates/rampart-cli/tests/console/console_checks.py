"""The key manager's web console, checked from outside: in headless
Chromium driven by Playwright (`browser`), and over plain HTTPS without a
client certificate (`security`). Run by kms_console.rs, which starts the
server; arguments: MODE RAMPART_BIN DATA_DIR WORK_DIR SCREENSHOT_DIR.

Every step asserts; any failure exits non-zero with the reason."""

import http.client
import json
import os
import re
import sqlite3
import ssl
import subprocess
import sys
import urllib.parse

MODE, RAMPART, DATA, WORK, SHOTS = sys.argv[1:6]
ADMIN = os.path.join(DATA, "admin.bundle")


def rampart(*args, stdin=b"", check=True):
    env = {k: v for k, v in os.environ.items() if k != "RAMPART_KMS"}
    out = subprocess.run([RAMPART, *args], input=stdin, capture_output=True, env=env)
    if check and out.returncode != 0:
        raise AssertionError(f"rampart {args} failed: {out.stderr.decode()}")
    return out


def login_url(bundle=ADMIN):
    out = rampart("kms", "console-login", "--kms", bundle)
    url = out.stdout.decode().strip()
    assert re.fullmatch(r"https://127\.0\.0\.1:\d+/ui/login\?code=[0-9a-f]{64}", url), url
    return url


def step(text):
    print(f"-- {text}", flush=True)


def server_spki():
    import base64
    import hashlib

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    with open(os.path.join(DATA, "server.pem"), "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def browser():
    from playwright.sync_api import expect, sync_playwright

    os.makedirs(SHOTS, exist_ok=True)
    url = login_url()
    base = url.split("/ui/")[0]
    with sync_playwright() as p:
        # The browser trusts the server's certificate by its key (as an
        # admin's browser trusts the deployment CA), so no handshake fails.
        chromium = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", f"--ignore-certificate-errors-spki-list={server_spki()}"],
        )
        context = chromium.new_context(accept_downloads=True, viewport={"width": 1366, "height": 900})
        page = context.new_page()
        scripts_blocked = []
        page.on("console", lambda m: scripts_blocked.append(m.text) if "Content Security Policy" in m.text else None)

        def shot(name):
            path = os.path.join(SHOTS, f"{name}.png")
            page.screenshot(path=path, full_page=True)

        step("sign in with the one-time URL")
        page.goto(url)
        shot("01-sign-in")
        page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(f"{base}/ui/keys")
        expect(page.get_by_text("Signed in as")).to_contain_text("admin")
        cookies = [c for c in context.cookies() if c["name"] == "rampart_console"]
        assert len(cookies) == 1, cookies
        cookie = cookies[0]
        assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict", cookie
        assert cookie["path"] == "/ui", cookie

        step("create a key")
        page.get_by_label("Name", exact=True).fill("vault")
        page.get_by_label("Allow (client:NAME or label:KEY=VALUE, separated by spaces)").fill("label:role=web")
        page.get_by_role("button", name="Create key").click()
        expect(page).to_have_url(f"{base}/ui/keys/vault")
        expect(page.get_by_role("heading", name="Key vault")).to_be_visible()
        expect(page.locator("dd").first).to_have_text("label:role=web")
        listed = json.loads(rampart("kms", "key", "show", "vault", "--json", "--kms", ADMIN).stdout)
        assert listed["name"] == "vault" and listed["allow"] == ["label:role=web"], listed

        step("issue a client and download its bundle")
        page.get_by_role("link", name="Clients", exact=True).click()
        page.get_by_label("Name", exact=True).fill("web-1")
        page.get_by_label("Labels (KEY=VALUE,KEY=VALUE)").fill("role=web")
        with page.expect_download() as download:
            page.get_by_role("button", name="Issue and download bundle").click()
        bundle = os.path.join(WORK, "web-1.bundle")
        download.value.save_as(bundle)
        assert download.value.suggested_filename == "web-1.bundle"
        os.chmod(bundle, 0o600)
        with open(bundle) as f:
            parsed = json.load(f)
        assert parsed["format"] == "rampart-kms-bundle/v1" and parsed["name"] == "web-1", parsed.keys()
        assert parsed["endpoints"] == [base], parsed["endpoints"]
        who = json.loads(rampart("kms", "client", "list", "--prefix", "web-1", "--json", "--kms", ADMIN).stdout.splitlines()[0])
        assert who["labels"] == {"role": "web"} and not who["admin"], who

        step("the downloaded bundle wraps and unwraps with the new key")
        wrapped = rampart("kms", "key", "wrap", "vault", "--kms", bundle, stdin=b"volume key").stdout.decode().strip()
        plain = rampart("kms", "key", "unwrap", wrapped, "--kms", bundle).stdout
        assert plain == b"volume key", plain
        page.reload()
        shot("02-clients")

        step("revoke the client; its unwrap is refused and shows in the audit page")
        page.get_by_role("link", name="web-1").click()
        expect(page.get_by_role("heading", name="Client web-1")).to_be_visible()
        shot("03-client")
        page.get_by_label("Reason (recorded in the audit log)").fill("host decommissioned")
        page.once("dialog", lambda d: d.accept())
        page.get_by_role("button", name="Revoke client").click()
        expect(page.locator("dd", has_text="host decommissioned")).to_be_visible()
        refused = rampart("kms", "key", "unwrap", wrapped, "--kms", bundle, check=False)
        assert refused.returncode != 0 and b"volume key" not in refused.stdout, refused
        assert b"revoked" in refused.stderr.lower(), refused.stderr
        page.get_by_role("link", name="Audit", exact=True).click()
        page.get_by_label("Outcome").select_option("denied")
        page.get_by_role("button", name="Filter").click()
        denied = page.locator("table.audit tbody tr", has_text="tls.handshake")
        expect(denied.filter(has_text="Revoked")).to_have_count(1)
        expect(denied).to_have_count(1)
        shot("04-audit-denied")

        step("rotate the key")
        page.goto(f"{base}/ui/keys/vault")
        page.get_by_role("button", name="Rotate key").click()
        expect(page.get_by_role("status")).to_contain_text("rotated to version 2")
        rows = page.locator("table tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.first).to_contain_text("active")
        shot("05-key")
        assert [v["version"] for v in json.loads(rampart("kms", "key", "show", "vault", "--json", "--kms", ADMIN).stdout)["versions"]] == [1, 2]

        step("filter the audit log")
        page.goto(f"{base}/ui/audit")
        page.get_by_label("Operation").fill("key.rotate")
        page.get_by_role("button", name="Filter").click()
        entries = page.locator("table.audit tbody tr")
        expect(entries).to_have_count(1)
        expect(entries.first).to_contain_text("admin")
        expect(entries.first).to_contain_text("vault v2")
        expect(entries.first).to_contain_text("console session")
        page.get_by_label("Operation").fill("")
        page.get_by_label("Key").fill("vault")
        page.get_by_label("Outcome").select_option("ok")
        page.get_by_role("button", name="Filter").click()
        ops = page.locator("table.audit tbody tr td:nth-child(4)").all_inner_texts()
        assert {"key.create", "key.wrap", "key.unwrap", "key.rotate"} <= set(ops), ops
        with page.expect_download() as download:
            page.get_by_role("link", name="Download these entries as JSON lines").click()
        lines = [json.loads(l) for l in open(download.value.path()).read().splitlines()]
        assert len(lines) == len(ops) and all(e["key"] == "vault" and e["outcome"] == "ok" for e in lines), lines
        shot("06-audit-filtered")

        step("verify the chain, tamper with the store, and see the break")
        page.goto(f"{base}/ui/audit")
        page.get_by_role("button", name="Verify the chain").click()
        expect(page.get_by_role("status")).to_contain_text("Intact")
        db = sqlite3.connect(os.path.join(DATA, "kms.db"))
        seq = db.execute("SELECT seq FROM kms_audit WHERE operation = 'key.rotate'").fetchone()[0]
        db.execute("DROP TRIGGER kms_audit_no_update")
        db.execute("UPDATE kms_audit SET detail = 'nothing happened' WHERE seq = ?", (seq,))
        db.commit()
        db.close()
        page.get_by_role("button", name="Verify the chain").click()
        alert = page.get_by_role("alert")
        expect(alert).to_contain_text(f"BROKEN: the first bad entry is {seq}")
        shot("07-audit-broken")
        page.get_by_role("link", name=f"Show entry {seq} and those after it").click()
        expect(page.locator("table.audit tbody tr").first).to_contain_text("nothing happened")

        step("health and sessions pages")
        page.get_by_role("link", name="Health", exact=True).click()
        expect(page.locator("dd").first).to_contain_text("unsealed")
        expect(page.get_by_text("sqlite", exact=True)).to_be_visible()
        expect(page.locator("dl")).to_contain_text("This server's certificate expires")
        expect(page.locator("table", has_text="By operation")).to_contain_text("key.unwrap")
        # The server announces itself in the store at start.
        expect(page.locator("table", has_text="Servers sharing this store")).to_contain_text("(this server)")
        shot("08-health")
        page.get_by_role("link", name="Sessions", exact=True).click()
        expect(page.locator("tbody")).to_contain_text("(this browser)")
        shot("09-sessions")
        step("key pairs are listed with their type and algorithm")
        rampart("kms", "key", "create", "signer", "--type", "ec-p256", "--kms", ADMIN)
        page.goto(f"{base}/ui/keys")
        expect(page.locator("thead")).to_contain_text("Type")
        row = lambda name: page.locator("tr", has=page.get_by_role("link", name=name, exact=True))
        expect(row("signer.pub")).to_contain_text("public-key")
        expect(row("signer.pub")).to_contain_text("ec-p256")
        expect(row("signer")).to_contain_text("private-key")
        expect(row("vault")).to_contain_text("symmetric-key")
        shot("10-keys")
        page.goto(f"{base}/ui/keys/signer")
        expect(page.locator("dl")).to_contain_text("private-key")
        expect(page.locator("dl")).to_contain_text("public key signer.pub")

        step("keyboard: the navigation is reachable with Tab and Enter")
        page.goto(f"{base}/ui/keys")
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement.textContent")
        assert focused == "Keys", focused
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        expect(page).to_have_url(f"{base}/ui/clients")

        step("sign out; the old cookie is refused")
        old = cookie["value"]
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("heading", name="Not signed in")).to_be_visible()
        assert not [c for c in context.cookies() if c["name"] == "rampart_console" and c["value"]], context.cookies()
        context.add_cookies([{**cookie, "value": old}])
        response = page.goto(f"{base}/ui/keys")
        assert response.status == 401, response.status
        expect(page.get_by_role("heading", name="Not signed in")).to_be_visible()
        assert not scripts_blocked, scripts_blocked
        context.close()
        chromium.close()
    print(f"screenshots in {SHOTS}")


def https():
    with open(ADMIN) as f:
        ca = json.load(f)["ca_cert"]
    ctx = ssl.create_default_context(cadata=ca)
    port = int(re.search(r":(\d+)", json.load(open(ADMIN))["endpoints"][0]).group(1))
    return ctx, port


def request(method, path, body=None, headers=None):
    ctx, port = https()
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response, data


def post_form(path, fields, cookie=None, origin=True):
    _, port = https()
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if origin:
        headers["Origin"] = f"https://127.0.0.1:{port}"
    if cookie:
        headers["Cookie"] = f"rampart_console={cookie}"
    return request("POST", path, urllib.parse.urlencode(fields), headers)


def sign_in(url):
    code = url.split("code=")[1]
    response, body = post_form("/ui/login", {"code": code})
    assert response.status == 303, (response.status, body)
    cookie = response.getheader("Set-Cookie")
    assert cookie.endswith("; HttpOnly; Secure; SameSite=Strict; Path=/ui"), cookie
    return code, cookie.split(";")[0].split("=", 1)[1]


def csrf_of(cookie, path="/ui/keys"):
    response, body = request("GET", path, headers={"Cookie": f"rampart_console={cookie}"})
    assert response.status == 200, response.status
    return re.search(rb'name="csrf" value="([0-9a-f]{64})"', body).group(1).decode()


def security():
    step("REST without a client certificate is still refused")
    for method, path in [("GET", "/v1/keys"), ("GET", "/v1/health"), ("POST", "/v1/console/login-codes"), ("GET", "/metrics")]:
        response, body = request(method, path, body=b"{}" if method == "POST" else None)
        assert response.status == 401, (path, response.status, body)
        assert json.loads(body)["error"]["code"] == "certificate_required", body
    entries = [json.loads(l) for l in rampart("kms", "audit", "--operation", "tls.handshake", "--json", "--kms", ADMIN).stdout.splitlines()]
    assert any("no client certificate" in e["detail"] and e["outcome"] == "denied" for e in entries), entries

    step("a non-admin identity cannot get a code")
    host = os.path.join(WORK, "host.bundle")
    rampart("kms", "client", "issue", "host", "--labels", "role=web", "--out", host, "--kms", ADMIN)
    refused = rampart("kms", "console-login", "--kms", host, check=False)
    assert refused.returncode != 0 and b"admin" in refused.stderr, refused
    assert b"code=" not in refused.stdout

    step("security headers on every console page")
    response, body = request("GET", "/ui/login?code=00")
    for name, want in [
        ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-store"),
    ]:
        assert response.getheader(name) == want, (name, response.getheader(name))
    assert b"<script>" not in body and b"style=" not in body, body
    response, _ = request("GET", "/ui/keys")
    assert response.status == 401 and response.getheader("Content-Security-Policy"), response.status

    step("a login code works once")
    code, cookie = sign_in(login_url())
    response, body = post_form("/ui/login", {"code": code})
    assert response.status == 403 and b"already used" in body, (response.status, body)
    assert response.getheader("Set-Cookie") is None
    response, body = post_form("/ui/login", {"code": "0" * 64})
    assert response.status == 403, response.status

    step("a login from another origin is refused")
    url = login_url()
    response, body = request("POST", "/ui/login", urllib.parse.urlencode({"code": url.split("code=")[1]}),
                             {"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"})
    assert response.status == 403 and response.getheader("Set-Cookie") is None, response.status

    step("a state change without the CSRF token is refused")
    for fields in [{"name": "csrf-less"}, {"name": "csrf-less", "csrf": "0" * 64}]:
        response, body = post_form("/ui/keys", fields, cookie)
        assert response.status == 403 and b"CSRF" in body, (response.status, body)
    token = csrf_of(cookie)
    response, _ = post_form("/ui/keys", {"name": "csrf-less", "csrf": token}, cookie, origin=False)
    assert response.status == 303, response.status
    response, body = request("POST", "/ui/keys", urllib.parse.urlencode({"name": "cross-site", "csrf": token}),
                             {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"rampart_console={cookie}",
                              "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
    assert response.status == 403, response.status
    response, body = request("POST", "/ui/keys", urllib.parse.urlencode({"name": "null-origin", "csrf": token}),
                             {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"rampart_console={cookie}",
                              "Origin": "null"})
    assert response.status == 403, response.status
    keys = [json.loads(l)["name"] for l in rampart("kms", "key", "list", "--json", "--kms", ADMIN).stdout.splitlines()]
    assert keys == ["csrf-less"], keys
    denied = [json.loads(l) for l in rampart("kms", "audit", "--operation", "console.csrf", "--json", "--kms", ADMIN).stdout.splitlines()]
    assert len(denied) == 4 and all(e["client"] == "admin" and e["outcome"] == "denied" for e in denied), denied

    step("values are escaped")
    query = urllib.parse.urlencode({"client": "<script>x</script>\"'"})
    response, body = request("GET", f"/ui/audit?{query}", headers={"Cookie": f"rampart_console={cookie}"})
    assert response.status == 200, response.status
    assert b"<script>x" not in body and b'value="&lt;script&gt;x&lt;/script&gt;&quot;&#39;"' in body, body

    step("a revoked admin's sessions end, and its codes no longer sign in")
    for name in ["admin2", "admin3"]:
        rampart("kms", "client", "issue", name, "--admin", "--out", os.path.join(WORK, f"{name}.bundle"), "--kms", ADMIN)
    _, cookie2 = sign_in(login_url(os.path.join(WORK, "admin2.bundle")))
    csrf_of(cookie2)
    url3 = login_url(os.path.join(WORK, "admin3.bundle"))
    for name in ["admin2", "admin3"]:
        rampart("kms", "client", "revoke", name, "--reason", "left", "--kms", ADMIN)
    response, _ = request("GET", "/ui/keys", headers={"Cookie": f"rampart_console={cookie2}"})
    assert response.status == 401, response.status
    response, body = post_form("/ui/login", {"code": url3.split("code=")[1]})
    assert response.status == 403 and b"revoked" in body, (response.status, body)

    step("sessions can be listed and ended")
    _, other = sign_in(login_url())
    response, body = request("GET", "/ui/sessions", headers={"Cookie": f"rampart_console={cookie}"})
    ids = re.findall(rb'action="/ui/sessions/([0-9a-f]{16})/end"', body)
    assert len(ids) == 2, body
    mine = re.search(rb"([0-9a-f]{16}) \(this browser\)", body).group(1)
    theirs = [i for i in ids if i != mine][0].decode()
    response, _ = post_form(f"/ui/sessions/{theirs}/end", {"csrf": csrf_of(cookie)}, cookie)
    assert response.status == 303, response.status
    response, _ = request("GET", "/ui/keys", headers={"Cookie": f"rampart_console={other}"})
    assert response.status == 401, response.status
    response, _ = request("GET", "/ui/keys", headers={"Cookie": f"rampart_console={cookie}"})
    assert response.status == 200, response.status

    step("and from the CLI")
    _, third = sign_in(login_url())
    listed = [json.loads(l) for l in rampart("kms", "console-sessions", "list", "--json", "--kms", ADMIN).stdout.splitlines()]
    assert [l["admin"] for l in listed] == ["admin", "admin"], listed
    assert mine.decode() == listed[1]["id"], (mine, listed)
    text = rampart("kms", "console-sessions", "list", "--kms", ADMIN).stdout.decode()
    assert "SIGNED IN" in text and listed[0]["id"] in text, text
    rampart("kms", "console-sessions", "end", listed[0]["id"], "--kms", ADMIN)
    response, _ = request("GET", "/ui/keys", headers={"Cookie": f"rampart_console={third}"})
    assert response.status == 401, response.status
    missing = rampart("kms", "console-sessions", "end", listed[0]["id"], "--kms", ADMIN, check=False)
    assert missing.returncode != 0 and b"not found" in missing.stderr.lower(), missing
    refused = rampart("kms", "console-sessions", "list", "--kms", host, check=False)
    assert refused.returncode != 0 and b"admin" in refused.stderr, refused

    step("the session list pages as the other lists")
    for _ in range(4):
        sign_in(login_url())
    whole = rampart("kms", "console-sessions", "list", "--json", "--kms", ADMIN).stdout.splitlines()
    assert len(whole) == 5, whole
    paged = rampart("kms", "console-sessions", "list", "--json", "--page-size", "2", "--kms", ADMIN).stdout.splitlines()
    assert paged == whole, (paged, whole)
    first = rampart("kms", "console-sessions", "list", "--json", "--limit", "3", "--page-size", "2", "--kms", ADMIN).stdout.splitlines()
    assert first == whole[:3], (first, whole)
    status, page = admin_api("/v1/console/sessions?limit=2")
    assert status == 200 and page["sessions"] == [json.loads(l) for l in whole[:2]], page
    status, rest = admin_api("/v1/console/sessions?limit=3&cursor=" + page["next_cursor"])
    assert status == 200 and rest["next_cursor"] is None and [s["id"] for s in rest["sessions"]] == [json.loads(l)["id"] for l in whole[2:]], rest
    for bad in ["limit=0", "limit=10001", "cursor=AQ", "cursor=" + page["next_cursor"][:-2] + "AA", "state=active"]:
        status, body = admin_api("/v1/console/sessions?" + bad)
        assert status == 400 and body["error"]["message"], (bad, status, body)
    status, body = admin_api("/v1/clients?cursor=" + page["next_cursor"])
    assert status == 400 and "console session list" in body["error"]["message"], body


def admin_api(path):
    """GET `path` of the REST API with the admin bundle's certificate: (status, JSON)."""
    bundle = json.load(open(ADMIN))
    ctx, port = https()
    cert, key = os.path.join(WORK, "admin-cert.pem"), os.path.join(WORK, "admin-key.pem")
    with open(cert, "w") as f:
        f.write(bundle["cert"])
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(bundle["key"])
    ctx.load_cert_chain(cert, key)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    body = json.loads(response.read() or b"null")
    conn.close()
    return response.status, body


if MODE == "browser":
    browser()
elif MODE == "security":
    security()
else:
    raise SystemExit(f"unknown mode {MODE}")
print("all checks passed")
