"""The before/after runner (``benchmarks.compare``) and the wire profile
(``benchmarks.wire_profile``): what they compute from what the runs give them. No timing
assertions; neither starts a benchmark run here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import compare, wire_profile


def _report(samples: dict[str, list[float]]) -> dict[str, Any]:
    row = {"reference": "float32", "impls": {k: {"samples": v} for k, v in samples.items()}}
    unreferenced = {"reference": None, "impls": {"x": {"samples": [1.0]}}}
    return {"figures": {"wire_shaped": {"rows": {"16MiB_1gbit": row, "alone": unreferenced}}}}


def test_compare_pairs_each_repeat_with_its_reference_and_tables_both_sides() -> None:
    report = _report({"float32": [0.1, 0.2], "int8": [0.3, 0.5]})
    ratios = compare._paired_ratios(report)
    assert list(ratios) == [("wire_shaped", "16MiB_1gbit", "int8/float32")]
    assert [round(r, 6) for r in ratios[("wire_shaped", "16MiB_1gbit", "int8/float32")]] == [
        3.0,
        2.5,
    ]
    result = {
        "rounds": 1,
        "repeats": 2,
        "ratios": {
            "wire_shaped/16MiB_1gbit/int8/float32": {
                "before": compare._spread([2.5, 3.0]),
                "after": compare._spread([]),
            }
        },
    }
    text = compare.table(result)
    assert "2.750x [2.500-3.000]" in text and "nanx" in text


def test_compare_exports_a_revision_as_committed(tmp_path: Path) -> None:
    compare._export("HEAD", tmp_path)
    assert (tmp_path / "remote_module" / "_shared.py").is_file()
    assert not (tmp_path / ".git").exists()


def test_the_profile_splits_a_call_between_its_casts() -> None:
    ms = 1e-3
    caller = [
        ("caller", "cast_to_wire", 2 * ms, 4 * ms),  # nested inside the outer cast: ends first
        ("caller", "cast_to_wire", 1 * ms, 5 * ms),
        ("caller", "restore_from_wire", 90 * ms, 98 * ms),
    ]
    owner = [
        ("owner", "restore_from_wire", 40 * ms, 45 * ms),
        ("owner", "cast_to_wire", 46 * ms, 50 * ms),
        ("owner", "cast_to_wire", 500 * ms, 501 * ms),  # another call's: outside this one
    ]
    parts = wire_profile.breakdown({"spans": [(0.0, 100 * ms, caller)], "owner": owner})
    rounded = {name: [round(value, 6) for value in values] for name, values in parts.items()}
    assert rounded == {
        "caller: encode": [4.0],
        "send, until the owner holds it": [35.0],
        "owner: decode": [5.0],
        "owner: the call": [1.0],
        "owner: encode": [4.0],
        "reply, until the caller holds it": [40.0],
        "caller: decode": [8.0],
        "total": [100.0],
    }
