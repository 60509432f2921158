"""Candidate estimators, calibration, evaluation and selection."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import pathlib
import types

import numpy as np
import pytest
from sklearn.utils.validation import check_is_fitted

from benchmarks import datasets, questions
from rayjob_advisor.advice.features import Features
from rayjob_advisor.models import calibration, combination, design, estimators, evaluation, splits
from rayjob_advisor.models.estimators import CANDIDATES, PER_SAMPLE, STRUCTURAL, Ernest
from rayjob_advisor.models.runtime import RuntimeModel
from rayjob_advisor.models.startup import StartupCurve
from rayjob_advisor.observations import read_observations
from rayjob_advisor.profiles.shipped import shipped_data
from rayjob_advisor_testkit.fits import counting_fits
from rayjob_advisor_testkit.profiles import synthetic_observations

EOS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks/data/mlperf/mlperf-resnet-nvidia-h100-eos.csv"
EOS_BERT = EOS.with_name("mlperf-bert-nvidia-h100-eos-mixed.csv")


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
    # the synthetic law syncs linearly in W; SyncSGD's growth is a ring's, bounded (see its docstring): it falls
    # short of a linear law, but far less than Ernest, which has no synchronisation at all
    assert errors["sync-sgd"] < 0.3 * errors["ernest"] and errors["dataparallel"] < 0.5 * errors["ernest"]


def _packed_runs(packings: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Runs of a step that waits for its busiest node's shared host link, as on Sia's V100s: (workers, nodes) each,
    at two dataset sizes and 32 samples per worker."""
    X, y = [], []
    for (workers, nodes), size in itertools.product(packings, (4000, 16000)):
        sharing = math.ceil(workers / nodes) - 1
        sync = (0.01 + 0.01 * sharing + 0.004 * (nodes > 1)) * (workers > 1)
        X.append([size, 1, workers, 32 * workers, 1, 1, nodes, 0])
        y.append(1.0 + math.ceil(size / (32 * workers)) * (0.064 + sync))
    return np.array(X, dtype=float), np.array(y)


@pytest.mark.parametrize("name", ["dataparallel", "sync-sgd"])
def test_the_step_models_price_the_workers_sharing_a_node_where_the_profile_packed_them_two_ways(name, monkeypatch):
    """8 workers on one node or spread over 2 and 4: the profile shows what a node's other workers cost, and 16
    workers on 2, 4 or 8 nodes are predicted from it; without the price, from the node counts alone, they are not."""
    packings = [(w, n) for w in (1, 2, 4, 8) for n in (1, 2, 4) if n <= w]
    X, y = _packed_runs(packings)
    asked, truth = _packed_runs([(16, 2), (16, 4), (16, 8)])
    priced = CANDIDATES[name]().fit(X, y)
    assert np.abs(priced.predict(asked) / truth - 1).max() < 0.03
    monkeypatch.setattr(estimators, "SHARED_LINK", ())
    assert np.abs(CANDIDATES[name]().fit(X, y).predict(asked) / truth - 1).max() > 0.1


def test_a_profile_that_packed_each_worker_count_one_way_prices_no_sharing():
    """What the other workers on a node cost cannot be told from what more workers cost."""
    X, y = _packed_runs([(w, math.ceil(w / 4)) for w in (1, 2, 3, 4, 6, 8, 12, 16)])
    assert design.sharing_measured(X) == 0.0
    assert CANDIDATES["sync-sgd"]().fit(X, y).theta_[6] == 0.0
    assert design.sharing_measured(_packed_runs([(4, 1), (4, 2), (8, 2)])[0]) == 3.0


def _crowded_runs(workers: tuple[int, ...], node_cpus: float) -> tuple[np.ndarray, np.ndarray]:
    """Runs of half-CPU workers, one thread each, on one node of ``node_cpus`` cores, at two sizes and two
    per-worker batches: a worker computes at full speed while the node has a core for it, and the threads share the
    cores beyond."""
    X, y = [], []
    for w, size, batch in itertools.product(workers, (4000, 16000), (16, 64)):
        crowd = max(1.0, w / node_cpus)
        X.append([size, 1, w, batch * w, 0.5, 0, 1, node_cpus])
        y.append(0.5 + math.ceil(size / (batch * w)) * (0.002 + batch * 0.001 * crowd))
    return np.array(X, dtype=float), np.array(y)


