from __future__ import annotations

import ipaddress

import pytest

from hookbay_ingest.capture import client_ip
from hookbay_ingest.errors import PayloadTooLarge

TRUSTED = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("192.168.1.1/32"))


class TestClientIp:
    @pytest.mark.parametrize(
        ("peer", "xff", "expected"),
        [
            ("203.0.113.9", None, "203.0.113.9"),
            ("203.0.113.9", "1.2.3.4", "203.0.113.9"),  # untrusted peer: header ignored
            ("10.1.2.3", "1.2.3.4", "1.2.3.4"),
            ("10.1.2.3", "6.6.6.6, 1.2.3.4, 192.168.1.1", "1.2.3.4"),  # right-most untrusted
            ("10.1.2.3", "10.9.9.9, 10.8.8.8", "10.9.9.9"),  # all trusted: the left-most
            ("10.1.2.3", "garbage", "10.1.2.3"),
            ("10.1.2.3", " , ", "10.1.2.3"),
        ],
    )
    def test_forwarded_for_only_from_trusted_proxies(
        self, peer: str, xff: str | None, expected: str
    ) -> None:
        assert client_ip(peer, xff, TRUSTED) == expected


class TestSizeLabels:
    @pytest.mark.parametrize(
        ("received", "label"),
        [
            (4_500_001, "4.500001 MB"),
            (5_200_000, "5.2 MB"),
            (6_000_000, "6 MB"),
            (None, "more than 4.5 MB"),
        ],
    )
    def test_exact_decimal_megabytes(self, received: int | None, label: str) -> None:
        body = PayloadTooLarge(4_500_000, received).body()
        assert body["limit"] == "4.5 MB"
        assert body["received"] == label
