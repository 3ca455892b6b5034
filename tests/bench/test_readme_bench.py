"""``python -m bench publish`` / ``readme``: the README's results table from result JSONs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bench.cli import cli
from bench.readme import END, PUBLISHED_DIR, README, START, load_published, render, update_readme

MACHINE = {
    "cpu_count": 2, "cpu_model": "AMD EPYC", "machine": "x86_64", "python": "3.11.7", "packages": {}
}  # fmt: skip
QUEUE_TARGETS = {
    "dispatch_per_s": 100_000, "dispatch_ratio": 0.4, "schedule_ratio": 0.7,
    "lateness_p99_ms": 20.0, "lateness_max_ms": 100.0, "game_events_per_s": 3_000,
}  # fmt: skip
WEB_TARGETS = {"poll_304_ratio": 0.7, "full_ratio": 0.4, "p99_ms": 50.0}


def _web_result(phase: str, rps: float, p99: float, connections: int = 100) -> dict[str, Any]:
    return {"phase": phase, "connections": connections, "rps": rps,
            "latency_ms": {"p50": p99 / 3, "p90": p99 / 2, "p99": p99, "max": p99 * 2}}  # fmt: skip


# the shape each bench subcommand writes (only the keys the table reads, plus a few others)
FIXTURES: dict[str, dict[str, Any]] = {
    "queue_noop": {
        "machine": {**MACHINE, "redis": "7.0.15", "loadavg_at_start": 0.42},
        "finished_at": "2026-01-10T09:00:00+0000", "mode": "noop", "events": 200_000,
        "schedule_per_s": 150_000.0, "raw_zadd_per_s": 200_000.0, "schedule_ratio": 0.75,
        "dispatch_per_s": 90_000.0, "bare_pop_per_s": 450_000.0, "dispatch_ratio": 0.2,
        "targets": QUEUE_TARGETS,
        "steady": {"rate_per_s": 45_000.0, "seconds": 10.0,
                   "lateness_ms": {"p50": 2.0, "p90": 4.0, "p99": 8.5, "max": 120.0}},
        "targets_met": {"dispatch_per_s": False, "dispatch_ratio": False, "schedule_ratio": True,
                        "lateness_p99": True, "lateness_max": False},
    },
    "tick_postgresql": {
        "machine": MACHINE, "finished_at": "2026-01-10T09:05:00+0000", "villages": 5_000_000,
        "shards": 60, "rotations": 2,
        "shard_seconds": {"p50": 0.45, "p90": 0.9, "p99": 1.54, "max": 1.7},
        "bare_shard_seconds": {"p50": 0.37, "p90": 0.8, "p99": 1.6, "max": 1.8},
        "villages_per_s": 180_000.0, "bare_villages_per_s": 200_000.0, "ratio_to_bare": 0.9,
        "projected_max_villages_p99_under_1s": 3_246_753,
    },
    "tick_sqlite": {
        "machine": MACHINE, "finished_at": "2026-01-10T09:06:00+0000", "villages": 1_000_000,
        "shards": 60, "rotations": 1,
        "shard_seconds": {"p50": 0.015, "p90": 0.02, "p99": 0.023, "max": 0.03},
        "bare_shard_seconds": {"p50": 0.009, "p90": 0.012, "p99": 0.0085, "max": 0.02},
        "villages_per_s": 1_100_000.0, "bare_villages_per_s": 1_000_000.0, "ratio_to_bare": 1.1,
        "projected_max_villages_p99_under_1s": 43_478_260, "ratio_to_rule": 0.94,
    },
    "web_sqlite": {
        "machine": {**MACHINE, "redis": "7.0.15", "loadavg_at_start": 1.5},
        "finished_at": "2026-01-10T09:10:00+0000", "connections": 100, "workers": 1,
        "target": "bench server (sqlite)", "targets": WEB_TARGETS,
        "ratios": {"poll_304_ratio": 0.58, "full_ratio": 0.47, "commands_ratio": 0.02},
        "targets_met": {"poll_304_ratio": False, "full_ratio": True, "poll_304_p99": True,
                        "full_p99": False},
        "results": [_web_result("bare", 29_412.0, 20.0), _web_result("bare", 9_000.0, 3.0, 10),
                    _web_result("poll_304", 17_083.0, 44.0), _web_result("full", 13_689.0, 291.0),
                    _web_result("commands", 600.0, 400.0)],
    },
    "queue_game_postgresql": {
        "machine": {**MACHINE, "redis": "7.0.15", "database": "15.20 (Debian 15.20-0+deb12u1)",
                    "loadavg_at_start": 0.9},
        "finished_at": "2026-01-11T10:00:00+0000", "mode": "game", "db": "postgresql",
        "villages": 10_000, "events": 3_000, "game_events_per_s": 727.0,
        "durable_noop_per_s": 10_990.0, "ratio_to_durable_noop": 0.066,
        "targets": {"game_events_per_s": 3_000}, "targets_met": {"game_events_per_s": False},
    },
}  # fmt: skip
README_TEXT = f"# game\n\nintro\n\n## Benchmarks\n\nrun it\n\n{START}\nold table\n{END}\n\nafter\n"


def write_results(folder: Path, names: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names or list(FIXTURES):
        figures = {"benchmark": name, **FIXTURES[name]}
        (folder / f"{name}.json").write_text(json.dumps(figures, indent=2, sort_keys=True))
    return folder


def table_rows(block: str) -> dict[str, list[str]]:
    """The Markdown table's rows by their first cell (header and rule left out)."""
    rows = [line.strip("|").split(" | ") for line in block.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[2:]}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_rows_carry_figures_ceilings_ratios_targets_and_verdicts(tmp_path: Path) -> None:
    block = render(load_published(write_results(tmp_path)), tmp_path)
    rows = table_rows(block)
    assert rows["queue: `schedule_many`, 200,000 events"] == [
        "150,000 events/s",
        "multi-member ZADD 200,000/s",
        "0.75",
        "ratio ≥ 0.7",
        "met",
    ]
    assert rows["queue: dispatch (claim + no-op handler + ack)"] == [
        "90,000 events/s",
        "bare Lua batch pop 450,000/s",
        "0.20",
        "ratio ≥ 0.4, ≥ 100,000/s",
        "**missed** (ratio, rate)",
    ]
    assert rows["queue: lateness at a steady 45,000 events/s for 10 s"] == [
        "p99 8.5 ms, max 120.0 ms",
        "—",
        "—",
        "p99 ≤ 20 ms, max ≤ 100 ms",
        "**missed** (max)",
    ]
    pg = rows["tick, PostgreSQL, 5,000,000 villages / 60 shards, 2 rotations"]
    assert pg[0] == "shard p99 1.54 s; 3.25M villages per rotation at p99 < 1 s (projected)"
    assert pg[1:] == [
        "bare UPDATE shard p99 1.60 s",
        "0.90",
        "ratio ≥ 0.8, ≥ 5M villages per rotation",
        "**missed** (villages)",
    ]
    sqlite = rows["tick, SQLite, 1,000,000 villages / 60 shards, 1 rotation"]
    assert sqlite[0].startswith("shard p99 23 ms; 43.48M villages")
    assert sqlite[1:] == [
        "bare UPDATE shard p99 8.5 ms (ours = 0.94 × its own statement run as raw SQL)",
        "1.10",
        "ratio ≥ 0.8, ≥ 1M villages per rotation",
        "met",
    ]
    setup = "web, SQLite bench server, 1 process, 100 connections"
    assert rows[f"{setup}: snapshot poll answered 304"] == [
        "17,083 req/s, p99 44 ms",
        "bare aiohttp 29,412 req/s",
        "0.58",
        "ratio ≥ 0.7, p99 < 50 ms",
        "**missed** (ratio)",
    ]
    assert rows[f"{setup}: full snapshot"] == [
        "13,689 req/s, p99 291 ms",
        "bare aiohttp 29,412 req/s",
        "0.47",
        "ratio ≥ 0.4, p99 < 50 ms",
        "**missed** (p99)",
    ]
    assert rows["game: march arrivals with battle, PostgreSQL, 3,000 events / 10,000 villages"] == [
        "727 events/s",
        "durable no-op events 10,990/s",
        "0.07",
        "≥ 3,000/s",
        "**missed** (rate)",
    ]
    assert len(rows) == 8
    assert (
        "Machine: 2 CPUs (AMD EPYC, x86_64), Python 3.11.7, Redis 7.0.15, PostgreSQL 15.20. "
        "Load average at start: queue 0.42; tick PostgreSQL not recorded; "
        "tick SQLite not recorded; web SQLite 1.5; game 0.9. Finished on 2026-01-10 to 2026-01-11."
    ) in block
    assert "left out" not in block


