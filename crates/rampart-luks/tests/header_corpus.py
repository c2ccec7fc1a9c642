#!/usr/bin/env python3
"""The LUKS2 header corpus: mutations of a cryptsetup-made volume, one per
check of cryptsetup 2.6's header validation (lib/luks2/luks2_json_metadata.c
LUKS2_hdr_validate and its hdr_validate_* steps, the keyslot handler checks
in luks2_keyslot.c / luks2_keyslot_luks2.c, and the binary header and JSON
area checks of luks2_disk_metadata.c), each with the verdict cryptsetup
2.6.1 gives and the check it models.

Usage:
  header_corpus.py make DIR
      Formats DIR/base.img with cryptsetup (keyslot 0: PBKDF2, passphrase
      "pass"; keyslot 1: Argon2id, passphrase "pass1"; token 0 of a foreign
      type), then writes DIR/<case>.img for every case and DIR/cases.json:
      a list of {"name", "check", "verdict", "passphrase", "cryptsetup"}
      ("cryptsetup" is the verdict, or what cryptsetup 2.6.1 does instead
      where it misbehaves: see CRYPTSETUP_DIFFERS).

Verdicts: "open" (the header loads and the passphrase opens it), "load"
(the header loads, the passphrase does not open it), "refuse" (the header
does not load). The test that uses this corpus (corpus_cryptsetup.rs) runs
the real cryptsetup and Rampart on every case and asserts that both give
the recorded verdict.

Every JSON mutation is written to both header copies with both SHA-256
checksums recomputed (over the binary header with its checksum field
zeroed, then the JSON area), as cryptsetup writes them.
"""

import copy
import hashlib
import json
import os
import struct
import subprocess
import sys

BIN = 4096
HDR = 16384
PASS = b"pass"
PASS1 = b"pass1"
TOKEN = {"type": "vendor-token", "keyslots": ["0"], "path": "/etc/x", "n": 7}


