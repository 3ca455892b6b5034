"""No Docker engine runs on our machines, so the production stack is checked with the real
tools that can check it: the compose file's structure, `promtool` (Debian's ``prometheus``
package) on the Prometheus config and alert rules, the Grafana dashboards against the metrics
the code defines, and nginx (Debian's ``nginx``) testing and running the proxy's config.
``scripts/ensure-services.sh`` installs promtool and nginx."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from common.embedded_redis import free_port, port_open
from common.settings import env_variables
from tests.conftest import TEST_REDIS_URL
from tests.gameserver.metric_names import sample_names
from tests.sockets import backlog_cap, listen_backlogs
from webfront.main import LISTEN_BACKLOG

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# variables the third-party images read themselves
IMAGE_ENV = {
    "postgres": lambda name: name in {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"},
    "grafana": lambda name: name.startswith("GF_"),
}
# Metric names the dashboards and alerts use before the code that exports them is merged:
# the clock-skew check (issue 15, part 5) exports this gauge.
PENDING_METRICS = {"webgame_clock_offset_seconds"}
PROMETHEUS_NAMES = {"up"}  # made by Prometheus itself, not by our code
OUR_METRIC = re.compile(r"\b(?:gameserver|tick|webfront|webgame)_[a-z0-9_]+\b")


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _entry_points() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["scripts"])


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    assert path, f"{name} is missing: run scripts/ensure-services.sh"
    return path


def _run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60)


def _run_env(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


# --- the compose file -----------------------------------------------------------------


def test_stack_has_every_tier() -> None:
    services = _compose()["services"]
    expected = {"redis", "postgres", "migrate", "gameserver", "webfront", "proxy"}
    assert expected | {"prometheus", "grafana"} <= set(services)
    assert services["gameserver"]["deploy"]["replicas"] >= 2
    assert services["webfront"]["deploy"]["replicas"] >= 2
    assert services["migrate"]["command"] == ["wgctl", "migrate"]


def test_app_commands_are_entry_points_of_the_project() -> None:
    scripts = _entry_points()
    for name, service in _compose()["services"].items():
        if "build" not in service:
            continue  # third-party image
        command = service.get("command")
        assert command, f"{name} has no command"
        assert command[0] in scripts, f"{name} runs {command[0]!r}, not a project entry point"


def test_only_the_proxy_publishes_a_port() -> None:
    published = {
        name: service["ports"]
        for name, service in _compose()["services"].items()
        if "ports" in service
    }
    assert list(published) == ["proxy"]
    (port,) = published["proxy"]
    assert port.endswith(":80")  # nginx.conf listens on 80


def test_every_service_has_a_healthcheck_and_waits_for_what_it_needs() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        if service.get("restart") == "no":
            # a one-shot job: nothing to probe while it runs; who needs it waits for its exit
            assert "healthcheck" not in service
            continue
        check = service.get("healthcheck")
        assert check and check.get("test"), f"{name} has no healthcheck"
        assert not check.get("disable"), name
        for dependency, how in service.get("depends_on", {}).items():
            wanted = (
                "service_completed_successfully"
                if services[dependency].get("restart") == "no"
                else "service_healthy"
            )
            assert how == {"condition": wanted}, (name, dependency)
    gameserver = " ".join(services["gameserver"]["healthcheck"]["test"])
    assert "gameserver --check" in gameserver
    web = " ".join(services["webfront"]["healthcheck"]["test"])
    port = services["webfront"]["environment"]["WEB_PORT"]
    assert f"127.0.0.1:{port}/healthz" in web


def _app_env(**changes: str) -> dict[str, str]:
    """A container's environment here: the project's scripts on PATH, this test's world."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "GAMESERVER_METRICS_PORT": "0", **changes}