def test_missing_results_leave_their_rows_out_and_say_so(tmp_path: Path) -> None:
    results = load_published(write_results(tmp_path, ["queue_noop", "tick_sqlite"]))
    del results["queue_noop"].data["steady"]  # a run with --steady-seconds 0
    block = render(results, tmp_path)
    rows = table_rows(block)
    assert [what.split(",")[0].split(":")[0] for what in rows] == ["queue", "queue", "tick"]
    assert "tick, SQLite, 1,000,000 villages / 60 shards, 1 rotation" in rows
    assert "Not in the published run, so left out: queue lateness" in block
    for gap in (
        "tick on PostgreSQL (tick_postgresql.json)",
        "web 304 and full snapshot",
        "game march arrivals",
    ):
        assert gap in block
    assert "PostgreSQL not recorded" not in block  # no PostgreSQL result, no version asked for


def test_no_results_at_all_renders_a_pointer_not_a_table(tmp_path: Path) -> None:
    block = render({}, tmp_path)
    assert "|" not in block and "python -m bench publish" in block


def test_check_fails_on_a_stale_readme_and_passes_once_rewritten(tmp_path: Path) -> None:
    published = write_results(tmp_path / "published")
    readme = tmp_path / "README.md"
    readme.write_text(README_TEXT)
    args = ["--readme", str(readme), "--published", str(published)]

    stale = run("readme", "--check", *args)
    assert stale.exit_code == 1
    assert "out of date" in stale.stderr and "python -m bench readme" in stale.stderr
    assert readme.read_text() == README_TEXT  # --check changes nothing

    assert run("readme", *args).exit_code == 0
    text = readme.read_text()
    before, after = text.split(START)[0], text.split(END)[1]
    assert before == README_TEXT.split(START)[0] and after == README_TEXT.split(END)[1]
    assert "| 150,000 events/s |" in text and "old table" not in text
    assert run("readme", "--check", *args).exit_code == 0
    assert run("readme", *args).stdout.strip().endswith("already up to date")

    # a hand edit of a figure, or a newer published result, makes it stale again
    readme.write_text(text.replace("150,000 events/s", "250,000 events/s"))
    assert run("readme", "--check", *args).exit_code == 1
    readme.write_text(text)
    queue = json.loads((published / "queue_noop.json").read_text())
    (published / "queue_noop.json").write_text(json.dumps({**queue, "schedule_per_s": 1.0}))
    assert run("readme", "--check", *args).exit_code == 1