def test_cpu_workers_that_outnumber_a_nodes_cores_compute_slower():
    """Half-CPU workers run a thread each: 4 of them on 2 cores run at half speed, on 8 cores at full speed; on GPUs
    or where the node's CPUs are unknown nothing is crowded."""
    X, _ = _crowded_runs((1, 2, 3, 4), 2.0)
    assert design.crowding(X[::4]).tolist() == [1.0, 1.0, 1.5, 2.0]
    assert not np.any(design.crowding(_crowded_runs((4,), 8.0)[0]) != 1.0)
    gpus, unknown = X.copy(), X.copy()
    gpus[:, design.GPUS] = 1.0
    unknown[:, design.NODE_CPUS] = 0.0
    assert not np.any(design.crowding(gpus) != 1.0) and not np.any(design.crowding(unknown) != 1.0)
    threads = X.copy()
    threads[:, design.CPUS] = 2.0  # two threads each: 2 workers fill 2 cores twice over
    assert design.crowding(threads[::4]).tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("name", ["dataparallel", "sync-sgd"])
def test_the_step_models_predict_more_workers_on_crowded_cores_from_the_nodes_cpus(name, monkeypatch):
    """Fitted on 1-2 workers of a 2-core node (none crowded), 3-4 are predicted as slow as the shared cores make
    them; without the node's CPUs, as if each had a core."""
    X, y = _crowded_runs((1, 2), 2.0)
    asked, truth = _crowded_runs((3, 4), 2.0)
    assert np.abs(CANDIDATES[name]().fit(X, y).predict(asked) / truth - 1).max() < 0.03
    monkeypatch.setattr(estimators, "CROWDED_CORES", ())
    assert np.abs(CANDIDATES[name]().fit(X, y).predict(asked) / truth - 1).max() > 0.2


def test_a_job_is_predicted_on_nodes_like_the_profiles():
    """A RayJob does not say its nodes' CPUs: the profile's are assumed, and said so for CPU workers."""
    observations = read_observations(shipped_data("digits-cnn"))[0]
    assert {run.node_cpus for run in observations} == {2.0}
    model = RuntimeModel().fit(observations)
    assert model.node_cpus_ == 2.0
    assert model.assumptions(features(4))["node_cpus"] == 2.0
    roomy = types.SimpleNamespace(**features(4).model_dump(), node_cpus=8.0)  # a run that says its nodes' CPUs
    assert "node_cpus" not in model.assumptions(roomy)
    assert model.predict([roomy])[0] < model.predict([features(4)])[0]  # 4 threads on 8 cores, not on 2


