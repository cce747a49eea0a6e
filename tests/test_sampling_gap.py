"""scripts/sampling_gap.py: the experiment variants it runs and the outputs it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import load_script

gap = load_script("sampling_gap")

EXP = {
    "name": "densities",
    "duration": "6s",
    "machine": {"page_size": "4KiB"},
    "workload": {
        "rate": "10M/s",
        "phases": [
            {"name": "uniform", "duration": "1500ms", "patterns": [{"kind": "uniform"}]},
            {"name": "gaussian", "duration": "1500ms", "patterns": [{"kind": "gaussian"}]},
        ],
    },
    "monitors": [{"preset": "damon-mod"}, {"preset": "telescope-bnd"}, {"preset": "pebs-mod"}],
}


def test_variant_keeps_damon_on_the_statistical_engine_in_the_mode_asked() -> None:
    v = gap.variant(EXP, 7, "window", Path("/x"))
    assert v["seed"] == 7
    assert v["machine"] == {"page_size": "4KiB", "engine": "stat"}
    assert v["monitors"] == [{"preset": "damon-mod", "sampling": "window"}]
    assert v["workload"]["phases"] == EXP["workload"]["phases"]
    # The parsed file is left as it was.
    assert EXP["monitors"][0] == {"preset": "damon-mod"} and "seed" not in EXP


def test_variant_with_presets_and_one_phase() -> None:
    v = gap.variant(EXP, 1, "each", Path("/x"), ["damon-mod", "damon-agg"], phase=1)
    assert [m["preset"] for m in v["monitors"]] == ["damon-mod", "damon-agg"]
    assert all(m["sampling"] == "each" for m in v["monitors"])
    assert v["workload"]["phases"] == [
        {"name": "gaussian", "duration": "6s", "patterns": [{"kind": "gaussian"}]}
    ]
    longer = gap.variant(EXP, 1, "each", Path("/x"), phase=0, duration="30s")
    assert longer["duration"] == "30s" and longer["workload"]["phases"][0]["duration"] == "30s"
    with pytest.raises(ValueError, match="phase 2"):
        gap.variant(EXP, 1, "each", Path("/x"), phase=2)


def test_variant_names_a_masim_file_from_the_original_directory() -> None:
    exp = dict(EXP, workload={"masim": "w.cfg"})
    v = gap.variant(exp, 1, "each", Path("/a/b"))
    assert v["workload"]["masim"] == str(Path("/a/b/w.cfg").resolve())


def test_variant_needs_a_damon_monitor() -> None:
    with pytest.raises(ValueError, match="no DAMON monitor"):
        gap.variant(dict(EXP, monitors=[{"preset": "pebs-mod"}]), 1, "each", Path("."))


def test_outputs_are_read() -> None:
    summary = (
        "monitor            prec recall     f1       cpu%     bits_clr  regions  flushes  conv_ms\n"
        "damon-mod         1.000  0.513  0.672    1.27513       247850    125.4        0        -\n"
        "damon-agg         0.990  0.600  0.700    5.00000       947850    300.0        0       12\n"
        "\n"
        "policy   speedup gap fast% promo_GB demo_GB p99_op_us\n"
    )
    got = gap.parse_summary(summary)
    assert got["damon-mod"] == {
        "precision": 1.0,
        "recall": 0.513,
        "f1": 0.672,
        "cpu_percent": 1.27513,
        "regions": 125.4,
    }
    assert got["damon-agg"]["regions"] == 300.0 and len(got) == 2
    line = (
        "telescope-rule@damon-mod: speed-up over all-slow 1.5201, 1.0 GB promoted; 1TB, 60s "
        "simulated: 4.92 s CPU, 9.53 s wall, 12.2 simulated s per CPU s"
    )
    assert gap.parse_tiering(line) == {"speed-up": 1.5201, "promoted GB": 1.0}
    with pytest.raises(ValueError):
        gap.parse_tiering("error")


def test_table_compares_the_modes() -> None:
    each = [{"f1": x} for x in (0.60, 0.62, 0.64, 0.66)]
    window = [{"f1": x} for x in (0.70, 0.74, 0.78, 0.82)]
    header, row = gap.table({"each": each, "window": window})
    assert "each (n=4)" in header and "window (n=4)" in header
    cols = row.split()
    # The difference of the means, then the two p-values, then the ratio of the spreads.
    assert float(cols[-4]) == pytest.approx(0.13)
    assert float(cols[-3]) < 0.01 and float(cols[-2]) < 0.05
    assert float(cols[-1]) == pytest.approx(2.0)
    same = gap.table({"each": each, "window": each})[1].split()
    assert float(same[-3]) == 1.0 and float(same[-1]) == 1.0


def test_errors_are_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = Path(__file__).resolve().parents[1] / "experiments" / "densities.toml"
    built = tmp_path / "built"
    built.mkdir()
    (built / "run_summary").touch()
    for argv, message in [
        (["tiering", "damon-mod", "--binaries", str(tmp_path)], "bench_speed: not built"),
        (["summary", str(exp), "--phase", "9", "--binaries", str(built)], "phase 9"),
        # Binaries given: a fresh clone has none built where the script looks first.
        (
            ["summary", str(tmp_path / "none.toml"), "--binaries", str(built)],
            "no such experiment file",
        ),
        (["summary", str(exp), "--seeds", "x", "--binaries", str(built)], "--seeds"),
    ]:
        monkeypatch.setattr("sys.argv", ["sampling_gap.py", *argv, "--out", str(tmp_path)])
        with pytest.raises(SystemExit) as e:
            gap.main()
        assert e.value.code == 2
        assert message in capsys.readouterr().err
