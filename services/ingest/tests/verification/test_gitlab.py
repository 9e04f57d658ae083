"""GitLab: the secret token itself in ``X-Gitlab-Token`` (constant-time equality)."""

from __future__ import annotations

from hookbay_ingest.verification import InvalidReason, MatchedSecret
from tests.support.signing import check_for, rotated, run, signed


class TestGitLab:
    check = check_for("gitlab", "glpat-token")

    def test_equal_token(self) -> None:
        assert run(self.check, signed(b"{}", {"X-Gitlab-Token": "glpat-token"}), 0).valid

    def test_other_token(self) -> None:
        result = run(self.check, signed(b"{}", {"X-Gitlab-Token": "glpat-tokeN"}), 0)
        assert result.reason is InvalidReason.BAD_SIGNATURE

    def test_missing(self) -> None:
        assert run(self.check, signed(b"{}"), 0).reason is InvalidReason.MISSING_SIGNATURE

    def test_rotation(self) -> None:
        check = rotated("gitlab", "new", "old", expires_unix=10)
        request = signed(b"{}", {"X-Gitlab-Token": "old"})
        assert run(check, request, 9).secret is MatchedSecret.PREVIOUS
        assert not run(check, request, 10).valid

    def test_a_non_ascii_token_compares_on_its_bytes(self) -> None:
        check = check_for("gitlab", "tök")
        sent = "tök".encode().decode("latin-1")  # as captured: the UTF-8 bytes, latin-1 decoded
        assert run(check, signed(b"{}", {"X-Gitlab-Token": sent}), 0).valid