def _one_batch_runs(local: int, workers: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """GPU runs of one per-worker batch whose step is mostly computation per sample, on nodes of 4 GPUs."""
    X, y = [], []
    for w, size in itertools.product(workers, (64000, 256000)):
        sync = 0.0 if w == 1 else 0.004 + 0.002 * (2 * (1 - 1 / w) - 1)
        X.append([size, 1, w, local * w, 0, 1, math.ceil(w / 4), 0])
        y.append(5.0 + math.ceil(size / (local * w)) * (0.001 * local + sync))
    return np.array(X, dtype=float), np.array(y)


def test_a_step_the_runs_cannot_split_is_computation_so_another_per_worker_batch_scales_with_it(monkeypatch):
    """A profile of one per-worker batch cannot tell a step's fixed cost from its cost per sample: taken as
    computation, a quarter or four times the batch is predicted; taken as half fixed, 1.8x too slow or too fast."""
    X, y = _one_batch_runs(64, (1, 2, 4, 8))
    asked = [_one_batch_runs(local, (8,)) for local in (16, 256)]

    def worst() -> float:
        fitted = CANDIDATES["sync-sgd"]().fit(X, y)
        return max(float(np.abs(fitted.predict(A) / truth - 1).max()) for A, truth in asked)

    assert worst() < 0.1
    monkeypatch.setattr(estimators, "COMPUTE_PULL", 0.0)
    assert worst() > 0.25


def _ring_runs(workers: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """GPU runs on one node at two sizes and two per-worker batches, whose all-reduce costs a ring's bandwidth term:
    ``a * 2(W - 1) / W`` per step, so ``a`` at 2 workers and ``1.5 a`` at 4."""
    X, y = [], []
    for w, size, local in itertools.product(workers, (64000, 256000), (32, 128)):
        sync = 0.0 if w == 1 else 0.01 * 2 * (1 - 1 / w)
        X.append([size, 1, w, local * w, 0, 1, 1, 0])
        y.append(5.0 + math.ceil(size / (local * w)) * (0.0002 * local + sync))
    return np.array(X, dtype=float), np.array(y)


@pytest.mark.parametrize("profiled", [(1, 2), (1, 4), (1, 8)])
def test_runs_at_one_synced_worker_count_take_the_rings_growth(profiled):
    """Synced runs at one worker count show the all-reduce's cost there, not how it grows with the ring: the slope
    is the ring's (``b`` the least intercept), so the counts between and beyond follow the ring's bandwidth term.
    Left to the fit, the intercept and the slope of one sum split as the ridge pulled them: from 1 and 4 workers,
    2 were predicted 11 % too slow."""
    X, y = _ring_runs(profiled)
    asked, truth = _ring_runs((2, 3, 4, 6, 8, 16))
    fitted = CANDIDATES["sync-sgd"]().fit(X, y)
    assert fitted.theta_[5] == pytest.approx(fitted.theta_[estimators.SyncSGD._SHARED])
    assert np.abs(fitted.predict(asked) / truth - 1).max() < 0.01


def _fitted_in_both_orders(X: np.ndarray, y: np.ndarray) -> tuple[estimators.SyncSGD, estimators.SyncSGD]:
    """``sync-sgd`` fitted on the runs as given and reversed: a change of rounding, as another BLAS kernel's."""
    return estimators.SyncSGD().fit(X, y), estimators.SyncSGD().fit(X[::-1], y[::-1])


def test_sync_sgd_fits_one_point_of_a_valley_of_equally_good_fits_whatever_the_rounding():
    """The shipped profile (one per-worker batch per worker count, one epoch count) leaves parameters its runs
    cannot tell apart; the fit is the same in any order of the runs (as on any machine's BLAS), and a per-epoch
    cost it cannot see is none."""
    runs = evaluation.Runs.from_observations(read_observations(shipped_data("digits-cnn"))[0])
    train, asked = runs.workers <= 2, runs.workers > 2
    forward, backward = _fitted_in_both_orders(runs.X[train], runs.y[train])
    assert forward.predict(runs.X[asked]) == pytest.approx(backward.predict(runs.X[asked]), rel=1e-3)  # 3e-2 before
    assert forward.theta_[1] == 0.0  # c1: one epoch count


def test_sync_sgd_fits_the_same_point_in_either_order_of_an_mlperf_profile(monkeypatch):
    """MLPerf's BERT on NVIDIA's H100s at up to a quarter of its GPUs (one per-GPU batch per node count, 1 % noise)
    leaves a flat valley the solver crosses slowly: run to convergence, the fit is the same in either order of the
    runs (as on any BLAS kernel); stopped at scipy's default budget and a looser tolerance it was not."""
    cut = questions.QUESTIONS["workers-x4-few"](datasets.DATASETS["mlperf-bert-nvidia-h100"]())
    assert not isinstance(cut, str)
    runs, asked = evaluation.Runs.from_observations(cut.train), evaluation.Runs.from_observations(cut.test)

    def apart() -> float:
        forward, backward = _fitted_in_both_orders(runs.X, runs.y)
        return float(np.max(np.abs(forward.predict(asked.X) / backward.predict(asked.X) - 1)))

    assert apart() < 1e-4
    monkeypatch.setattr(estimators, "MAX_EVALUATIONS", None)
    monkeypatch.setattr(estimators, "FIT_TOLERANCE", 1e-10)
    assert apart() > 0.05


def test_evaluation_covers_every_split_and_candidate_and_their_combination(evaluated):
    document = evaluated.to_json()
    # 4 sizes over 8x: a quarter of the largest is the second smallest, and far-extrapolate-size is extrapolate's
    assert set(document["splits"]) == {*splits.SPLITS, "kfold"} - {"far-extrapolate-size"}
    assert set(document["skipped"]) == {"far-extrapolate-size"}
    for split in document["splits"].values():
        assert set(split) == {*CANDIDATES, evaluation.COMBINED}
        for scores in split.values():
            assert set(scores) == {"mape", "p90_ape", "underprediction_rate", "coverage", "n_test", "bands"}
            assert 0 <= scores["underprediction_rate"] <= 1 and 0 <= scores["coverage"] <= 1
            assert sum(band["n_test"] for band in scores["bands"].values()) == scores["n_test"]
    assert set(document["splits"]["kfold"]["ernest"]["bands"]) == {"nodes=1", "nodes=2", "nodes=3", "nodes=4"}
    assert document["splits"]["far-extrapolate-workers"]["ernest"]["n_test"] == 8  # 16 workers; fit on 1-4
    assert document["splits"]["kfold"]["ernest"]["n_test"] == 64
    assert document["selected"] in [*CANDIDATES, evaluation.COMBINED]
    assert set(document["weights"]) == set(splits.QUESTIONS)
    for weights in document["weights"].values():
        assert sum(weights.values()) == pytest.approx(1.0, abs=0.01)


def test_beyond_the_profile_only_physically_shaped_candidates_answer(evaluated):
    weights = evaluated.weights
    assert set(weights["workers"]) <= set(STRUCTURAL) and set(weights["batch"]) <= set(STRUCTURAL)
    assert set(weights["size"]) <= {*STRUCTURAL, *PER_SAMPLE}  # these scale with the work by construction
    assert weights["workers"]["sync-sgd"] >= 0.5  # the prior of a synchronous data-parallel step holds its ground
    far = evaluated.splits["far-extrapolate-workers"]
    assert far[evaluation.COMBINED].mape < far["ernest"].mape  # Ernest has no synchronisation to grow with W


def test_a_member_that_collapses_on_a_run_is_left_out_of_it():
    weights = np.array([[0.2, 0.5, 0.3]])
    usable = np.array([[True, True, True], [True, False, True], [False, False, False]])
    shares = np.ones((3, 1))
    prior = np.array([0.0, 0.0, 1.0])
    per_run = combination.row_weights(weights, shares, usable, prior)
    assert per_run[0] == pytest.approx([0.2, 0.5, 0.3])
    assert per_run[1] == pytest.approx([0.4, 0.0, 0.6])  # its weight shared by the others in proportion
    assert per_run[2] == pytest.approx(prior)


def test_a_member_one_kind_of_a_row_gives_no_weight_takes_no_part_in_it():
    """Eos's shape: beyond in workers (which trusts the step alone) and in work (which leans on Ernest too)."""
    weights = np.array([[0.5, 0.5], [0.0, 1.0], [0.47, 0.53], [0.0, 1.0]])  # kinds x (ernest, sync-sgd)
    usable = np.ones((4, 2), dtype=bool)
    shares = np.array([[0, 0.5, 0.5, 0], [0, 0, 1, 0], [0.5, 0.25, 0.25, 0], [0, 0, 0.5, 0.5]])
    per_row = combination.row_weights(weights, shares, usable, np.array([0.0, 1.0]))
    assert per_row[0] == pytest.approx([0.0, 1.0])  # added, Ernest would keep 0.235 of it
    assert per_row[1] == pytest.approx([0.47, 0.53])  # beyond in one kind: that kind's weights
    assert per_row[2] == pytest.approx([0.25, 0.75])  # the part inside the profile still adds its own
    assert per_row[3] == pytest.approx([0.0, 1.0])
    both = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])  # no member answers workers and work
    assert combination.row_weights(both, shares[:1], usable[:1], np.array([0.0, 1.0]))[0] == pytest.approx([0.5, 0.5])


