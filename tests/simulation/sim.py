"""``make sim``: ten thousand seeded CONCURRENT fault runs on the in-memory twins (issue 20; DESIGN
§10; spec §13).

Each seed is ``world.run_world``: four schedules firing within minutes of each other on a day picked
by the seed (so DST days and month ends come round), their trigger fires, executors, deliverers and
sweeps running as interleaved Lambda invocations under ``baton.Baton`` (every AWS call a step at
which the seeded scheduler may switch, pass time or kill the invocation for good), lost, duplicated
and delayed SQS records, downstream faults; then the faults stop, the run converges and
``oracle.check_invariants`` holds the ledger and the downstream to spec §13.

    python tests/simulation/sim.py --seeds 10000 [--jobs N]   # one summary line
    python tests/simulation/sim.py --seed 4711                # replay one seed, with its trace
    python tests/simulation/sim.py --seeds 100 --double no-reservation-condition --stop-at-first

A seed replays exactly: every decision comes from random streams derived from it, the clock is
virtual and only one invocation thread runs at a time. Exit status 1 when any invariant was violated.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parents[1] / "shared")]

DAY_MS = 86_400_000
EPOCH = "2026-01-01T00:00:00Z"
SPAN_DAYS = 730  # the start day cycles through two years

_worker: dict = {}


class _OutcomeSink:
    """Takes the Powertools logger's stream: keeps only the schedule.outcome lines the oracle reads."""

    def __init__(self) -> None:
        self.lines: list[dict] = []

    def write(self, text: str) -> int:
        if '"schedule.outcome"' in text:
            for raw in text.splitlines():
                if '"schedule.outcome"' in raw:
                    try:
                        self.lines.append(json.loads(raw))
                    except ValueError:
                        pass
        return len(text)

    def flush(self) -> None:
        pass

    def outcomes(self, slot_id: str) -> list[dict]:
        from conftest import OUTCOME_MESSAGE

        return [line for line in self.lines if line.get("message") == OUTCOME_MESSAGE and line.get("slot_id") == slot_id]


def _init(double: str | None = None) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
                       "POWERTOOLS_METRICS_DISABLED": "true"}.items():
        os.environ[key] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)
    from conftest import write_config
    from pixivflow.local.downstream import Downstream
    from pixivflow.observability import logger

    double = double or os.environ.get("SIM_DOUBLE")
    if double:
        from doubles import DOUBLES

        DOUBLES[double]()  # a guard broken on purpose (the self-test): the run must find it
    tmp = Path(tempfile.mkdtemp(prefix="pixivflow-sim-"))
    downstream = Downstream().__enter__()
    sink = _OutcomeSink()
    logger.registered_handler.stream = sink
    from conftest import OUTCOME_MESSAGE

    # Only the outcome lines reach the sink (the oracle reads nothing else), so only they are
    # formatted: the JSON formatting of every other INFO line of a seed cost ~3% of its time.
    logger.registered_handler.addFilter(lambda record: record.msg == OUTCOME_MESSAGE)
    logger.setLevel("INFO")  # the oracle reads the schedule.outcome lines, whatever level the caller runs at
    from world import sim_config
    from world_routes import ROUTE_ENV, routes_config

    from pixivflow.local.fake_pixiv import FakePixiv
    from world_pixiv import PIXIV_ENV, PixivWorld, pixiv_config

    PixivWorld.fake = FakePixiv(rotate=True).__enter__()  # one loopback fake Pixiv per worker, reset per seed
    # Its answers are several small writes: without TCP_NODELAY each waits out a delayed ACK (~40 ms).
    PixivWorld.fake._server.RequestHandlerClass.disable_nagle_algorithm = True  # noqa: SLF001
    os.environ.update(PIXIV_ENV)
    os.environ.update(ROUTE_ENV)  # the routes' ${VAR}s (resolved at send time; the demo config has none)
    os.environ.pop("ROUTE_SECRETS_PATH", None)
    # One config file per world variant, each parsed once per worker (world._config).
    for name in ("demo", "routes", "pixiv"):
        (tmp / name).mkdir()
    _worker.update(configs={"demo": write_config(tmp / "demo", downstream.url, sim_config),
                            "routes": write_config(tmp / "routes", downstream.url, routes_config),
                            "pixiv": write_config(tmp / "pixiv", downstream.url, pixiv_config(PixivWorld.fake.url))},
                   downstream=downstream, sink=sink)


def variant(seed: int) -> str:
    """The world a seed runs in: the demo world, PixivFlow's routes (world_routes), the Pixiv
    source (world_pixiv), in turn."""
    return VARIANTS[seed % len(VARIANTS)]


VARIANTS = ("demo", "routes", "pixiv")