def test_task_server_healthcheck_runs_as_written(sqlite_url: str, redis_prefix: str) -> None:
    check = _compose()["services"]["gameserver"]["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL"
    world = {"DATABASE_URL": sqlite_url, "REDIS_URL": TEST_REDIS_URL, "REDIS_PREFIX": redis_prefix}
    healthy = subprocess.run(["sh", "-c", check[1]], env=_app_env(**world), timeout=60)
    assert healthy.returncode == 0
    unreachable = {**world, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    sick = subprocess.run(
        ["sh", "-c", check[1]], env=_app_env(**unreachable), capture_output=True, timeout=60
    )
    assert sick.returncode == 1  # Docker's "unhealthy" (2 is reserved)
    assert b"REDIS_URL: cannot reach" in sick.stderr


def test_gameserver_check_says_one_line(sqlite_url: str, redis_prefix: str) -> None:
    world = {"DATABASE_URL": sqlite_url, "REDIS_URL": TEST_REDIS_URL, "REDIS_PREFIX": redis_prefix}
    result = _run_env(["gameserver", "--check"], _app_env(**world))
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    assert line.startswith("ok: redis: ok") and "database: ok" in line


def test_web_healthcheck_runs_as_written(sqlite_url: str, redis_prefix: str) -> None:
    services = _compose()["services"]
    check = services["webfront"]["healthcheck"]["test"]
    assert check[0] == "CMD"
    compose_port = services["webfront"]["environment"]["WEB_PORT"]
    port = free_port()  # 8080 may be taken on this machine: the same command on another port
    command = [part.replace(f":{compose_port}/", f":{port}/") for part in check[1:]]
    world = {"DATABASE_URL": sqlite_url, "REDIS_URL": TEST_REDIS_URL, "REDIS_PREFIX": redis_prefix}
    web = subprocess.Popen(
        ["webfront", "--port", str(port)],
        env=_app_env(**world),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_open("127.0.0.1", port):
            assert web.poll() is None, "webfront exited"
            assert time.monotonic() < deadline, "webfront did not open its port"
            time.sleep(0.05)
        command[0] = sys.executable  # the image's python
        assert subprocess.run(command, capture_output=True, timeout=30).returncode == 0
    finally:
        web.terminate()
        web.wait(15)
    assert subprocess.run(command, capture_output=True, timeout=30).returncode != 0


def test_task_server_metrics_listen_where_a_scraper_reaches_them() -> None:
    gameserver = _compose()["services"]["gameserver"]
    assert gameserver["environment"]["GAMESERVER_METRICS_HOST"] == "0.0.0.0"
    assert "ports" not in gameserver  # the internal network only: no authentication


def test_app_environment_is_read_by_settings() -> None:
    known = env_variables()
    for name, service in _compose()["services"].items():
        for variable in service.get("environment", {}):
            if "build" in service:
                assert variable in known, f"{name} sets {variable}, which no setting reads"
            else:
                allowed = IMAGE_ENV.get(name, lambda _: False)
                assert allowed(variable), f"{name}: unexpected {variable}"


def test_the_proxy_has_a_fixed_address_the_web_tier_can_trust() -> None:
    """Rate limits key on the client's address: the web tier must believe X-Forwarded-For
    from the proxy, and from nobody else (a fixed address outside the dynamic range)."""
    compose = _compose()
    (ipam,) = compose["networks"]["default"]["ipam"]["config"]
    address = ipaddress.ip_address(
        compose["services"]["proxy"]["networks"]["default"]["ipv4_address"]
    )
    assert address in ipaddress.ip_network(ipam["subnet"])
    assert address not in ipaddress.ip_network(ipam["ip_range"])
    if "TRUSTED_PROXIES" in env_variables():  # the trusted-proxy setting (issue 14)
        web = compose["services"]["webfront"]["environment"]
        assert web.get("TRUSTED_PROXIES") == str(address)


def test_web_metrics_token_comes_from_the_environment() -> None:
    compose = _compose()
    web = compose["services"]["webfront"]["environment"]["WEB_METRICS_TOKEN"]
    assert web.startswith("${WEB_METRICS_TOKEN:?")  # required, never a default in the file
    assert compose["secrets"]["web_metrics_token"] == {"environment": "WEB_METRICS_TOKEN"}
    assert "web_metrics_token" in compose["services"]["prometheus"]["secrets"]
    prometheus = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    (web_job,) = [job for job in prometheus["scrape_configs"] if job["job_name"] == "webfront"]
    assert web_job["authorization"]["credentials_file"] == "/run/secrets/web_metrics_token"


def test_mounted_files_are_in_the_repository() -> None:
    for name, service in _compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which is missing"


def test_dockerfile_copies_every_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        assert f"COPY {package} {package}" in dockerfile, f"Dockerfile misses {package}/"


# --- Prometheus -----------------------------------------------------------------------


def test_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    """``promtool check config`` also checks the rule files and the token file exist: the
    token file is the compose secret, so point it at a stand-in."""
    shutil.copy(DEPLOY / "prometheus/alerts.yml", tmp_path / "alerts.yml")
    token = tmp_path / "token"
    token.write_text("stand-in\n")
    config = (DEPLOY / "prometheus/prometheus.yml").read_text()
    assert "/run/secrets/web_metrics_token" in config
    (tmp_path / "prometheus.yml").write_text(
        config.replace("/run/secrets/web_metrics_token", str(token))
    )
    result = _run([_tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml")])
    assert result.returncode == 0, result.stdout + result.stderr
    # the alert rules were read with it
    assert f"SUCCESS: {len(_alert_rules())} rules found" in result.stdout


def test_prometheus_scrapes_both_tiers_on_their_ports() -> None:
    services = _compose()["services"]
    prometheus = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    ports = {
        "gameserver": int(services["gameserver"]["environment"]["GAMESERVER_METRICS_PORT"]),
        "webfront": int(services["webfront"]["environment"]["WEB_PORT"]),
    }
    for service, port in ports.items():
        (sd,) = jobs[service]["dns_sd_configs"]
        assert sd["names"] == [service] and sd["port"] == port and sd["type"] == "A"
    volume = next(v for v in services["prometheus"]["volumes"] if v.startswith("./deploy"))
    assert volume.split(":")[1] == "/etc/prometheus"  # alerts.yml sits beside the config


def test_alert_rules_pass_promtool_and_their_unit_tests() -> None:
    promtool = _tool("promtool")
    checked = _run([promtool, "check", "rules", "alerts.yml"], cwd=DEPLOY / "prometheus")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _run([promtool, "test", "rules", "alerts_test.yml"], cwd=DEPLOY / "prometheus")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def _alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_alerts_cover_what_an_operator_must_know_and_each_is_unit_tested() -> None:
    rules = {rule["alert"]: rule for rule in _alert_rules()}
    assert {"QueueLagHigh", "DeadLetters", "TickOverruns", "RedisDataLost", "ClockSkew"} <= set(
        rules
    )
    tests = yaml.safe_load((DEPLOY / "prometheus/alerts_test.yml").read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert fired == set(rules)  # every alert is shown to fire on its own series
    for name, rule in rules.items():
        _assert_defined_metrics(rule["expr"], f"alert {name}")


# --- Grafana --------------------------------------------------------------------------


def _assert_defined_metrics(expr: str, where: str) -> None:
    names = set(OUR_METRIC.findall(expr))
    bare = {word for word in re.findall(r"[a-z_]+", expr) if word in PROMETHEUS_NAMES}
    assert names or bare, f"{where}: {expr!r} reads none of our metrics"
    unknown = names - sample_names() - PENDING_METRICS
    assert not unknown, f"{where}: {sorted(unknown)} are not metrics the code defines"


def _panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        yield item
        yield from _panels(item.get("panels", []))  # panels inside collapsed rows


def _dashboards() -> dict[Path, dict[str, Any]]:
    paths = sorted((DEPLOY / "grafana/dashboards").glob("*.json"))
    assert paths
    return {path: json.loads(path.read_text()) for path in paths}


def test_dashboards_read_only_metrics_the_code_defines(tmp_path: Path) -> None:
    """Each panel's expressions name metrics the code exports, and parse as PromQL (checked
    by promtool as recording rules, Grafana's interval variables replaced)."""
    rules: list[dict[str, str]] = []
    for path, dashboard in _dashboards().items():
        assert dashboard["uid"] and dashboard["title"]
        panels = [p for p in _panels(dashboard["panels"]) if p.get("type") != "row"]
        assert panels, path
        for panel in panels:
            assert panel["targets"], f"{path.name}: panel {panel['title']!r} has no query"
            for target in panel["targets"]:
                expr = target["expr"]
                _assert_defined_metrics(expr, f"{path.name}: {panel['title']!r}")
                promql = re.sub(r"\$__(rate_interval|interval|range)", "5m", expr)
                rules.append({"record": f"dashboard:check:{len(rules)}", "expr": promql})
    file = tmp_path / "dashboard_exprs.yml"
    file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = _run([_tool("promtool"), "check", "rules", str(file)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboards_show_what_an_operator_watches() -> None:
    exprs = " ".join(
        target["expr"]
        for dashboard in _dashboards().values()
        for panel in _panels(dashboard["panels"])
        for target in panel.get("targets", [])
    )
    for metric in (
        "gameserver_queue_lag_seconds",  # queue lag
        "gameserver_queue_depth",  # and depth
        "gameserver_queue_acked_total",  # events/s
        "tick_shard_seconds_bucket",  # tick duration
        "tick_overruns_total",  # and overruns
        "webfront_requests_total",  # web requests/s
        "webfront_request_duration_seconds_bucket",  # and p99 per route
        "gameserver_queue_dead_total",  # dead letters
        "webgame_clock_offset_seconds",  # clock offset
    ):
        assert metric in exprs, metric
    assert "histogram_quantile(0.99, sum by (route, le)" in exprs


def test_grafana_is_provisioned_with_the_datasource_the_dashboards_use() -> None:
    grafana = _compose()["services"]["grafana"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"] if v.startswith("./"))
    provisioning = ROOT / next(s for s, t in mounts.items() if t == "/etc/grafana/provisioning")
    (datasource,) = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    assert datasource["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards/webgame.yml").read_text())["providers"]
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    for dashboard in _dashboards().values():
        for panel in _panels(dashboard["panels"]):
            sources = [panel.get("datasource"), *(t.get("datasource") for t in panel["targets"])]
            for source in sources:
                assert source == {"type": "prometheus", "uid": datasource["uid"]}


# --- nginx ----------------------------------------------------------------------------


class _Backend(BaseHTTPRequestHandler):
    """Stands in for a web replica: answers each request with the headers it received."""

    seen: ClassVar[list[tuple[str, dict[str, str]]]] = []

    def do_GET(self) -> None:
        headers = dict(self.headers.items())
        self.seen.append((self.path, headers))
        body = json.dumps({"path": self.path, "headers": headers}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _local_proxy_config(tmp_path: Path, listen: int, backend: int) -> Path:
    """The proxy's config with what only exists in the stack pointed at this machine: the
    listening port, the web replicas, the static files' mount and writable temp paths."""
    text = (DEPLOY / "nginx/nginx.conf").read_text()
    replacements = {
        # the proxy queues as many connects as the web tier behind it
        f"listen 80 backlog={LISTEN_BACKLOG};": f"listen 127.0.0.1:{listen} "
        f"backlog={LISTEN_BACKLOG};",
        "http://webfront:8080": f"http://127.0.0.1:{backend}",
        "http://grafana:3000": f"http://127.0.0.1:{backend}",
        "alias /srv/webgame/static/;": f"alias {ROOT / 'refgame/static'}/;",
        "alias /srv/webgame/sdk/;": f"alias {ROOT / 'webfront/static/sdk'}/;",
        "http {": "http {\n"
        + "".join(
            f"    {kind}_temp_path {tmp_path / kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        ),
    }
    for old, new in replacements.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    compose_mounts = _compose()["services"]["proxy"]["volumes"]
    assert "${GAME_CLIENT_DIR:-./refgame/static}:/srv/webgame/static:ro" in compose_mounts
    assert "./webfront/static/sdk:/srv/webgame/sdk:ro" in compose_mounts
    conf = tmp_path / "nginx.conf"
    conf.write_text(text)
    return conf


def _nginx(conf: Path, *extra: str) -> list[str]:
    return [_tool("nginx"), "-e", "stderr", "-p", str(conf.parent), "-c", str(conf), *extra]


def test_proxy_config_passes_nginx_t(tmp_path: Path) -> None:
    conf = _local_proxy_config(tmp_path, free_port(), free_port())
    result = _run(_nginx(conf, "-t", "-g", f"pid {tmp_path / 'nginx.pid'};"))
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


@pytest.fixture
def backend() -> Iterator[ThreadingHTTPServer]:
    _Backend.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Backend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def test_proxy_serves_static_files_and_forwards_the_client_address(
    tmp_path: Path, backend: ThreadingHTTPServer
) -> None:
    port = free_port()
    conf = _local_proxy_config(tmp_path, port, backend.server_address[1])
    proc = subprocess.Popen(
        _nginx(conf, "-g", f"daemon off; pid {tmp_path / 'nginx.pid'};"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not port_open("127.0.0.1", port):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "nginx did not open its port"
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        assert listen_backlogs(port) == [min(LISTEN_BACKLOG, backlog_cap())]

        # static files come from the proxy itself, with the browser hardening headers
        status, headers, body = _get(f"{base}/static/app.js")
        assert status == 200 and body == (ROOT / "refgame/static/app.js").read_bytes()
        status, _, body = _get(f"{base}/sdk/webgame.js")
        assert status == 200 and body == (ROOT / "webfront/static/sdk/webgame.js").read_bytes()
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "Server" not in headers or "/" not in headers["Server"]  # no version
        assert _get(f"{base}/static/no-such-file.js")[0] == 404
        assert _Backend.seen == []

        # the rest goes to a web replica, which learns the client's address, and only the
        # proxy's view of it: a forged header is replaced, not passed on
        forged = {"X-Forwarded-For": "198.51.100.7", "Forwarded": "for=198.51.100.7"}
        status, _, body = _get(f"{base}/api/snapshot?x=1", forged)
        assert status == 200
        seen = json.loads(body)
        assert seen["path"] == "/api/snapshot?x=1"
        assert seen["headers"]["X-Forwarded-For"] == "127.0.0.1"
        assert seen["headers"]["X-Real-IP"] == "127.0.0.1"
        assert "Forwarded" not in seen["headers"]
        assert seen["headers"]["Host"] == f"127.0.0.1:{port}"

        # Grafana, under its sub-path, gets the same forwarding headers
        status, _, body = _get(f"{base}/grafana/login", forged)
        seen = json.loads(body)
        assert status == 200 and seen["path"] == "/grafana/login"
        assert seen["headers"]["X-Forwarded-For"] == "127.0.0.1"

        # the web tier's metrics are never reachable through the public port
        status, headers, body = _get(f"{base}/metrics")
        assert status == 404 and json.loads(body)["error"]["code"] == "not_found"
        assert [path for path, _ in _Backend.seen] == ["/api/snapshot?x=1", "/grafana/login"]
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()
