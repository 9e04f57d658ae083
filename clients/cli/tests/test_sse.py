"""The text/event-stream parser, against the WHATWG rules a browser follows."""

from __future__ import annotations

from hookbay_cli.sse import Message, SseParser


def parse(*chunks: bytes) -> tuple[list[Message], SseParser]:
    parser = SseParser()
    return [m for c in chunks for m in parser.feed(c)], parser


class TestSseParser:
    def test_fields_and_the_id_persisting(self) -> None:
        messages, _ = parse(b"event: event\nid: 3.100\ndata: {}\n\ndata: two\n\n")
        assert messages == [Message("event", "{}", "3.100"), Message("message", "two", "3.100")]

    def test_chunks_cut_anywhere_even_inside_utf8_and_crlf(self) -> None:
        text = "event: e\r\nid: 1.2\r\ndata: caf\u00e9\r\n\r\n".encode()
        chunks = [text[i : i + 1] for i in range(len(text))]
        messages, _ = parse(*chunks)
        assert messages == [Message("e", "caf\u00e9", "1.2")]

    def test_comments_multiline_data_and_retry(self) -> None:
        messages, parser = parse(b": ping\nretry: 3000\ndata: a\ndata: b\n\nretry: x\n\n")
        assert messages == [Message("message", "a\nb", "")]
        assert parser.retry_ms == 3000

    def test_an_id_with_nul_is_ignored_and_a_message_without_data_is_not_dispatched(self) -> None:
        messages, parser = parse(b"id: 5.1\n\nid: bad\0id\ndata: x\n\n")
        assert messages == [Message("message", "x", "5.1")]
        assert parser.last_id == "5.1"

    def test_cr_line_endings(self) -> None:
        messages, _ = parse(b"data: a\r\rdata: b\r", b"\r", b"data: c")
        assert [m.data for m in messages] == ["a", "b"]
