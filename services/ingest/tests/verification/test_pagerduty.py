"""PagerDuty v3: comma-separated ``v1=`` hex signatures of the body; the vector (and its
negative) of https://github.com/PagerDuty/go-pagerduty/blob/main/webhookv3/webhookv3_test.go ."""

from __future__ import annotations

import hashlib

from hookbay_ingest.verification import InvalidReason
from tests.support.signing import check_for, run, signed

SECRET = "lDQHScfUeXUKaQRNF+8XIiDKZ7XX3itBAYzwU0TARw8lJqRnkKl2iB1anSb0Z+IK"
GOOD = "v1=0c0b9495b893a39e70d1fea2fe11fbe0a825f88b9f67846f6cc07dd2bc5476cd"
BAD = "v1=7020c8a7ec668a9b7012bc3dd82e483394b038f4230acc6785efbf2a7d8bcaf5"
BODY = (
    b'{"event":{"id":"01BWDWL3NYY7LUFPZCC28QUCMK","event_type":"incident.priority_updated","re'
    b'source_type":"incident","occurred_at":"2021-04-26T17:36:27.458Z","agent":{"html_url":"ht'
    b'tps://acme.pagerduty.com/users/PLH1HKV","id":"PLH1HKV","self":"https://api.pagerduty.com'
    b'/users/PLH1HKV","summary":"Tenex Engineer","type":"user_reference"},"client":null,"data"'
    b':{"id":"PGR0VU2","type":"incident","self":"https://api.pagerduty.com/incidents/PGR0VU2",'
    b'"html_url":"https://acme.pagerduty.com/incidents/PGR0VU2","number":2,"status":"triggered'
    b'","title":"A little bump in the road","service":{"html_url":"https://acme.pagerduty.com/'
    b'services/PF9KMXH","id":"PF9KMXH","self":"https://api.pagerduty.com/services/PF9KMXH","su'
    b'mmary":"API Service","type":"service_reference"},"assignees":[{"html_url":"https://acme.'
    b'pagerduty.com/users/PTUXL6G","id":"PTUXL6G","self":"https://api.pagerduty.com/users/PTUX'
    b'L6G","summary":"User 123","type":"user_reference"}],"escalation_policy":{"html_url":"htt'
    b'ps://acme.pagerduty.com/escalation_policies/PUS0KTE","id":"PUS0KTE","self":"https://api.'
    b'pagerduty.com/escalation_policies/PUS0KTE","summary":"Default","type":"escalation_policy'
    b'_reference"},"teams":[{"html_url":"https://acme.pagerduty.com/teams/PFCVPS0","id":"PFCVP'
    b'S0","self":"https://api.pagerduty.com/teams/PFCVPS0","summary":"Engineering","type":"tea'
    b'm_reference"}],"priority":{"html_url":"https://acme.pagerduty.com/account/incident_prior'
    b'ities","id":"PSO75BM","self":"https://api.pagerduty.com/priorities/PSO75BM","summary":"P'
    b'1","type":"priority_reference"},"urgency":"high","conference_bridge":{"conference_number'
    b'":1000,"conference_url":"https://example.com"},"resolve_reason":null}}}'
)


class TestPagerDuty:
    check = check_for("pagerduty", SECRET)

    def test_the_body_is_the_published_one(self) -> None:
        digest = "6ef42c69dbbc0feaff02e04ca31f497cb2bcbecf1a038a636f114cd7cdd2e23a"
        assert (len(BODY), hashlib.sha256(BODY).hexdigest()) == (1655, digest)

    def test_published_vector(self) -> None:
        assert run(self.check, signed(BODY, {"X-PagerDuty-Signature": GOOD}), 0).valid

    def test_published_negative(self) -> None:
        result = run(self.check, signed(BODY, {"X-PagerDuty-Signature": BAD}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_several_signatures_any_match(self) -> None:
        value = f"{BAD},v2=abcd, {GOOD}"
        assert run(self.check, signed(BODY, {"X-PagerDuty-Signature": value}), 0).valid

    def test_only_other_versions(self) -> None:
        result = run(self.check, signed(BODY, {"X-PagerDuty-Signature": "v2=abcd"}), 0)
        assert result.reason is InvalidReason.UNSUPPORTED_VERSION

    def test_one_body_byte_changed(self) -> None:
        result = run(self.check, signed(BODY[:-1] + b" ", {"X-PagerDuty-Signature": GOOD}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE
