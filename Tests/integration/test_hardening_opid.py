"""Hardening, item 6: any opId the contract accepts (1-100 characters) works.

Lower-casing `İ` (U+0130) gives two code points, so 100 of them made a 200-character key for a
100-character column: the whole push failed with 500, and every retry failed the same way.
"""

from __future__ import annotations

import synclib
from synclib import create_tag_op, push, uid
from tsapi import assert_json, short


def test_opid_of_100_dotted_capital_i_is_applied_and_replays(client):
    op_id = "\u0130" * 99 + "A"
    operation = create_tag_op("dotted-i", op_id=op_id)
    first = push(client, [operation])
    assert first[0]["status"] == "applied", first
    # The same opId in another case is the same operation: the stored result, nothing applied.
    r = synclib.push_raw(client, {"deviceId": "dev-1", "operations": [dict(operation, opId="\u0130" * 99 + "a")]})
    assert r.status_code == 200, short(r)
    assert assert_json(r)["results"] == first
    tags = [t for t in client.list_tags() if t["name"] == "dotted-i"]
    assert len(tags) == 1, tags


def test_batch_with_long_unicode_opids_next_to_normal_ones(client):
    operations = [
        create_tag_op("a-" + uid()[:8], op_id=uid()),
        create_tag_op("b-" + uid()[:8], op_id="\u0130" * 100),
        create_tag_op("c-" + uid()[:8], op_id="\U0001F600" * 100),  # 4-byte characters
        create_tag_op("d-" + uid()[:8], op_id="\u1E9E" * 100),  # ẞ lower-cases to ß
    ]
    results = push(client, operations)
    assert [r["status"] for r in results] == ["applied"] * 4, results
    r = synclib.push_raw(client, {"deviceId": "dev-1", "operations": operations})
    assert r.status_code == 200, short(r)
    assert assert_json(r)["results"] == results
