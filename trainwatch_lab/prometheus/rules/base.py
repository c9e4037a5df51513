"""What every alerting rule is made of: the rule mapping, its labels and annotations, and
the small PromQL pieces the storage and GPU rules share."""

from __future__ import annotations

from typing import Any

Rule = dict[str, Any]
ON = "{{ $labels.instance }}"


def pct(fraction: float) -> str:
    """A fraction as the rules' message writes it (``10 %``)."""
    return f"{fraction * 100:g} %"


def rule(
    alert: str,
    code: str,
    severity: str,
    expr: str,
    subject: str,
    summary: str,
    message: str,
    fix: str,
    for_s: float = 0.0,
) -> Rule:
    """One alert: the warning's code, severity and subject as labels, the words as
    annotations (see prometheus.rules.ruleset)."""
    rule: Rule = {"alert": alert, "expr": expr.strip()}
    if for_s > 0:
        rule["for"] = f"{for_s:g}s"
    rule["labels"] = {"code": code, "severity": severity, "subject": subject}
    rule["annotations"] = {"summary": summary, "message": message, "fix": fix}
    return rule


def rate(metric: str, window: str) -> str:
    """``rate(metric[window])``."""
    return f"rate({metric}[{window}])"


def indent(text: str, by: str = "    ") -> str:
    """Every line of a PromQL expression indented (nested under ``unless``)."""
    return "\n".join(by + line for line in text.split("\n"))
