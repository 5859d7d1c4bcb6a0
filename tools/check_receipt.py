#!/usr/bin/env python3
"""An independent checker of cotwire receipts (format "cotwire-receipt/v1").

It is written from the published formats alone, with Python's standard
library and none of cotwire's code, so that a receipt can be trusted without
trusting cotwire: the row hash, the Merkle leaf, the RFC 9162 inclusion proof,
the C2SP signed note and its Ed25519 signature (RFC 8032) are all recomputed
here.

    python3 check_receipt.py RECEIPT.json VERIFIER_KEY

prints "OK leaf <index> of <tree_size> under <origin>" and exits 0, or prints
"FAIL: <reason>" and exits 1. A usage error (wrong arguments, an unreadable
file, a malformed verifier key) exits 2.
"""

import base64
import hashlib
import json
import struct
import sys

FORMAT = "cotwire-receipt/v1"
NULL_MARKER = b"\xff" * 8
SIGNATURE_PREFIX = "\u2014 "  # EM DASH and a space, as C2SP signed notes spell it
ED25519_KEY_TYPE = 0x01


class Fail(Exception):
    """Why the receipt does not verify; main prints it after "FAIL: "."""


class UsageError(Exception):
    """A mistake by the caller rather than a bad receipt: exit 2, not 1."""


# --- Row hash and Merkle tree -------------------------------------------------


def lp(text):
    # Length-prefixing keeps "ab"+"c" and "a"+"bc" apart; the NULL marker can
    # never be a length (no text is 2^64-1 bytes), so NULL and "" differ too.
    if text is None:
        return NULL_MARKER
    data = text.encode("utf-8")
    return struct.pack(">Q", len(data)) + data


HASH_VERSIONS = ("cotwire/v1", "cotwire/v2", "cotwire/v3")

# What a v3 pre-image holds as text rather than as a salted commitment.
V3_UNCOMMITTED = {"current_hash", "row_salt", "step_index", "prev_hash", "created_at", "ledger_seq",
                  "session_id", "trace_id", "has_embedding"}


