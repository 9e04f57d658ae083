"""``/issues``: the caller's issues. Another owner's issue answers 404 like a missing one."""

from __future__ import annotations

from fastapi import APIRouter

from hookbay_common.models import IssueStatus
from hookbay_dashboard.deps import CurrentUser, IssuesDep
from hookbay_dashboard.issues.schemas import IssueRead

router = APIRouter(tags=["issues"])


@router.get("/issues", response_model=list[IssueRead])
async def list_issues(
    principal: CurrentUser, issues: IssuesDep, status: IssueStatus | None = None
) -> list[IssueRead]:
    """Every issue (or those of one ``status``), the most recently seen first."""
    return [IssueRead.of(i) for i in await issues.list_for_owner(principal.username, status)]


@router.get("/issues/{issue_id}", response_model=IssueRead)
async def get_issue(issue_id: str, principal: CurrentUser, issues: IssuesDep) -> IssueRead:
    return IssueRead.of(await issues.get(principal.username, issue_id))


@router.post("/issues/{issue_id}/acknowledge", response_model=IssueRead)
async def acknowledge_issue(issue_id: str, principal: CurrentUser, issues: IssuesDep) -> IssueRead:
    """open → acknowledged: recurrences count silently. A resolved or ignored issue: 409."""
    return IssueRead.of(await issues.acknowledge(principal.username, issue_id))


@router.post("/issues/{issue_id}/resolve", response_model=IssueRead)
async def resolve_issue(issue_id: str, principal: CurrentUser, issues: IssuesDep) -> IssueRead:
    """→ resolved (the channels are told when they were told it was open); it reopens if the
    problem recurs."""
    return IssueRead.of(await issues.resolve(principal.username, issue_id))


@router.post("/issues/{issue_id}/ignore", response_model=IssueRead)
async def ignore_issue(issue_id: str, principal: CurrentUser, issues: IssuesDep) -> IssueRead:
    """→ ignored: it never notifies and never reopens until you resolve it."""
    return IssueRead.of(await issues.ignore(principal.username, issue_id))
