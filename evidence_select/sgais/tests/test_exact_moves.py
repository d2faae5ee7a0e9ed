"""The engine's exact HMC kernel: when it runs, and that it leaves the exact tempered posterior invariant."""

from types import SimpleNamespace

import numpy as np
import pytest

from evidence_select import BayesianLinearRegressor, SamplerDegeneracyWarning
from evidence_select.datasets import make_linear_regression
from evidence_select.sgais import _moves as _sgais_moves
from evidence_select.sgais._moves import (ChunkContext, MoveTarget, exact_draw_kernel, exact_hmc_kernel, move_kernels,
                                          sghmc_kernel, uses_exact_moves)
from evidence_select.sgais._settings import ExactMoveSettings, with_tuning
from evidence_select.sgais._state import Particles, SGAISConfig
from evidence_select.kernels import _particle_hmc
from evidence_select.kernels._hmc import jittered_leapfrog_count
from evidence_select.sgais._reservoir import reservoir_init, reservoir_insert
from evidence_select.models import LinearGaussianModel, ModelCapabilities


def _context(model, X, y, n_seen, n_groups, reservoir, exact_moves=True, capabilities=None):
    """The :class:`ChunkContext` of a move on ``(X, y)`` after ``n_seen`` rows held in ``reservoir``."""
    if capabilities is None:
        capabilities = ModelCapabilities() if model is None else model.capabilities()
    return ChunkContext(model=model, config=SGAISConfig(), capabilities=capabilities, X=X, y=y, n_seen=n_seen,
                        n_groups=n_groups, reservoir=reservoir, block=None, use_cv=False, scales=None,
                        exact_moves=exact_moves)


def _particles(theta, n_groups, n_particles):
    """Uniformly weighted particles of ``n_groups`` groups, no references."""
    return Particles(theta=theta, log_weights=np.full((n_groups, n_particles), -np.log(n_particles)),
                     log_evidence=np.zeros(n_groups), log_evidence_variance=np.zeros(n_groups), reference=None,
                     reference_grad=None)


@pytest.mark.parametrize("n_seen, n_chunk, n_stored, budget, from_statistics, expected", [
    (0, 500, 0, 2000, False, True),  # the first chunk
    (1500, 500, 1500, 2000, False, True),  # the chunk that reaches the budget
    (1500, 501, 1500, 2000, False, False),  # past the budget
    (1500, 500, 1000, 2000, False, False),  # the reservoir lost rows: the past is no longer exact
    (1500, 500, 1000, 2000, True, True),  # ... unless the draws come from every past row's summed statistics
    (1500, 501, 1500, 2000, True, False),  # which still keep to the budget
    (10**6, 500, 1000, None, True, True),  # no budget
    (0, 500, 0, 0, True, False),  # switched off
])
def test_exact_moves_only_while_the_past_is_exact_and_within_budget(n_seen, n_chunk, n_stored, budget,
                                                                      from_statistics, expected):
    state = SimpleNamespace(n_samples_seen=n_seen, reservoir=SimpleNamespace(n_stored=n_stored, n_seen=n_seen),
                            sghmc_fell_behind=0)
    assert uses_exact_moves(SGAISConfig(exact_move_rows=budget), state, n_chunk, from_statistics) is expected


@pytest.mark.parametrize("n_seen, n_chunk, n_stored, expected", [
    (1500, 501, 1500, True),  # past exact_move_rows, within CheckSettings.lag_rows (5000)
    (4500, 500, 4500, True),  # the chunk that reaches lag_rows
    (4500, 501, 4500, False),  # past lag_rows
    (2500, 500, 2000, False),  # the reservoir lost rows
])
def test_a_run_whose_sghmc_fell_behind_moves_exactly_up_to_the_lag_rows(n_seen, n_chunk, n_stored, expected):
    state = SimpleNamespace(n_samples_seen=n_seen, reservoir=SimpleNamespace(n_stored=n_stored, n_seen=n_seen),
                            sghmc_fell_behind=1200)
    assert uses_exact_moves(SGAISConfig(exact_move_rows=1000), state, n_chunk) is expected


def test_the_state_keeps_the_summed_statistics_of_every_row_seen():
    """Past the reservoir's 300 rows the kept sum is still every row's: the exact draws rest on it."""
    data = make_linear_regression(1000, random_state=0)
    est = BayesianLinearRegressor(batch_size=128, reservoir_size=300, random_state=0).fit(data.X, data.y)
    expected = est.model_.gradient_statistics(data.X, data.y)
    np.testing.assert_allclose(est.sgais_state_.past_statistics, expected, rtol=1e-12)
    assert est.sgais_state_.reservoir.n_stored == 300