def v3_key(row_salt, name, m):
    """A committed column's 16-byte key: from the row's salt (32 hex digits), two keys to a
    block of SHA-256(lp("cotwire/v3 keys") || salt || u32_be(block)), or after a redaction
    from the JSON object of keys the salt column holds instead."""
    if row_salt is not None and len(row_salt) == 32 and all(c in "0123456789abcdef" for c in row_salt):
        block = hashlib.sha256(lp("cotwire/v3 keys") + bytes.fromhex(row_salt) + struct.pack(">I", m // 2)).digest()
        return block[16 * (m % 2):16 * (m % 2) + 16]
    try:
        listed = json.loads(row_salt or "")
    except ValueError:
        raise Fail("row_salt is neither a salt nor a list of keys")
    key = listed.get(name) if isinstance(listed, dict) else None
    if not isinstance(key, str) or len(key) != 32:
        raise Fail("row_salt holds no key for column %r, which is not redacted" % name)
    return bytes.fromhex(key)


def row_hash(table, columns, version="cotwire/v1", redacted=None):
    """v1 hashes each column's lp(text); v2 hashes SHA-256(lp(text)); v3 a committed column's
    SHA-256(key || lp(text)) and any other column's lp(text). A redacted column's recorded
    digest (v2) or commitment (v3) stands in for its value."""
    redacted = redacted or {}
    pre = lp(version) + lp(table)
    row_salt = dict(columns).get("row_salt")
    m = 0
    for name, value in columns:
        # The hash cannot cover itself, nor a v3 row's salt.
        if name == "current_hash" or (version == "cotwire/v3" and name == "row_salt"):
            continue
        if version == "cotwire/v1" or (version == "cotwire/v3" and name in V3_UNCOMMITTED):
            pre += lp(name) + lp(value)
        elif name in redacted:
            pre += lp(name) + bytes.fromhex(redacted[name])
            m += 1 if version == "cotwire/v3" else 0
        elif version == "cotwire/v3":
            pre += lp(name) + hashlib.sha256(v3_key(row_salt, name, m) + lp(value)).digest()
            m += 1
        else:
            pre += lp(name) + hashlib.sha256(lp(value)).digest()
    return hashlib.sha256(pre).hexdigest()


def leaf_hash(schema, table, chain_key, current_hash):
    data = lp("cotwire/leaf/v1") + lp(schema) + lp(table) + lp(chain_key) + lp(current_hash)
    # The 0x00 / 0x01 prefixes (RFC 9162 section 2.1.1) stop an interior node
    # from being passed off as a leaf.
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(index, size, leaf, proof, root):
    """RFC 9162 section 2.1.3.2; raises Fail with the first thing that is wrong."""
    if not 0 <= index < size:
        raise Fail("leaf_index %d is not below tree_size %d" % (index, size))
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise Fail("the inclusion proof has %d hashes, more than leaf %d of %d needs" % (len(proof), index, size))
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            # On the tree's right edge a node can have no sibling at some
            # levels; those levels add no hash, so skip them.
            while fn != 0 and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise Fail("the inclusion proof has %d hashes, fewer than leaf %d of %d needs" % (len(proof), index, size))
    if r != root:
        raise Fail("the inclusion proof leads to root %s, the checkpoint's root is %s" % (r.hex(), root.hex()))


# --- Ed25519 verification (RFC 8032 section 5.1) -----------------------------
# Points are in extended coordinates (X, Y, Z, T) with x = X/Z, y = Y/Z,
# x*y = T/Z, so that additions need no modular inversion.

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493  # order of the base point
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)
IDENTITY = (0, 1, 1, 0)


def point_add(a, b):
    # RFC 8032 section 5.1.4; the formula is complete (it also doubles), so
    # scalar multiplication needs no special cases.
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    pa = (y1 - x1) * (y2 - x2) % P
    pb = (y1 + x1) * (y2 + x2) % P
    pc = 2 * t1 * t2 * D % P
    pd = 2 * z1 * z2 % P
    e, f, g, h = pb - pa, pd - pc, pd + pc, pb + pa
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def scalar_mult(s, point):
    # Not constant time, which only matters when the scalar is secret; here
    # everything is public.
    result = IDENTITY
    while s:
        if s & 1:
            result = point_add(result, point)
        point = point_add(point, point)
        s >>= 1
    return result


def point_equal(a, b):
    # Cross-multiplied because equal points can have different Z.
    return (a[0] * b[2] - b[0] * a[2]) % P == 0 and (a[1] * b[2] - b[1] * a[2]) % P == 0


def point_decode(data):
    """RFC 8032 section 5.1.3; None for an encoding that is not a curve point."""
    if len(data) != 32:
        return None
    y = int.from_bytes(data, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    # A non-canonical y would give one point several encodings.
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P != 0:
        return None
    # x = 0 has no negative, so a set sign bit there is a forged encoding.
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = P - x
    return (x, y, 1, x * y % P)


B = point_decode(bytes.fromhex("58" + "66" * 31))  # y = 4/5, x even


def ed25519_verify(public, message, signature):
    """RFC 8032 section 5.1.7, checking [S]B == R + [k]A."""
    if len(public) != 32 or len(signature) != 64:
        return False
    a = point_decode(public)
    r = point_decode(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    # Without this, S and S + L would both verify: a malleable signature.
    if s >= L:
        return False
    # k hashes the encodings as received, not re-encoded points.
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % L
    return point_equal(scalar_mult(s, B), point_add(r, scalar_mult(k, a)))


# --- C2SP signed note and tlog checkpoint -------------------------------------


def valid_name(name):
    # The same rule as Go's golang.org/x/mod/sumdb/note: "+" separates the
    # parts of a key and a space ends the name in a signature line.
    return name != "" and "+" not in name and not any(c.isspace() for c in name)


def b64decode(text, what):
    # validate=True: the default silently drops characters outside the
    # alphabet, which would let two different texts stand for one value.
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise Fail("%s is not valid base64" % what) from None


def parse_verifier(text):
    """(name, 4-byte key hash, 32-byte public key) of "name+hash+base64(0x01 || key)"."""
    parts = text.strip().split("+", 2)
    if len(parts) != 3:
        raise UsageError("the verifier key is not name+hash+key")
    name, hash_hex, key_b64 = parts
    if not valid_name(name):
        raise UsageError("the verifier key's name %r is not a valid key name" % name)
    if len(hash_hex) != 8 or any(c not in "0123456789abcdef" for c in hash_hex):
        raise UsageError("the verifier key's hash %r is not 8 lowercase hex digits" % hash_hex)
    try:
        material = base64.b64decode(key_b64, validate=True)
    except ValueError:
        raise UsageError("the verifier key's key is not valid base64") from None
    if len(material) != 33 or material[0] != ED25519_KEY_TYPE:
        raise UsageError("the verifier key is not an Ed25519 key (type 0x01 and 32 bytes)")
    # The hash binds the name to the key; checking it catches a key pasted
    # under the wrong name.
    key_hash = hashlib.sha256(name.encode("utf-8") + b"\n" + material).digest()[:4]
    if key_hash.hex() != hash_hex:
        raise UsageError("the verifier key's hash %s does not match its name and key (%s)" % (hash_hex, key_hash.hex()))
    return name, key_hash, material[1:]


def open_checkpoint(note, name, key_hash, public):
    """(origin, tree size, root hash) of the checkpoint, once a signature by the key verifies."""
    # The signed bytes must be exactly what was signed: no control characters
    # that could render differently, and nothing that is not UTF-8.
    if any(c < " " and c != "\n" for c in note):
        raise Fail("checkpoint: the signed note contains a control character")
    # The signatures follow the last blank line; the text keeps its final newline.
    split = note.rfind("\n\n")
    if split < 0:
        raise Fail("checkpoint: not a signed note (no blank line before the signatures)")
    text, signatures = note[: split + 1], note[split + 2 :]
    if not signatures.endswith("\n"):
        raise Fail("checkpoint: the signed note does not end with a signature line")
    message = text.encode("utf-8")
    verified = False
    for line in signatures[:-1].split("\n"):
        if not line.startswith(SIGNATURE_PREFIX):
            raise Fail("checkpoint: malformed signature line %r" % line)
        signer, _, sig_b64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
        sig = b64decode(sig_b64, "checkpoint: the signature of %r" % signer)
        if not valid_name(signer) or len(sig) < 5:
            raise Fail("checkpoint: malformed signature line %r" % line)
        # Other keys' signatures (witnesses, say) are allowed and ignored.
        if signer != name or sig[:4] != key_hash:
            continue
        # A bad signature that claims to be by our key is an attack, not noise.
        if not ed25519_verify(public, message, sig[4:]):
            raise Fail("checkpoint: the signature by %s (key hash %s) does not verify" % (name, key_hash.hex()))
        verified = True
    if not verified:
        raise Fail("checkpoint: not signed by %s+%s" % (name, key_hash.hex()))
    # c2sp.org/tlog-checkpoint: origin, size, root, then optional extension
    # lines, none of them empty.
    lines = text[:-1].split("\n")
    if len(lines) < 3 or "" in lines:
        raise Fail("checkpoint: the body is not origin, tree size and root hash lines")
    origin, size_text, root_b64 = lines[:3]
    # Canonical decimal only, so one size has one spelling.
    if not (size_text.isascii() and size_text.isdigit()) or (len(size_text) > 1 and size_text[0] == "0"):
        raise Fail("checkpoint: tree size %r is not a decimal number" % size_text)
    root = b64decode(root_b64, "checkpoint: the root hash")
    if len(root) != 32:
        raise Fail("checkpoint: the root hash is %d bytes, not 32" % len(root))
    if origin != name:
        raise Fail("checkpoint: origin %r is not the verifier key's name %r" % (origin, name))
    return origin, int(size_text), root


# --- The receipt ---------------------------------------------------------------


def field(receipt, key, kind, what):
    if key not in receipt:
        raise Fail("the receipt has no %r" % key)
    value = receipt[key]
    # bool is an int in Python, but true is not a leaf index.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise Fail("%r is not %s" % (key, what))
    return value


def text_field(receipt, key, nullable=False):
    if nullable and key in receipt and receipt[key] is None:
        return None
    value = field(receipt, key, str, "text")
    check_unicode(value, repr(key))
    return value


def check_unicode(text, what):
    # JSON can carry lone surrogates, which have no UTF-8 bytes to hash.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Fail("%s is not valid Unicode text" % what) from None


def read_columns(receipt):
    columns = field(receipt, "columns", list, "a list of [name, value] pairs")
    values = {}
    for column in columns:
        if not (isinstance(column, list) and len(column) == 2 and isinstance(column[0], str)):
            raise Fail("a column is not a [name, value] pair: %r" % (column,))
        name, value = column
        if value is not None and not isinstance(value, str):
            raise Fail("column %r: the value is neither text nor null" % name)
        check_unicode(name, "a column name")
        if value is not None:
            check_unicode(value, "column %r" % name)
        # A repeated name would let the hash cover one value and the reader see another.
        if name in values:
            raise Fail("column %r appears twice" % name)
        values[name] = value
    return columns, values


def check_receipt(receipt, verifier):
    """The OK line for a receipt that verifies; raises Fail otherwise."""
    name, key_hash, public = verifier
    if not isinstance(receipt, dict):
        raise Fail("the receipt is not a JSON object")
    if receipt.get("format") != FORMAT:
        raise Fail("format is %r, not %r" % (receipt.get("format"), FORMAT))

    schema = text_field(receipt, "schema")
    table = text_field(receipt, "table")
    chain_key_column = text_field(receipt, "chain_key_column", nullable=True)
    columns, values = read_columns(receipt)
    claimed = values.get("current_hash")
    if claimed is None:
        raise Fail("the row has no current_hash")
    version = receipt.get("hash_version", "cotwire/v1")
    if version not in HASH_VERSIONS:
        raise Fail("hash_version %r is not one of %r" % (version, HASH_VERSIONS))
    redacted = receipt.get("redacted", {})
    if not isinstance(redacted, dict) or (redacted and version == "cotwire/v1"):
        raise Fail("redacted is not an object of column digests, or the row is cotwire/v1")
    for column, digest in redacted.items():
        if column not in values or not isinstance(digest, str) or len(digest) != 64 or not all(ch in "0123456789abcdef" for ch in digest):
            raise Fail("redacted column %r has no 64-hex-digit digest" % (column,))
    computed = row_hash(table, columns, version, redacted)
    if computed != claimed:
        raise Fail("row hash mismatch: computed %s, receipt says %s" % (computed, claimed))

    leaf_index = field(receipt, "leaf_index", int, "an integer")
    seq = values.get("ledger_seq")
    if seq is None or not (seq.isascii() and seq.isdigit()):
        raise Fail("ledger_seq %r is not a decimal number" % (seq,))
    if leaf_index != int(seq) - 1:
        raise Fail("leaf_index %d is not ledger_seq - 1 (ledger_seq is %s)" % (leaf_index, seq))

    note = text_field(receipt, "checkpoint")
    origin, size, root = open_checkpoint(note, name, key_hash, public)

    tree_size = field(receipt, "tree_size", int, "an integer")
    if tree_size != size:
        raise Fail("tree_size %d is not the checkpoint's tree size %d" % (tree_size, size))
    if not 0 <= leaf_index < tree_size:
        raise Fail("leaf_index %d is not below tree_size %d" % (leaf_index, tree_size))

    if chain_key_column is None:
        chain_key = ""
    elif chain_key_column not in values:
        raise Fail("chain_key_column %r is not a column of the row" % chain_key_column)
    else:
        chain_key = values[chain_key_column] or ""
    leaf = leaf_hash(schema, table, chain_key, claimed)
    proof = []
    for i, p in enumerate(field(receipt, "inclusion_proof", list, "a list of base64 hashes")):
        if not isinstance(p, str):
            raise Fail("inclusion_proof[%d] is not text" % i)
        h = b64decode(p, "inclusion_proof[%d]" % i)
        if len(h) != 32:
            raise Fail("inclusion_proof[%d] is %d bytes, not 32" % (i, len(h)))
        proof.append(h)
    verify_inclusion(leaf_index, tree_size, leaf, proof, root)
    return "OK leaf %d of %d under %s" % (leaf_index, tree_size, origin)


def reject_duplicate_keys(pairs):
    # Parsers disagree on which duplicate wins; a receipt must mean one thing.
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError("duplicate key %r" % key)
        obj[key] = value
    return obj


def main(argv):
    if len(argv) != 3:
        print("usage: check_receipt.py RECEIPT.json VERIFIER_KEY", file=sys.stderr)
        return 2
    try:
        verifier = parse_verifier(argv[2])
        with open(argv[1], "rb") as f:
            raw = f.read()
    except (UsageError, OSError) as err:
        print("check_receipt.py: %s" % err, file=sys.stderr)
        return 2
    try:
        try:
            receipt = json.loads(raw.decode("utf-8"), object_pairs_hook=reject_duplicate_keys)
        except ValueError as err:
            raise Fail("the receipt is not valid JSON: %s" % err) from None
        print(check_receipt(receipt, verifier))
        return 0
    except Fail as err:
        print("FAIL: %s" % err)
        return 1
    except Exception as err:
        # Whatever slipped past the checks above, a receipt that crashes the
        # checker has not verified, and the caller must still see FAIL.
        print("FAIL: malformed receipt (%s: %s)" % (type(err).__name__, err))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
