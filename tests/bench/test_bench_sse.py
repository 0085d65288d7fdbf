"""Server-sent events framed from raw reads, each stamped with the read that completed it."""

from __future__ import annotations

from inferfleet.client.sse import Event, SseFramer


def test_an_event_split_across_reads_carries_the_last_reads_time() -> None:
    framer = SseFramer()
    assert framer.feed(b'data: {"a":', 100) == []
    assert framer.feed(b" 1}\n", 200) == []
    assert framer.feed(b"\n", 300) == [Event(300, '{"a": 1}')]


def test_several_events_in_one_read_share_its_time() -> None:
    framer = SseFramer()
    events = framer.feed(b"data: one\n\ndata: two\n\ndata: [DONE]\n\n", 7)
    assert events == [Event(7, "one"), Event(7, "two"), Event(7, "[DONE]")]


def test_crlf_and_lone_cr_line_endings() -> None:
    framer = SseFramer()
    assert framer.feed(b"data: x\r\n\r\ndata: y\r\r", 1) == [Event(1, "x")]
    # A lone CR at the end of a read may be the first half of CRLF: wait for more.
    assert framer.feed(b"data: z\r", 2) == [Event(2, "y")]
    assert framer.feed(b"\n\r\n", 3) == [Event(3, "z")]


def test_comments_other_fields_and_multi_line_data() -> None:
    framer = SseFramer()
    raw = b": keep-alive\nevent: message\nid: 4\ndata: first\ndata:second\n\n"
    assert framer.feed(raw, 5) == [Event(5, "first\nsecond")]


def test_a_final_event_without_its_blank_line_still_counts() -> None:
    framer = SseFramer()
    assert framer.feed(b"data: tail", 1) == []
    assert framer.close(9) == [Event(9, "tail")]


def test_utf8_split_inside_a_character() -> None:
    text = 'data: {"t": "caf\u00e9"}\n\n'.encode()
    framer = SseFramer()
    cut = text.index(b"\xc3") + 1
    assert framer.feed(text[:cut], 1) == []
    assert framer.feed(text[cut:], 2) == [Event(2, '{"t": "caf\u00e9"}')]
