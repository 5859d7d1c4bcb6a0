"""An independent checker of cotwire receipts, written from the README alone.

It uses Python's standard library only and none of cotwire's code: the row
hash, the leaf, the RFC 9162 inclusion proof and the C2SP signed note with
its Ed25519 signature are all recomputed here.

    python3 check_receipt.py RECEIPT.json VERIFIER_KEY
prints "OK leaf <index> of <size> under <origin>" and exits 0, or
"FAIL: <reason>" and exits 1; a usage error exits 2.
"""

import base64
import hashlib
import json
import struct
import sys


def lp(text):
    if text is None:
        return b"\xff" * 8
    data = text.encode("utf-8")
    return struct.pack(">Q", len(data)) + data


def row_hash(table, columns):
    pre = lp("cotwire/v1") + lp(table)
    for name, value in columns:
        if name != "current_hash":
            pre += lp(name) + lp(value)
    return hashlib.sha256(pre).hexdigest()


def leaf_hash(schema, table, chain_key, current_hash):
    data = lp("cotwire/leaf/v1") + lp(schema) + lp(table) + lp(chain_key) + lp(current_hash)
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(index, size, leaf, proof, root):
    """RFC 9162, section 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = node_hash(p, r)
            if fn % 2 == 0:
                # Climb past the levels where this node is a right edge with no sibling.
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


# Ed25519 verification (RFC 8032, section 5.1.7), in extended coordinates.
P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def point_add(a, b):
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    aa = (y1 - x1) * (y2 - x2) % P
    bb = (y1 + x1) * (y2 + x2) % P
    cc = 2 * t1 * t2 * D % P
    dd = 2 * z1 * z2 % P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def scalar_mult(s, point):
    result = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            result = point_add(result, point)
        point = point_add(point, point)
        s >>= 1
    return result


def point_equal(a, b):
    return (a[0] * b[2] - b[0] * a[2]) % P == 0 and (a[1] * b[2] - b[1] * a[2]) % P == 0


def recover_x(y, sign):
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P != 0:
        return None
    if x & 1 != sign:
        x = P - x
    return x


def decompress(data):
    if len(data) != 32:
        return None
    y = int.from_bytes(data, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % P)


G_Y = 4 * pow(5, P - 2, P) % P
G = (recover_x(G_Y, 0), G_Y, 1, recover_x(G_Y, 0) * G_Y % P)


def ed25519_verify(public, message, signature):
    if len(public) != 32 or len(signature) != 64:
        return False
    a = decompress(public)
    r = decompress(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % L
    return point_equal(scalar_mult(s, G), point_add(r, scalar_mult(k, a)))


def parse_verifier(text):
    """name+hash+base64(0x01 || key), the key hash binding name and key."""
    name, hash_hex, key_b64 = text.strip().split("+", 2)
    material = base64.b64decode(key_b64)
    if len(material) != 33 or material[0] != 1:
        raise ValueError("not an Ed25519 verifier key")
    key = material[1:]
    key_hash = hashlib.sha256(name.encode() + b"\n" + material).digest()[:4]
    if key_hash.hex() != hash_hex:
        raise ValueError("the verifier key's hash does not match its name and key")
    return name, key_hash, key


def open_checkpoint(note, name, key_hash, key):
    """The checkpoint's origin, size and root, once a signature by the key verifies."""
    text, sep, signatures = note.partition("\n\n")
    if sep == "":
        raise ValueError("the checkpoint is not a signed note")
    body = (text + "\n").encode("utf-8")
    signed = False
    for line in signatures.split("\n"):
        if not line.startswith("\u2014 "):
            continue
        signer, _, sig_b64 = line[2:].partition(" ")
        sig = base64.b64decode(sig_b64)
        if signer == name and sig[:4] == key_hash and ed25519_verify(key, body, sig[4:]):
            signed = True
    if not signed:
        raise ValueError("no valid signature by " + name)
    lines = text.split("\n")
    origin, size, root = lines[0], int(lines[1]), base64.b64decode(lines[2])
    if origin != name:
        raise ValueError("the checkpoint's origin is not the key's name")
    return origin, size, root


def check(receipt, verifier):
    if receipt.get("format") != "cotwire-receipt/v1":
        return "not a cotwire-receipt/v1 receipt"
    columns = receipt["columns"]
    values = {name: value for name, value in columns}
    computed = row_hash(receipt["table"], columns)
    if computed != values.get("current_hash"):
        return "row hash mismatch: computed %s, receipt says %s" % (computed, values.get("current_hash"))
    index = receipt["leaf_index"]
    if index != int(values["ledger_seq"]) - 1:
        return "leaf_index is not ledger_seq - 1"
    name, key_hash, key = parse_verifier(verifier)
    try:
        origin, size, root = open_checkpoint(receipt["checkpoint"], name, key_hash, key)
    except ValueError as err:
        return "checkpoint: %s" % err
    if size != receipt["tree_size"]:
        return "tree_size is not the checkpoint's"
    key_column = receipt.get("chain_key_column")
    chain_key = (values.get(key_column) if key_column else None) or ""
    leaf = leaf_hash(receipt["schema"], receipt["table"], chain_key, values["current_hash"])
    proof = [base64.b64decode(p) for p in receipt["inclusion_proof"]]
    if not verify_inclusion(index, size, leaf, proof, root):
        return "the inclusion proof does not lead to the checkpoint's root"
    print("OK leaf %d of %d under %s" % (index, size, origin))
    return None


def main(argv):
    if len(argv) != 3:
        print("usage: check_receipt.py RECEIPT.json VERIFIER_KEY", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        receipt = json.load(f)
    failure = check(receipt, argv[2])
    if failure is not None:
        print("FAIL: " + failure)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
