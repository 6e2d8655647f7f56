"""``Hostile``: a relay that is not there. The test hands frames to a client's frame handler
directly, so it can rewrite, drop, replay or re-route envelopes at will."""

from __future__ import annotations

import msgspec

from client_tui.core import ChatClient
from client_tui.core.record import now_ms
from shared import envelope, frames, membership
from shared.content import Text
from shared.keys import Identity
from shared.membership_chain import Chain


class Hostile:
    """A relay that is not there: the test hands frames to the client's frame handler directly,
    so it can rewrite, drop, replay or re-route envelopes at will. Each conversation it seals for
    has a verified membership log (alice created it; ``conv`` with bob and carol, another one with
    the members of its first envelope), already known to the client."""

    def __init__(self, client: ChatClient, ids: dict[str, Identity], conv: str = "conv-1") -> None:
        self.client = client
        self.ids = ids
        self.conv = conv
        self.seq = 0
        self.ctr: dict[str, int] = {}
        self.logs: dict[str, list[membership.Statement]] = {}
        self.log = self.log_of(conv, ["alice", "bob", "carol"])

    def log_of(self, conv: str, members: list[str]) -> list[membership.Statement]:
        """The log of ``conv`` (made, and given to the client as verified, on first use)."""
        if conv not in self.logs:
            names = sorted({"alice", *members})
            self.logs[conv] = [
                membership.create(
                    self.ids["alice"], conv, conv, [membership.member_of(self.ids[n].public) for n in names]
                )
            ]
            chain = self.client.membership.chains[conv] = Chain(conv)
            chain.extend(self.logs[conv], lambda user, kid: self.ids[user].public.sign_key)
            self.client.membership.claimed[conv] = (chain.head.ep, chain.head.hash)
        return self.logs[conv]

    def epoch_of(self, conv: str | None = None) -> dict:
        """``epoch``/``head`` of the newest statement of ``conv``'s log, for ``envelope.seal``."""
        head = self.logs[conv or self.conv][-1]
        return {"epoch": head.ep, "head": head.hash}

    @property
    def epoch(self) -> dict:
        return self.epoch_of(self.conv)

    def seal(
        self, sender: str, text: str, *, to: list[str] | None = None, conv: str | None = None, ctr: int | None = None
    ) -> bytes:
        conv = conv or self.conv
        log = self.log_of(conv, to or [sender, self.client.username])
        to = to or list(log[-1].usernames)
        if ctr is None:
            ctr = self.ctr[sender] = self.ctr.get(sender, 0) + 1
        return envelope.seal(
            Text(text, ts=now_ms(), ctr=ctr),
            self.ids[sender],
            conv,
            [self.ids[u].public for u in to],
            **self.epoch_of(conv),
        )

    async def deliver(self, data: bytes, *, sender: str, conv: str | None = None, seq: int | None = None) -> int:
        if seq is None:
            self.seq += 1
            seq = self.seq
        await self.client._on_event(frames.Message(seq, conv or self.conv, sender, msgspec.Raw(data)))
        return seq
