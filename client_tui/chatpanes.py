"""The chat screen's panes beside the message log: the inspector (F2; Ctrl+Up/Down select the
message it shows), the notice of messages that never arrived (counter gaps) and the banner of a
changed key that blocks sending.

A mixin of :class:`~client_tui.chatscreen.ChatScreen`, which owns the layout (``#inspector``,
``#inspector-body``, ``#banner``) and calls these when its events or selection change. Everything
another user or the relay controls is drawn through :mod:`.safe`.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from .inspector import inspect_record
from .safe import one_line

__all__ = ["ChatPanes"]


class ChatPanes:
    """Inspector, gap notices and the key-change banner (mixed into ``ChatScreen``, which provides
    ``client``, ``conversation``, ``gaps``, ``log_view`` and ``query_one``)."""

    client: Any
    conversation: str
    gaps: dict[str, dict[str, Any]]
    inspected: Any
    inspected_lid: str | None
    log_view: Any
    query_one: Any
    set_class: Any

    def refresh_gaps(self) -> None:
        """Show one notice per sender whose messages never arrived; remove filled ones."""
        cid = self.conversation
        now = self.client.missing_counters(cid) if cid else {}
        shown = self.gaps.setdefault(cid, {})
        for sender in set(shown) | set(now):
            missing = now.get(sender, ())
            if shown.get(sender) == missing:
                continue
            key = f"gap-{cid}-{sender}"
            if not missing:
                shown.pop(sender, None)
                self.log_view.add_notice(key, "")
                continue
            shown[sender] = missing
            span = f"{missing[0]}" if len(missing) == 1 else f"{missing[0]}–{missing[-1]}"
            self.log_view.add_notice(
                key,
                f"⚠ {len(missing)} message(s) from {one_line(sender)} never arrived (counter {span}): "
                "withheld by the relay, or still on their way",
            )

    def update_banner(self) -> None:
        banner = self.query_one("#banner", Static)
        blocked = self.client.blocked_by(self.conversation) if self.conversation else []
        if not blocked:
            banner.display = False
            return
        t = Text()
        for user in blocked:
            c = self.client.contacts[user]
            evidence = {
                True: "signed by their previous key",
                False: "NOT signed by the key you pinned",
                None: "no rotation evidence",
            }[c.pending_signed_by_old]
            t.append(f"⚠ {one_line(user)}'s key changed ({evidence}). ", style="bold")
        t.append("Sending here is blocked until you accept or verify it: press Ctrl+K.")
        banner.update(t)
        banner.display = True

    # -- inspector and selection
    def action_toggle_inspector(self) -> None:
        insp = self.query_one("#inspector")
        insp.display = not insp.display
        self.set_class(insp.display, "-inspecting")
        if insp.display and self.log_view.selected_record is None:
            self.log_view.action_select_edge(-1)
        self.refresh_inspector()

    def action_escape(self) -> None:
        if self.query_one("#inspector").display:
            self.action_toggle_inspector()

    def action_select_message(self, step: int) -> None:
        self.log_view.action_select(step)

    def kid_names(self) -> dict[str, str]:
        names = {}
        for user, c in self.client.contacts.items():
            for ident in (*c.previous, c.identity, *([c.pending] if c.pending else [])):
                names[ident.wrap_kid] = user
        return names

    def refresh_inspector(self) -> None:
        if not self.query_one("#inspector").display:
            return
        rec = self.log_view.selected_record
        self.inspected_lid = rec.lid if rec is not None else None
        readers = self.client.receipts.readers(rec) if rec is not None and rec.mine else []
        body = inspect_record(rec, kid_names=self.kid_names(), me=self.client.username, readers=readers)
        self.inspected = body
        self.query_one("#inspector-body", Static).update(body)
