"""The engine chooses its kernels from what a model declares (``Model.capabilities``), never from its class."""

import numpy as np
import pytest

from evidence_select.models import GaussianMixtureModel, LinearGaussianModel, ModelCapabilities, SoftmaxRegressionModel
from evidence_select.sgais._moves import (MoveTarget, exact_draw_kernel, exact_hmc_kernel, jump_kernel, move_kernels,
                                          sghmc_kernel)
from evidence_select.sgais._state import SGAISConfig, sgais_init
from evidence_select.sgais._engine import sgais_update


def test_the_built_in_models_declare_their_moves():
    linear, softmax, mixture = (LinearGaussianModel(2).capabilities(), SoftmaxRegressionModel(2, 3).capabilities(),
                                GaussianMixtureModel(2, 2).capabilities())
    assert linear == ModelCapabilities(exact_draws=True, statistics_draws=True, gradient_statistics=True,
                                       exact_evidence=True, prior_transform=True)
    assert softmax == ModelCapabilities(prior_transform=True)
    assert mixture == ModelCapabilities(global_jumps=True, mode_search=True, fused_joint_gradient=True,
                                        fused_fixed_points=True, exact_evidence=True, prior_transform=True,
                                        approximate_sum=True)


class _OtherPrior(LinearGaussianModel):
    """A linear model whose prior is no longer the one its inherited transform was written for."""

    def log_prior(self, theta):
        return super().log_prior(theta / 2.0) - self.n_params * np.log(2.0)


def test_a_prior_transform_is_dropped_with_the_prior_it_was_written_for():
    assert not _OtherPrior(2).capabilities().prior_transform


def test_a_class_patched_after_its_first_declaration_is_declared_afresh():
    """The class part of the declaration is cached per class and its members: a member replaced on the class
    after a first call counts as the new definer."""
    class Patched(LinearGaussianModel):
        pass

    model = Patched(2)
    assert model.capabilities().exact_draws
    Patched.log_likelihood = LinearGaussianModel.log_likelihood  # now defined by Patched, not by the draws' owner
    assert not model.capabilities().exact_draws
    del Patched.log_likelihood
    assert model.capabilities().exact_draws


class _Context:
    """The two members of a chunk context that :func:`move_kernels` reads."""

    def __init__(self, capabilities, exact_moves):
        self.capabilities, self.exact_moves, self.past_statistics = capabilities, exact_moves, None


def test_kernels_follow_the_declaration():
    jump = MoveTarget(1.0, 1.0, 5, True)
    assert move_kernels(_Context(ModelCapabilities(), False), jump) == (sghmc_kernel,)
    assert move_kernels(_Context(ModelCapabilities(global_jumps=True), False), jump) == (sghmc_kernel, jump_kernel)
    assert move_kernels(_Context(ModelCapabilities(global_jumps=True), False), jump._replace(jump=False)) == (
        sghmc_kernel,)
    assert move_kernels(_Context(ModelCapabilities(), True), jump) == (exact_hmc_kernel,)
    assert move_kernels(_Context(ModelCapabilities(exact_draws=True), True), jump) == (exact_draw_kernel,)


class _JumpsDeclaredOff(GaussianMixtureModel):
    """A mixture that keeps ``propose_jump`` and ``mode_starts`` but declares neither."""

    def capabilities(self):
        return super().capabilities()._replace(global_jumps=False, mode_search=False)


# Eight particles on a two-cluster stream: the first chunk keeps few lineages, which the engine warns about.
@pytest.mark.filterwarnings("ignore::evidence_select.EvidenceConvergenceWarning")
def test_a_member_the_model_does_not_declare_is_never_called():
    """Surprising chunks (reheat after one step) of a mixture whose global moves are declared off: no jump is
    tried, although the class defines ``propose_jump``; declared on, the same stream accepts jumps."""
    X = np.random.default_rng(0).normal(size=(300, 1)) + np.repeat([[-3.0], [3.0]], 150, axis=0)
    config = SGAISConfig(n_particles=8, batch_size=100, reheat_after_steps=1, exact_move_rows=0)

    def jumps(model):
        state = sgais_init(np.random.default_rng(0), model, config, 1)
        total = 0
        for start in range(0, len(X), 100):
            state, record, _ = sgais_update(state, X[start:start + 100], None, model, config)
            total += record.n_jumps_accepted
        return total

    assert jumps(_JumpsDeclaredOff(2, 1)) == 0
    assert jumps(GaussianMixtureModel(2, 1)) > 0