def test_at_40x_the_profiled_gpus_with_more_work_and_a_smaller_batch_the_step_carries_the_job():
    """MLPerf's ResNet-50 on NVIDIA's Eos: 9 runs at 8 and 64 H100s, asked about 2,528 (issue 18: 24x too slow)."""
    runs, _ = read_observations(EOS)
    profile, asked = [run for run in runs if run.workers <= 64], [run for run in runs if run.workers > 64]
    # beyond the profile in workers (40x), work (more epochs) and per-GPU batch (16 against 50-400) at once
    assert min(run.epochs for run in asked) > 35 and {run.batch_size for run in asked} == {40448}
    model = RuntimeModel().fit(profile)
    actual = np.array([run.execution_seconds for run in asked])
    assert np.max(np.abs(model.predict(asked) / actual - 1)) < 0.1
    assert "ernest" not in model.predicted_by(asked[0])  # more work trusts it, more workers does not


def test_between_two_profiled_worker_counts_the_step_answers_not_the_nearer_count():
    """MLPerf's BERT on Eos: 10 runs at 8 and 10 at 3,472 H100s, asked about 64. K-fold, the only fold of the kind
    ``inside`` here, favours a tree ensemble of the time per sample, which holds 8 GPUs' time between them (7x)."""
    runs, _ = read_observations(EOS_BERT)
    profile, asked = [run for run in runs if run.workers != 64], [run for run in runs if run.workers == 64]
    assert {run.workers for run in profile} == {8, 3472} and len(asked) == 9
    model = RuntimeModel().fit(profile)
    actual = np.array([run.execution_seconds for run in asked])
    assert np.max(np.abs(model.predict(asked) / actual - 1)) < 0.1
    assert "gradient-boosting" not in model.predicted_by(asked[0])
    assert model.predicted_by(profile[0]).startswith("gradient-boosting")  # at a profiled count, K-fold's weights