def run_one(seed: int) -> dict:
    from conftest import ms
    from oracle import index_lag
    from world import FIRST_FIRE_UTC_H, World, run_world
    from world_pixiv import PixivWorld
    from world_routes import RoutesWorld
    from pixivflow.clock import VirtualClock
    from pixivflow.local.downstream import DownstreamState
    from pixivflow.local.harness import EmbeddedRuntime

    if not _worker:
        _init()
    downstream, sink = _worker["downstream"], _worker["sink"]
    downstream.state.__dict__.update(DownstreamState().__dict__)  # a fresh downstream per seed, same server
    sink.lines.clear()
    start = ms(EPOCH) + (seed % SPAN_DAYS) * DAY_MS + FIRST_FIRE_UTC_H * 3_600_000 - 60_000
    clock = VirtualClock(start)
    kind = variant(seed)
    world_cls: type[World] = {"demo": World, "routes": RoutesWorld, "pixiv": PixivWorld}[kind]
    with EmbeddedRuntime(_worker["configs"][kind], clock, tokens={"trigger": "sim-trigger", "jobs": "sim-jobs", "callback": "whsec_c2ltLWNhbGxiYWNrLXNpZ25pbmc="}, backend="twin",
                         seed=seed, index_lag_ms=index_lag(seed), prefix="sim") as rt:
        result = run_world(rt, downstream, seed, start_ms=start, outcomes=sink.outcomes, world_cls=world_cls)
    if not _worker.get("frozen"):
        # After a worker's first seed every module a seed needs is loaded: those objects (boto3's
        # service models, pydantic's schemas, the parsed template) live as long as the worker, so
        # they leave the cyclic collector's generations, which scanned them again and again (8% of
        # a seed's CPU). The first seed's garbage is collected before, never frozen.
        gc.collect()
        gc.freeze()
        _worker["frozen"] = True
    return {"seed": seed, "variant": kind, "problems": result.problems, "faults": dict(result.faults), "line": result.line,
            "trace": result.trace, "fires": result.fired}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=int(os.environ.get("SEEDS", "10000")), help="how many seeds (1..N)")
    parser.add_argument("--first", type=int, default=1, help="the first seed")
    parser.add_argument("--seed", type=int, default=None, help="replay exactly this seed, verbosely")
    parser.add_argument("--replay", default=None, help="comma-separated seeds to run (e.g. the ones that once failed)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--double", default=None, help="break one guard on purpose (doubles.DOUBLES): the self-test")
    parser.add_argument("--stop-at-first", action="store_true", help="stop at the first seed with a violation")
    args = parser.parse_args(argv)
    if args.double:
        os.environ["SIM_DOUBLE"] = args.double  # the workers' _init reads it

    if args.seed is not None:
        out = run_one(args.seed)
        print(f"[sim] {out['line']}")
        for p in out["problems"]:
            print(f"  violation: {p}")
        for t in out["trace"]:
            print(f"  trace: {t}")
        return 1 if out["problems"] else 0

    seeds = [int(x) for x in args.replay.split(",")] if args.replay else range(args.first, args.first + args.seeds)
    began = time.monotonic()
    violations: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    failing: list[int] = []
    examples: list[str] = []
    fires = ran = 0
    pool = multiprocessing.get_context("fork").Pool(args.jobs, initializer=_init) if args.jobs > 1 else None
    try:
        results = pool.imap(run_one, seeds, chunksize=4) if pool else map(run_one, seeds)
        for out in results:  # in seed order, so --stop-at-first names the lowest failing seed
            ran += 1
            fires += out["fires"]
            faults.update(out["faults"])
            for p in out["problems"]:
                violations[p.split("]")[0].strip("[")] += 1
            if out["problems"]:
                failing.append(out["seed"])
                examples.extend(f"seed {out['seed']}: {p}" for p in out["problems"][:3])
                if args.stop_at_first:
                    break
    finally:
        if pool:
            pool.terminate()
    seeds = seeds[:ran]
    wall = time.monotonic() - began
    kinds = " ".join(f"{k}={v}" for k, v in sorted(faults.items()))
    by_invariant = ", ".join(f"§13/{k}: {v}" for k, v in sorted(violations.items())) or "none"
    print(f"sim: seeds={len(seeds)} fires={fires} violations={sum(violations.values())} ({by_invariant}) "
          f"wall={wall:.1f}s ({len(seeds) / wall:.1f} seeds/s on {args.jobs} process(es)) | faults: {kinds}")
    if failing:
        print(f"sim: failing seeds (replay with SEED=n make sim): {sorted(failing)[:50]}")
        for line in examples[:10]:
            print(f"sim:   {line}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