def test_the_committed_readme_is_what_the_committed_results_render() -> None:
    results = load_published(PUBLISHED_DIR)
    assert results, f"no published results in {PUBLISHED_DIR}"
    update_readme(README, PUBLISHED_DIR, check=True)  # raises StaleReadme when hand-edited


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "queue_noop.json: not valid JSON"),
        ("[1, 2]", "queue_noop.json: not a bench result"),
        (json.dumps({"benchmark": "queue_noop", "events": 5}), "no 'targets' key"),
        (json.dumps({"benchmark": "tick_sqlite"}), "holds benchmark 'tick_sqlite'"),
    ],
)
def test_a_bad_result_file_is_one_clear_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "queue_noop.json").write_text(content)
    readme = tmp_path / "README.md"
    readme.write_text(README_TEXT)
    result = run("readme", "--readme", str(readme), "--published", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert readme.read_text() == README_TEXT


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no markers\n", f"no {START!r} marker"),
        (f"{START}\n{START}\n{END}\n", f"2 {START!r} markers"),
        (f"{END}\n{START}\n", "comes before"),
    ],
)
def test_a_readme_without_its_markers_is_one_clear_line(
    tmp_path: Path, text: str, message: str
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(text)
    published = write_results(tmp_path / "published")
    result = run("readme", "--readme", str(readme), "--published", str(published))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert readme.read_text() == text


def test_publish_makes_the_given_files_the_published_set(tmp_path: Path) -> None:
    results = write_results(tmp_path / "results", ["queue_noop", "tick_sqlite"])
    published = write_results(tmp_path / "published", ["web_sqlite"])  # an older run's
    (published / "notes.json").write_text("{}")  # not a result file: never removed
    files = [str(results / "queue_noop.json"), str(results / "tick_sqlite.json")]

    result = run("publish", "--published", str(published), *files)
    assert result.exit_code == 0
    assert "dropped from the published set: web_sqlite (--add keeps the others)" in result.output
    assert sorted(p.name for p in published.iterdir()) == [
        "notes.json",
        "queue_noop.json",
        "tick_sqlite.json",
    ]
    copied, source = published / "tick_sqlite.json", results / "tick_sqlite.json"
    assert copied.read_bytes() == source.read_bytes()  # byte for byte

    write_results(tmp_path / "more", ["web_sqlite"])
    more = str(tmp_path / "more" / "web_sqlite.json")
    assert run("publish", "--add", "--published", str(published), more).exit_code == 0
    assert set(load_published(published)) == {"queue_noop", "tick_sqlite", "web_sqlite"}


@pytest.mark.parametrize(
    ("figures", "message"),
    [
        ({"benchmark": "all"}, "publish the per-benchmark files"),
        ({"benchmark": "chaos"}, "benchmark 'chaos' is none of"),
    ],
)
def test_publish_refuses_what_the_table_cannot_show(
    tmp_path: Path, figures: dict[str, Any], message: str
) -> None:
    published = write_results(tmp_path / "published", ["tick_sqlite"])
    good = write_results(tmp_path / "results", ["queue_noop"]) / "queue_noop.json"
    bad = tmp_path / "results" / "other.json"
    bad.write_text(json.dumps(figures))
    result = run("publish", "--published", str(published), str(good), str(bad))
    assert result.exit_code == 2 and message in result.stderr
    assert sorted(p.name for p in published.iterdir()) == ["tick_sqlite.json"]  # untouched


def test_a_several_process_web_run_is_shown_beside_the_one_process_run(tmp_path: Path) -> None:
    published = write_results(tmp_path, ["web_sqlite"])
    workers = {**FIXTURES["web_sqlite"], "benchmark": "web_sqlite_workers", "workers": 2}
    (published / "web_sqlite_workers.json").write_text(json.dumps(workers))
    block = render(load_published(published), tmp_path)
    rows = table_rows(block)
    for processes in ("1 process", "2 processes"):
        setup = f"web, SQLite bench server, {processes}, 100 connections"
        assert rows[f"{setup}: snapshot poll answered 304"][0] == "17,083 req/s, p99 44 ms"
    assert "web SQLite 1.5; web SQLite processes 1.5" in block


def test_commands_are_shown_beside_their_hand_written_ceiling(tmp_path: Path) -> None:
    def phase(name: str, rps: float, p99: float, cpu_us: float) -> dict[str, Any]:
        return {**_web_result(name, rps, p99), "server_cpu_us_per_request": cpu_us}

    figures = {
        "benchmark": "web_postgresql", "machine": MACHINE, "connections": 100, "workers": 1,
        "finished_at": "2026-01-10T09:10:00+0000", "target": "bench server (postgresql)",
        "targets": {**WEB_TARGETS, "commands_ratio": 0.5, "commands_p99_ms": 100.0},
        "ratios": {"poll_304_ratio": 0.9, "full_ratio": 0.7, "commands_ratio": 0.55,
                   "refused_ratio": 0.3},
        "targets_met": {"poll_304_ratio": True, "full_ratio": True, "poll_304_p99": True,
                        "full_p99": True, "commands_ratio": True, "commands_p99": False,
                        "refused_ratio": False, "refused_p99": False},
        "results": [phase("bare", 40_000, 4, 50), phase("poll_304", 36_000, 4, 60),
                    phase("full", 28_000, 5, 80), phase("bare_commands", 1_000, 300, 700),
                    phase("commands", 550, 420, 1_300), phase("bare_refused", 2_000, 130, 400),
                    phase("refused", 600, 380, 900)],
    }  # fmt: skip
    (tmp_path / "web_postgresql.json").write_text(json.dumps(figures))
    rows = table_rows(render(load_published(tmp_path), tmp_path))
    setup = "web, PostgreSQL bench server, 1 process, 100 connections"
    assert rows[f"{setup}: build command"] == [
        "550 req/s, p99 420 ms, 1,300 µs of web CPU each",
        "aiohttp + asyncpg by hand 1,000 req/s, p99 300 ms, 700 µs each",
        "0.55",
        "ratio ≥ 0.5, p99 < 100 ms",
        "**missed** (p99)",
    ]
    assert rows[f"{setup}: build command the rules refuse"][3:] == [
        "ratio ≥ 0.5, p99 < 100 ms",
        "**missed** (ratio, p99)",
    ]


def test_a_steady_run_after_a_warm_up_says_so(tmp_path: Path) -> None:
    results = load_published(write_results(tmp_path, ["queue_noop"]))
    results["queue_noop"].data["steady"]["warmup_s"] = 2.0
    rows = table_rows(render(results, tmp_path))
    what = "queue: lateness at a steady 45,000 events/s for 10 s, after 2 s of the same flow"
    assert rows[what][0] == "p99 8.5 ms, max 120.0 ms"
