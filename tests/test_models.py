"""Candidate estimators, calibration, evaluation and selection."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from sklearn.utils.validation import check_is_fitted

from rayjob_advisor.advice.features import Features
from rayjob_advisor.models import calibration, evaluation, splits
from rayjob_advisor.models.estimators import CANDIDATES, Ernest
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.models.startup import StartupCurve
from rayjob_advisor.observations import read_observations
from rayjob_advisor.profiles.shipped import shipped_data
from rayjob_advisor_testkit.fits import counting_fits
from rayjob_advisor_testkit.profiles import synthetic_observations


@pytest.fixture(scope="module")
def noiseless():
    return evaluation.Runs.from_observations(synthetic_observations(noise=0.0, repeats=1))


@pytest.fixture(scope="module")
def evaluated():
    return evaluation.evaluate(synthetic_observations(noise=0.05))


@pytest.mark.parametrize("name", list(CANDIDATES))
def test_candidates_are_sklearn_estimators(name, noiseless):
    estimator = CANDIDATES[name]()
    assert estimator.fit(noiseless.X, noiseless.y) is estimator
    check_is_fitted(estimator)
    predicted = estimator.predict(noiseless.X)
    assert predicted.shape == noiseless.y.shape and np.all(predicted > 0)
    mape = np.mean(np.abs(predicted / noiseless.y - 1))
    assert mape < 0.35, f"{name} does not even fit its training data: {mape:.3f}"


def test_ernest_is_nnls_on_its_four_terms():
    X = np.array([[100.0, 1, w, w, 1, 0, 1] for w in (1, 2, 4, 8, 16)])
    y = 2.0 + 3.0 * X[:, 0] / X[:, 2] + 0.5 * np.log(X[:, 2]) + 0.25 * X[:, 2]
    model = Ernest().fit(X, y)
    assert model.coef_ == pytest.approx([2.0, 3.0, 0.5, 0.25], rel=1e-6)
    assert np.all(Ernest().fit(X, 1000.0 - 10 * X[:, 2]).coef_ >= 0)


def test_structured_models_extrapolate_to_more_workers_and_ernest_cannot(noiseless):
    train = noiseless.workers <= 8
    test = ~train
    errors = {}
    for name in ("ernest", "sync-sgd", "dataparallel"):
        model = CANDIDATES[name]().fit(noiseless.X[train], noiseless.y[train])
        errors[name] = np.mean(np.abs(model.predict(noiseless.X[test]) / noiseless.y[test] - 1))
    # the synthetic law syncs linearly in W; SyncSGD grows with log W (as real rings do, see its docstring)
    assert errors["sync-sgd"] < 0.2 * errors["ernest"] and errors["dataparallel"] < 0.5 * errors["ernest"]


def test_evaluation_covers_every_split_and_candidate(evaluated):
    document = evaluated.to_json()
    assert set(document["splits"]) == {*splits.SPLITS, "kfold"}
    for split in document["splits"].values():
        assert set(split) == set(CANDIDATES)
        for scores in split.values():
            assert set(scores) == {"mape", "p90_ape", "underprediction_rate", "coverage", "n_test", "bands"}
            assert 0 <= scores["underprediction_rate"] <= 1 and 0 <= scores["coverage"] <= 1
            assert sum(band["n_test"] for band in scores["bands"].values()) == scores["n_test"]
    assert set(document["splits"]["kfold"]["ernest"]["bands"]) == {"nodes=1", "nodes=2", "nodes=3", "nodes=4"}
    assert document["splits"]["far-extrapolate-workers"]["ernest"]["n_test"] == 8  # 16 workers; fit on 1-4
    assert document["splits"]["kfold"]["ernest"]["n_test"] == 64
    assert document["selected"] in CANDIDATES and document["selected"] not in document["disqualified"]


def test_selection_is_the_lowest_weighted_mape_of_the_candidates_sound_outside_the_data(evaluated):
    scores = {name: evaluation.selection_score(evaluated.splits, name) for name in CANDIDATES}
    eligible = {name: score for name, score in scores.items() if name not in evaluated.disqualified}
    assert evaluated.selected == min(eligible, key=eligible.get)
    assert evaluation.mean_mape(evaluated.splits, evaluated.selected) < evaluation.mean_mape(evaluated.splits, "ernest")
    far = evaluated.splits["far-extrapolate-workers"]
    for name in ("gradient-boosting", "svr"):  # flat outside the data: never chosen
        assert far[name].mape > far[evaluated.selected].mape and scores[name] > scores[evaluated.selected]


def test_a_candidate_that_collapsed_on_a_held_out_run_is_never_selected():
    good = evaluation.Scores(mape=0.3, p90_ape=0.5, underprediction_rate=0.5, coverage=None, n_test=3)
    great = dataclasses.replace(good, mape=0.01)
    cv = {"kfold": {"a": good, "b": great}, "far-extrapolate-workers": {"a": good, "b": great}}
    ranking, disqualified = evaluation.rank(cv, {"a": False, "b": True}, ["a", "b"])
    assert ranking == ["a"] and set(disqualified) == {"b"}
    assert evaluation.rank(cv, {"a": False, "b": False}, ["a", "b"]) == (["b", "a"], {})


def test_selection_breaks_ties_by_candidate_order():
    tie = evaluation.Scores(mape=0.1, p90_ape=0.2, underprediction_rate=0.5, coverage=0.9, n_test=3)
    assert evaluation.rank({"kfold": {"b": tie, "a": tie}}, {"a": False, "b": False}, ["b", "a"])[0] == ["b", "a"]


def test_evaluation_is_deterministic(evaluated):
    again = evaluation.evaluate(synthetic_observations(noise=0.05))
    assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(evaluated.to_json(), sort_keys=True)


def test_upper_bound_covers_about_the_confidence_on_new_runs():
    """The bound a fitted profile gives at run time, on runs it has never seen."""
    model = RuntimeModel().fit(synthetic_observations(noise=0.1, seed=1, repeats=2))
    test = synthetic_observations(noise=0.1, seed=2, repeats=2)
    upper = model.predict_upper(test, 0.9)
    coverage = np.mean([run.execution_seconds <= bound for run, bound in zip(test, upper, strict=True)])
    assert 0.84 <= coverage <= 0.99


def test_conformal_margin_is_the_finite_sample_quantile():
    residuals = np.arange(1, 20, dtype=float) / 100  # 0.01 ... 0.19, n = 19
    assert calibration.relative_margin(residuals, 0.9) == pytest.approx(0.18)  # ceil(20 * 0.9) = 18th
    assert calibration.relative_margin(residuals, 0.99) == pytest.approx(0.19)  # capped at the largest
    assert calibration.relative_margin(-residuals, 0.9) == 0.0  # never below the median prediction
    assert calibration.upper_bound(np.array([100.0]), residuals, 0.9)[0] == pytest.approx(118.0)


def held_out_runs(rng: np.random.Generator, n: int) -> calibration.HeldOut:
    """Runs predicted at 100 s whose residuals spread 3x wider at per-worker batches up to 16 than above."""
    local = rng.choice([8.0, 16.0, 64.0, 128.0], n)
    predicted = np.full(n, 100.0)
    return calibration.HeldOut(
        actual=predicted * (1.0 + np.where(local <= 16, 0.3, 0.1) * rng.standard_normal(n)),
        predicted=predicted,
        unanchored=predicted,
        anchored=np.zeros(n, dtype=bool),
        nodes=rng.choice([1.0, 2.0], n),
        local_batch=local,
        distance=np.zeros(n),
        collapsed=np.zeros(n, dtype=bool),
    )


def test_each_batch_half_gets_the_margin_of_its_own_spread():
    """Normalised conformal: one margin per node count would under-cover the small batches and over-cover the rest."""
    rng = np.random.default_rng(0)
    fitted = calibration.Calibration.from_held_out({"kfold": held_out_runs(rng, 400), "other": held_out_runs(rng, 400)})
    assert fitted.threshold == 16.0  # the lower median of the distinct per-worker batches
    assert fitted.free_scale.factor(1.0, True) > 2 * fitted.free_scale.factor(1.0, False)
    new = held_out_runs(rng, 4000)
    pools = fitted.pools(new.nodes, new.distance, new.anchored, new.local_batch)
    upper = calibration.upper_bounds(new.predicted, pools, 0.9)
    small = new.local_batch <= fitted.threshold
    for half in (small, ~small):
        assert 0.87 <= np.mean(new.actual[half] <= upper[half]) <= 0.96
    chances = calibration.probabilities_within(new.predicted, pools, upper)
    assert np.all(chances >= 0.9)


def features(workers: int, cpus: float = 1.0, size: int = 8000) -> Features:
    return Features(
        workload=None,
        dataset_size=size,
        epochs=1,
        batch_size=128,
        workers=workers,
        cpus_per_worker=cpus,
        gpus_per_worker=0,
        memory_bytes_per_worker=None,
        scale_group=None,
    )


def test_runtime_model_fits_predicts_and_states_its_assumptions(synthetic):
    model = RuntimeModel().fit(synthetic)
    assert model.selected_ in CANDIDATES and model.n_samples_ == len(synthetic)
    assert model.workers_per_node_ == 4  # the synthetic profile runs 1-4 workers on one node
    assert set(model.fixed_columns_) == {1, 4, 5}  # epochs, cpus, gpus never vary
    assert model.measured_gpus_ == (0.0,)
    p50 = model.predict([features(4), features(4, size=16000)])
    assert p50[1] > 1.5 * p50[0]
    upper = model.predict_upper([features(4)], 0.9)
    assert upper[0] >= p50[0]
    assert model.predict([features(4, cpus=8)])[0] == pytest.approx(p50[0], rel=1e-12)
    packed = {"placement": "packed", "workers_per_node": 4.0}
    assert model.assumptions(features(4, cpus=8)) == {"cpus_per_worker": 1.0, **packed}
    assert model.assumptions(features(4)) == packed


@pytest.mark.parametrize("profile", ["shipped", "synthetic"])
def test_runtime_model_selects_like_the_full_evaluation_for_a_tenth_of_the_fits(profile, synthetic):
    observations = read_observations(shipped_data("digits-cnn"))[0] if profile == "shipped" else synthetic
    with counting_fits() as full:
        report = evaluation.evaluate(observations)
    with counting_fits() as cheap:
        model = RuntimeModel().fit(observations)
    assert model.selected_ == report.selected
    assert model.cv_mape_ == evaluation.mean_mape(report.splits, report.selected)
    runs = evaluation.Runs.from_observations(observations)
    defined, _ = splits.split_folds(runs.workers, runs.sizes)
    folds = sum(len(f) for f in defined.values())
    # once per fold each; the selected one (and a structural fallback) refitted on all runs, calibrated for free
    refitted = {model.selected_} | ({model.fallback_.point.name} if model.fallback_ else set())
    assert cheap == {name: folds + (name in refitted) for name in CANDIDATES}
    assert sum(cheap.values()) <= 0.12 * sum(full.values())


def test_runtime_model_can_be_forced_to_a_candidate(synthetic):
    assert RuntimeModel("ernest").fit(synthetic).selected_ == "ernest"
    with pytest.raises(ValueError, match="unknown model 'magic'"):
        RuntimeModel("magic")


def test_too_little_data_is_a_clear_error():
    with pytest.raises(evaluation.NotEnoughData, match="no observations"):
        evaluation.evaluate([])
    with pytest.raises(evaluation.NotEnoughData, match="too few observations"):
        evaluation.evaluate(synthetic_observations()[:1])


@dataclasses.dataclass(frozen=True)
class Job:
    """A job as the planner asks about it: no node count, maybe a placement hint, maybe no batch."""

    workers: int
    dataset_size: int = 8000
    epochs: int | None = 1
    batch_size: int | None = 128
    cpus_per_worker: float | None = 1.0
    gpus_per_worker: float | None = 0.0
    placement: str | None = None


@pytest.fixture(scope="module")
def fitted(synthetic):
    return RuntimeModel().fit(synthetic)


def test_nodes_follow_the_placement_hint(fitted):
    assert (fitted.workers_per_node_, fitted.max_nodes_) == (4, 4)
    assert [fitted.nodes(Job(w)) for w in (1, 4, 5, 16)] == [1, 1, 2, 4]
    assert [fitted.nodes(Job(w, placement="spread")) for w in (1, 3, 16)] == [1, 3, 4]
    assert fitted.nodes(Job(3, placement="one-per-node")) == 3
    assert fitted.nodes(synthetic_observations()[0]) == 1  # an observation says where it ran


def test_a_missing_batch_holds_the_profiles_per_worker_batch(fitted):
    local = fitted.batch_per_worker_
    assert local == round(np.median([o.batch_size / o.workers for o in synthetic_observations()]))
    for workers in (1, 4, 16):
        without = fitted.predict([Job(workers, batch_size=None, epochs=None)])[0]
        assert without == pytest.approx(fitted.predict([Job(workers, batch_size=local * workers)])[0])
    assert fitted.assumptions(Job(4, batch_size=None, epochs=None, placement="spread")) == {
        "batch_size_per_worker": local,
        "epochs": 1.0,
    }


def test_predictions_are_positive_and_above_the_physical_floor(fitted):
    far = [Job(w, batch_size=b, dataset_size=s) for w in (1, 64, 1024) for b in (None, 1, 8192) for s in (1, 10**9)]
    predicted = fitted.predict(far)
    assert np.all(np.isfinite(predicted)) and np.all(predicted >= fitted.floor(far)) and np.all(fitted.floor(far) > 0)


def test_probability_within_is_monotone_and_agrees_with_the_upper_bound(fitted):
    jobs = [Job(w) for w in (1, 3, 8, 32)]
    for confidence in (0.5, 0.8, 0.9):  # every pool holds enough residuals for up to 0.9
        upper = fitted.predict_upper(jobs, confidence)
        assert np.all(fitted.probability_within(jobs, upper) >= confidence)
        assert np.all(fitted.probability_within(jobs, upper * 0.98) <= confidence + 0.05)
    grid = np.linspace(0.5, 2.0, 40)
    probabilities = [fitted.probability_within(jobs, fitted.predict(jobs) * factor) for factor in grid]
    assert np.all(np.diff(probabilities, axis=0) >= 0)
    assert np.all(probabilities[0] == 0.0) and np.all(probabilities[-1] > 0.9)


# Start-up per worker count (models/startup.py), on the shipped digits-cnn runs: 13 s for 1 worker, 27 s for 4.
@pytest.fixture(scope="module")
def digits_runs():
    return read_observations(shipped_data("digits-cnn"))[0]


def startup_medians(runs) -> dict[int, float]:
    return {
        w: float(np.median([o.startup_seconds for o in runs if o.workers == w]))
        for w in sorted({o.workers for o in runs})
    }


def test_the_start_up_of_a_measured_worker_count_is_the_median_of_its_runs(digits_runs):
    medians = startup_medians(digits_runs)
    assert list(medians) == [1, 2, 3, 4] and medians[1] < medians[2] < medians[3] < medians[4]  # it grows
    model = RuntimeModel(candidate="ernest").fit(digits_runs)
    assert model.startup([features(w) for w in medians]) == pytest.approx(list(medians.values()))


def test_a_worker_count_between_measured_ones_is_interpolated_near_what_it_measured(digits_runs):
    medians = startup_medians(digits_runs)
    curve = StartupCurve.from_runs([o for o in digits_runs if o.workers != 3])
    assert curve.seconds([3])[0] == pytest.approx((medians[2] + medians[4]) / 2)
    assert curve.seconds([3])[0] == pytest.approx(medians[3], rel=0.1)


def test_outside_the_profile_the_start_up_errs_long(digits_runs):
    medians = startup_medians(digits_runs)
    above = StartupCurve.from_runs([o for o in digits_runs if o.workers != 4])
    extrapolated = above.seconds([4, 5, 8])
    assert medians[3] < extrapolated[0] < extrapolated[1] < extrapolated[2]  # grows on past the largest count
    assert abs(extrapolated[0] - medians[4]) < abs(medians[3] - medians[4]) / 2  # closer than holding it flat
    below = StartupCurve.from_runs([o for o in digits_runs if o.workers != 1])
    assert below.seconds([1])[0] == pytest.approx(medians[2]) and medians[2] > medians[1]  # held, never less


def test_a_profile_that_never_measured_start_up_has_none():
    runs = read_observations(shipped_data("pollux-ncf"))[0]
    assert all(o.startup_seconds is None for o in runs)
    assert StartupCurve.from_runs(runs).seconds([1, 4, 16]).tolist() == [0.0, 0.0, 0.0]
