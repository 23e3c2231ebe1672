"""Benchmark: 1 and 3 `krill run` replicas on one throwaway PostgreSQL, Telegram webhooks
spread over them round-robin, and a kill -9 of one replica halfway.

`--chats` private chats each send `--messages` messages; round n posts every chat's message
n (over at most `--connections` connections, to the replicas in turn) and waits for all of
them to be acknowledged before round n+1, as Telegram delivers one chat's updates in order.
Halfway, one replica is killed with SIGKILL; with a single replica it is restarted at once
(as a supervisor would), with three the other two take its sessions over once their leases
expire, and an update it never acknowledged goes to the next replica. The fake model answers
at once and repeats each message's token (`c<chat>m<n>`), so the fake Bot API sees which
message every reply answers.

Reported per run: answered messages/s, latency from posting an update to the sendMessage
that answers it (p50, p99), sendMessage calls (a turn that took several queued messages of
a chat answers them in one), lost (never answered), duplicated (answered more than once),
out of order (chats whose answers came in another order), takeover time (kill -> the first
message the dead replica had acknowledged but not answered is answered: its sessions are
served again) and drain time (kill -> the last of them is answered: its backlog is worked
off), the share of the CPU time spent that PostgreSQL took, and how many of the machine's
cores the run kept busy (CPU seconds of Krill, PostgreSQL and this process over the wall
time); then the throughput ratio of 3 replicas to 1.

Then the cost per answer, which does not depend on how many cores the machine has: the CPU
seconds (user + system, from /proc/<pid>/stat) of every process of the run per answered
message — each replica (a restarted one from its start, a killed one up to its kill), the
PostgreSQL server's processes summed (the postmaster, its live backends and the exited ones
it reaped), and apart from them this process (the fake Bot API, the fake model and the load
generator) — and the ratio of Krill + PostgreSQL per answer, 3 replicas to 1: near 1.0 means
a third replica adds as much capacity as the cores it is given. What the processes use with
nothing to answer (timers, polls, lease renewals; watched for a few seconds before the run)
is reported too, and the per-answer cost less that idle CPU over the run: on a busy machine
a run lasts longer and the idle part of each answer grows with it.

Run: python bench/replicas.py [--chats 200] [--messages 20] [--connections 40]
                              [--lease-seconds 5] [--store postgres|sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.proc_cpu import cpu_of
from bench.telegram_webhook import percentile
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess
from tests.postgres import MISSING, PostgresCluster, find_bin_dir
from tests.replica_set import TOKEN_RE, ReplicaSet, replica_config, token

FIRST_CHAT = 20_000
ANSWER_WAIT_SECONDS = 300.0
IDLE_SECONDS = 5.0  # how long the idle replicas are watched before the run


class TimedTelegram(FakeTelegram):
    """The fake Bot API, noting when each sent message arrived and which tokens it carries."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[tuple[int, int], list[float]] = {}
        self.order: dict[int, list[int]] = {}
        self.sends = 0

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        result = super()._send_message(params)
        at = time.perf_counter()
        self.sends += 1
        for chat, n in TOKEN_RE.findall(str(params.get("text", ""))):
            self.answers.setdefault((int(chat), int(n)), []).append(at)
            self.order.setdefault(int(chat), []).append(int(n))
        return result


