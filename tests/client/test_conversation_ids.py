"""A conversation id goes into URL paths: whoever gives one (the user's ``--conversation``, a
relay's frame or answer) it is checked against ``shared.membership.CID_PATTERN`` first. A
newline in ``--conversation`` crashed the app with a 300-line traceback (httpx ``InvalidURL``)
and ``../../v1/keys`` reached another relay route (newcomer trial F2)."""

from __future__ import annotations

import msgspec
import pytest

from client_tui.cliargs import build_parser, mid_argv
from shared import frames, membership
from shared.errors import InvalidRequest

BAD = ["a\nb", "abc\n", "..", ".", "../../v1/keys", "a b", "x" * 65, "", "é", "a/b", "a?b=1"]
GOOD = ["abc", "a.b", "Qx-_9", "x" * 64, "..."]


@pytest.mark.parametrize("cid", BAD)
def test_a_bad_conversation_id_is_refused_everywhere(cid):
    with pytest.raises(InvalidRequest) as exc:
        membership.check_conversation_id(cid)
    assert exc.value.field == "conversation" and "\n" not in exc.value.message
    for kind in ("send", "msg"):
        doc = {"type": kind, "conversation": cid, "envelope": {}, "seq": 1, "sender": "bob"}
        if kind == "send":
            doc = {k: doc[k] for k in ("type", "conversation", "envelope")}
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(msgspec.json.encode(doc), type=frames.Send if kind == "send" else frames.Message)


@pytest.mark.parametrize("cid", GOOD)
def test_good_conversation_ids_pass(cid):
    assert membership.check_conversation_id(cid) == cid
    sent = msgspec.json.decode(
        msgspec.json.encode({"type": "send", "conversation": cid, "envelope": {}}), type=frames.Send
    )
    assert sent.conversation == cid


@pytest.mark.parametrize("argv", [["send", "--text", "hi"], ["tail"], ["search", "x"], ["react", "MID", "x"]])
def test_the_command_line_refuses_a_bad_conversation_id_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as usage:
        build_parser().parse_args(mid_argv([*argv, "--conversation", "a\nb"]))
    err = capsys.readouterr().err
    assert usage.value.code == 2 and "is not a conversation id" in err and "Traceback" not in err


async def test_the_client_never_builds_a_url_from_a_bad_id(make_client):
    alice = await make_client("alice")
    with pytest.raises(InvalidRequest) as exc:
        await alice.membership.sync("a\nb")
    assert exc.value.field == "conversation"
    with pytest.raises(InvalidRequest):
        await alice.membership.sync("../../v1/keys")