def test_a_tree_ensemble_weighs_less_the_farther_a_worker_count_lies_between_two_profiled_ones():
    names = ("ernest", "sync-sgd", "gradient-boosting")
    weights = np.tile([0.1, 0.3, 0.6], (5, 1))
    X = np.zeros((5, len(design.COLUMNS)))
    X[:, design.WORKERS] = [1, 1.2, 4, 16, 64]
    two = design.Reach(16, 1, 1, 1, (1.0, 16.0))
    shaped = combination.shaped_in_gaps(weights, names, two, X)
    assert shaped[0] == pytest.approx(weights[0]) and shaped[3] == pytest.approx(weights[3])  # profiled counts
    kept = 0.6 * (1 - math.log(1.2) / math.log(1.5))  # 1.2 workers: the ensemble weighed down by the distance to 1
    assert shaped[1][2] == pytest.approx(kept / (0.4 + kept))
    assert shaped[2] == pytest.approx([0.25, 0.75, 0.0])  # 4x from both: the step's structure alone
    assert shaped[4] == pytest.approx(weights[4])  # beyond the profile, the kinds' weights decide (``answers``)
    three = dataclasses.replace(two, worker_counts=(1.0, 4.0, 16.0))  # a fold measures interpolation
    assert combination.shaped_in_gaps(weights, names, three, X) == pytest.approx(weights)


def test_stacking_recovers_a_mixture_and_never_leaves_its_members_range():
    rng = np.random.default_rng(0)
    low, high = rng.uniform(1, 2, 50), rng.uniform(3, 4, 50)
    weights = combination.stack(np.column_stack([low, high, 10 * high]), 0.3 * low + 0.7 * high)
    assert weights == pytest.approx([0.3, 0.7, 0.0], abs=1e-6) and weights.sum() == pytest.approx(1.0)


def test_a_question_just_beyond_the_profile_is_mostly_one_inside_it():
    beyond = np.array([[True, False, False]] * 3 + [[False, False, False]])
    distance = np.array([0.5 * combination.FULL_DISTANCE, combination.FULL_DISTANCE, 3.0, 0.0])
    shares = combination.memberships(beyond, distance)
    assert shares == pytest.approx(np.array([[0.5, 0.5, 0, 0], [0, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]]))
    both = combination.memberships(np.array([[True, False, True]]), np.array([3.0]))
    assert both == pytest.approx(np.array([[0, 0.5, 0, 0.5]]))


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
        spread=np.zeros(n),
        collapsed=np.zeros(n, dtype=bool),
    )


