"""The judge's reader of what a room sends (attn_drill.room.wire's decoder and attn_drill.judge.untrusted):
whatever the bytes, it returns bounded, typed values or says the message is unreadable; it never
raises anything else, never recurses without bound, and never trusts a size it was told.
"""
from __future__ import annotations

import json
import struct

import pytest
import torch
from hypothesis import given, settings, strategies as st

from attn_drill.judge import untrusted
from attn_drill.results import UserProblem
from attn_drill.room import wire
from attn_drill.room.side import Side


def frame(header: bytes, blobs: bytes = b"", magic: bytes = wire.MAGIC) -> bytes:
    return struct.pack("<4sQQ", magic, len(header), len(blobs)) + header + blobs


def test_a_message_round_trips():
    value = {"side": {"outs": [["out", torch.arange(6.0).reshape(2, 3)]], "grads": {"x": None}},
             "n": 2 ** 70, "f": float("nan"), "t": (1, "a"), "b": b"\x00\xff", "dt": torch.bfloat16}
    got = wire.decode(wire.encode(value))
    assert torch.equal(got["side"]["outs"][0][1], value["side"]["outs"][0][1])
    assert got["n"] == 2 ** 70 and got["t"] == (1, "a") and got["b"] == b"\x00\xff" and got["dt"] is torch.bfloat16


