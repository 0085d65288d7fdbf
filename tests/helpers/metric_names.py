"""Metric names: which series rendered PromQL reads, and which a ``/metrics`` scrape exports.

:func:`promql_names` tokenizes a PromQL expression the way the PromQL lexer
does, enough to find every metric selector: string literals, label matchers
(``{...}``), ranges and subquery steps (``[...]``), numbers and durations are
skipped; an identifier followed by ``(`` is a function or an aggregation;
the label lists after ``by``/``without``/``on``/``ignoring``/``group_left``/
``group_right`` are labels, not series; keywords and operators are not
names. A selector written ``{__name__="x"}`` names ``x``. Grafana's
``label_values(SELECTOR, label)`` template query is read as its selector.

:func:`exported_names` reads the Prometheus text exposition format: every
sample's name (``foo_total``, ``foo_bucket``, ...), comments skipped.

Expressions are syntax-checked by the real promtool elsewhere
(tests/render/test_render_monitoring.py); this module only names series.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

# Series Prometheus itself writes for every scrape job; no server exports them.
SCRAPE_SERIES = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
    }
)
_KEYWORDS = frozenset(
    {
        "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
        "offset", "bool", "atan2", "inf", "nan", "start", "end",
    }
)  # fmt: skip
_AGGREGATIONS = frozenset(
    {
        "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
        "bottomk", "topk", "quantile", "limitk", "limit_ratio",
    }
)  # fmt: skip
_LABEL_LIST_AFTER = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_TOKEN = re.compile(
    rf"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<brace>\{{)
  | (?P<bracket>\[[^\]]*\])
  | (?P<number>(?:0x[0-9a-fA-F]+|\d[0-9a-zA-Z_.]*|\.\d[0-9a-zA-Z_.]*))
  | (?P<name>{_NAME})
  | (?P<space>\s+)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_NAME_MATCHER = re.compile(r"""__name__\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
_LABEL_VALUES = re.compile(rf"^\s*label_values\s*\((?P<selector>.*),\s*{_NAME}\s*\)\s*$", re.S)


def _tokens(expr: str) -> Iterator[tuple[str, str, int]]:
    """(kind, text, end) of each token; a ``{`` token's text is the whole matcher block."""
    pos = 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        assert match is not None and match.lastgroup is not None
        kind, text, pos = match.lastgroup, match.group(), match.end()
        if kind == "brace":
            end = _matcher_end(expr, pos)
            text, pos = expr[match.start() : end], end
        if kind != "space":
            yield kind, text, pos


def _matcher_end(expr: str, pos: int) -> int:
    """The index after the ``}`` closing a label matcher block opened before ``pos``."""
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        assert match is not None
        pos = match.end()
        if match.group() == "}":
            return pos
    raise ValueError(f"unclosed label matcher in {expr!r}")


def promql_names(expr: str) -> set[str]:
    """Every series name that the PromQL expression ``expr`` selects."""
    template = _LABEL_VALUES.match(expr)
    if template is not None:
        expr = template.group("selector")
    tokens = list(_tokens(expr))
    names: set[str] = set()
    skip_labels = False
    for i, (kind, text, _end) in enumerate(tokens):
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if skip_labels:
            if text == ")":
                skip_labels = False
            continue
        if kind == "brace":
            named = _NAME_MATCHER.search(text)
            if named is not None:
                names.add(named.group(1)[1:-1])
            continue
        if kind != "name":
            continue
        if text in _LABEL_LIST_AFTER:
            skip_labels = following == "("
            if skip_labels:
                tokens[i + 1] = ("other", "", 0)  # the list's own "(" is consumed here
            continue
        if following == "(" or text in _KEYWORDS or text in _AGGREGATIONS:
            continue  # a function call, an aggregation or a keyword
        names.add(text)
    return names


def rule_exprs(rules_doc: dict[str, Any]) -> tuple[list[str], set[str]]:
    """The expressions of a rules file and the series its recording rules define."""
    exprs, recorded = [], set()
    for group in rules_doc["groups"]:
        for rule in group["rules"]:
            exprs.append(str(rule["expr"]))
            if "record" in rule:
                recorded.add(str(rule["record"]))
    return exprs, recorded


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL query of a Grafana dashboard: panel targets and template variables."""
    exprs = [
        str(target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if variable.get("type") == "query" and isinstance(query, dict):
            exprs.append(str(query["query"]))
    return exprs


def exported_names(scrape: str) -> set[str]:
    """The sample names of a ``/metrics`` answer (Prometheus text format)."""
    names = set()
    for line in scrape.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(_NAME, line)
        assert match is not None, f"not a sample line: {line!r}"
        names.add(match.group())
    return names


def unexported(exprs: Iterable[str], recorded: set[str], exported: set[str]) -> dict[str, str]:
    """Each name the expressions read that is neither exported, recorded nor a scrape series,
    with the first expression that reads it."""
    missing: dict[str, str] = {}
    for expr in exprs:
        for name in sorted(promql_names(expr) - recorded - exported - SCRAPE_SERIES):
            missing.setdefault(name, expr)
    return missing
