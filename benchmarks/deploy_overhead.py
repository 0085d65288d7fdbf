"""What do `inferfleet deploy` and `plan` cost when there is nothing (or a lot) to do?

1. A no-op deploy to two real test hosts (network namespaces with their own
   sshd, as in tests/deploy), every service already at HEAD: the full CLI as
   a fresh process (dirty check, push, per host in parallel over a
   multiplexed ssh: lock, pull --ff-only, plan from markers, nothing to do).
   Reference, in the same run: what a hand-written deploy script does for the
   same result, `git push` then `ssh HOST 'cd CHECKOUT && git pull --ff-only'`
   on both hosts in parallel over the same kind of multiplexed connection.
   Target: under 0.3 s.
2. `plan` over a generated repository with 5,000 commits and 200 services on
   10 hosts, markers recorded at many older revisions: the fleet at HEAD
   (git show, ls-tree, validation, inputs) and the plan of every host.
   Reference: `git rev-list --count HEAD` (merely walking the history a
   commit-by-commit planner would have to walk). Target: under 1 s.

Needs root (network namespaces) and openssh-server. Runs alternate arms so
drift hits both alike; prints medians, spread and ratios, and records them with
results.py.

    .venv/bin/python benchmarks/deploy_overhead.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from results import Row, record

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "deploy"
sys.path[:0] = [str(TESTS), str(ROOT / "tests")]

from deploy_hosts import Lab, claim_tag  # noqa: E402
from deploy_repo import FleetRepo, git  # noqa: E402

from inferfleet.deploy import planner  # noqa: E402
from inferfleet.deploy.gitrepo import Repo  # noqa: E402
from inferfleet.deploy.markers import Marker  # noqa: E402

ENTRY = [sys.executable, str(TESTS / "inferfleet_entry.py")]


def summary(name: str, values: list[float]) -> str:
    return (
        f"{name:<46} median {statistics.median(values):6.3f} s  "
        f"min {min(values):6.3f}  max {max(values):6.3f}  (n={len(values)})"
    )


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


# ---------------------------------------------------------------- 1. no-op deploy


def noop_deploy(runs: int, work: Path, figures: dict[str, float]) -> None:
    lab = Lab(work / "lab", claim_tag())
    control = Path(tempfile.mkdtemp(prefix="ifbench", dir="/tmp"))
    try:
        lab.start(["h1", "h2"])
        # The hosts' applies report their own CPU seconds (user + sys) to a file.
        remote_cpu = work / "remote-cpu.txt"
        env = {
            **os.environ,
            "INFERFLEET_SSH_CONFIG": str(lab.ssh_config),
            "INFERFLEET_SSH_CONTROL_DIR": str(control),
            "INFERFLEET_REMOTE_COMMAND": f"/usr/bin/time -a -o {remote_cpu} -f '%U %S' "
            + " ".join(ENTRY),
        }
        repo = _lab_fleet(lab, work)
        run = ENTRY + ["deploy", "h1", "h2", "-y", "--file", str(repo.fleet_file)]
        first = subprocess.run(run, env=env, capture_output=True, text=True, timeout=300)
        if first.returncode != 0:
            raise SystemExit(f"the first deploy failed:\n{first.stderr}")
        ssh = ["ssh", "-F", str(lab.ssh_config), "-o", f"ControlPath={control}/%C"]

        def by_hand() -> None:
            git(repo.operator, "push", "-q")

            def pull(host: str) -> None:
                checkout = repo.checkouts[host]
                subprocess.run(
                    [*ssh, "-o", "ControlMaster=no", lab.hosts[host].address,
                     f"cd {checkout} && git pull -q --ff-only"],
                    check=True, capture_output=True, timeout=60,
                )  # fmt: skip

            with ThreadPoolExecutor(2) as pool:
                list(pool.map(pull, ["h1", "h2"]))

        local_cpu: list[float] = []
        remote_max: list[float] = []

        def inferfleet() -> None:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            remote_cpu.unlink(missing_ok=True)
            done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=300)
            if done.returncode != 0 or "deployed" in done.stdout:
                raise SystemExit(f"not a no-op deploy:\n{done.stdout}\n{done.stderr}")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            local_cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            lines = remote_cpu.read_text().split("\n")
            remote_max.append(max(sum(map(float, ln.split())) for ln in lines if ln.strip()))

        plan = ENTRY + ["plan", "--file", str(repo.fleet_file)]
        hand, ours, plans = [], [], []
        for _ in range(runs):
            hand.append(timed(by_hand))
            ours.append(timed(inferfleet))
            plans.append(
                timed(lambda: subprocess.run(plan, env=env, capture_output=True, timeout=120))
            )
        print("1. no-op deploy to 2 test hosts (ssh multiplexed, masters warm)")
        print("   " + summary("by hand: git push + ssh git pull x2", hand))
        print("   " + summary("inferfleet deploy h1 h2 -y (fresh process)", ours))
        print("   " + summary("inferfleet plan (fresh process, 2 hosts)", plans))
        ratio = statistics.median(ours) / statistics.median(hand)
        verdict = "meets" if statistics.median(ours) < 0.3 else "MISSES"
        print(f"   inferfleet / by hand: {ratio:.1f}x; {verdict} the 0.3 s target")
        floor = statistics.median(local_cpu) + statistics.median(remote_max)
        print(
            f"   cpu: deploying process {statistics.median(local_cpu):.2f} s (with its ssh "
            f"and git), slowest host's apply {statistics.median(remote_max):.2f} s; on idle "
            f"cores the wall time approaches their sum, {floor:.2f} s"
        )
        print(f"   load average during the runs: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
        figures["noop_deploy_s"] = statistics.median(ours)
        figures["by_hand_s"] = statistics.median(hand)
        figures["plan_2_hosts_s"] = statistics.median(plans)
        figures["noop_deploy_vs_by_hand"] = ratio
        figures["deploying_cpu_s"] = statistics.median(local_cpu)
        figures["slowest_apply_cpu_s"] = statistics.median(remote_max)
    finally:
        for host in lab.hosts.values():
            subprocess.run(
                ["ssh", "-F", str(lab.ssh_config), "-o", f"ControlPath={control}/%C",
                 "-O", "exit", host.address],
                capture_output=True, timeout=10, check=False,
            )  # fmt: skip
        lab.close()
        for leftover in control.iterdir():
            leftover.unlink()
        control.rmdir()


def _lab_fleet(lab: Lab, work: Path) -> FleetRepo:
    model = work / "model"
    model.mkdir()
    (model / "tiny.gguf").write_bytes(b"GGUF" + bytes(4096))
    fake = work / "llama-server"
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} {TESTS / "fake_llama_server.py"} "$@"\n')
    fake.chmod(0o755)
    folder = work / "fleet"
    data = {
        "version": 1,
        "hosts": {
            name: {"address": host.address, "checkout": str(folder / "hosts" / name / "fleet"),
                   "state_dir": str(folder / "hosts" / name / "state")}
            for name, host in lab.hosts.items()
        },
        "runtimes": {"fake": {"kind": "llama.cpp", "binary": str(fake)}},
        "models": {"tiny": {"source": {"path": str(model)},
                            "files": [{"path": "tiny.gguf", "size": 4100}]}},
        "services": {
            f"svc-{name}": {"host": name, "runtime": "fake", "model": "tiny",
                            "bind": host.address, "port": 8080, "ctx_per_slot": 512}
            for name, host in lab.hosts.items()
        },
    }  # fmt: skip
    return FleetRepo.create(folder, data, list(lab.hosts))


# ---------------------------------------------------------------- 2. plan over history

HOSTS = 10
SERVICES = 200
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # 500 dumps of a 200-service fleet
COMMITS = 5000


def generated_repo(folder: Path) -> tuple[Repo, list[str]]:
    """5,000 commits by git fast-import: docs, manifests and every 10th a fleet change."""
    rng = random.Random(7)
    fleet: dict[str, object] = {
        "version": 1,
        "hosts": {f"h{i}": {"address": f"192.0.2.{i + 1}"} for i in range(HOSTS)},
        "runtimes": {"llama": {"kind": "llama.cpp", "binary": "/opt/llama-server"}},
        "models": {
            f"m{i}": {"source": {"path": f"/models/m{i}"}, "manifest": f"models/m{i}.manifest"}
            for i in range(50)
        },
        "services": {
            f"s{i}": {"host": f"h{i % HOSTS}", "runtime": "llama", "model": f"m{i % 50}",
                      "port": 8000 + i, "ctx_per_slot": 4096,
                      "paths": [f"services/s{i}/"]}
            for i in range(SERVICES)
        },
    }  # fmt: skip
    services = fleet["services"]
    assert isinstance(services, dict)
    stream: list[bytes] = []

    def blob(path: str, text: str) -> None:
        data = text.encode()
        stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    for n in range(COMMITS):
        message = f"change {n}".encode()
        stream.append(
            f"commit refs/heads/main\nmark :{n + 1}\n"
            f"committer Bench <bench@example.invalid> {1_700_000_000 + n} +0000\n"
            f"data {len(message)}\n".encode()
            + message
            + b"\n"
        )
        if n == 0:
            for i in range(50):
                blob(f"models/m{i}.manifest", f"{1000 + i} sha256:{'0' * 64} m{i}.gguf\n")
        kind = n % 10
        if n == 0 or kind == 0:
            services[f"s{rng.randrange(SERVICES)}"]["parallel"] = rng.randrange(1, 4)
            blob("fleet.yaml", yaml.dump(fleet, Dumper=DUMPER, sort_keys=False))
        elif kind < 6:
            blob(f"docs/page{rng.randrange(100)}.md", f"notes {n}\n")
        elif kind < 8:
            i = rng.randrange(50)
            blob(f"models/m{i}.manifest", f"{1000 + n} sha256:{'0' * 64} m{i}.gguf\n")
        else:
            blob(f"services/s{rng.randrange(SERVICES)}/prompt.txt", f"prompt {n}\n")
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
    subprocess.run(
        ["git", "fast-import", "--quiet"], cwd=folder, input=b"".join(stream), check=True
    )
    subprocess.run(["git", "checkout", "-q", "main"], cwd=folder, check=True)
    revs = subprocess.run(
        ["git", "rev-list", "--reverse", "main"], cwd=folder, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    return Repo(folder), revs


def plan_over_history(runs: int, work: Path, figures: dict[str, float]) -> None:
    started = time.perf_counter()
    repo, revs = generated_repo(work / "history")
    built = time.perf_counter() - started
    # Markers recorded at 20 older revisions spread over the history, as hosts
    # that were deployed at different times would have them.
    recorded = sorted(set(revs[len(revs) * k // 21] for k in range(1, 21)))
    at_rev = {rev: planner.fleet_at(repo, rev, "fleet.yaml") for rev in recorded}
    rng = random.Random(11)
    markers: dict[str, dict[str, Marker]] = {f"h{i}": {} for i in range(HOSTS)}
    for i in range(SERVICES):
        rev = rng.choice(recorded)
        name = f"s{i}"
        host = f"h{i % HOSTS}"
        markers[host][name] = Marker(
            service=name, host=host, revision=rev, inputs=at_rev[rev].inputs[name],
            backend="systemd", bind="0.0.0.0", port=8000 + i, health_path="/health",
            applied_at=0.0, by="bench",
        )  # fmt: skip

    def plan_all() -> int:
        head = planner.fleet_at(repo, repo.head(), "fleet.yaml")
        return sum(len(planner.plan_host(h, head, markers[h]).changes()) for h in sorted(markers))

    def walk() -> None:
        subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=repo.root, check=True,
                       capture_output=True)  # fmt: skip

    changed = plan_all()
    ours, ref = [], []
    for _ in range(runs):
        ref.append(timed(walk))
        ours.append(timed(plan_all))
    print(
        f"2. plan: {COMMITS:,} commits, {SERVICES} services on {HOSTS} hosts, markers at "
        f"{len(recorded)} revisions ({changed} services to deploy; repo built in {built:.1f} s)"
    )
    print("   " + summary("reference: git rev-list --count HEAD", ref))
    print("   " + summary("plan every host (fleet at HEAD + 10 plans)", ours))
    ratio = statistics.median(ours) / statistics.median(ref)
    verdict = "meets" if statistics.median(ours) < 1.0 else "MISSES"
    print(f"   plan / history walk: {ratio:.1f}x; {verdict} the 1 s target")
    figures["plan_history_s"] = statistics.median(ours)
    figures["history_walk_s"] = statistics.median(ref)
    figures["plan_vs_history_walk"] = ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--skip-hosts", action="store_true", help="Only the plan benchmark.")
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="inferfleet-deploy-bench-") as tmp:
        work = Path(tmp)
        if not args.skip_hosts:
            if os.geteuid() != 0:
                raise SystemExit("the test hosts need root (network namespaces)")
            noop_deploy(args.runs, work, figures)
        plan_over_history(args.runs, work, figures)
    record(
        "deploy_overhead",
        figures,
        rows=[
            *(
                [
                    Row(
                        "noop_deploy_s",
                        "no-op deploy, 2 hosts",
                        "s",
                        True,
                        "by_hand_s",
                        "git push + ssh pull by hand",
                        0.3,
                    ),
                    Row("plan_2_hosts_s", "plan, 2 hosts", "s", True),
                    Row("deploying_cpu_s", "CPU of the deploying side", "s", True),
                    Row("slowest_apply_cpu_s", "CPU of the slowest host's apply", "s", True),
                ]
                if "noop_deploy_s" in figures
                else []
            ),
            Row(
                "plan_history_s",
                "plan, 5,000 commits, 200 services, 10 hosts",
                "s",
                True,
                "history_walk_s",
                "git rev-list --count HEAD",
                1.0,
            ),
        ],  # fmt: skip
        notes={"runs": args.runs, "target": "no-op deploy to 2 hosts < 0.3 s; plan < 1 s"},
    )


if __name__ == "__main__":
    main()
