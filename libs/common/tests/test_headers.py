from __future__ import annotations

from hookbay_common.headers import forwardable, join_headers


class TestJoinHeaders:
    def test_lowercases_and_joins_repeats_in_order(self) -> None:
        raw = [(b"X-A", b"1"), (b"Content-Type", b"text/plain"), (b"x-a", b"2")]
        assert join_headers(raw) == {"x-a": "1, 2", "content-type": "text/plain"}

    def test_latin1_bytes_round_trip(self) -> None:
        assert join_headers([(b"x-b", b"caf\xe9")]) == {"x-b": "caf\xe9"}

    def test_whitespace_around_a_value_is_not_part_of_it(self) -> None:
        raw = [(b"X-Service-Signature", b"sha256=ab  "), (b"X-T", b"\t a\tb \t"), (b"X-S", b"  ")]
        assert join_headers(raw) == {"x-service-signature": "sha256=ab", "x-t": "a\tb", "x-s": ""}

    def test_empty_lines_of_a_repeated_header_add_nothing(self) -> None:
        raw = [(b"X-A", b""), (b"X-A", b"1"), (b"X-A", b" "), (b"X-A", b"2"), (b"X-B", b""),
               (b"X-B", b"")]  # fmt: skip
        assert join_headers(raw) == {"x-a": "1, 2", "x-b": ""}


class TestForwardable:
    def test_drops_hop_by_hop_connection_named_and_hookbay_headers(self) -> None:
        headers = {
            "host": "a", "connection": "close, X-Secret", "x-secret": "1", "keep-alive": "5",
            "te": "trailers", "transfer-encoding": "chunked", "content-length": "3",
            "upgrade": "h2c", "proxy-authorization": "Basic x", "x-hookbay-attempt": "9",
            "content-type": "application/json", "x-custom": "caf\xe9",
        }  # fmt: skip
        assert forwardable(headers) == [
            (b"content-type", b"application/json"),
            (b"x-custom", b"caf\xe9"),
        ]

    def test_whitespace_an_earlier_capture_kept_is_not_sent(self) -> None:
        assert forwardable({"x-service-signature": "sha256=ab \t", "x-a": "1, "}) == [
            (b"x-service-signature", b"sha256=ab"),
            (b"x-a", b"1,"),
        ]