def test_a_state_without_the_summed_statistics_moves_by_sghmc_past_the_reservoir():
    """A state pickled before the engine kept the sum: past the reservoir its chunks cannot draw exactly (the
    stored rows are a subsample), so they move by SGHMC, and the state goes on without a sum."""
    data = make_linear_regression(700, random_state=0)
    est = BayesianLinearRegressor(batch_size=100, reservoir_size=300, random_state=0).fit(data.X[:600], data.y[:600])
    est.sgais_state_ = est.sgais_state_._replace(past_statistics=None)
    context = _sgais_moves.chunk_context(est.sgais_state_, data.X[600:], data.y[600:], est.model_, est.sgais_config_)
    assert context.past_statistics is None and not context.exact_moves
    est.partial_fit(data.X[600:], data.y[600:])
    assert est.sgais_state_.past_statistics is None and np.isfinite(est.log_evidence_)


def _tempered_posterior(model, past, chunk, tempering):
    """Mean and covariance of ``p(theta) p(past|theta) p(chunk|theta)^tempering`` (conjugate, exact)."""
    design = np.vstack([model._design(past[0]), model._design(chunk[0])])
    y = np.concatenate([past[1], chunk[1]])
    weights = np.concatenate([np.ones(len(past[1])), np.full(len(chunk[1]), tempering)])
    precision = np.diag(1.0 / model.prior_variances) + (design.T * weights) @ design / model.noise_variance
    covariance = np.linalg.inv(precision)
    return covariance @ (design.T @ (weights * y)) / model.noise_variance, covariance


def _linear_case(rng):
    """A linear model with correlated features, 200 past rows in a reservoir and a chunk of 50 at tempering 0.4:
    ``(model, X, y, reservoir, mean, covariance)`` of that exact tempered posterior."""
    mixing = np.array([[1.0, 0.9, 0.0], [0.0, 0.3, 0.0], [0.0, 0.0, 2.0]])
    X = rng.normal(size=(250, 3)) @ mixing
    y = X @ [0.5, -1.0, 0.2] + 0.3 + rng.normal(size=250)
    model = LinearGaussianModel(3, noise_variance=1.0, prior_scale=3.0)
    reservoir, _ = reservoir_insert(rng, reservoir_init(1000, 3, y.dtype), X[:200], y[:200])
    mean, covariance = _tempered_posterior(model, (X[:200], y[:200]), (X[200:], y[200:]), 0.4)
    return model, X, y, reservoir, mean, covariance


def _assert_whitened_standard(theta, mean, covariance):
    """Each whitened coordinate's mean within 4 standard errors (sqrt(1/n)), its variance within 4 (sqrt(2/n))."""
    whitened = np.linalg.solve(np.linalg.cholesky(covariance), (theta - mean).T).T
    n = len(whitened)
    assert np.all(np.abs(whitened.mean(axis=0)) < 4 * np.sqrt(1.0 / n)), whitened.mean(axis=0)
    assert np.all(np.abs(whitened.var(axis=0) - 1.0) < 4 * np.sqrt(2.0 / n)), whitened.var(axis=0)


def test_exact_draws_give_the_tempered_linear_posterior():
    """The linear model's exact moves are independent draws from the tempered posterior (past at power 1, the chunk
    at 0.4): from a population far off (all at the origin), one move lands on its mean and covariance. Draws that
    used the chunk at full power, or left the past out, fail."""
    rng = np.random.default_rng(1)
    model, X, y, reservoir, mean, covariance = _linear_case(rng)
    n_groups, n_particles = 2, 2000
    particles = _particles(np.zeros((n_groups * n_particles, 4)), n_groups, n_particles)
    context = _context(model, X[200:], y[200:], 200, n_groups, reservoir)
    target = MoveTarget(0.4, 1.0, 5, False)
    assert move_kernels(context, target) == (exact_draw_kernel,)
    moved, counts, _ = exact_draw_kernel(rng, context, particles, target)
    assert counts.n_evaluations == 250
    _assert_whitened_standard(moved.theta, mean, covariance)


