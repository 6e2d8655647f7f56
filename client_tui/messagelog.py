"""The message list of the chat window (Textual Line API: only visible lines are drawn)."""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from .core.record import Record
from .messagebody import MARK_GLYPH, body_text, day_label, lay_out
from .safe import harmless

__all__ = ["MAX_ROWS", "MessageLog", "Row", "day_label", "lay_out"]

MAX_ROWS = 1000
"""Most records the log keeps on screen (older ones stay in the history cache)."""
FLUSH_S = 0.1
"""Least time between two layout updates of the message log while messages stream in."""


@dataclass
class Row:
    """One entry of the log: a message record, or a notice (``record`` is None)."""

    key: str
    pos: float
    record: Record | None = None
    notice: str = ""
    mark: str = "unverified"
    version: int = 0
    lines: list[Strip] = field(default_factory=list)
    width: int = -1
    rendered: int = -1
    context: tuple = ()  # (day separator, gap before) it was drawn with: they depend on the row above


class MessageLog(ScrollView, can_focus=True):
    """The messages of one conversation, rendered line by line (only visible lines are drawn).

    Rows are kept sorted by ``pos`` (the relay's sequence; my unsent messages after the last one).
    Up/Down (or Ctrl+Up/Ctrl+Down from anywhere) select a message; the inspector shows it.
    """

    COMPONENT_CLASSES = {
        "messagelog--time",
        "messagelog--sender",
        "messagelog--me",
        "messagelog--selected",
        "messagelog--notice",
        "messagelog--unreadable",
        "messagelog--day",
    }
    BINDINGS = [
        Binding("up", "select(-1)", "Previous message", show=False),
        Binding("down", "select(1)", "Next message", show=False),
        Binding("home", "select_edge(0)", "First message", show=False),
        Binding("end", "select_edge(-1)", "Last message", show=False),
    ]

    class Selected(Message):
        """The selected message changed."""

        def __init__(self, record: Record | None) -> None:
            super().__init__()
            self.record = record

    def __init__(self, me: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.me = me
        self.rows: list[Row] = []
        self._keys: dict[str, Row] = {}
        self._offsets: list[int] = []  # first line of each row
        self._total = 0
        self.selected: int | None = None
        self._render_width = 0
        # Screen updates are throttled: a new virtual size means a layout pass of the whole screen,
        # so during a burst the size (and the scroll to the end) is applied at most every FLUSH_S.
        self._flush_timer = None
        self._last_flush = 0.0
        self._follow = True
        self._force_follow = True
        self.following = True
        """The view shows the newest line and keeps showing it as lines arrive (until the user
        scrolls up or selects an older message). A resize never changes it."""
        self._styles: dict[str, Style] = {}
        self.hint = ""
        """Shown in the middle of an empty list (what to do next)."""
        self.readers: Callable[[Record], list[str]] = lambda _record: []
        """Who read one of my messages (their read receipts): the chat screen sets it."""
        self.audience: Callable[[Record], int] = lambda _record: 0
        """How many members besides its sender could read a record (0: unknown): the chat screen sets it."""
        self.quotes: dict[str, Record] = {}
        """Messages quoted by replies on screen that are not rows themselves (older), by mid."""

    # -- the model ---------------------------------------------------------------------------------
    @property
    def records(self) -> list[Record]:
        return [r.record for r in self.rows if r.record is not None]

    @property
    def selected_record(self) -> Record | None:
        if self.selected is None or not 0 <= self.selected < len(self.rows):
            return None
        return self.rows[self.selected].record

    def quoted(self, mid: str | None) -> Record | None:
        """The message ``mid`` as shown here (a row, or one loaded for a quote); None if neither."""
        if mid is None:
            return None
        for row in self.rows:
            if row.record is not None and row.record.mid == mid:
                return row.record
        return self.quotes.get(mid)

    def remove(self, lid: str) -> None:
        """Take the record ``lid`` off the screen (deleted, expired, or an action applied)."""
        row = self._keys.pop(lid, None)
        if row is None:
            return
        i = self.rows.index(row)
        del self.rows[i]
        if self.selected is not None and self.selected >= i:
            self.selected = max(0, self.selected - 1) if self.selected > i else None
        if row.record is not None and row.record.mid:
            self.quotes.pop(row.record.mid, None)
            self.requote(row.record.mid)
        self._relayout(min(i, len(self.rows)))

    def requote(self, mid: str | None) -> None:
        """Draw again the replies that quote ``mid`` (it changed: edited, deleted)."""
        for row in self.rows:
            if mid and row.record is not None and row.record.content.ref == mid:
                row.version += 1
        self._relayout(0)

    def redraw_mine(self) -> None:
        """Draw my messages again (their read marks changed)."""
        for row in self.rows:
            if row.record is not None and row.record.sender == self.me:
                row.version += 1
        self._relayout(0)

    def clear(self) -> None:
        self.rows, self._keys, self._offsets, self._total, self.selected = [], {}, [], 0, None
        self._force_follow = True
        self._changed()

    def set_records(self, records: list[Record], marks: dict[str, str]) -> None:
        self.rows = [Row(r.lid, r.pos, r, mark=marks.get(r.lid, "unverified")) for r in records[-MAX_ROWS:]]
        self._keys = {r.key: r for r in self.rows}
        self.selected = None
        self._force_follow = True
        self._relayout(0)
        self.flush()

    def upsert(self, record: Record, mark: str) -> None:
        """Add or update a record (found by ``lid``), keeping the order by ``pos``; one that is
        not ``visible`` (deleted, expired, an action) is taken off instead."""
        if not record.visible:
            self.remove(record.lid)
            return
        if record.mid and any(r.record is not None and r.record.content.ref == record.mid for r in self.rows):
            self.requote(record.mid)
        row = self._keys.get(record.lid)
        if row is not None:
            row.record, row.mark, row.version = record, mark, row.version + 1
            i = self.rows.index(row)
            if row.pos != record.pos:  # stored: moves to its sequence
                selected = self.rows[self.selected] if self.selected is not None else None
                del self.rows[i]
                row.pos = record.pos
                j = bisect.bisect_right([r.pos for r in self.rows], row.pos)
                self.rows.insert(j, row)
                if selected is not None:  # the selection stays on its message, wherever it went
                    self.selected = self.rows.index(selected)
                i = min(i, j)
            self._relayout(i)
        else:
            self._insert(Row(record.lid, record.pos, record, mark=mark))

    def add_notice(self, key: str, text: str, pos: float | None = None) -> None:
        """Show (or update) a notice line; an empty ``text`` removes it."""
        if key in self._keys:
            row = self._keys[key]
            i = self.rows.index(row)
            if not text:
                del self.rows[i]
                del self._keys[key]
                if self.selected is not None and self.selected >= i:
                    self.selected = max(0, self.selected - 1) if self.selected > i else None
            else:
                row.notice, row.version = text, row.version + 1
            self._relayout(i)
            return
        if text:
            after_last = math.nextafter(self.rows[-1].pos, math.inf) if self.rows else 0.0
            self._insert(Row(key, after_last if pos is None else pos, notice=text))

    def remark(self, marks: dict[str, str]) -> None:
        """Update every row's verified/warning mark (after a contact changed)."""
        changed = False
        for row in self.rows:
            if row.record is not None and marks.get(row.key, row.mark) != row.mark:
                row.mark, row.version, changed = marks[row.key], row.version + 1, True
        if changed:
            self._relayout(0)

    def _insert(self, row: Row) -> None:
        if not self.rows or row.pos >= self.rows[-1].pos:
            i = len(self.rows)
            self.rows.append(row)
        else:
            i = bisect.bisect_right([r.pos for r in self.rows], row.pos)
            self.rows.insert(i, row)
            if self.selected is not None and self.selected >= i:
                self.selected += 1
        self._keys[row.key] = row
        if len(self.rows) > MAX_ROWS:
            drop = len(self.rows) - MAX_ROWS
            for r in self.rows[:drop]:
                self._keys.pop(r.key, None)
            del self.rows[:drop]
            if self.selected is not None:
                self.selected = max(0, self.selected - drop)
            i = 0
        self._relayout(i)

    def _at_end(self) -> bool:
        return self.scroll_y >= self.max_scroll_y - 1

    # -- layout and rendering ----------------------------------------------------------------------
    def _width(self) -> int:
        return max(20, self.scrollable_content_region.width or self.size.width or 80)

    def _relayout(self, start: int) -> None:
        width = self._width()
        if width != self._render_width:
            self._render_width, start = width, 0
        del self._offsets[start:]
        y = self._offsets[start - 1] + len(self.rows[start - 1].lines) if start > 0 else 0
        for i in range(start, len(self.rows)):
            row, context = self.rows[i], self._row_context(i)
            if row.width != width or row.version != row.rendered or row.context != context:
                row.lines = self._render_row(row, width, context)
                row.width, row.rendered, row.context = width, row.version, context
            self._offsets.append(y)
            y += len(row.lines)
        self._total = y
        self._changed()

    def _changed(self) -> None:
        """Schedule a screen update; during a burst at most one every FLUSH_S."""
        if self._flush_timer is not None:
            return
        if not self._force_follow:  # as the user sees it before this change
            self.following = self._at_end()
        self._follow = self._force_follow or self.following
        wait = max(0.0, FLUSH_S - (time.monotonic() - self._last_flush))
        if not self.is_mounted:
            return
        self._flush_timer = self.set_timer(max(wait, 0.001), self.flush, name="messagelog-flush")

    def flush(self) -> None:
        """Apply the new size now (and follow the end if the view was at the end)."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._last_flush = time.monotonic()
        self._follow, self._force_follow = self._follow or self._force_follow, False
        size = Size(self._width(), self._total)
        if self.virtual_size != size:
            if self.styles.overflow_y == "scroll" and size.width == self.virtual_size.width:
                # The scrollbar is always shown (see chat.tcss), so a taller log changes nothing
                # around it: update the scroll range without a layout pass of the whole screen.
                self.set_reactive(Widget.virtual_size, size)
                self._scroll_update(size)
            else:
                self.virtual_size = size
        if self._follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            self.following = True
        self.refresh()

    def on_mount(self) -> None:
        if self.rows:
            self._changed()

    def on_resize(self, event: events.Resize) -> None:
        # A resize is not the user scrolling: at a tiny size every line is "above the view", and
        # judging by the scroll position then stopped the list following new messages for good.
        self._force_follow = self._force_follow or self.following
        if self.rows:
            self._relayout(0)
        elif self._force_follow:
            self._changed()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new < old and self._flush_timer is None:  # scrolled up by the user (keys, bar, wheel)
            self.following = self._at_end()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        for row in self.rows:
            row.rendered = -1

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            try:
                style = self.get_component_rich_style(name) if name else self.rich_style
            except Exception:  # not mounted yet
                return Style()
            self._styles[name] = style
        return style

    def _row_context(self, i: int) -> tuple[str, bool]:
        """(the day separator drawn above row ``i``, or ""; a blank line above it: the sender changed)."""
        r = self.rows[i].record
        if r is None:
            return ("", False)
        prev = next((self.rows[j].record for j in range(i - 1, -1, -1) if self.rows[j].record is not None), None)
        day = day_label(r.ts)
        if prev is None or day_label(prev.ts) != day:
            return (day, False)
        return ("", prev.sender != r.sender)

    def _render_row(self, row: Row, width: int, context: tuple = ("", False)) -> list[Strip]:
        console = self.app.console
        base = self._style("")
        if row.record is None:
            text = Text(harmless(row.notice), style=self._style("messagelog--notice"))
            return [Strip(line.render(console), line.cell_len).apply_style(base) for line in text.wrap(console, width)]
        day, gap = context
        above: list[Strip] = []
        if day:
            label = Text(f" {day} ".center(width, "─"), style=self._style("messagelog--day"))
            above.append(Strip(label.render(console), label.cell_len).apply_style(base))
        elif gap:
            above.append(Strip.blank(width, base))
        r = row.record
        stamp = time.strftime("%H:%M", time.localtime(r.ts / 1000)) if r.ts else "--:--"
        glyph, gstyle = MARK_GLYPH.get(row.mark, ("·", "dim"))
        prefix = Text()
        prefix.append(f"{stamp} ", style=self._style("messagelog--time"))
        sender_style = self._style("messagelog--me" if r.sender == self.me else "messagelog--sender")
        prefix.append(harmless(r.sender), style=sender_style)
        prefix.append(" ")
        prefix.append(glyph, style=gstyle)
        prefix.append(" ")
        readers = self.readers(r) if r.sender == self.me else []
        audience = self.audience(r) if readers else 0
        body = body_text(r, me=self.me, quoted=self.quoted(r.content.ref), readers=readers, audience=audience)
        if r.state == "unreadable":
            body.stylize(self._style("messagelog--unreadable"))
        strips = above
        for full in lay_out(console, prefix, body, width):
            strips.append(Strip(full.render(console), full.cell_len).apply_style(base))  # the pane's background
        return strips

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        line_no = scroll_y + y
        width = self.scrollable_content_region.width or self.size.width
        base = self._style("")
        if not self.rows and self.hint and y == max(0, self.size.height // 3):
            hint = Text(self.hint.center(width), style=self._style("messagelog--notice"))
            return Strip(hint.render(self.app.console), hint.cell_len).crop_extend(0, width, base).apply_style(base)
        if not self.rows or line_no >= self._total:
            return Strip.blank(width, base)
        i = bisect.bisect_right(self._offsets, line_no) - 1
        row = self.rows[i]
        if row.rendered != row.version:  # restyled (theme, focus tint): same lines, new colours
            lines = self._render_row(row, row.width, row.context)
            if len(lines) == len(row.lines):
                row.lines, row.rendered = lines, row.version
        strip = row.lines[line_no - self._offsets[i]]
        strip = strip.crop_extend(scroll_x, scroll_x + width, base)
        if i == self.selected:
            strip = strip.apply_style(self._style("messagelog--selected"))
        return strip

    # -- selection ---------------------------------------------------------------------------------
    def select(self, index: int | None) -> None:
        self.flush()
        if index is not None:
            candidates = [i for i, r in enumerate(self.rows) if r.record is not None]
            if not candidates:
                index = None
            else:
                index = min(candidates, key=lambda i: abs(i - index))
        self.selected = index
        if index is not None:
            top = self._offsets[index]
            bottom = top + len(self.rows[index].lines)
            height = self.scrollable_content_region.height
            if top < self.scroll_y:
                self.scroll_to(y=top, animate=False, immediate=True)
            elif bottom > self.scroll_y + height:
                self.scroll_to(y=bottom - height, animate=False, immediate=True)
        self.refresh()
        self.post_message(self.Selected(self.selected_record))

    def select_lid(self, lid: str) -> None:
        """Select the message with local id ``lid`` (the view stops following new messages)."""
        for i, row in enumerate(self.rows):
            if row.key == lid:
                self.following = self._force_follow = self._follow = False
                self.select(i)
                return

    def action_select(self, step: int) -> None:
        rows = [i for i, r in enumerate(self.rows) if r.record is not None]
        if not rows:
            return
        if self.selected is None:
            self.select(rows[-1])
            return
        pos = bisect.bisect_left(rows, self.selected)
        pos = max(0, min(len(rows) - 1, pos + step))
        self.select(rows[pos])

    def action_select_edge(self, which: int) -> None:
        rows = [i for i, r in enumerate(self.rows) if r.record is not None]
        if rows:
            self.select(rows[which])

    def on_click(self, event: events.Click) -> None:
        line_no = self.scroll_offset.y + event.y
        if self._offsets and line_no < self._total:
            self.select(bisect.bisect_right(self._offsets, line_no) - 1)
