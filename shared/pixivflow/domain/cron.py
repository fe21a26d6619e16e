"""Translate a Unix 5-field cron into an EventBridge Scheduler ``cron(...)`` expression.

EventBridge's six fields are ``min hour day-of-month month day-of-week year``
and differ from Unix cron in ways that silently change a schedule if copied
verbatim:

* exactly one of day-of-month / day-of-week must be ``?``. Unix cron ORs the
  two when both are restricted; EventBridge has no way to say that, so such an
  expression is refused instead of being mistranslated;
* numeric weekdays are off by one (EventBridge 1 = SUN, Unix 0 or 7 = Sunday),
  so weekdays are always emitted by name (``MON-FRI``, ``SUN,TUE``), except in
  the ``#``/``L`` forms, which AWS documents with numbers only;
* ``*/n`` is written ``<first>/n``; a stepped range (``10-40/10``) or a range
  that wraps (``22-2``) is expanded into an explicit list.

Only a literal ``*`` (or ``?``) counts as "unrestricted" for the day fields.
"""

from __future__ import annotations

from .text import ascii_digits
from croniter import croniter

_DOW_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")

# field -> (lowest, highest) as Unix cron writes them
_BOUNDS = {"minute": (0, 59), "hour": (0, 23), "dom": (1, 31), "month": (1, 12), "dow": (0, 7)}


def _number(token: str, field: str) -> int:
    upper = token.upper()
    if field == "month" and upper in _MONTH_NAMES:
        return _MONTH_NAMES.index(upper) + 1
    if field == "dow" and upper in _DOW_NAMES:
        return _DOW_NAMES.index(upper)
    if not ascii_digits(token):
        raise ValueError(f"unsupported {field} value {token!r}")
    value = int(token)
    low, high = _BOUNDS[field]
    if not low <= value <= high:
        raise ValueError(f"{field} value {value} outside {low}-{high}")
    return value


def _expand(item: str, field: str) -> list[int]:
    """Values one comma-separated item selects (Unix semantics, wrap-around allowed)."""
    low, high = _BOUNDS[field]
    if field == "dow":
        high = 6  # a written 7 is Sunday, folded to 0 below
    base, _, step_text = item.partition("/")
    step = 1
    if step_text:
        if not ascii_digits(step_text) or int(step_text) == 0:
            raise ValueError(f"bad step in {field} item {item!r}")
        step = int(step_text)
    if base in ("*", "?"):
        start, end = low, high
    elif "-" in base:
        a, b = base.split("-", 1)
        start, end = _number(a, field), _number(b, field)
    else:
        start = _number(base, field)
        end = max(high, start) if step_text else start
    if start <= end:
        sequence = list(range(start, end + 1))
    else:  # wraps past the top of the field, e.g. hours 22-2 or FRI-MON
        sequence = list(range(start, high + 1)) + list(range(low, end + 1))
    picked = sequence[::step]
    if field == "dow":
        picked = [v % 7 for v in picked]
    return list(dict.fromkeys(picked))


def _plain(field_text: str, field: str) -> str:
    """minute / hour / day-of-month / month, rewritten where EventBridge differs."""
    if field_text in ("*", "?"):
        return "*"
    out: list[str] = []
    for item in field_text.split(","):
        base, _, step = item.partition("/")
        upper = item.upper()
        if field == "dom" and (upper == "L" or upper.endswith("W")):
            out.append(upper)
        elif step and base == "*":
            _expand(item, field)  # validates the step
            out.append(f"{_BOUNDS[field][0]}/{step}")
        elif step and "-" not in base:
            _number(base, field)
            out.append(f"{base.upper()}/{step}")
        elif step or ("-" in base and _number(base.split("-", 1)[0], field) > _number(base.split("-", 1)[1], field)):
            out.extend(str(v) for v in _expand(item, field))
        else:
            for part in base.split("-"):
                _number(part, field)
            out.append(upper)
    return ",".join(dict.fromkeys(out))


def _dow(field_text: str) -> str:
    if field_text in ("*", "?"):
        return field_text
    items = field_text.split(",")
    special = [i for i in items if "#" in i or "L" in i.upper()]
    if special:
        if len(items) != 1:
            raise ValueError(f"day-of-week {field_text!r}: '#' and 'L' cannot be combined with other values")
        token = items[0].upper()
        if "#" in token:
            day, _, nth = token.partition("#")
            if not ascii_digits(nth) or not 1 <= int(nth) <= 5:
                raise ValueError(f"day-of-week {field_text!r}: bad '#' occurrence")
            return f"{_number(day, 'dow') % 7 + 1}#{nth}"
        day = token.replace("L", "")
        if not day:
            raise ValueError("day-of-week 'L' needs a weekday (e.g. L5 for the last Friday)")
        return f"{_number(day, 'dow') % 7 + 1}L"
    out: list[str] = []
    for item in items:
        base, _, step = item.partition("/")
        if not step and "-" in base:
            a, b = (_number(x, "dow") for x in base.split("-", 1))
            if a < b <= 6:
                out.append(f"{_DOW_NAMES[a]}-{_DOW_NAMES[b]}")
                continue
        out.extend(_DOW_NAMES[v] for v in _expand(item, "dow"))
    return ",".join(dict.fromkeys(out))


def to_eventbridge_cron(expr5: str) -> str:
    """``"0 8 * * 1-5"`` -> ``"cron(0 8 ? * MON-FRI *)"``; ValueError if it cannot be expressed."""
    if not isinstance(expr5, str):
        raise ValueError("cron expression must be a string")
    fields = expr5.split()
    if len(fields) != 5:
        raise ValueError(f"expected a 5-field cron expression, got {len(fields)} fields: {expr5!r}")
    try:
        croniter.expand(" ".join(fields))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"invalid cron expression {expr5!r}: {exc}") from None
    minute, hour, dom, month, dow = fields
    dom_free = dom in ("*", "?")
    dow_free = dow in ("*", "?")
    if not dom_free and not dow_free:
        raise ValueError(
            f"{expr5!r} restricts both day-of-month and day-of-week; Unix cron runs on either, "
            "EventBridge cannot express that -- split it into two schedules"
        )
    eb_dom = "?" if not dow_free else _plain(dom, "dom")
    eb_dow = "?" if dow_free else _dow(dow)
    return f"cron({_plain(minute, 'minute')} {_plain(hour, 'hour')} {eb_dom} {_plain(month, 'month')} {eb_dow} *)"


to_eventbridge_expression = to_eventbridge_cron

__all__ = ["to_eventbridge_cron", "to_eventbridge_expression"]