def test_where_the_combined_candidates_disagree_the_bound_widens_and_the_chances_agree():
    rng = np.random.default_rng(0)
    fitted = calibration.Calibration.from_held_out({"kfold": held_out_runs(rng, 400)})
    nodes, distance, anchored, batch = np.ones(2), np.zeros(2), np.zeros(2, dtype=bool), np.full(2, 64.0)
    pools = fitted.pools(nodes, distance, anchored, batch, spread=np.array([0.0, 0.2]))
    predicted = np.array([100.0, 100.0])
    upper = calibration.upper_bounds(predicted, pools, 0.9)
    assert upper[1] == pytest.approx(100.0 + (upper[0] - 100.0) * np.exp(0.2) + 100.0 * (np.exp(0.2) - 1.0))
    chances = calibration.probabilities_within(predicted, pools, upper)
    assert np.all(chances >= 0.9)  # the bound and the chance of finishing within it come from the same pools
    at_median = calibration.probabilities_within(predicted, pools, predicted)
    assert at_median[1] == at_median[0]  # the prediction itself stays where it was


def test_an_extrapolation_pool_bounds_a_run_as_measured_its_distance_not_counted_twice(monkeypatch):
    """The workers folds' residuals were measured log 4 beyond their runs: a run as far beyond is bounded by them as
    they are (the inside pool widened by that distance says as much), not by them widened a second time."""
    rng = np.random.default_rng(0)
    inside, far = held_out_runs(rng, 400), held_out_runs(rng, 400)
    far = dataclasses.replace(
        far, actual=far.predicted + 3.0 * (far.actual - far.predicted), distance=np.full(400, math.log(4.0))
    )
    fitted = calibration.Calibration.from_held_out({"kfold": inside, "extrapolate-workers": far})
    predicted, asked = np.array([100.0]), [calibration.INSIDE | {"workers"}]

    def upper(distance: float, kinds: list[calibration.Asked]) -> float:
        args = (np.ones(1), np.full(1, distance), np.zeros(1, dtype=bool), np.full(1, 64.0))
        return float(calibration.upper_bounds(predicted, fitted.pools(*args, asked=kinds), 0.9)[0])

    measured, inside_only = upper(0.0, asked), upper(0.0, [calibration.INSIDE])
    assert measured > inside_only * 1.2  # the extrapolation folds were far more wrong than the k-fold
    assert upper(math.log(4.0), asked) == pytest.approx(measured, rel=0.02)
    assert upper(math.log(16.0), asked) > measured * 1.2  # farther than the folds reached: widened
    monkeypatch.setattr(calibration, "WIDEN_EXTRAPOLATED", True)
    assert upper(math.log(4.0), asked) > measured + 0.8 * (measured - inside_only)  # counted twice


def test_a_run_is_bounded_by_the_kinds_of_question_it_asks():
    """A batch extrapolation that ran 30 % slow says nothing of a size inside the profile; it bounds a run beyond."""
    rng = np.random.default_rng(0)
    inside, batch = held_out_runs(rng, 400), held_out_runs(rng, 400)
    slow = dataclasses.replace(batch, actual=batch.actual * 1.3)
    fitted = calibration.Calibration.from_held_out({"kfold": inside, "extrapolate-batch": slow})
    nodes, distance, anchored, local = np.ones(2), np.zeros(2), np.zeros(2, dtype=bool), np.full(2, 64.0)
    asked = [calibration.INSIDE, calibration.INSIDE | {"batch"}]
    pools = fitted.pools(nodes, distance, anchored, local, asked=asked)
    predicted = np.array([100.0, 100.0])
    at_median = calibration.probabilities_within(predicted, pools, predicted)
    assert at_median[0] > 0.3 and at_median[1] < 0.05  # inside: about even; beyond in batch: the slow pool's
    upper = calibration.upper_bounds(predicted, pools, 0.9)
    assert upper[1] > upper[0] * 1.2
    assert calibration.asked_of(np.array([[False, False, False], [True, False, True]])) == [
        calibration.INSIDE, calibration.INSIDE | {"workers", "batch"},
    ]  # fmt: skip


