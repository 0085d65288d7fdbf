"""The steps of ``host bootstrap``, in order, each reporting what it found or changed.

Everything read comes first (ssh, Python, the checkout's state), so a host
that cannot be bootstrapped is refused before anything is changed there.
Then: the venv and the wheel (skipped when the venv already runs this very
wheel), the checkout (skipped when at the revision), lingering when user
units need it. ``inferfleet doctor`` on the host closes the run (the CLI).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from inferfleet.bootstrap import checkout as co
from inferfleet.bootstrap import host as hostside
from inferfleet.bootstrap import wheels
from inferfleet.bootstrap.errors import BootstrapError
from inferfleet.deploy.gitrepo import Repo
from inferfleet.deploy.ssh import SshConnector, Target, quote_path
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import Fleet, Host
from inferfleet.io.become import Become, BecomeError

Status = Literal["ok", "changed", "unchanged"]
DepsChoice = Literal["auto", "index", "wheelhouse"]
Progress = Callable[[str], None]
_TMP_RE = re.compile(r"^/[A-Za-z0-9._/-]{1,200}$")


@dataclass(frozen=True)
class Step:
    step: str  # ssh | python | wheel | venv | checkout | runtime | linger
    status: Status
    detail: str


@dataclass
class Bootstrap:
    name: str
    host: Host
    fleet_path: Path
    python: str = "python3"
    deps: DepsChoice = "auto"
    wheel: Path | None = None
    progress: Progress = lambda _text: None  # noqa: E731 - a no-op default
    steps: list[Step] = field(default_factory=list)
    conn: SshConnector | None = None
    found: hostside.HostPython | None = None
    revision: str = ""
    version: str = ""

    def __post_init__(self) -> None:
        if self.host.is_local(self.name):
            raise UsageError(
                f"host {self.name} is this machine: bootstrap prepares hosts over ssh",
                hint="here, install inferfleet with pip into a venv of your choice",
            )
        hostside.check_python_name(self.python)

    def _done(self, step: str, status: Status, detail: str) -> None:
        self.steps.append(Step(step, status, detail))
        self.progress(f"{self.name} {step}: {detail}")

    @property
    def changed(self) -> bool:
        return any(s.status == "changed" for s in self.steps)

    def run(self) -> None:
        """ssh, Python, checkout check, venv + wheel, checkout (linger and doctor: after)."""
        self.progress(f"{self.name}: connecting over ssh")
        self.conn = conn = SshConnector(Target.of(self.name, self.host))
        conn.connect()
        self._done("ssh", "ok", f"reached {conn.target.describe()}")
        self.found = found = hostside.read_python(conn, self.python)
        self._done("python", "ok", f"{found.path} is Python {found.text} ({found.target.tag})")
        repo = Repo.containing(self.fleet_path)
        ours = co.Ours.of(repo)
        self.revision = ours.revision
        if repo.dirty():
            self.progress(
                f"{self.name}: note: uncommitted changes here are not shipped; the host gets "
                f"HEAD {ours.revision[:12]}"
            )
        state = co.read_state(conn, self.host.checkout)
        co.refuse_unsafe(state, self.host.checkout, self.name)
        self._install(conn, found)
        how = co.sync(conn, self.host.checkout, state, ours)
        where = f"{self.host.checkout} at {ours.revision[:12]} ({ours.branch})"
        if how == "unchanged":
            self._done("checkout", "unchanged", f"{where}: already there")
        else:
            self._done("checkout", "changed", f"{where}: {how}")

    def _install(self, conn: SshConnector, found: hostside.HostPython) -> None:
        wheel = wheels.inferfleet_wheel(self.wheel, self.progress)
        self.version = wheel.version
        self._done("wheel", "ok", f"inferfleet {wheel.version} ({wheel.origin})")
        venv = self.host.venv
        installed = hostside.read_venv(conn, venv)
        if hostside.up_to_date(installed, wheel):
            self._done("venv", "unchanged", f"{venv} runs inferfleet {wheel.version} already")
            return
        if not installed.venv:
            self.progress(f"{self.name}: making the venv {venv}")
            hostside.make_venv(conn, found, venv)
        deps = self.deps
        if deps == "auto":
            first = (wheels.requirements(wheel.path) or ["pip"])[0]
            deps = "index" if hostside.index_reachable(conn, venv, first) else "wheelhouse"
            self.progress(f"{self.name}: dependencies from the {deps} (auto)")
        house = (
            wheels.wheelhouse(wheel, found.target, self.progress) if deps == "wheelhouse" else None
        )
        tmp = conn.run(
            'mktemp -d "${TMPDIR:-/tmp}/inferfleet-bootstrap.XXXXXX"', timeout=60
        ).stdout.strip()
        if not _TMP_RE.match(tmp):
            raise BootstrapError(
                f"mktemp on the host answered {tmp[:80]!r}, not a folder",
                where=f"host {self.name}",
                hint="check TMPDIR on the host",
            )
        try:
            remote_wheel = f"{tmp}/{wheel.path.name}"
            self.progress(f"{self.name}: copying {wheel.path.name}")
            conn.put(wheel.path, shlex.quote(remote_wheel))
            remote_house = None
            if house is not None:
                files = sorted(p for p in house.glob("*.whl"))
                self.progress(f"{self.name}: copying the wheelhouse ({len(files)} wheels)")
                remote_house = f"{tmp}/wheelhouse"
                conn.run(f"mkdir {shlex.quote(remote_house)}", timeout=60)
                for path in files:
                    conn.put(path, shlex.quote(f"{remote_house}/{path.name}"))
            self.progress(f"{self.name}: pip install inferfleet {wheel.version} into {venv}")
            hostside.pip_install(
                conn,
                venv,
                remote_wheel,
                wheelhouse=remote_house,
                reinstall=installed.version == wheel.version,
            )
        finally:
            conn.run(f"rm -rf {shlex.quote(tmp)}", timeout=120, check=False)
        record = hostside.Record(version=wheel.version, wheel_sha256=wheel.sha256, deps=deps)
        hostside.write_record(conn, venv, record)
        after = hostside.read_venv(conn, venv)
        if after.version != wheel.version:
            raise BootstrapError(
                f"{venv}/bin/inferfleet answers {after.version or 'nothing'} after the install, "
                f"not inferfleet {wheel.version}",
                where=f"host {self.name}",
                hint=f"run `{venv}/bin/inferfleet --version` on the host to see why",
            )
        self._done("venv", "changed", f"{venv}: inferfleet {wheel.version} installed ({deps})")

    def build_runtimes(self, fleet: Fleet) -> None:
        """Each source runtime the host's services (or RPC workers) run, built or installed on
        the host by its own inferfleet in the checkout, so the first deploy starts at once."""
        assert self.conn is not None
        wanted = {
            name: runtime.kind
            for name, runtime in fleet.runtimes.items()
            if runtime.source is not None
            and runtime.kind in ("llama.cpp", "vllm")
            and self.name in fleet.runtime_hosts(name)
        }
        repo = Repo.containing(self.fleet_path)
        relative = self.fleet_path.resolve().relative_to(repo.root.resolve()).as_posix()
        program = quote_path(self.host.venv.rstrip("/") + "/bin/inferfleet")
        for name, kind in sorted(wanted.items()):
            source = fleet.runtimes[name].source
            assert source is not None
            self.progress(f"{self.name}: runtime {name}: {source.pin} (a build takes minutes)")
            argv = ["runtime", "install", kind, "--runtime", name, "--file", relative, "--json"]
            done = self.conn.run(
                f"cd {quote_path(self.host.checkout)} && {program} {shlex.join(argv)}",
                timeout=7200,
                check=False,
            )
            try:
                doc = json.loads(done.stdout[:1_000_000]) if done.returncode == 0 else {}
            except ValueError:
                doc = None  # not the document `runtime install --json` prints
            if done.returncode != 0 or not isinstance(doc, dict):
                raise BootstrapError(
                    f"runtime {name} ({source.pin}) could not be installed on the host "
                    f"(status {done.returncode})",
                    where=f"host {self.name}",
                    hint="read the reason above; run `inferfleet runtime install "
                    f"{kind} --runtime {name}` in the host's checkout to retry",
                    log_tail="\n".join((done.stderr or done.stdout).strip().splitlines()[-8:]),
                )
            now = bool(doc.get("built") or doc.get("installed_now"))
            what = "built" if kind == "llama.cpp" else "installed"
            detail = (
                f"{name}: {source.pin} {what}" if now else f"{name}: {source.pin} already there"
            )
            self._done("runtime", "changed" if now else "unchanged", detail)

    def enable_linger(self, user: str) -> None:
        """``loginctl enable-linger USER`` on the host, through sudo when the host says so."""
        assert self.conn is not None and self.found is not None
        become = Become(self.name, self.host.become, uid=self.found.uid, user=self.found.user)
        argv = become.argv(["loginctl", "enable-linger", user])
        done = self.conn.run(shlex.join(argv), timeout=60, check=False)
        try:
            become.check(done, argv)
        except BecomeError as exc:
            raise BootstrapError(
                exc.message,
                where=exc.where,
                hint=f"run `sudo loginctl enable-linger {user}` on the host once, or allow "
                f"it: `{self.found.user} ALL=(root) NOPASSWD: /usr/bin/loginctl enable-linger "
                f"{user}` in /etc/sudoers.d/ (visudo -f)",
            ) from None
        if done.returncode != 0:
            raise BootstrapError(
                f"loginctl enable-linger {user} failed on the host (status {done.returncode})",
                where=f"host {self.name}",
                hint=f"run `loginctl enable-linger {user}` there by hand (it needs "
                "systemd-logind); user units do not start at boot without it (L-38)",
                log_tail="\n".join((done.stderr or done.stdout).strip().splitlines()[-5:]),
            )
        self._done("linger", "changed", f"lingering enabled for {user} (L-38)")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