def run(*args, stdin=None):
    r = subprocess.run(args, input=stdin, capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {r.stderr.decode(errors='replace')}")
    return r


def make_base(d):
    base = os.path.join(d, "base.img")
    key = os.path.join(d, "pass")
    key1 = os.path.join(d, "pass1")
    tok = os.path.join(d, "token.json")
    with open(key, "wb") as f:
        f.write(PASS)
    with open(key1, "wb") as f:
        f.write(PASS1)
    with open(tok, "w") as f:
        json.dump(TOKEN, f)
    with open(base, "wb") as f:
        f.truncate(4 << 20)
    run("cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2",
        "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-size", "256",
        "--luks2-keyslots-size", "1m", "--offset", "4096", "--key-file", key, base)
    run("cryptsetup", "luksAddKey", "--batch-mode", "--pbkdf", "argon2id",
        "--pbkdf-force-iterations", "4", "--pbkdf-memory", "32", "--key-file", key,
        base, key1)
    run("cryptsetup", "token", "import", "--json-file", tok, "--token-id", "0", base)
    with open(base, "rb") as f:
        return bytearray(f.read())


def reseal(img, off, alg="sha256"):
    size = struct.unpack(">Q", img[off + 8:off + 16])[0]
    if not HDR <= size <= 4 << 20:
        size = HDR
    img[off + 448:off + 512] = bytes(64)
    h = hashlib.new(alg)
    h.update(bytes(img[off:off + size]))
    d = h.digest()
    img[off + 448:off + 448 + len(d)] = d


def json_of(img, off=0):
    area = bytes(img[off + BIN:off + HDR])
    return json.loads(area[:area.index(b"\0")])


def put_text(img, text, offs=(0, HDR)):
    for off in offs:
        if len(text) > HDR - BIN:
            raise SystemExit("JSON too large")
        img[off + BIN:off + HDR] = text + bytes(HDR - BIN - len(text))
        reseal(img, off)


def dumps(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()


def edit(f):
    """A case that edits the JSON of both copies."""
    def apply(img):
        v = json_of(img)
        f(v)
        put_text(img, dumps(v))
    return apply


def text_edit(f):
    """A case that edits the JSON text of both copies."""
    def apply(img):
        area = bytes(img[BIN:HDR])
        put_text(img, f(area[:area.index(b"\0")]))
    return apply


def binary(f):
    def apply(img):
        f(img)
    return apply


def set_bytes(img, at, b):
    img[at:at + len(b)] = b


# ---- helpers for the JSON mutations -------------------------------------

def setp(path, value):
    def f(v):
        node = v
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return f


def delp(path):
    def f(v):
        node = v
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
    return f


def both(*fs):
    def f(v):
        for g in fs:
            g(v)
    return f


def rename(section, old, new, refs=()):
    """Renames an object of a section, keeping its place, and its
    references in the given (section, field) lists."""
    def f(v):
        items = list(v[section].items())
        v[section] = {(new if k == old else k): val for k, val in items}
        for sec, field in refs:
            for obj in v[sec].values():
                obj[field] = [new if x == old else x for x in obj[field]]
    return f


def two_segments(v):
    s0 = v["segments"]["0"]
    s0["size"] = "1048576"
    s1 = copy.deepcopy(s0)
    s1["offset"] = str(int(s0["offset"]) + 1048576)
    s1["size"] = "dynamic"
    s1["iv_tweak"] = "2048"
    v["segments"]["1"] = s1
    v["digests"]["0"]["segments"] = ["0", "1"]


def second_digest(v):
    d = copy.deepcopy(v["digests"]["0"])
    d["keyslots"] = ["1"]
    d["segments"] = []
    v["digests"]["1"] = d


def nested(depth):
    node = "leaf"
    for _ in range(depth):
        node = {"n": node}
    return node


# (name, check it models, verdict, passphrase, mutation)
CASES = [
    # -- the pristine volume and what must be kept --------------------------
    ("pristine", "none", "open", PASS, edit(lambda v: None)),
    ("pristine_keyslot1", "none", "open", PASS1, edit(lambda v: None)),
    ("top_unknown_member", "unknown members are kept", "open", PASS,
     edit(setp(["vendor"], {"a": [1, "x"]}))),
    ("json_text_escapes_and_utf8", "any JSON string is kept", "open", PASS,
     edit(setp(["tokens", "1"], {"type": "x/y", "keyslots": [], "s": "\u00e9\u2603\t\"\\/\u0001"}))),
    ("json_nested_30", "json-c depth limit (32) not reached", "open", PASS,
     edit(setp(["tokens", "1"], {"type": "deep", "keyslots": [], "d": nested(28)}))),
    ("json_nested_40", "json-c parser depth limit (32)", "refuse", PASS,
     edit(setp(["tokens", "1"], {"type": "deep", "keyslots": [], "d": nested(40)}))),
    # -- JSON area (luks2_disk_metadata.c validate_json_area, parse) --------
    ("json_trailing_space", "json-c consumes trailing whitespace", "open", PASS,
     text_edit(lambda t: t + b" ")),
    ("json_leading_space", "validate_json_area: the area starts with '{'", "refuse", PASS,
     text_edit(lambda t: b" " + t)),
    ("json_garbage", "json_tokener_parse_ex", "refuse", PASS,
     text_edit(lambda t: t[:-1])),
    ("json_not_object", "validate_luks2_json_object: top level is an object", "refuse", PASS,
     text_edit(lambda t: b"[" + t + b"]")),
    # -- requirements (hdr_validate_requirements) -------------------------
    ("req_not_object", "hdr_validate_requirements: requirements is an object", "refuse", PASS,
     edit(setp(["config", "requirements"], ["x"]))),
    ("req_mandatory_not_array", "hdr_validate_requirements: mandatory is an array", "refuse", PASS,
     edit(setp(["config", "requirements"], {"mandatory": "x"}))),
    ("req_mandatory_not_string", "hdr_validate_requirements: mandatory holds strings", "refuse",
     PASS, edit(setp(["config", "requirements"], {"mandatory": [1]}))),
    ("req_unknown", "unknown requirement: loads; the passphrase is tested (mapping is refused)", "open", PASS,
     edit(setp(["config", "requirements"], {"mandatory": ["vendor-feature"]}))),
    ("req_empty", "an empty requirements object", "open", PASS,
     edit(setp(["config", "requirements"], {"mandatory": []}))),
    ("req_two_reencrypt", "hdr_validate_requirements: one online-reencrypt flag", "refuse", PASS,
     edit(setp(["config", "requirements"],
               {"mandatory": ["online-reencrypt-v2", "online-reencrypt-v3"]}))),
    ("req_reencrypt_no_keyslot", "LUKS2_keyslots_validate: reencryption keyslot missing",
     "refuse", PASS, edit(setp(["config", "requirements"], {"mandatory": ["online-reencrypt-v2"]}))),
    # -- tokens (hdr_validate_tokens, LUKS2_token_validate) -----------------
    ("tokens_missing", "hdr_validate_tokens: the tokens section", "refuse", PASS,
     edit(delp(["tokens"]))),
    ("tokens_not_object", "hdr_validate_tokens: tokens is an object", "refuse", PASS,
     edit(setp(["tokens"], []))),
    ("token_name_not_numbered", "hdr_validate_tokens: numbered names", "refuse", PASS,
     edit(rename("tokens", "0", "t0"))),
    ("token_no_type", "LUKS2_token_validate: type", "refuse", PASS, edit(delp(["tokens", "0", "type"]))),
    ("token_empty_type", "LUKS2_token_validate: type is not empty", "refuse", PASS,
     edit(setp(["tokens", "0", "type"], ""))),
    ("token_type_number", "LUKS2_token_validate: type is a string", "refuse", PASS,
     edit(setp(["tokens", "0", "type"], 3))),
    ("token_no_keyslots", "LUKS2_token_validate: keyslots", "refuse", PASS,
     edit(delp(["tokens", "0", "keyslots"]))),
    ("token_keyslots_not_array", "LUKS2_token_validate: keyslots is an array", "refuse", PASS,
     edit(setp(["tokens", "0", "keyslots"], "0"))),
    ("token_keyslot_missing", "validate_keyslots_array: existing keyslot", "refuse", PASS,
     edit(setp(["tokens", "0", "keyslots"], ["5"]))),
    ("token_keyslot_number", "validate_keyslots_array: strings", "refuse", PASS,
     edit(setp(["tokens", "0", "keyslots"], [0]))),
    ("token_builtin_type", "luks2-keyring tokens load", "open", PASS,
     edit(setp(["tokens", "1"], {"type": "luks2-keyring", "keyslots": ["1"], "key_description": "d"}))),
    # -- digests (hdr_validate_digests) -------------------------------------
    ("digests_missing", "hdr_validate_digests: the digests section", "refuse", PASS,
     edit(delp(["digests"]))),
    ("digest_name_not_numbered", "hdr_validate_digests: numbered names", "refuse", PASS,
     edit(rename("digests", "0", "d"))),
    ("digest_no_type", "hdr_validate_digests: type", "refuse", PASS, edit(delp(["digests", "0", "type"]))),
    ("digest_empty_type", "hdr_validate_digests: type is not empty", "refuse", PASS,
     edit(setp(["digests", "0", "type"], ""))),
    ("digest_keyslots_not_array", "hdr_validate_digests: keyslots is an array", "refuse", PASS,
     edit(setp(["digests", "0", "keyslots"], "0"))),
    ("digest_segments_not_array", "hdr_validate_digests: segments is an array", "refuse", PASS,
     edit(setp(["digests", "0", "segments"], {}))),
    ("digest_keyslot_missing", "validate_keyslots_array: existing keyslot", "refuse", PASS,
     edit(setp(["digests", "0", "keyslots"], ["0", "1", "7"]))),
    ("digest_segment_missing", "validate_segments_array: existing segment", "refuse", PASS,
     edit(setp(["digests", "0", "segments"], ["0", "3"]))),
    ("digest_segment_number", "validate_segments_array: strings", "refuse", PASS,
     edit(setp(["digests", "0", "segments"], [0]))),
    ("digest_unknown_type", "digest types are not checked at load", "load", PASS,
     edit(setp(["digests", "0", "type"], "vendor-digest"))),
    ("digest_no_hash", "the pbkdf2 digest is checked when used", "load", PASS,
     edit(delp(["digests", "0", "hash"]))),
    ("digest_extra_member", "unknown digest members are kept", "open", PASS,
     edit(setp(["digests", "0", "vendor"], True))),
    ("keyslot_in_two_digests", "LUKS2_keyslots_validate: exactly one digest", "refuse", PASS,
     edit(both(second_digest, setp(["digests", "1", "keyslots"], ["0"])))),
    ("keyslot_in_no_digest", "LUKS2_keyslots_validate: exactly one digest", "refuse", PASS,
     edit(setp(["digests", "0", "keyslots"], ["0"]))),
    ("second_digest_other_keyslot", "a digest for another key", "open", PASS,
     edit(both(second_digest, setp(["digests", "0", "keyslots"], ["0"])))),
    # -- segments (hdr_validate_segments, hdr_validate_crypt_segment) -------
    ("segments_missing", "hdr_validate_segments: the segments section", "refuse", PASS,
     edit(delp(["segments"]))),
    ("segments_empty", "hdr_validate_segments: at least one segment", "refuse", PASS,
     edit(both(setp(["segments"], {}), setp(["digests", "0", "segments"], [])))),
    ("segment_name_not_numbered", "hdr_validate_segments: numbered names", "refuse", PASS,
     edit(rename("segments", "0", "s", [("digests", "segments")]))),
    ("segment_no_type", "hdr_validate_segments: type", "refuse", PASS, edit(delp(["segments", "0", "type"]))),
    ("segment_offset_number", "hdr_validate_segments: offset is a string", "refuse", PASS,
     edit(setp(["segments", "0", "offset"], 2097152))),
    ("segment_offset_not_digits", "hdr_validate_segments: offset is numbered", "refuse", PASS,
     edit(setp(["segments", "0", "offset"], "2M"))),
    ("segment_offset_overflow", "hdr_validate_segments: offset fits 64 bits", "refuse", PASS,
     edit(setp(["segments", "0", "offset"], "18446744073709551616"))),
    ("segment_offset_unaligned", "hdr_validate_segments: offset aligned to 512", "refuse", PASS,
     edit(setp(["segments", "0", "offset"], "2097153"))),
    ("segment_offset_largest", "the largest aligned offset loads", "open", PASS,
     edit(setp(["segments", "0", "offset"], "18446744073709551104"))),
    ("segment_offset_zero", "offset 0 (detached header) skips the keyslots_size check", "open",
     PASS, edit(setp(["segments", "0", "offset"], "0"))),
    ("segment_size_zero", "hdr_validate_segments: size is not 0", "refuse", PASS,
     edit(setp(["segments", "0", "size"], "0"))),
    ("segment_size_not_digits", "hdr_validate_segments: size is numbered", "refuse", PASS,
     edit(setp(["segments", "0", "size"], "all"))),
    ("segment_size_unaligned", "hdr_validate_segments: size aligned to 512", "refuse", PASS,
     edit(setp(["segments", "0", "size"], "1000"))),
    ("segment_size_not_sector_multiple", "hdr_validate_crypt_segment: size % sector_size",
     "refuse", PASS, edit(setp(["segments", "0", "size"], "1049088"))),
    ("segment_size_largest", "the largest aligned size loads", "open", PASS,
     edit(setp(["segments", "0", "size"], "18446744073707454464"))),
    ("segment_flags_not_array", "hdr_validate_segments: flags is an array", "refuse", PASS,
     edit(setp(["segments", "0", "flags"], "x"))),
    ("segment_flags_not_strings", "hdr_validate_segments: flags hold strings", "refuse", PASS,
     edit(setp(["segments", "0", "flags"], [1]))),
    ("segment_unknown_flag", "unknown segment flags are kept", "open", PASS,
     edit(setp(["segments", "0", "flags"], ["vendor-flag"]))),
    ("segment_unknown_type", "segment types other than crypt are not checked; the key is tested", "open", PASS,
     edit(setp(["segments", "0", "type"], "vendor-linear"))),
    ("segment_no_iv_tweak", "hdr_validate_crypt_segment: iv_tweak", "refuse", PASS,
     edit(delp(["segments", "0", "iv_tweak"]))),
    ("segment_iv_tweak_not_digits", "hdr_validate_crypt_segment: iv_tweak is numbered",
     "refuse", PASS, edit(setp(["segments", "0", "iv_tweak"], "-1"))),
    ("segment_iv_tweak_largest", "the largest iv_tweak loads", "open", PASS,
     edit(setp(["segments", "0", "iv_tweak"], "18446744073709551615"))),
    ("segment_no_encryption", "hdr_validate_crypt_segment: encryption", "refuse", PASS,
     edit(delp(["segments", "0", "encryption"]))),
    ("segment_empty_encryption", "hdr_validate_crypt_segment: encryption is not empty",
     "refuse", PASS, edit(setp(["segments", "0", "encryption"], ""))),
    ("segment_unknown_cipher", "the data cipher is checked when used", "open", PASS,
     edit(setp(["segments", "0", "encryption"], "serpent-xts-plain64"))),
    ("segment_sector_size_string", "hdr_validate_crypt_segment: sector_size is an integer",
     "refuse", PASS, edit(setp(["segments", "0", "sector_size"], "4096"))),
    ("segment_sector_size_zero", "hdr_validate_crypt_segment: sector_size is not 0", "refuse",
     PASS, edit(setp(["segments", "0", "sector_size"], 0))),
    ("segment_sector_size_unaligned", "hdr_validate_crypt_segment: sector_size % 512",
     "refuse", PASS, edit(setp(["segments", "0", "sector_size"], 520))),
    ("segment_sector_size_negative", "validate_json_uint32: sector_size", "refuse", PASS,
     edit(setp(["segments", "0", "sector_size"], -4096))),
    ("segment_sector_size_1536", "sector sizes that are multiples of 512 load", "open", PASS,
     edit(setp(["segments", "0", "sector_size"], 1536))),
    ("segment_integrity_not_object", "hdr_validate_crypt_segment: integrity is an object",
     "refuse", PASS, edit(setp(["segments", "0", "integrity"], "hmac"))),
    ("segment_integrity_incomplete", "hdr_validate_crypt_segment: integrity fields", "refuse",
     PASS, edit(setp(["segments", "0", "integrity"], {"type": "hmac(sha256)"}))),
    ("segment_integrity", "integrity segments load", "open", PASS,
     edit(setp(["segments", "0", "integrity"],
               {"type": "hmac(sha256)", "journal_encryption": "none", "journal_integrity": "none"}))),
    ("segment_without_digest", "hdr_validate_crypt_segment: segment has a digest", "refuse", PASS,
     edit(setp(["digests", "0", "segments"], []))),
    ("segments_two", "several segments load", "open", PASS, edit(two_segments)),
    ("segments_gap", "hdr_validate_segments: no gap in segment ids", "refuse", PASS,
     edit(both(two_segments, rename("segments", "1", "2", [("digests", "segments")])))),
    ("segments_dynamic_not_last", "validate_segment_intervals: only the last is dynamic",
     "refuse", PASS, edit(both(two_segments, setp(["segments", "0", "size"], "dynamic")))),
    ("segments_overlap", "validate_segment_intervals: no overlap", "refuse", PASS,
     edit(both(two_segments, setp(["segments", "0", "size"], "2097152")))),
    ("segments_backup_first", "hdr_validate_segments: a regular segment exists", "refuse", PASS,
     edit(setp(["segments", "0", "flags"], ["backup-final"]))),
    ("segments_regular_after_backup", "hdr_validate_segments: backups come last", "refuse",
     PASS, edit(both(two_segments, setp(["segments", "0", "flags"], ["backup-previous"])))),
    ("segments_backup_last", "a backup segment after the regular ones", "open", PASS,
     edit(both(two_segments, setp(["segments", "1", "flags"], ["backup-previous"])))),
    # -- keyslots (hdr_validate_keyslots, LUKS2_keyslot_validate) -----------
    ("keyslots_missing", "hdr_validate_keyslots: the keyslots section", "refuse", PASS,
     edit(delp(["keyslots"]))),
    ("keyslot_name_not_numbered", "hdr_validate_keyslots: numbered names", "refuse", PASS,
     edit(rename("keyslots", "1", "k1", [("digests", "keyslots")]))),
    ("keyslot_high_id", "keyslot ids above 31 load", "open", PASS1,
     edit(rename("keyslots", "1", "40", [("digests", "keyslots")]))),
    ("keyslot_no_type", "LUKS2_keyslot_validate: type", "refuse", PASS, edit(delp(["keyslots", "1", "type"]))),
    ("keyslot_empty_type", "LUKS2_keyslot_validate: type is not empty", "refuse", PASS,
     edit(setp(["keyslots", "1", "type"], ""))),
    ("keyslot_no_key_size", "LUKS2_keyslot_validate: key_size", "refuse", PASS,
     edit(delp(["keyslots", "1", "key_size"]))),
    ("keyslot_key_size_string", "LUKS2_keyslot_validate: key_size is an integer", "refuse",
     PASS, edit(setp(["keyslots", "1", "key_size"], "32"))),
    ("keyslot_key_size_negative", "validate_json_uint32: key_size", "refuse", PASS,
     edit(setp(["keyslots", "1", "key_size"], -32))),
    ("keyslot_key_size_over_32_bits", "validate_json_uint32: key_size", "refuse", PASS,
     edit(setp(["keyslots", "1", "key_size"], 4294967296))),
    ("keyslot_key_size_zero", "key_size is checked when the keyslot is used", "load", PASS,
     edit(setp(["keyslots", "0", "key_size"], 0))),
    ("keyslot_unknown_type", "keyslot types without a handler are not checked", "open", PASS,
     edit(both(setp(["keyslots", "1", "type"], "vendor-slot"),
               setp(["digests", "0", "keyslots"], ["0"])))),
    ("keyslot_unknown_type_in_digest", "unknown keyslot types may be in a digest", "open", PASS,
     edit(setp(["keyslots", "1", "type"], "vendor-slot"))),
    ("keyslot_priority_odd", "priority is not checked at load; an invalid one disables the keyslot", "load", PASS,
     edit(setp(["keyslots", "0", "priority"], 7))),
    ("keyslot_priority_ignore", "priority 0: the keyslot is not tried without a slot", "load",
     PASS, edit(setp(["keyslots", "0", "priority"], 0))),
    ("keyslot_extra_member", "unknown keyslot members are kept", "open", PASS,
     edit(setp(["keyslots", "0", "vendor"], {"x": 1}))),
    # -- luks2 keyslot handler (luks2_keyslot_validate) ---------------------
    ("kdf_missing", "luks2_keyslot_validate: kdf", "refuse", PASS, edit(delp(["keyslots", "0", "kdf"]))),
    ("kdf_no_type", "luks2_keyslot_validate: kdf type", "refuse", PASS,
     edit(delp(["keyslots", "0", "kdf", "type"]))),
    ("kdf_unknown_type", "unknown KDFs load; the keyslot is refused when used", "load", PASS,
     edit(setp(["keyslots", "0", "kdf", "type"], "scrypt"))),
    ("kdf_pbkdf2_no_hash", "luks2_keyslot_validate: pbkdf2 hash", "refuse", PASS,
     edit(delp(["keyslots", "0", "kdf", "hash"]))),
    ("kdf_pbkdf2_iterations_string", "luks2_keyslot_validate: pbkdf2 iterations is an integer",
     "refuse", PASS, edit(setp(["keyslots", "0", "kdf", "iterations"], "1000"))),
    ("kdf_pbkdf2_no_salt", "luks2_keyslot_validate: pbkdf2 salt", "refuse", PASS,
     edit(delp(["keyslots", "0", "kdf", "salt"]))),
    ("kdf_pbkdf2_extra_member", "luks2_keyslot_repair drops extra kdf members", "open", PASS,
     edit(setp(["keyslots", "0", "kdf", "vendor"], 1))),
    ("kdf_pbkdf2_iterations_zero", "KDF costs are checked when used", "load", PASS,
     edit(setp(["keyslots", "0", "kdf", "iterations"], 0))),
    ("kdf_pbkdf2_iterations_low", "legacy low costs open (write limits do not apply)", "open",
     PASS, edit(lambda v: None)),
    ("kdf_pbkdf2_unknown_hash", "the KDF hash is checked when used", "load", PASS,
     edit(setp(["keyslots", "0", "kdf", "hash"], "whirlpool-x"))),
    ("kdf_salt_not_base64", "the salt is checked when used", "load", PASS,
     edit(setp(["keyslots", "0", "kdf", "salt"], "***"))),
    ("kdf_argon2_no_memory", "luks2_keyslot_validate: argon2 memory", "refuse", PASS,
     edit(delp(["keyslots", "1", "kdf", "memory"]))),
    ("kdf_argon2_cpus_string", "luks2_keyslot_validate: argon2 cpus is an integer", "refuse",
     PASS, edit(setp(["keyslots", "1", "kdf", "cpus"], "1"))),
    ("kdf_argon2_time_zero", "KDF costs are checked when used", "load", PASS1,
     edit(setp(["keyslots", "1", "kdf", "time"], 0))),
    ("kdf_argon2_memory_over_limit", "KDF costs are checked when used", "load", PASS1,
     edit(setp(["keyslots", "1", "kdf", "memory"], 4194305))),
    ("kdf_argon2_memory_over_32_bits", "KDF costs are checked when used", "load", PASS1,
     edit(setp(["keyslots", "1", "kdf", "memory"], 5000000000))),
    ("kdf_argon2_cpus_many", "KDF costs are checked when used", "load", PASS1,
     edit(setp(["keyslots", "1", "kdf", "cpus"], 1000))),
    ("kdf_argon2_legacy_cost_other_slot", "an unusable keyslot does not stop the others",
     "open", PASS, edit(setp(["keyslots", "1", "kdf", "time"], 0))),
    ("af_missing", "luks2_keyslot_validate: af", "refuse", PASS, edit(delp(["keyslots", "0", "af"]))),
    ("af_unknown_type", "luks2_keyslot_validate: af type luks1", "refuse", PASS,
     edit(setp(["keyslots", "0", "af", "type"], "luks2"))),
    ("af_no_hash", "luks2_keyslot_validate: af hash", "refuse", PASS,
     edit(delp(["keyslots", "0", "af", "hash"]))),
    ("af_stripes_string", "luks2_keyslot_validate: af stripes is an integer", "refuse", PASS,
     edit(setp(["keyslots", "0", "af", "stripes"], "4000"))),
    ("af_unknown_hash", "the AF hash is checked when used", "load", PASS,
     edit(setp(["keyslots", "0", "af", "hash"], "whirlpool-x"))),
    ("area_missing", "luks2_keyslot_validate / hdr_validate_areas: area", "refuse", PASS,
     edit(delp(["keyslots", "0", "area"]))),
    ("area_unknown_type", "luks2_keyslot_validate: area type raw", "refuse", PASS,
     edit(setp(["keyslots", "0", "area", "type"], "datashift"))),
    ("area_no_encryption", "luks2_keyslot_validate: area encryption", "refuse", PASS,
     edit(delp(["keyslots", "0", "area", "encryption"]))),
    ("area_key_size_string", "luks2_keyslot_validate: area key_size is an integer", "refuse",
     PASS, edit(setp(["keyslots", "0", "area", "key_size"], "32"))),
    ("area_unknown_cipher", "the keyslot cipher is checked when used", "load", PASS,
     edit(setp(["keyslots", "0", "area", "encryption"], "vendor-cipher-plain64"))),
    ("area_too_small_for_key", "the area size is not checked against the key material", "open", PASS,
     edit(setp(["keyslots", "0", "area", "size"], "4096"))),
    # -- areas (hdr_validate_areas, validate_intervals) ---------------------
    ("area_offset_number", "hdr_validate_areas: offset is a string", "refuse", PASS,
     edit(setp(["keyslots", "0", "area", "offset"], 32768))),
    ("area_offset_not_digits", "hdr_validate_areas: offset is numbered", "refuse", PASS,
     edit(setp(["keyslots", "0", "area", "offset"], "0x8000"))),
    ("area_offset_overflow", "hdr_validate_areas: offset fits 64 bits", "refuse", PASS,
     edit(setp(["keyslots", "0", "area", "offset"], "18446744073709551616"))),
    ("area_in_header", "validate_intervals: not inside the header copies", "refuse", PASS,
     edit(setp(["keyslots", "0", "area", "offset"], "16384"))),
    ("area_size_zero", "validate_intervals: length > 0", "refuse", PASS,
     edit(setp(["keyslots", "0", "area", "size"], "0"))),
    ("area_beyond_keyslots", "validate_intervals: inside the keyslots area", "refuse", PASS,
     edit(setp(["keyslots", "0", "area", "offset"], "1081344"))),
    ("area_end_overflow", "validate_intervals: offset + length overflow", "refuse", PASS,
     edit(setp(["keyslots", "0", "area", "size"], "18446744073709551000"))),
    ("areas_overlap", "validate_intervals: no overlap", "refuse", PASS,
     edit(lambda v: v["keyslots"]["1"]["area"].update(offset=v["keyslots"]["0"]["area"]["offset"]))),
    ("area_unknown_keyslot_type_no_area", "hdr_validate_areas: every keyslot has an area",
     "refuse", PASS, edit(both(setp(["keyslots", "1"], {"type": "vendor-slot", "key_size": 0}),
                               setp(["digests", "0", "keyslots"], ["0"])))),
    # -- config (hdr_validate_config, hdr_validate_json_size) ---------------
    ("config_missing", "hdr_validate_config: the config section", "refuse", PASS,
     edit(delp(["config"]))),
    ("config_json_size_number", "hdr_validate_config: json_size is a string", "refuse", PASS,
     edit(setp(["config", "json_size"], 12288))),
    ("config_json_size_mismatch", "hdr_validate_json_size: json_size = header size - 4096",
     "refuse", PASS, edit(setp(["config", "json_size"], "28672"))),
    ("config_json_size_not_power_of_2", "LUKS2_check_metadata_area_size", "refuse", PASS,
     edit(setp(["config", "json_size"], "13000"))),
    ("config_keyslots_size_unaligned", "LUKS2_check_keyslots_area_size: 4096 multiple",
     "refuse", PASS, edit(setp(["config", "keyslots_size"], "1000000"))),
    ("config_keyslots_size_too_large", "LUKS2_check_keyslots_area_size: at most 128 MiB",
     "refuse", PASS, edit(setp(["config", "keyslots_size"], "134221824"))),
    ("config_keyslots_size_into_data", "hdr_validate_config: keyslots end before the data",
     "refuse", PASS, edit(setp(["config", "keyslots_size"], "2093056"))),
    ("config_keyslots_size_fills_gap", "the keyslots area may reach the data offset", "open",
     PASS, edit(setp(["config", "keyslots_size"], "2064384"))),
    ("config_flags_not_array", "hdr_validate_config: flags is an array", "refuse", PASS,
     edit(setp(["config", "flags"], "allow-discards"))),
    ("config_flags_not_strings", "hdr_validate_config: flags hold strings", "refuse", PASS,
     edit(setp(["config", "flags"], [1]))),
    ("config_unknown_flag", "unknown config flags are kept", "open", PASS,
     edit(setp(["config", "flags"], ["allow-discards", "vendor-flag"]))),
    ("config_unknown_member", "unknown config members are kept", "open", PASS,
     edit(setp(["config", "vendor"], "x"))),
    # -- binary header (luks2_disk_metadata.c) ------------------------------
    ("bin_primary_checksum", "hdr_checksum_check: the secondary copy is used", "open", PASS,
     binary(lambda img: img.__setitem__(BIN + 10, img[BIN + 10] ^ 0x20))),
    # -- lookups by name, which cryptsetup makes with the canonical "%d" ---
    ("keyslot_id_leading_zero", "numbered() accepts \"01\"; the digest's reference finds no keyslot \"01\"",
     "refuse", PASS1, edit(rename("keyslots", "1", "01", [("digests", "keyslots")]))),
    ("keyslot_id_leading_zero_unreferenced", "a keyslot \"01\" is not keyslot 1 of the digest",
     "refuse", PASS, edit(rename("keyslots", "1", "01"))),
    ("token_id_leading_zero", "numbered() accepts a token \"01\"", "open", PASS,
     edit(rename("tokens", "0", "01"))),
    ("segment_id_leading_zero", "the digest's segment \"00\" is not segment 0", "refuse", PASS,
     edit(both(rename("segments", "0", "00"), setp(["digests", "0", "segments"], ["00"])))),
    ("digest_id_leading_zero", "a digest \"00\" is found by iteration but not by id: loads, never opens",
     "load", PASS, edit(rename("digests", "0", "00"))),
    ("token_id_32", "token ids above 31 load", "open", PASS, edit(rename("tokens", "0", "32"))),
    ("token_id_40", "token ids above 31 load", "open", PASS, edit(rename("tokens", "0", "40"))),
    # -- what opening a keyslot reads --------------------------------------
    ("af_stripes_zero", "the stripe count is read, but keyslots always split into 4000", "open",
     PASS, edit(setp(["keyslots", "0", "af", "stripes"], 0))),
    ("af_stripes_two", "the stripe count is read, but keyslots always split into 4000", "open",
     PASS, edit(setp(["keyslots", "0", "af", "stripes"], 2))),
    ("kdf_unknown_type_first", "a keyslot no KDF can open ends the search (LUKS2_keyslot_open_priority)",
     "load", PASS1, edit(setp(["keyslots", "0", "kdf", "type"], "scrypt"))),
    ("kdf_unknown_type_second", "a later keyslot is not reached", "open", PASS,
     edit(setp(["keyslots", "1", "kdf", "type"], "scrypt"))),
    ("digest_unknown_hash", "a digest whose hash is unknown verifies no key", "load", PASS,
     edit(setp(["digests", "0", "hash"], "whirlpool-x"))),
    ("digest_hash_size_mismatch", "a 32-byte digest is not a sha1 digest", "load", PASS,
     edit(setp(["digests", "0", "hash"], "sha1"))),
    ("bin_both_checksums", "hdr_checksum_check on both copies", "refuse", PASS,
     binary(lambda img: [img.__setitem__(o + BIN + 10, img[o + BIN + 10] ^ 0x20) for o in (0, HDR)])),
    ("bin_both_versions", "hdr_disk_sanity_check_pre: version 2", "refuse", PASS,
     binary(lambda img: [(set_bytes(img, o + 6, b"\0\3"), reseal(img, o)) for o in (0, HDR)])),
    ("bin_primary_offset", "hdr_disk_sanity_check_pre: hdr_offset", "open", PASS,
     binary(lambda img: (set_bytes(img, 256, struct.pack(">Q", 512)), reseal(img, 0)))),
    ("bin_sha1_checksums", "any checksum algorithm cryptsetup can compute", "open", PASS,
     binary(lambda img: [(set_bytes(img, o + 72, b"sha1".ljust(32, b"\0")), reseal(img, o, "sha1"))
                         for o in (0, HDR)])),
    ("bin_uuid_not_ascii", "the UUID is not checked at load", "open", PASS,
     binary(lambda img: [(set_bytes(img, o + 168, b"\xff\x01uuid\0"), reseal(img, o)) for o in (0, HDR)])),
    ("bin_label_utf8", "labels are any bytes", "open", PASS,
     binary(lambda img: [(set_bytes(img, o + 24, "\u00e9t\u00e9\0".encode()), reseal(img, o))
                         for o in (0, HDR)])),
    ("bin_newer_secondary", "the copy with the higher seqid wins", "open", PASS,
     binary(lambda img: (set_bytes(img, HDR + 16, struct.pack(">Q", 99)), reseal(img, HDR)))),
]


# Cases where cryptsetup 2.6.1 itself misbehaves, with what it does instead
# of the verdict above (the test checks that it still does, so that a fixed
# cryptsetup shows up as a failure to update this table):
# - "abort": luksDump loads the header; `open` dies of an assertion.
# - "accepts-any-passphrase": PBKDF2_digest_verify returns success when the
#   digest's length matches neither 20 bytes nor its hash (the length check
#   jumps out with r still 0 from the base64 decoding), so any passphrase
#   "opens" the volume with a wrong key. Rampart refuses such a digest.
CRYPTSETUP_DIFFERS = {
    "token_id_32": "abort",  # token_is_blocked: assert(token < 32)
    "token_id_40": "abort",
    "digest_unknown_hash": "accepts-any-passphrase",
    "digest_hash_size_mismatch": "accepts-any-passphrase",
}


def make(d):
    os.makedirs(d, exist_ok=True)
    base = make_base(d)
    # The low-cost case runs the same header with a 1-iteration keyslot
    # made by cryptsetup itself is not possible (it refuses < 1000), so the
    # base's 1000 iterations stand for "below Rampart's defaults".
    cases = []
    names = set()
    for name, check, verdict, passphrase, mutate in CASES:
        assert name not in names, name
        names.add(name)
        img = bytearray(base)
        mutate(img)
        with open(os.path.join(d, name + ".img"), "wb") as f:
            f.write(img)
        cases.append({"name": name, "check": check, "verdict": verdict,
                      "passphrase": passphrase.decode(),
                      "cryptsetup": CRYPTSETUP_DIFFERS.get(name, verdict)})
    with open(os.path.join(d, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