def test_each_batch_half_gets_the_margin_of_its_own_spread():
    """Normalised conformal: one margin per node count would under-cover the small batches and over-cover the rest."""
    rng = np.random.default_rng(0)
    fitted = calibration.Calibration.from_held_out(
        {"kfold": held_out_runs(rng, 400), "interpolate-workers": held_out_runs(rng, 400)}
    )
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
    assert model.selected_ in [*CANDIDATES, evaluation.COMBINED] and model.n_samples_ == len(synthetic)
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
    defined, _ = splits.split_folds(runs.variables())
    folds = sum(len(f) for f in defined.values())
    # once per fold each; the combination's members refitted on all runs, calibrated for free
    members = {name for weights in model.evaluation_.weights.values() for name in weights}
    assert cheap == {name: folds + (name in members) for name in CANDIDATES}
    assert sum(cheap.values()) <= 0.12 * sum(full.values())


def test_runtime_model_can_be_forced_to_a_candidate(synthetic):
    assert RuntimeModel("ernest").fit(synthetic).selected_ == "ernest"
    with pytest.raises(ValueError, match="unknown model 'magic'"):
        RuntimeModel("magic")


def test_too_little_data_is_a_clear_error():
    with pytest.raises(evaluation.NotEnoughData, match="no observations"):
        evaluation.evaluate([])
    with pytest.raises(evaluation.NotEnoughData, match=r"^7 runs cannot fit a prediction: a profile needs 8 runs"):
        evaluation.evaluate(synthetic_observations()[:7])
    two_of_each = [
        run for run in synthetic_observations() if run.workers in (1, 2) and run.dataset_size in (2000, 4000)
    ]
    assert len(two_of_each) == 8
    with pytest.raises(
        evaluation.NotEnoughData,
        match=r"^8 runs cannot bound a prediction: they give 8 held-out errors inside the profile and a 0.9 bound "
        r"needs 9; measure 9 runs, or a third worker count or dataset size$",
    ):
        RuntimeModel().fit(two_of_each)


def test_eight_runs_at_four_worker_counts_predict_twice_the_workers_with_a_bound():
    """A small profile (issue 18: "fit 1-8 GPUs, 8-12 training runs"): 8 runs are more than the step's structure
    has parameters, and a worker count is held out again by the interpolation split: 10 held-out errors."""
    runs = synthetic_observations()
    profile = [run for run in runs if run.workers in (1, 2, 4, 8) and run.dataset_size == 8000]
    asked = [run for run in runs if run.workers == 16 and run.dataset_size == 8000]
    assert len(profile) == 8
    model = RuntimeModel().fit(profile)
    estimates = model.estimate(asked, 0.9)
    actual = np.array([run.execution_seconds for run in asked])
    assert np.all(np.abs(estimates.p50 / actual - 1) < 0.15), estimates.p50 / actual
    assert np.all(estimates.upper > actual) and np.all(np.isfinite(estimates.upper))


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
    far = above.seconds([3, 6, 12, 24, 384])
    assert np.diff(far[:4]) == pytest.approx([far[1] - far[0]] * 3)  # as much again per doubling: log(workers)
    assert far[4] < 10 * far[0]  # 128x the workers: not 128x the start-up
    below = StartupCurve.from_runs([o for o in digits_runs if o.workers != 1])
    assert below.seconds([1])[0] == pytest.approx(medians[2]) and medians[2] > medians[1]  # held, never less


def test_the_start_up_upper_quantile_is_a_conformal_rank_of_each_counts_runs(digits_runs):
    curve = StartupCurve.from_runs(digits_runs)
    for workers in (1, 4):
        measured = sorted(o.startup_seconds for o in digits_runs if o.workers == workers)
        rank = min(len(measured), math.ceil((len(measured) + 1) * 0.9))
        assert curve.upper([workers])[0] == pytest.approx(measured[rank - 1])
        assert curve.upper([workers])[0] > curve.seconds([workers])[0]  # above the median
    assert curve.upper([8])[0] - curve.upper([4])[0] == pytest.approx(curve.seconds([8])[0] - curve.seconds([4])[0])


def test_a_profile_that_never_measured_start_up_has_none():
    runs = read_observations(shipped_data("pollux-ncf"))[0]
    assert all(o.startup_seconds is None for o in runs)
    assert StartupCurve.from_runs(runs).seconds([1, 4, 16]).tolist() == [0.0, 0.0, 0.0]
