"""Plans: rate limit and retention per plan, loaded from a YAML file operators can extend.

File format (``HOOKBAY_PLANS_FILE``; the bundled ``default_plans.yaml`` when unset)::

    default: free                 # plan given to new users when none is named
    plans:
      free:    {rate_per_minute: 10,   retention_days: 30}
      starter: {rate_per_minute: 300,  retention_days: 90}
      pro:     {rate_per_minute: 1500, retention_days: null}   # null = keep forever
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hookbay_common.errors import ConfigurationError, PlanNotFound
from hookbay_common.names import PLAN_NAME


class Plan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=PLAN_NAME.pattern)
    rate_per_minute: int = Field(ge=1, le=1_000_000)
    retention_days: int | None = Field(ge=1, le=36_500)

    @property
    def rate_label(self) -> str:
        return f"{self.rate_per_minute} requests per minute"


class _PlanEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rate_per_minute: int = Field(ge=1, le=1_000_000)
    retention_days: int | None = Field(ge=1, le=36_500)


class _PlansFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default: str
    plans: dict[str, _PlanEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _default_exists(self) -> _PlansFile:
        if self.default not in self.plans:
            raise ValueError(f"default plan {self.default!r} is not among the plans")
        return self


class PlanBook:
    """The plans known to this deployment, by name."""

    def __init__(self, plans: dict[str, Plan], default: str) -> None:
        self._plans = plans
        self.default = default

    def get(self, name: str) -> Plan:
        try:
            return self._plans[name]
        except KeyError:
            raise PlanNotFound(name, self.names()) from None

    def names(self) -> list[str]:
        return sorted(self._plans)

    def __contains__(self, name: object) -> bool:
        return name in self._plans


def load_plans(path: Path | None = None) -> PlanBook:
    """Read and validate a plans file; raise ``ConfigurationError`` naming the file and the fault."""
    source = str(path) if path else "default_plans.yaml (bundled)"
    try:
        if path is None:
            text = resources.files("hookbay_common").joinpath("default_plans.yaml").read_text()
        else:
            text = path.read_text(encoding="utf-8")
        parsed = _PlansFile.model_validate(yaml.safe_load(text))
        plans = {
            name: Plan(name=name, **entry.model_dump()) for name, entry in parsed.plans.items()
        }
    except OSError as exc:
        raise ConfigurationError(f"plans file {source}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(
            f"plans file {source}: not valid YAML ({_yaml_problem(exc)})"
        ) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigurationError(f"plans file {source}: {problems}") from None
    return PlanBook(plans, parsed.default)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or "parse error"
    mark = getattr(exc, "problem_mark", None)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else str(problem)
