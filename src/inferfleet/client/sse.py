"""Server-sent events, framed from raw bytes with the time each one arrived.

A streamed answer is timed here: every network read is stamped with a
monotonic clock *before* anything is parsed, and an event carries the stamp
of the read that completed it. JSON decoding happens later and costs the
measurement nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """One ``data:`` event: when its last byte arrived (ns, monotonic) and its text."""

    arrived_ns: int
    data: str


class SseFramer:
    """Feed raw reads in order; get complete events out.

    Handles the three line endings the spec allows, events split across
    reads, several events in one read, comments (``: ping``) and multi-line
    ``data:`` fields (joined with ``\\n``).
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes, arrived_ns: int) -> list[Event]:
        self._buffer += chunk
        events: list[Event] = []
        while True:
            line, found = self._next_line()
            if not found:
                return events
            if line == "":
                if self._data:
                    events.append(Event(arrived_ns, "\n".join(self._data)))
                    self._data = []
                continue
            if line.startswith(":"):
                continue  # a comment, e.g. a keep-alive
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "data":
                self._data.append(value)
            # event:, id: and retry: carry nothing an OpenAI-style stream uses.

    def close(self, arrived_ns: int) -> list[Event]:
        """End of stream: a final event without its blank line still counts."""
        events: list[Event] = []
        if self._buffer:
            self._buffer += b"\n\n"
            events = self.feed(b"", arrived_ns)
        if self._data:
            events.append(Event(arrived_ns, "\n".join(self._data)))
            self._data = []
        return events

    def _next_line(self) -> tuple[str, bool]:
        buf = self._buffer
        newline = buf.find(b"\n")
        carriage = buf.find(b"\r")
        if newline == -1 and carriage == -1:
            return "", False
        if carriage != -1 and (newline == -1 or carriage < newline):
            if carriage + 1 == len(buf):
                return "", False  # wait: a \n may follow in the next read
            index, skip = carriage, 2 if buf[carriage + 1] == 0x0A else 1
        else:
            index, skip = newline, 1
        self._buffer = buf[index + skip :]
        return buf[:index].decode("utf-8", errors="replace"), True
