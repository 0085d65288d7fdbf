"""Statistics and verdicts: a difference is called only beyond run-to-run noise (L-48)."""

from __future__ import annotations

import numpy as np
import pytest

from inferfleet.bench.stats import Spread, compare, median, percentile


@pytest.mark.parametrize("q", [0, 10, 25, 50, 90, 100])
def test_percentile_matches_numpy(q: float) -> None:
    data = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    assert percentile(data, q) == pytest.approx(float(np.percentile(data, q)))


def test_empty_and_single_values() -> None:
    assert median([]) is None
    assert median([7.0]) == 7.0
    assert Spread.of([None, None]).n == 0
    assert Spread.of([None, 2.0, 4.0]) == Spread(2, 3.0, 2.2, 3.8, 2.0, 4.0)


def test_a_difference_inside_the_noise_is_not_called() -> None:
    v = compare("decode", "a", [40.0, 44.0, 42.0], "b", [43.0, 41.0, 45.0])
    assert v.verdict == "within noise"
    assert v.diff_pct == pytest.approx(2.381, abs=1e-3) and v.noise_pct == pytest.approx(9.524)


def test_a_difference_beyond_the_noise_is_called_either_way() -> None:
    assert compare("d", "a", [40, 41, 40.5], "b", [50, 51, 50.5]).verdict == "b higher"
    assert compare("d", "a", [50, 51, 50.5], "b", [40, 41, 40.5]).verdict == "b lower"


def test_one_run_gives_numbers_but_no_verdict() -> None:
    v = compare("d", "a", [40.0], "b", [80.0])
    assert v.diff_pct == 100.0 and v.verdict == "no verdict: one run, noise unknown"
    assert compare("d", "a", [None], "b", [1.0]).verdict == "no verdict: missing data"
