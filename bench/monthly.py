"""What a deployment costs a month: every line priced from ``prices.json`` or named as
"price not in the kit" with the quantity it is billed on, never silently zero.

A bill is three parts: the variable cost of its cells (measured per delivered cell by the bench,
scaled), the storage its retention keeps (S3, DynamoDB and its continuous backups, CloudWatch Logs),
and the fixed cost of a stack that is deployed and watched (a sweep tick every SweepIntervalMinutes, idle queue
polling, cold starts, alarms and metric series of its alarm profile)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

GB = 1e9
MONTH_DAYS = 30
NOT_IN_KIT = "price not in the kit"


@dataclass
class Line:
    name: str
    usd: float | None  # None: not priced (then ``named`` says why)
    quantity: str = ""
    named: str | None = None
    fixed: bool = False


@dataclass
class Profile:
    key: str
    name: str
    source: str
    cells_per_month: int
    targets_per_slot: int
    novel_share: float
    accounts: int
    accounts_why: str
    retention_days: int
    delete_after_delivery: bool
    alarm_profile: str
    # enabled schedules: every sweep tick reads each one's watch (missed fires), so the fixed
    # part of a month grows with them (the bench measures the profile's idle tick at this count)
    schedules: int = 1
    schedules_why: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    works_from: str = "pixiv"  # or "catalog": a pre-fetched catalogue of works, no Pixiv request in a cell


def profiles(a: dict[str, Any]) -> list[Profile]:
    per_cell_s = _pixiv_seconds(a, 0.5)
    per_account_day = int(86_400 / per_cell_s)
    return [
        Profile("a", "the published PixivFlow production deployment",
                "pixivflow.production.json: 2 schedules (bot1-daily '0 10,18 * * *', bot2-daily '10 10,18 * * *'), "
                "2 fires a day each, 2 topic targets each (an illustration and a novel) = 8 cells a day",
                8 * MONTH_DAYS, 2, 0.5, 1, "its own pixiv block: one account at maxConcurrency 1",
                7, True, "health", schedules=2, schedules_why="its two schedules"),
        Profile("b", "a team deployment", "100 targets, 3,000 cells a day (say 30 schedules of 3-4 targets, ~10 fires a day)",
                3_000 * MONTH_DAYS, 3, 0.2, 1,
                f"one account at maxConcurrency 1 and 1 s pacing does about {per_account_day:,} cells a day "
                f"({per_cell_s:.1f} s of Pixiv per cell): 3,000 fit one, in bursts the schedule timeout absorbs",
                7, True, "full", schedules=30, schedules_why="the 30 schedules said above"),
        Profile("c", "one million cells a month", "33,333 cells a day, 3-target slots, 7-day artifact retention",
                1_000_000, 3, 0.2, math.ceil(1_000_000 / MONTH_DAYS / per_account_day * 1.5),
                f"{1_000_000 / MONTH_DAYS:,.0f} cells a day at about {per_account_day:,} per account, with 50% headroom "
                "(or the catalogue source, which needs none)", 7, True, "full", schedules=1_111,
                schedules_why="11,111 fires a day at 10 fires a day each (as (b)): a stated assumption"),
    ]


def _pixiv_seconds(a: dict[str, Any], novel_share: float) -> float:
    px, sizes = a["pixiv_seconds_per_cell"], a["work_bytes"]
    mean_bytes = (1 - novel_share) * sizes["illustration_original"] + novel_share * sizes["novel"]
    return px["requests"] * px["pacing_s"] + mean_bytes / (px["mb_per_s"] * 1e6)


def bill(profile: Profile, *, per_million: dict[str, float], per_cell: dict[str, Any], prices: dict[str, float],
         a: dict[str, Any], fixed: dict[str, float], ledger_bytes_per_cell: float, memory_gb: float,
         retention_days_ledger: int) -> dict[str, Any]:
    """One profile's month, line by line. ``per_million`` are the bench's variable lines per 1M
    delivered cells (3-target slots), ``fixed`` the stack's fixed lines a month for this profile."""
    cells = profile.cells_per_month
    scale = cells / 1_000_000
    lines: list[Line] = []
    for name, usd in per_million.items():
        if name in ("EventBridge Scheduler", "API Gateway"):
            continue
        lines.append(Line(name, usd * scale, f"{cells:,} cells x measured per cell"))
    fires = cells / profile.targets_per_slot
    lines.append(Line("EventBridge Scheduler", fires * prices["scheduler_invocation"], f"{fires:,.0f} fires"))
    lines.append(Line("API Gateway", 0.0, "0 HTTP requests: scheduled delivery only (jobs and the operator page add $1 per 1M)"))
    if profile.works_from == "catalog":
        lines.append(Line("Lambda waiting on Pixiv (assumed)", 0.0, "the catalogue source: no Pixiv request in a cell"))
    else:
        pixiv_s = _pixiv_seconds(a, profile.novel_share)
        lines.append(Line("Lambda waiting on Pixiv (assumed)", cells * pixiv_s * memory_gb * prices["lambda_gb_s_arm64"],
                          f"{pixiv_s:.2f} s a cell x {memory_gb:g} GB"))
    sizes = a["work_bytes"]
    kept = ((1 - profile.novel_share) * (sizes["illustration_preview"] if profile.delete_after_delivery
                                         else sizes["illustration_original"] + sizes["illustration_preview"])
            + profile.novel_share * sizes["novel"])
    stored_gb = cells / MONTH_DAYS * profile.retention_days * kept / GB
    lines.append(Line("S3 storage", stored_gb * prices["s3_storage_gb_month"],
                      f"{stored_gb:,.3f} GB kept ({profile.retention_days} days; "
                      + ("originals deleted on delivery, previews kept" if profile.delete_after_delivery else "originals kept") + ")"))
    ledger_gb = cells / MONTH_DAYS * retention_days_ledger * ledger_bytes_per_cell / GB
    lines.append(Line("DynamoDB storage", None, f"{ledger_gb:,.4f} GB ({retention_days_ledger}-day TTL x "
                      f"{ledger_bytes_per_cell:,.0f} B a cell, measured)", named=NOT_IN_KIT))
    lines.append(Line("DynamoDB point-in-time recovery", None, f"{ledger_gb:,.4f} GB of continuous backups", named=NOT_IN_KIT))
    log_gb = cells * per_cell["log_bytes"] / GB * a["log_retention_days"] / MONTH_DAYS
    lines.append(Line("CloudWatch Logs storage", log_gb * prices["cloudwatch_logs_storage_gb_month"],
                      f"{log_gb:,.4f} GB-month ({a['log_retention_days']}-day retention)"))
    inbound = cells * ((1 - profile.novel_share) * sizes["illustration_original"] + profile.novel_share * sizes["novel"]) / GB
    lines.append(Line("data in from Pixiv", None, f"{inbound:,.2f} GB", named=NOT_IN_KIT))
    for name, usd in fixed.items():
        lines.append(Line(name, usd, "a month, whatever is delivered", fixed=True))
    return summarise(profile, lines, prices, a, fires)


def summarise(profile: Profile, lines: list[Line], prices: dict[str, float], a: dict[str, Any], fires: float) -> dict[str, Any]:
    total = sum(line.usd for line in lines if line.usd is not None)
    unnamed = [line.name for line in lines if line.usd is None and not line.named]
    return {"key": profile.key, "name": profile.name, "source": profile.source, "cells_per_month": profile.cells_per_month,
            "accounts": profile.accounts, "accounts_why": profile.accounts_why, "schedules": profile.schedules,
            "schedules_why": profile.schedules_why, "retention_days": profile.retention_days,
            "delete_after_delivery": profile.delete_after_delivery, "alarm_profile": profile.alarm_profile,
            "lines": [line.__dict__ for line in lines], "total": total,
            "per_million_cells": total / profile.cells_per_month * 1_000_000,
            "fixed": sum(line.usd for line in lines if line.fixed and line.usd is not None),
            "named": [line.name for line in lines if line.named], "unpriced": unnamed}


def check_every_line_priced_or_named(bills: list[dict[str, Any]]) -> list[str]:
    """The names of lines that have neither a price nor a reason: ``make bench`` fails on any."""
    return [f"({b['key']}) {name}" for b in bills for name in b["unpriced"]]