@dataclass
class Result:
    replicas: int
    messages: int
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    stranded: int = 0
    sends: int = 0  # sendMessage calls: a turn that took several queued messages sends one
    takeover_seconds: float | None = None
    drained_seconds: float | None = None
    postgres_cpu: float | None = None  # None: the run used SQLite
    krill_cpu: float = 0.0
    bench_cpu: float = 0.0
    replica_cpu: dict[str, float] = field(default_factory=dict)  # label -> CPU seconds
    # A restarted replica's start-up (imports, recovery): once per start, not per message.
    restart_cpu: float | None = None
    # CPU seconds per second with nothing to do (timers, polling, lease renewals): one
    # replica's, and the database server's with every replica connected.
    idle_replica: float = 0.0
    idle_postgres: float = 0.0
    replica_seconds: float = 0.0  # how long the replicas ran while counted, added up
    wall: float = 0.0  # the time the CPU seconds were counted over

    @property
    def answered_per_second(self) -> float:
        return (self.messages - self.lost) / self.seconds if self.seconds else 0.0

    @property
    def postgres_share(self) -> str:
        if self.postgres_cpu is None:
            return "n/a"
        total = self.postgres_cpu + self.krill_cpu + self.bench_cpu
        return f"{self.postgres_cpu / total:.0%}" if total else "0%"

    @property
    def answered(self) -> int:
        return self.messages - self.lost

    def per_answer_ms(self, seconds: float) -> float:
        return seconds * 1000 / self.answered if self.answered else float("nan")

    @property
    def served_cpu(self) -> float:
        """What serving the messages cost: every replica and the database server."""
        return sum(self.replica_cpu.values()) + (self.postgres_cpu or 0.0)

    @property
    def idle_cpu(self) -> float:
        """What the run's CPU would have been with nothing to answer, at the idle rates."""
        return self.idle_replica * self.replica_seconds + self.idle_postgres * self.wall

    @property
    def cores_busy(self) -> float:
        total = (self.postgres_cpu or 0.0) + self.krill_cpu + self.bench_cpu
        return total / self.wall if self.wall else 0.0


class ReplicaMeter:
    """Each replica process's CPU seconds over the run: counted from when the run starts (a
    replica restarted during it, from when it is up again) to its kill or the end of the
    run."""

    def __init__(self) -> None:
        # pid -> (label, CPU and time when counting began)
        self._from: dict[int, tuple[str, float, float]] = {}
        self.used: dict[str, float] = {}
        self.alive: dict[str, float] = {}  # label -> seconds counted

    def start(self, label: str, replica: KrillProcess) -> float:
        """Count from now (the replica is up); returns what it has used so far (start-up)."""
        pid = self._pid(replica)
        used, _ = cpu_of(pid)
        self._from[pid] = (label, used, time.perf_counter())
        return used

    def stop(self, replica: KrillProcess) -> None:
        """Read before the replica is killed or stopped (afterwards its /proc entry is gone)."""
        pid = self._pid(replica)
        label, begun, since = self._from.pop(pid)
        self.used[label] = cpu_of(pid)[0] - begun
        self.alive[label] = time.perf_counter() - since

    @staticmethod
    def _pid(replica: KrillProcess) -> int:
        assert replica.proc is not None, "the replica was never started"
        return replica.proc.pid


async def idle_cost(
    replicas: ReplicaSet, pg_dir: Path | None, result: Result, seconds: float = IDLE_SECONDS
) -> None:
    """Measure the replicas' and the database server's CPU while nothing is sent."""
    await asyncio.sleep(1.0)  # start-up's last steps (recovery, first polls) settle
    pids = [r.proc.pid for r in replicas.replicas if r.proc is not None]
    krill = sum(cpu_of(pid)[0] for pid in pids)
    pg = postgres_cpu(pg_dir) if pg_dir else 0.0
    await asyncio.sleep(seconds)
    krill = sum(cpu_of(pid)[0] for pid in pids) - krill
    result.idle_replica = krill / seconds / len(pids)
    result.idle_postgres = (postgres_cpu(pg_dir) - pg if pg_dir else 0.0) / seconds


