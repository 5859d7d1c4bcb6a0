#!/usr/bin/env python3
"""An independent checker of cotwire evidence bundles (format "cotwire-evidence/v1").

A bundle is one session's record for an auditor: every step as its canonical texts, each with its
inclusion proof in the global log, the signed checkpoint they lead to, and, when asked for, a
consistency proof from an earlier checkpoint the auditor already holds. This script checks all of it
with Python's standard library and check_receipt.py beside it (the same published formats: the row
hash, the Merkle leaf, RFC 9162 proofs, the C2SP signed note and its Ed25519 signature), so that the
bundle can be trusted without trusting cotwire, or the bundle's own copy of anything.

    python3 check_evidence.py BUNDLE.json VERIFIER_KEY [--old-checkpoint FILE]

VERIFIER_KEY is the checkpoint key the auditor obtained apart from the bundle (the bundle names one,
which must be the same). FILE is a signed checkpoint the auditor kept from before; the bundle must
then carry a consistency proof from it: the log it describes was only appended to since.

Prints "OK ..." and exits 0, or prints "FAIL: <reason>" and exits 1. A usage error exits 2.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from check_receipt import (  # noqa: E402  (the checker beside this file)
    Fail,
    UsageError,
    b64decode,
    check_receipt,
    node_hash,
    open_checkpoint,
    parse_verifier,
    read_columns,
    reject_duplicate_keys,
)

FORMAT = "cotwire-evidence/v1"


def verify_consistency(old_size, new_size, old_root, new_root, proof):
    """RFC 9162 section 2.1.4.2: the tree of old_size leaves is a prefix of the tree of new_size."""
    if old_size > new_size:
        raise Fail("the old checkpoint has %d leaves, more than the bundle's %d" % (old_size, new_size))
    if old_size == new_size:
        if proof or old_root != new_root:
            raise Fail("the old checkpoint has the same size as the bundle's but another root")
        return
    if old_size == 0:
        return
    if not proof:
        raise Fail("the consistency proof is empty")
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise Fail("the consistency proof is longer than the trees allow")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn != 0 and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0 or fr != old_root or sr != new_root:
        raise Fail("the consistency proof does not lead from the old checkpoint's root to the bundle's")


def hashes(value, what):
    if not isinstance(value, list):
        raise Fail("%s is not a list of base64 hashes" % what)
    out = []
    for i, p in enumerate(value):
        if not isinstance(p, str):
            raise Fail("%s[%d] is not text" % (what, i))
        h = b64decode(p, "%s[%d]" % (what, i))
        if len(h) != 32:
            raise Fail("%s[%d] is %d bytes, not 32" % (what, i, len(h)))
        out.append(h)
    return out


def check_bundle(bundle, verifier_text, old_note=None):
    verifier = parse_verifier(verifier_text)
    name, key_hash, public = verifier
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise Fail("the file is not a %s bundle" % FORMAT)
    if bundle.get("verifier_key") != verifier_text:
        raise Fail("the bundle names the key %r, not the one given" % (bundle.get("verifier_key"),))
    session = bundle.get("session")
    if not isinstance(session, str):
        raise Fail("the bundle names no session")
    note = bundle.get("checkpoint")
    if not isinstance(note, str):
        raise Fail("the bundle has no checkpoint")
    origin, size, root = open_checkpoint(note, name, key_hash, public)
    receipts = bundle.get("receipts")
    if not isinstance(receipts, list) or not receipts:
        raise Fail("the bundle has no receipts")

    previous = None
    for i, receipt in enumerate(receipts):
        try:
            check_receipt(receipt, verifier)
        except Fail as err:
            raise Fail("step %d: %s" % (i, err))
        if receipt.get("checkpoint") != note:
            raise Fail("step %d is proved against another checkpoint than the bundle's" % i)
        _, values = read_columns(receipt)
        key_column = receipt.get("chain_key_column")
        if values.get(key_column) != session:
            raise Fail("step %d belongs to session %r, not %r" % (i, values.get(key_column), session))
        if values.get("step_index") != str(i):
            raise Fail("the bundle's step %d has step_index %r: a step is missing or out of order" % (i, values.get("step_index")))
        expected = "" if previous is None else previous
        if values.get("prev_hash") != expected:
            raise Fail("step %d does not link to step %d before it" % (i, i - 1))
        previous = values.get("current_hash")

    pending = bundle.get("pending", [])
    if not isinstance(pending, list):
        raise Fail("pending is not a list")
    for j, p in enumerate(pending):
        if not isinstance(p, dict) or p.get("step_index") != len(receipts) + j:
            raise Fail("pending step %d is out of order" % j)

    line = "OK session %s: %d steps, each in the log of %d leaves under %s" % (session, len(receipts), size, origin)
    if old_note is not None:
        old_origin, old_size, old_root = open_checkpoint(old_note, name, key_hash, public)
        consistency = bundle.get("consistency")
        if not isinstance(consistency, dict) or consistency.get("old_size") != old_size or consistency.get("new_size") != size:
            raise Fail("the bundle carries no consistency proof from the old checkpoint's %d leaves to its %d" % (old_size, size))
        verify_consistency(old_size, size, old_root, root, hashes(consistency.get("proof"), "consistency.proof"))
        line += ", which extends the old checkpoint of %d leaves" % old_size
    if pending:
        line += "; %d newer steps are not in a checkpoint yet" % len(pending)
    return line


def main(argv):
    args = argv[1:]
    old_path = None
    if "--old-checkpoint" in args:
        at = args.index("--old-checkpoint")
        if at + 1 >= len(args):
            raise UsageError("--old-checkpoint needs a file")
        old_path = args[at + 1]
        del args[at : at + 2]
    if len(args) != 2:
        raise UsageError("usage: check_evidence.py BUNDLE.json VERIFIER_KEY [--old-checkpoint FILE]")
    try:
        with open(args[0], "rb") as f:
            raw = f.read()
        old_note = None
        if old_path is not None:
            with open(old_path, "r", encoding="utf-8") as f:
                old_note = f.read()
    except OSError as err:
        raise UsageError("cannot read %s" % err)
    try:
        bundle = json.loads(raw.decode("utf-8"), object_pairs_hook=reject_duplicate_keys)
    except (UnicodeDecodeError, ValueError) as err:
        raise Fail("the bundle is not JSON: %s" % err)
    return check_bundle(bundle, args[1], old_note)


if __name__ == "__main__":
    try:
        print(main(sys.argv))
    except UsageError as err:
        print(str(err), file=sys.stderr)
        sys.exit(2)
    except Fail as err:
        print("FAIL: %s" % err)
        sys.exit(1)
    except Exception as err:
        # A bundle that crashes the checker has not verified: the caller must still see FAIL.
        print("FAIL: malformed bundle (%s: %s)" % (type(err).__name__, err))
        sys.exit(1)