def test_exact_kernel_keeps_the_tempered_linear_posterior(monkeypatch):
    """2 groups of 300 particles drawn from the exact tempered posterior of a linear model with correlated
    features (past 200 rows in the reservoir, a chunk of 50 at tempering 0.4) keep its mean and covariance after
    8 HMC moves (the kernel of models without exact draws): each whitened coordinate's mean within 4 standard
    errors (sqrt(1/n)) and variance within 4 standard errors (sqrt(2/n)). A kernel that used the chunk at full
    power, or left the past out, fails."""
    rng = np.random.default_rng(0)
    model, X, y, reservoir, mean, covariance = _linear_case(rng)
    factor = np.linalg.cholesky(covariance)
    n_groups, n_particles = 2, 300
    theta = mean + rng.standard_normal((n_groups * n_particles, 4)) @ factor.T
    particles = _particles(theta, n_groups, n_particles)
    context = _context(model, X[200:], y[200:], 200, n_groups, reservoir)
    drawn = []  # the leapfrog counts each transition drew, one per group

    def recorded_counts(*args):
        drawn.append(jittered_leapfrog_count(*args))
        return drawn[-1]

    monkeypatch.setattr(_particle_hmc, "jittered_leapfrog_count", recorded_counts)
    start = theta.copy()
    for _ in range(8):
        drawn.clear()
        particles, counts, _ = exact_hmc_kernel(rng, context, particles, MoveTarget(0.4, 1.0, 5, False))
    # A move is 2 transitions of each half, and a group moves again while its particles correlate with where the
    # move began (at most ExactMoveSettings.max_repeats more times). Per particle of the groups that move, for each half: the
    # start plus 2 transitions, each integrated for the longest of the moving groups' jittered counts; plus each
    # half's curvature (n_params + 1 positions per group); shared out over those particles and rounded up, then
    # summed over the moves and shared out over all particles.
    moves = [drawn[i:i + 4] for i in range(0, len(drawn), 4)]
    settings = ExactMoveSettings()
    assert 1 <= len(moves) <= 1 + settings.max_repeats and all(len(move) == 4 for move in moves)
    assert all(np.all((1 <= c) & (c <= settings.max_leapfrog)) for c in drawn)
    evaluations = 0
    for move in moves:
        n_moving = len(move[0]) * n_particles
        chain_steps = sum(n_moving // 2 * (1 + sum(int(c.max()) for c in pair)) for pair in (move[:2], move[2:]))
        evaluations += -(-(chain_steps + 2 * len(move[0]) * (theta.shape[1] + 1)) // n_moving) * n_moving
    per_particle = -(-evaluations // len(theta))
    assert counts.n_evaluations == per_particle * len(theta) * 250
    assert np.mean(np.all(particles.theta != start, axis=1)) > 0.9  # the particles did move
    _assert_whitened_standard(particles.theta, mean, covariance)
    assert np.all((particles.exact_step > 0.05) & (particles.exact_step < 2.0))


def test_sghmc_beyond_the_budget():
    context = _context(None, None, None, 0, 1, None, exact_moves=False)
    assert move_kernels(context, MoveTarget(1.0, 1.0, 5, False)) == (sghmc_kernel,)


class _WithoutDraws(LinearGaussianModel):
    """The linear model with its conjugate draws declared off: its exact moves are HMC's."""

    def capabilities(self):
        return super().capabilities()._replace(exact_draws=False, statistics_draws=False)


class _ExactHMCRegressor(BayesianLinearRegressor):
    def _make_model(self, n_features):
        return _WithoutDraws(n_features)


class _NeverDecorrelatedRegressor(_ExactHMCRegressor):
    """Every group's exact move counts as still correlated (threshold -1), with no repeats."""

    _engine_tuning = with_tuning(SGAISConfig(), exact_moves=dict(max_correlation=-1.0, max_repeats=0)).tuning


def test_moves_that_stay_correlated_are_recorded():
    """A group whose exact moves run out of repeats while its particles still correlate with their start is counted
    in its chunk record's ``n_correlated_moves``. With the threshold at -1 (every group stays correlated) and no
    repeats, every group's move of every chunk counts: a positive multiple of the groups. At the default threshold
    this well-conditioned linear stream decorrelates: over seeds, a stray group may still be counted now and then, but
    the count stays under 5% of the forced one (counting every move regardless of correlation would give 100%). The
    linear model's exact draws are declared off, so its exact moves are HMC's."""
    data = make_linear_regression(300, random_state=0)

    def counted(estimator_class, seed):
        est = estimator_class(n_particles=20, batch_size=100, random_state=seed).fit(data.X, data.y)
        return [record.n_correlated_moves for record in est.evidence_history_]

    forced = [counted(_NeverDecorrelatedRegressor, seed) for seed in range(3)]
    assert all(count > 0 and count % 2 == 0 for counts in forced for count in counts)
    at_default = [counted(_ExactHMCRegressor, seed) for seed in range(3)]
    assert all(len(counts) == 3 and min(counts) >= 0 for counts in at_default)
    assert np.sum(at_default) <= 0.05 * np.sum(forced)


def test_exact_target_kicks_with_a_fast_gradient_and_keeps_the_exact_density():
    """A model with ``fast_gradient`` (the softmax) gets a KickedTarget: exact density and curvature gradient from
    the fused double-precision call, kicks from its single-precision gradient; other models the fused call alone."""
    from evidence_select.kernels._hmc import KickedTarget
    from evidence_select.models import SoftmaxRegressionModel

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 4)), rng.integers(0, 3, size=300)
    weights = np.where(np.arange(300) < 100, 0.3, 1.0)  # a chunk at power 0.3 before 200 past rows
    softmax = SoftmaxRegressionModel(4, 3)
    theta = softmax.sample_prior(rng, 6)
    target = _sgais_moves._exact_target(softmax, X, y, weights)
    assert isinstance(target, KickedTarget)
    exact = softmax.log_prior(theta) + softmax.log_likelihood(theta, X, y) @ weights
    np.testing.assert_allclose(target(theta)[0], exact, rtol=1e-12)
    np.testing.assert_allclose(target.density_fn(theta)[0], exact, rtol=1e-12)
    exact_grad = target(theta)[1]
    # float32 products over 300 rows: within 1e-5 of the gradient's row-sum scale
    np.testing.assert_allclose(target.kick_gradient_fn(theta), exact_grad, atol=1e-5 * 300 * 4)
    linear = LinearGaussianModel(4)
    assert not isinstance(_sgais_moves._exact_target(linear, X, rng.normal(size=300), weights), KickedTarget)


def test_exact_draws_only_for_the_likelihood_they_were_written_for():
    """A subclass that overrides the likelihood alone must not inherit the conjugate draws; one that overrides
    both keeps them (the protocol's default declaration, :meth:`Model.capabilities`)."""
    def offers_exact_draws(model):
        return model.capabilities().exact_draws

    class HeavierNoise(LinearGaussianModel):
        def log_likelihood(self, theta, X, y=None):
            return 0.5 * super().log_likelihood(theta, X, y)

    class WithItsOwnDraws(HeavierNoise):
        def sample_tempered_posterior(self, rng, n_samples, X, y, weights):
            return super().sample_tempered_posterior(rng, n_samples, X, y, 0.5 * np.asarray(weights))

    assert offers_exact_draws(LinearGaussianModel(2))
    assert not offers_exact_draws(HeavierNoise(2))
    assert offers_exact_draws(WithItsOwnDraws(2))
    from evidence_select.models import SoftmaxRegressionModel
    assert not offers_exact_draws(SoftmaxRegressionModel(2, 3))


def _diverging(rng, theta, grad_fn, **options):
    """An SGHMC trajectory that always diverges."""
    return np.full_like(theta, np.nan)


def test_a_chunk_on_which_sghmc_diverges_is_annealed_again_with_exact_moves(monkeypatch):
    """While the reservoir holds every row, a chunk whose SGHMC diverges is annealed again from the same state with
    exact moves: the record and a warning say so, and the evidence agrees with the conjugate one within its error
    bar (4 sigma, each seed; 0.05 nats for the Monte Carlo error of the error bar itself). Without the recovery the
    fit raises."""
    monkeypatch.setitem(_sgais_moves.TRAJECTORIES, "baoab", _diverging)
    data = make_linear_regression(300, random_state=0)
    exact = LinearGaussianModel(data.X.shape[1]).exact_log_evidence(data.X, data.y)
    for seed in range(3):
        est = _ExactHMCRegressor(exact_move_rows=0, n_particles=20, batch_size=100, random_state=seed)
        with pytest.warns(SamplerDegeneracyWarning, match="SGHMC diverged .* annealed again with exact moves"):
            est.fit(data.X, data.y)
        assert "fallback" in est.evidence_checks_
        assert all("SGHMC diverged" in record.fallback and "annealed again with exact moves" in record.fallback
                   for record in est.evidence_history_)
        assert abs(est.log_evidence_ - exact) < 4 * est.log_evidence_std_ + 0.05


def test_sghmc_divergence_beyond_the_reservoir_is_raised_and_the_state_kept(monkeypatch):
    """Beyond the reservoir exact moves cannot run: the divergence is raised, naming the cure, and a failed
    ``partial_fit`` leaves the fitted state as it was."""
    data = make_linear_regression(300, random_state=0)
    est = _ExactHMCRegressor(exact_move_rows=0, n_particles=20, batch_size=100, reservoir_size=100, random_state=0)
    est.partial_fit(data.X[:200], data.y[:200])  # a reservoir of 100 rows holds half the rows seen
    before = (est.n_samples_seen_, est.log_evidence_, est.particles_.copy(), len(est.evidence_history_))
    monkeypatch.setitem(_sgais_moves.TRAJECTORIES, "baoab", _diverging)
    with pytest.raises(FloatingPointError, match="SGHMC diverged .* lower learning_rate or standardise"):
        est.partial_fit(data.X[200:], data.y[200:])
    assert (est.n_samples_seen_, est.log_evidence_, len(est.evidence_history_)) == (before[0], before[1], before[3])
    np.testing.assert_array_equal(est.particles_, before[2])