def postgres_cpu(data_dir: Path) -> float:
    """CPU seconds the cluster in `data_dir` has used: the postmaster, its exited children
    (counted in its cutime), and the backends alive now."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    total, _ = cpu_of(postmaster)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                cpu, parent = cpu_of(int(entry))
                if parent == postmaster:
                    total += cpu
    return total


@contextlib.contextmanager
def database_server(kind: str) -> Iterator[PostgresCluster | None]:
    """The throwaway PostgreSQL both runs share (a fresh database each), or None for SQLite."""
    if kind == "sqlite":
        yield None
        return
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit(MISSING)
    cluster = PostgresCluster(bin_dir).start()
    try:
        yield cluster
    finally:
        cluster.stop()


async def run(count: int, args: argparse.Namespace, cluster: PostgresCluster | None) -> Result:
    result = Result(count, args.chats * args.messages)
    chats = [FIRST_CHAT + i for i in range(args.chats)]
    url = cluster.new_database() if cluster else "sqlite:///data/krill.db"
    pg_dir = cluster.data if cluster else None
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        async with TimedTelegram() as tg, FakeAnthropic() as model:
            model.cache_enabled = False  # 4,000 sessions' cache entries are not the point here
            config = replica_config(tg, url, lease_seconds=args.lease_seconds)
            replicas = ReplicaSet(
                directory, tg, model, config, count, {"KRILL_LOG_LEVEL": "WARNING"}
            )
            await replicas.start()
            await idle_cost(replicas, pg_dir, result)
            meter = ReplicaMeter()
            for i, replica in enumerate(replicas.replicas):
                meter.start(f"replica {i}", replica)
            pg_before = postgres_cpu(pg_dir) if pg_dir else 0.0
            before = os.times()
            counting = time.perf_counter()
            try:
                await drive(replicas, tg, chats, args, result, meter)
                for i in replicas.live:
                    meter.stop(replicas.replicas[i])
            finally:
                await replicas.stop()
            result.replica_cpu = meter.used
            result.replica_seconds = sum(meter.alive.values())
            after = os.times()
            result.wall = time.perf_counter() - counting
            if pg_dir is not None:
                result.postgres_cpu = postgres_cpu(pg_dir) - pg_before
            result.krill_cpu = (after.children_user + after.children_system) - (
                before.children_user + before.children_system
            )
            result.bench_cpu = (after.user + after.system) - (before.user + before.system)
    return result


async def drive(
    replicas: ReplicaSet,
    tg: TimedTelegram,
    chats: list[int],
    args: argparse.Namespace,
    result: Result,
    meter: ReplicaMeter,
) -> None:
    posted: dict[tuple[int, int], float] = {}
    acked_by: dict[tuple[int, int], int] = {}
    killed = len(replicas.replicas) // 2  # the middle one: 0 of 1, 1 of 3
    stranded: list[tuple[int, int]] = []
    kill_at = 0.0
    limit = asyncio.Semaphore(args.connections)

    async def post(http: aiohttp.ClientSession, chat: int, n: int) -> None:
        async with limit:
            posted[(chat, n)] = time.perf_counter()
            update = tg.private_message(chat, f"say {token(chat, n)}")
            acked_by[(chat, n)] = await replicas.post_update(http, update)

    started = time.perf_counter()
    connector = aiohttp.TCPConnector(limit=args.connections)
    async with aiohttp.ClientSession(connector=connector) as http:
        for n in range(args.messages):
            if n == args.messages // 2:
                stranded = [k for k, r in acked_by.items() if r == killed and k not in tg.answers]
                kill_at = time.perf_counter()
                meter.stop(replicas.replicas[killed])
                await replicas.kill(killed)
                if len(replicas.replicas) == 1:
                    await replicas.restart(killed)
                    restarted = replicas.replicas[killed]
                    result.restart_cpu = meter.start(f"replica {killed} (restarted)", restarted)
            await asyncio.gather(*(post(http, chat, n) for chat in chats))
    wanted = set(posted)
    deadline = time.monotonic() + ANSWER_WAIT_SECONDS
    while not wanted <= tg.answers.keys() and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    # Anything sent after this would be a duplicate; the benchmark has no sentinel to wait for.
    await asyncio.sleep(1.0)
    answers = tg.answers
    finished = max((times[0] for times in answers.values()), default=time.perf_counter())
    result.seconds = finished - started
    result.latencies_ms = [(answers[k][0] - posted[k]) * 1000 for k in wanted if k in answers]
    result.lost = len(wanted - answers.keys())
    result.duplicated = sum(len(answers[k]) > 1 for k in wanted if k in answers)
    result.out_of_order = sum(tg.order.get(c, []) != sorted(tg.order.get(c, [])) for c in chats)
    result.stranded = len(stranded)
    result.sends = tg.sends
    done = [answers[k][0] for k in stranded if k in answers]
    if stranded and len(done) == len(stranded):
        result.takeover_seconds = min(done) - kill_at
        result.drained_seconds = max(done) - kill_at


def report(results: list[Result]) -> None:
    header = (
        "replicas | answered/s | p50 ms | p99 ms | sends | lost | duplicated | out of order"
        " | stranded | takeover s | drained s | PostgreSQL CPU | cores busy"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        lat = r.latencies_ms or [float("nan")]
        takeover = "n/a" if r.takeover_seconds is None else f"{r.takeover_seconds:.1f}"
        drained = "n/a" if r.drained_seconds is None else f"{r.drained_seconds:.1f}"
        print(
            f"{r.replicas:>8} | {r.answered_per_second:>10.1f} | {statistics.median(lat):>6.0f}"
            f" | {percentile(lat, 99):>6.0f} | {r.sends:>5} | {r.lost:>4} | {r.duplicated:>10}"
            f" | {r.out_of_order:>12} | {r.stranded:>8} | {takeover:>10} | {drained:>9}"
            f" | {r.postgres_share:>14} | {r.cores_busy:>10.2f}"
        )
    if len(results) == 2 and results[0].answered_per_second:
        ratio = results[1].answered_per_second / results[0].answered_per_second
        print(f"\nthroughput 3 replicas / 1 replica: {ratio:.2f}x")
    cost_report(results)


def cost_report(results: list[Result]) -> None:
    """CPU seconds per answered message, per process: what a message costs to serve."""
    print("\nCPU per answered message (user + system; ms per answer, CPU seconds in brackets)")
    header = f"{'process':<34}" + "".join(f" | {f'{r.replicas} replica(s)':>20}" for r in results)
    print(header)
    print("-" * len(header))
    labels = sorted({label for r in results for label in r.replica_cpu})

    def row(name: str, seconds: list[float | None]) -> None:
        cells = "".join(
            f" | {'-':>20}" if s is None else f" | {r.per_answer_ms(s):>10.2f} ({s:>6.1f} s)"
            for r, s in zip(results, seconds, strict=True)
        )
        print(f"{name:<34}{cells}")

    for label in labels:
        row(label, [r.replica_cpu.get(label) for r in results])
    row("Krill, all replicas", [sum(r.replica_cpu.values()) for r in results])
    row("PostgreSQL (all processes)", [r.postgres_cpu for r in results])
    row("Krill + PostgreSQL", [r.served_cpu for r in results])
    row("fakes + load generator", [r.bench_cpu for r in results])
    if any(r.restart_cpu is not None for r in results):
        row("a restart's start-up (not above)", [r.restart_cpu for r in results])
    row("idle, over the run (in the above)", [r.idle_cpu for r in results])
    row("Krill + PostgreSQL, less idle", [r.served_cpu - r.idle_cpu for r in results])
    print(
        "\nidle CPU (ms per second): "
        + ", ".join(
            f"{r.replicas} replica(s): {r.idle_replica * 1000:.1f} per replica,"
            f" PostgreSQL {r.idle_postgres * 1000:.1f}"
            for r in results
        )
    )
    if len(results) == 2 and results[0].served_cpu and results[0].answered:
        one, three = (r.per_answer_ms(r.served_cpu) for r in results)
        print(f"Krill + PostgreSQL CPU per answer, 3 replicas / 1 replica: {three / one:.2f}x")
        one, three = (r.per_answer_ms(r.served_cpu - r.idle_cpu) for r in results)
        print(f"the same less the idle CPU, 3 replicas / 1 replica: {three / one:.2f}x")
    # A turn that finds several of a chat's messages waiting answers them in one reply: the
    # slower a run, the more messages share a turn, and the cheaper each answer looks.
    if all(r.sends for r in results):
        per_reply = [r.served_cpu * 1000 / r.sends for r in results]
        pairs = zip(results, per_reply, strict=True)
        cells = ", ".join(f"{r.replicas}: {ms:.1f} ms" for r, ms in pairs)
        print(f"Krill + PostgreSQL CPU per reply sent (one turn): {cells}", end="")
        print(f" ({per_reply[-1] / per_reply[0]:.2f}x)" if len(results) == 2 else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--connections", type=int, default=40)
    parser.add_argument("--lease-seconds", type=float, default=5.0)
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    args = parser.parse_args()
    # A replica killed while the fake Bot API answers it makes aiohttp log the lost
    # connection with a traceback; that is the point of the run, not an error.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    with database_server(args.store) as cluster:
        results = [asyncio.run(run(count, args, cluster)) for count in (1, 3)]
    report(results)
    missed = [r for r in results if r.lost or r.duplicated or r.out_of_order]
    for r in missed:
        print(
            f"{r.replicas} replica(s) missed a target: {r.lost} lost, {r.duplicated} answered"
            f" twice, {r.out_of_order} chat(s) out of order"
        )
    if missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