@pytest.mark.parametrize("bad, why", [
    (b"AD", "too short"),
    (frame(b"{}", magic=b"XXXX"), "not a message"),
    (frame(b'{"v": 1, "t": []}')[:-3], "do not add up"),                      # truncated
    (frame(b'{"v": 1, "t": []}') + b"x", "do not add up"),                    # trailing bytes
    (frame(b"\xff\xfe"), "unreadable header"),                                  # not UTF-8
    (frame(b"[1, 2"), "unreadable header"),                                     # not JSON
    (frame(b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),             # deep enough to crash a parser
    (frame(json.dumps({"v": [[[[]]]] , "t": 5}).encode()), "malformed header"),
    (frame(json.dumps({"v": {"$t": 0}, "t": [{"dtype": "float32", "shape": [2], "n": 8}]}).encode(), b"\0" * 4),
     "do not match"),                                                          # a tensor longer than its bytes
    (frame(json.dumps({"v": {"$t": 3}, "t": []}).encode()), "bad tensor reference"),
    (frame(json.dumps({"v": {"$t": 0}, "t": [{"dtype": "float32", "shape": [2 ** 41], "n": 0}]}).encode()),
     "malformed tensor shape"),
    (frame(json.dumps({"v": {"$t": 0}, "t": [{"dtype": "object", "shape": [1], "n": 8}]}).encode()),
     "malformed tensor entry"),
    (frame(json.dumps({"v": {"$eval": "1"}, "t": []}).encode()), "unknown value kind"),
    (frame(json.dumps({"v": {"$d": [[[1], 2]]}, "t": []}).encode()), "unhashable"),
])
def test_a_malformed_message_is_refused_with_a_reason(bad, why):
    with pytest.raises(wire.WireError, match=why):
        wire.decode(bad)


def test_values_nested_past_the_limit_are_refused():
    deep = {"v": None, "t": []}
    for _ in range(wire.MAX_DEPTH + 2):
        deep["v"] = [deep["v"]]
    with pytest.raises(wire.WireError, match="nested too deeply"):
        wire.decode(frame(json.dumps(deep).encode()))


def test_take_messages_leaves_a_partial_one_and_refuses_a_foreign_header():
    one, two = wire.encode({"a": 1}), wire.encode({"b": 2})
    inbox = bytearray(one + two[:7])
    assert untrusted.take_messages(inbox) == [{"a": 1}]
    assert bytes(inbox) == two[:7]
    inbox += two[7:]
    assert untrusted.take_messages(inbox) == [{"b": 2}] and not inbox
    with pytest.raises(untrusted.Unreadable):
        untrusted.take_messages(bytearray(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 20))


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_random_bytes_are_a_value_or_unreadable(raw):
    try:
        wire.decode(frame(raw))
    except wire.WireError:
        pass
    inbox = bytearray(raw)
    try:
        untrusted.take_messages(inbox)
    except untrusted.Unreadable:
        pass


_valid = wire.encode({"side": {"outs": [["out", torch.ones(3, 2)]], "grads": {"x": torch.zeros(2)}, "ops": "[]",
                               "problem": None, "mapping": {}}, "used": 0.5, "output": "hi", "warnings": []})


@given(st.lists(st.tuples(st.integers(0, len(_valid) - 1), st.integers(0, 255)), max_size=8),
       st.integers(0, len(_valid)))
@settings(max_examples=400, deadline=None)
def test_a_damaged_reply_is_a_value_or_unreadable(flips, cut):
    raw = bytearray(_valid[:max(cut, wire.HEADER_SIZE)])
    for at, byte in flips:
        if at < len(raw):
            raw[at] = byte
    try:
        reply = wire.decode(bytes(raw))
    except wire.WireError:
        return
    side = untrusted.side(reply)                 # whatever decoded, the judge reads it without raising
    assert isinstance(side, Side)
    try:
        untrusted.reply_meta(reply)
    except untrusted.Unreadable:
        pass


@pytest.mark.parametrize("reply", [
    None, [], "text", {"side": "x"}, {"side": {"outs": "x"}}, {"side": {"outs": [[1, 2]]}},
    {"side": {"grads": {"x": "not a tensor"}}}, {"side": {"ops": 5}}, {"side": {"ops": "[1, 2]"}},
    {"side": {"ops": json.dumps([["aten.mm", "forward", ["float32"], [[2]], [["x"]], 4]])}},
    {"side": {"mapping": {1: 2}}}, {"side": {"problem": {"kind": 5, "message": "m"}}},
    # numbers past what a float or an int holds (JSON's Infinity, a forged huge int), shapes of other types
    {"side": {"ops": '[["aten.mm", "forward", ["float32"], [[1e999]], [[2]], 4]]'}},
    {"side": {"ops": '[["aten.mm", "forward", ["float32"], [[NaN]], [[2]], 4]]'}},
    {"side": {"ops": json.dumps([["aten.mm", "forward", ["float32"], [[10 ** 400]], [[2]], 4]])}},
    {"side": {"ops": json.dumps([["aten.mm", "forward", ["float32"], [[True]], [[2]], 4]])}},
    {"side": {"ops": json.dumps([["aten.mm", "forward", ["float32"], [[1] * 17], [[2]], 4]])}},
])
def test_a_malformed_side_becomes_the_submissions_problem(reply):
    side = untrusted.side(reply)
    assert isinstance(side.problem, UserProblem) and side.problem.kind == "runner"


def test_a_side_is_bounded():
    reply = {"side": {"outs": [["o" * 10_000, 1]], "mutated": ["m" * 500] * 1000, "adapted": "a" * 10 ** 6,
                      "nondeterministic": "n" * 10 ** 5, "seconds": float("inf"),
                      "problem": {"kind": "k" * 100, "message": "m" * 10 ** 6, "frames": [["f", 1, "g", "c"]] * 100}}}
    side = untrusted.side(reply)
    assert len(side.outs[0][0]) <= untrusted.MAX_NAME and len(side.mutated) <= 100
    assert len(side.adapted) <= 1000 and len(side.nondeterministic) <= 500 and side.seconds == 0.0
    assert len(side.problem.message) <= untrusted.MAX_MESSAGE and len(side.problem.frames) <= untrusted.MAX_FRAMES


@pytest.mark.parametrize("p", [None, "x", {"frames": "abc"}, {"frames": [[1]]}, {"kind": [], "message": 3},
                               {"frames": [["f", "not a line", "g", "c"]]}])
def test_a_malformed_problem_is_still_a_problem(p):
    assert isinstance(untrusted.problem(p), UserProblem)


def test_reply_meta_keeps_only_what_it_can_read():
    assert untrusted.reply_meta({"used": "1", "output": 5, "warnings": "w"}) == (None, None, None)
    assert untrusted.reply_meta({"used": 10 ** 400})[0] is None           # no float holds it: no count
    assert untrusted.side({"side": {"seconds": 10 ** 400}}).seconds == 0.0
    used, out, warns = untrusted.reply_meta({"used": 2.0, "output": "x" * 10 ** 6, "warnings": ["w" * 900] * 50})
    assert used == 2.0 and len(out) == untrusted.MAX_OUTPUT and len(warns) == 20 and len(warns[0]) == 500
    with pytest.raises(untrusted.Unreadable):
        untrusted.reply_meta(["not", "a", "reply"])


def test_a_death_reads_the_dump_without_trusting_it(tmp_path):
    user = tmp_path / "attend.py"
    user.write_text("import os\n\ndef attend():\n    while True:\n        pass\n")
    dump = f'Timeout (0:00:30)!\nThread 0x1 (most recent call first):\n  File "{user}", line 5 in attend\n'
    p = untrusted.death(dump, None, 30.0, False, str(user))
    assert p.kind == "timeout" and p.frames and p.frames[-1].line == 5 and "attend.py:5" in p.message
    p = untrusted.death("os._exit(" + "9" * 10 ** 6, None, 30.0, False, str(user))
    assert p.kind == "crash" and len(p.message) < 500
    p = untrusted.death("x" * (untrusted.MAX_DUMP * 3), -9, 30.0, False, str(user))
    assert p.kind == "crash"


def test_a_dump_naming_a_fifo_or_a_device_never_blocks_the_judge(tmp_path):
    """A room may leave a FIFO (or name a device) under a .py name beside the submission and write
    a frame of it into its dump: the judge shows no line for it and goes on."""
    import os
    user = tmp_path / "attend.py"
    user.write_text("def attend():\n    pass\n")
    fifo = tmp_path / "trap.py"
    os.mkfifo(fifo)
    dump = (f'Timeout (0:00:30)!\n  File "{fifo}", line 1 in trap\n  File "{tmp_path}/zero.py", line 1 in z\n'
            f'  File "{user}", line 2 in attend\n')
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    p = untrusted.death(dump, None, 30.0, False, str(user))
    assert [(f.file, f.code) for f in p.frames] == [("attend.py", "pass"), ("trap.py", "")]


def test_a_parameter_the_rooms_mapping_leaves_out_fails_its_gradient():
    """The room says which of its parameters stands for which of the reference's: one it leaves out
    would go unchecked, so the case fails instead."""
    from attn_drill.bank.api import Case
    from attn_drill.judge import verdicts
    from attn_drill.results import CaseResult
    g = torch.ones(2, 2)
    truth = Side(grads={"param a.weight": g, "param b.weight": g})
    case = Case(name="c", target="M", init={})
    for mapping, ok in (({"a.weight": ["copy", "a.weight"], "b.weight": ["copy", "b.weight"]}, True),
                        ({"a.weight": ["copy", "a.weight"]}, False), ({}, False)):
        sub = Side(grads={"param a.weight": g, "param b.weight": g}, mapping=mapping)
        res = verdicts._judge_param_grads(CaseResult(name="c", status="pass"), case, truth, None, sub, {})
        assert (res.status == "pass") == ok, (mapping, res.message)
        assert ok or "b.weight" in res.message or not mapping


def test_zygote_replies_are_read_as_numbers():
    assert untrusted.zygote_reply(b'{"pid": 12, "x": "y"}') == {"pid": 12}
    for raw in (b"[", b"[]", b"[" * 10 ** 5):
        with pytest.raises(untrusted.Unreadable):
            untrusted.zygote_reply(raw)
