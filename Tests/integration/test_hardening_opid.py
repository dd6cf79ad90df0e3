"""Push opIds (contract, Sync: push): 1-100 characters, compared exactly as sent, code point for
code point, so case, spaces and Unicode form all count; the same opId twice in one request rejects
the later one (validation_failed, field opId) and nothing else; an empty or over-long opId rejects
only its operation. No 500, no answer claiming an operation was applied that was not.

History: lower-casing `İ` (U+0130) once made a 200-character key for a 100-character column (500
for the whole batch, forever); later `pad-1` and `pad-1 ` in one batch collided under MariaDB's
PAD SPACE comparison (500 forever, valid operations rolled back), and two opIds that are the same
text in different Unicode forms were conflated by Swift's String equality (the second never
applied, yet told "applied").
"""

from __future__ import annotations

import synclib
from synclib import create_tag_op, push, uid
from tsapi import assert_json, short


def _names(client, prefix):
    return sorted(t["name"] for t in client.list_tags() if t["name"].startswith(prefix))


def test_opid_of_100_dotted_capital_i_is_applied_and_replays(client):
    op_id = "\u0130" * 99 + "A"
    operation = create_tag_op("dotted-i", op_id=op_id)
    first = push(client, [operation])
    assert first[0]["status"] == "applied", first
    r = synclib.push_raw(client, {"deviceId": "dev-1", "operations": [operation]})
    assert r.status_code == 200, short(r)
    assert assert_json(r)["results"] == first
    assert _names(client, "dotted-i") == ["dotted-i"]


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


def test_opids_differing_only_by_trailing_space_are_two_operations(client):
    ops = [create_tag_op("pad-a", op_id="pad-1"), create_tag_op("pad-b", op_id="pad-1 "),
           create_tag_op("pad-c", op_id=uid())]
    results = push(client, ops)
    assert [r["status"] for r in results] == ["applied"] * 3, results
    assert [r["opId"] for r in results] == ["pad-1", "pad-1 ", ops[2]["opId"]]
    assert _names(client, "pad-") == ["pad-a", "pad-b", "pad-c"]
    # each replays its own result, in any order and alone
    again = push(client, [ops[1], ops[0]])
    assert again == [results[1], results[0]]
    assert _names(client, "pad-") == ["pad-a", "pad-b", "pad-c"]


def test_opids_in_different_unicode_forms_are_two_operations(client):
    composed, decomposed = "op-\u00e9", "op-e\u0301"  # é as one code point, and e + combining acute
    results = push(client, [create_tag_op("nfc-a", op_id=composed), create_tag_op("nfc-b", op_id=decomposed)])
    assert [r["status"] for r in results] == ["applied", "applied"], results
    assert [r["opId"] for r in results] == [composed, decomposed]
    assert _names(client, "nfc-") == ["nfc-a", "nfc-b"], "a result said applied for a tag that does not exist"
    assert push(client, [create_tag_op("nfc-c", op_id=decomposed)]) == [results[1]]


def test_opids_in_another_case_are_other_operations(client):
    first = push(client, [create_tag_op("case-a", op_id="Case-Op")])
    second = push(client, [create_tag_op("case-b", op_id="case-op")])
    assert first[0]["status"] == second[0]["status"] == "applied"
    assert first[0]["id"] != second[0]["id"]
    assert _names(client, "case-") == ["case-a", "case-b"]


def test_a_repeated_opid_rejects_the_later_operation_only(client):
    op_id = uid()
    ops = [create_tag_op("dup-first", op_id=op_id), create_tag_op("dup-other", op_id=uid()),
           create_tag_op("dup-second", op_id=op_id)]
    results = push(client, ops)
    assert [r["status"] for r in results] == ["applied", "applied", "rejected"], results
    synclib.rejected(results[2], field="opId")
    assert results[2]["opId"] == op_id
    assert _names(client, "dup-") == ["dup-first", "dup-other"]
    # The opId's stored result is the first operation's; a replay of the whole request answers the same.
    assert push(client, ops) == results
    assert push(client, [ops[2]]) == [results[0]], "a lone replay gets the stored (first) result"


def test_a_repeated_opid_after_a_replay_is_rejected_too(client):
    op_id = uid()
    first = push(client, [create_tag_op("rep-1", op_id=op_id)])
    results = push(client, [create_tag_op("rep-1", op_id=op_id), create_tag_op("rep-2", op_id=op_id)])
    assert results[0] == first[0]
    assert results[1]["status"] == "rejected"
    synclib.rejected(results[1], field="opId")
    assert _names(client, "rep-") == ["rep-1"]


def test_empty_and_overlong_opids_reject_only_their_operation(client):
    ops = [create_tag_op("len-ok"), dict(create_tag_op("len-empty"), opId=""),
           dict(create_tag_op("len-long"), opId="o" * 101), dict(create_tag_op("len-100"), opId="o" * 100)]
    results = push(client, ops)
    assert [r["status"] for r in results] == ["applied", "rejected", "rejected", "applied"], results
    for rejected in results[1:3]:
        synclib.rejected(rejected, field="opId")
    assert _names(client, "len-") == ["len-100", "len-ok"]
