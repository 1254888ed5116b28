"""The bench's arithmetic: a figure is the median of its runs with their min and max, a ratio's bounds
pair the worst with the best, the makespan ideal follows the PR's real schedule (the reply beside round
2), and the parsers' hostile lines are the size their unit says."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from bench.cpu import CpuMeter, Spent
from bench.dispatch import figures as dispatch_figures
from bench.dispatch import measure_dispatch
from bench.fleet import Durations, draw, ended_otherwise, measure
from bench.parsers import MB, hostile_lines
from bench.stats import figure, ratio


def test_a_figure_is_the_median_of_its_runs_with_min_and_max() -> None:
    f = figure("s", "n", "ms", [5.0, 1.0, 3.0, 100.0, 2.0])
    assert (f.median, f.low, f.high, f.runs) == (3.0, 1.0, 100.0, 5)


def test_a_ratio_is_of_medians_bounded_by_the_extreme_pairings() -> None:
    num = figure("s", "a", "ms", [10.0, 20.0, 30.0])
    den = figure("s", "b", "ms", [1.0, 2.0, 4.0])
    r = ratio("s", "a/b", num, den)
    assert (r.median, r.low, r.high) == (10.0, 2.5, 30.0)


def test_a_prs_critical_path_runs_the_reply_beside_round_two() -> None:
    d = Durations(review1=(1.0, 5.0, 2.0), review2=(1.0, 3.0, 2.0), triage=4.0, reply=0.5)
    assert d.critical_path == 5.0 + 4.0 + 3.0
    assert d.total == 8.0 + 6.0 + 4.0 + 0.5
    slow_reply = Durations(review1=(1.0, 1.0, 1.0), review2=(1.0, 1.0, 1.0), triage=1.0, reply=7.0)
    assert slow_reply.critical_path == 1.0 + 1.0 + 7.0


def test_the_drawn_durations_are_fixed_by_the_seed_and_scaled() -> None:
    assert draw(5, 1.0) == draw(5, 1.0)
    assert draw(5, 1.0) != draw(5, 1.0, seed=13)
    full, tenth = draw(3, 1.0), draw(3, 0.1)
    assert all(abs(t.triage - f.triage / 10) < 0.002 for f, t in zip(full, tenth, strict=True))


def test_every_hostile_line_is_about_one_megabyte() -> None:
    lines = hostile_lines()
    assert lines and all(MB - 16 <= len(line) <= MB + 16 for line in lines)


def test_a_figure_of_runs_that_did_not_converge_says_so() -> None:
    assert ended_otherwise(["converged", "converged"]) == ""
    note = ended_otherwise(["converged", "human", "human", "failed"])
    assert "3 runs ended" in note and "'human'" in note and "'failed'" in note


def test_the_fleet_figures_refuse_to_run_without_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every review would end at once in `human`: a rate of no review at all, shown as Jury's.
    monkeypatch.setenv("JURY_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(SystemExit, match="sandbox, not here: .*bubblewrap"):
        measure("redis://127.0.0.1:1/0", quick=True)
    with pytest.raises(SystemExit, match="sandbox, not here: .*bubblewrap"):
        measure_dispatch("redis://127.0.0.1:1/0", quick=True)


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this process's CPU (not of the wall clock: a busy machine only takes longer)."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_the_cpu_meter_tells_a_process_own_cpu_from_its_childrens(shared_redis: str) -> None:
    client = redis.Redis.from_url(shared_redis)
    meter = CpuMeter([os.getpid()], client)
    meter.start()
    burn(0.3)
    child = "import time\ns = time.process_time()\nwhile time.process_time() - s < 0.6: pass"
    subprocess.run([sys.executable, "-c", child], check=True)  # waited for: its CPU is our children's
    spent = meter.stop()
    assert spent is not None
    # Clock ticks are 10 ms; an interpreter's start-up adds to the child, never takes from it.
    assert 0.28 <= spent.workers < 0.6 <= spent.children + 0.02
    assert spent.redis >= 0 and 0 < spent.busy_cores <= (os.cpu_count() or 1)


def test_the_cpu_meter_tells_a_process_user_time_from_the_kernels_work_for_it(shared_redis: str) -> None:
    meter = CpuMeter([os.getpid()], redis.Redis.from_url(shared_redis))
    meter.start()
    start = os.times()
    while os.times().user - start.user < 0.15:  # arithmetic: user time
        sum(range(10_000))
    with open("/dev/zero", "rb", buffering=0) as zero:
        while os.times().system - start.system < 0.15:  # the kernel filling buffers: system time
            zero.read(1 << 24)
    spent = meter.stop()
    assert spent is not None
    assert spent.workers_user >= 0.13  # clock ticks are 10 ms
    assert spent.workers - spent.workers_user >= 0.13


def test_the_tables_print_a_figure_name_with_brackets_as_written() -> None:
    from rich.console import Console

    from bench.__main__ import print_tables

    console = Console(width=200, record=True, color_system=None)
    info = {"date": "d", "cpu": "c", "cores": 2, "host_cores": 2, "memory_gb": 1, "python": "3", "redis": "7"}
    print_tables(console, info | {"load_avg": [0]}, [figure("fair share", "no [limits]: wait", "s", [1.0])])
    assert "no [limits]: wait" in console.export_text()


def test_each_section_that_ran_titles_its_table_with_its_seconds() -> None:
    from rich.console import Console

    from bench.__main__ import print_tables

    console = Console(width=200, record=True, color_system=None)
    info = {"date": "d", "cpu": "c", "cores": 2, "host_cores": 2, "memory_gb": 1, "python": "3", "redis": "7"}
    info |= {"load_avg": [0], "section_seconds": {"event log": 12.5}}
    rows = [figure("event log", "redis append", "events/s", [1.0]), figure("reaper", "pass", "ms", [2.0])]
    print_tables(console, info, rows)
    text = console.export_text()
    assert "event log (12.5 s)" in text
    titles = [line.strip() for line in text.splitlines() if line.strip().startswith(("event log", "reaper"))]
    assert titles == ["event log (12.5 s)", "reaper"]  # the reaper is part of the event log's section


def test_a_fleet_repeat_below_one_is_refused_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["--fleet-repeat", "0", "--only", "parsers"])
    assert exited.value.code == 2
    assert "--fleet-repeat: a whole number of runs, 1 or more, not '0'" in capsys.readouterr().err


def test_compare_puts_each_checkout_in_a_column_of_medians_and_ranges() -> None:
    from bench.compare import side_by_side

    figures = [
        figure("this", "dispatch rate", "tasks/s", [100.0, 120.0, 110.0]),
        figure("other (abc)", "dispatch rate", "tasks/s", [80.0, 90.0]),
    ]
    table = side_by_side(figures, "t")
    assert [c.header for c in table.columns] == ["figure", "unit", "this", "other (abc)"]
    assert [list(c.cells) for c in table.columns[2:]] == [["110.0 (100.0–120.0)"], ["85.0 (80.0–90.0)"]]


def test_compare_with_celery_gives_each_side_its_ratio_pair_by_pair_and_celery_a_column() -> None:
    from bench.compare import CELERY, over_celery, side_by_side

    # pair by pair: a fast minute for both sides is not mistaken for a faster Jury
    ratio = over_celery("this", [100.0, 200.0, 150.0], [1000.0, 2000.0, 500.0])
    assert (ratio.median, ratio.low, ratio.high) == pytest.approx((0.1, 0.1, 0.3))
    with pytest.raises(ValueError, match="shorter"):
        over_celery("this", [100.0, 200.0], [1000.0])
    figures = [
        figure("this", "dispatch rate", "tasks/s", [100.0, 200.0, 150.0]),
        ratio,
        figure(CELERY, "Celery's no-op rate", "tasks/s", [1000.0, 2000.0, 500.0]),
    ]
    table = side_by_side(figures, "t")
    assert [c.header for c in table.columns] == ["figure", "unit", "this", CELERY]
    assert list(table.columns[1].cells) == ["tasks/s", "x", "tasks/s"]
    assert list(table.columns[2].cells) == ["150.0 (100.0–200.0)", "0.100 (0.100–0.300)", "–"]
    assert list(table.columns[3].cells) == ["–", "–", "1000.0 (500.0–2000.0)"]


def test_compare_refuses_what_is_no_checkout_of_jury(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from bench.compare import main

    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path)])
    assert exit_.value.code == 2
    assert "is not a checkout of Jury" in capsys.readouterr().err


def test_dispatch_rates_jury_against_celery_and_against_celery_in_jurys_app() -> None:
    rates = {
        "jury": [100.0, 120.0, 110.0],
        "celery": [1000.0, 800.0, 900.0],
        "jury app": [500.0, 400.0, 450.0],
    }
    spent: dict[str, list[tuple[Spent | None, int]]] = {
        "jury": [(Spent(workers=3.0, workers_user=3.0, children=1.5, redis=0.3, busy_cores=1.6), 300)] * 3,
        "celery": [(Spent(workers=0.6, workers_user=0.6, children=0.0, redis=0.1, busy_cores=1.8), 600)] * 3,
        "jury app": [(Spent(workers=0.9, workers_user=0.9, children=0.0, redis=0.1, busy_cores=1.8), 600)]
        * 3,
    }
    by_name = {f.name: f for f in dispatch_figures(50, 2, rates, spent, "")}
    assert by_name["jury / celery"].median == pytest.approx(110 / 900)
    assert by_name["jury / celery in Jury's app"].median == pytest.approx(110 / 450)
    assert by_name["celery no-op tasks in Jury's app (W=2)"].median == 450
    assert by_name["celery in Jury's app: CPU in the workers"].median == pytest.approx(1.5)
    assert by_name["jury: CPU in their child processes"].median == pytest.approx(5.0)
    # a no-op starts no process: no children figure for either no-op side
    assert not any("child" in n for n in by_name if n.startswith("celery"))


MOUNTINFO = """\
21 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
40 21 0:30 / /tmp rw,relatime shared:5 - tmpfs tmpfs rw
41 40 0:31 / /tmp/with\\040space rw,relatime - xfs /dev/sdb rw
42 21 0:32 / /tmp rw,relatime - btrfs /dev/sdc rw
43 21 0:33 / /srv/data rw,relatime - xfs /dev/sdd rw
"""


def test_a_path_is_on_the_longest_mount_point_above_it_the_later_of_two_at_one_point() -> None:
    from bench.machine import mount_of

    assert mount_of(Path("/work/main"), MOUNTINFO) == ("ext4", "254:0")
    assert mount_of(Path("/dev/shm/x"), MOUNTINFO) == ("tmpfs", "0:23")
    assert mount_of(Path("/tmp/a"), MOUNTINFO) == ("btrfs", "0:32")  # mounted over the tmpfs
    assert mount_of(Path("/tmp/with space/b"), MOUNTINFO) == ("xfs", "0:31")
    assert mount_of(Path("/srv/database"), MOUNTINFO) == ("ext4", "254:0")  # a name's prefix is no parent
    assert mount_of(Path("/x"), "garbage\n") is None


def test_an_ext4_keeps_a_journal_when_jbd2_runs_one_for_its_device() -> None:
    from bench.machine import ext4_kind

    assert ext4_kind("vda", ["vda-8"]) == "ext4, journal"
    assert ext4_kind("vda", ["vdb-8", "dm-0-8"]) == "ext4, no journal"
    assert ext4_kind("dm-0", ["dm-0-8"]) == "ext4, journal"
    assert ext4_kind("dm-1", ["dm-10-8"]) == "ext4, no journal"


def test_the_header_names_the_file_system_the_temporary_files_are_on() -> None:
    from rich.console import Console

    from bench.__main__ import print_tables
    from bench.machine import file_system, mount_of

    shm = mount_of(Path("/dev/shm"), Path("/proc/self/mountinfo").read_text())
    if shm is None or shm[0] != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm here")
    assert file_system(Path("/dev/shm")) == "tmpfs"
    console = Console(width=200, record=True, color_system=None)
    info = {"date": "d", "cpu": "c", "cores": 2, "host_cores": 2, "memory_gb": 1, "python": "3", "redis": "7"}
    print_tables(console, info | {"load_avg": [0], "tmp_fs": "ext4, no journal"}, [])
    assert "temporary files on ext4, no journal" in console.export_text()
