"""The settings of nested sampling (:class:`NSConfig`)."""

from dataclasses import dataclass, replace

import numpy as np

from ..utils._likelihood import check_fraction, check_positive_int


MOVES = ("galilean", "slice")


@dataclass(frozen=True)
class NSConfig:
    """Settings of :func:`~._ns.nested_sampling_log_evidence`, validated on construction.

    Parameters
    ----------
    n_live : int, default=250
        Live points of each run.
    n_runs : int, default=2
        Independent runs, merged into one with ``n_runs * n_live`` live points.
        With two or more, the reported error is the larger of the simulated
        spread and the spread of the runs' own estimates over ``sqrt(n_runs)``,
        which also sees what the simulation cannot: live points that local moves
        cannot carry between the separated pieces of a multimodal constrained
        prior, or moves that remember their start.
    dlogz : float, default=0.5
        Stop when ``X * max(L_live)``, dynesty's estimate of the evidence
        left, would change ``log Z`` by less than this. The final live points
        then join the dead ones in order of likelihood, each with its
        simulated volume. The estimate takes the best live point, not their
        mean: where the likelihood keeps rising by orders of magnitude into a
        small volume (a funnel's neck), the live points' mean understates
        what is left, and a run stopped on it reads ``log Z`` low. Lowering it
        from the default costs about ``n_runs * n_live * log(0.5 / dlogz)``
        more replacements for a barely smaller error (dynesty's default with
        500 live points is 0.509).
    n_replace : int or None, default=None
        Live points replaced per iteration (all moved in one vectorised batch);
        None means ``max(1, n_live // 4)`` (the volume bookkeeping stays exact for
        any batch). At most ``n_live // 2``.
    moves : {"galilean", "slice"}, default="galilean"
        The replacement kernel. ``"galilean"``: ``n_galilean_steps`` Galilean
        Monte Carlo steps (straight whitened moves that reflect off the
        likelihood constraint, :mod:`evidence_select.kernels._galilean`; needs
        the model's gradients), then ``round(axis_fraction * n_slice_steps)``
        slice moves along coordinate axes. ``"slice"``: ``n_slice_steps`` slice
        moves, a fraction ``axis_fraction`` of them along axes and the rest
        along whitened random directions. Along the slow directions of a curved
        ridge or a badly conditioned target in many dimensions, random-direction
        slice moves carry each coordinate only a little and in a random
        direction, and the replacements keep a memory of their start that lets
        ``log Z`` read high; Galilean trajectories keep going.
    n_slice_steps : int or None, default=None
        Slice moves per replacement; None means ``max(10, 3 * n_params)``: with
        fewer, a replacement still remembers its starting live point and
        ``log Z`` comes out high.
    n_galilean_steps : int or None, default=None
        Galilean steps per replacement (``moves="galilean"``); None means
        ``4 * n_slice_steps``. A step costs one likelihood-and-gradient
        evaluation (for a model with a ``fast_gradient``, the likelihood, and
        that gradient alone where the step lands outside), and one likelihood
        evaluation more where it reflects off the constraint; its length adapts
        between iterations towards a quarter of the steps reversing at the
        constraint.
    trajectory_length : int, default=3
        Galilean steps between fresh velocities.
    max_step_out : int, default=10
        Stepping-out budget of each slice move.
    axis_fraction : float, default=0.5
        Share of slice moves along a random coordinate axis (scaled by the
        coordinate's spread given the others, under the live points'
        covariance; see :mod:`evidence_select.kernels._slice`); with
        ``moves="slice"`` the rest run along whitened random directions. Random
        directions and Galilean steps keep correlated and curved posteriors in
        reach, axis moves the spikes and separate modes of each coordinate.
    n_simulations : int, default=200
        Simulated-volume replicates for the uncertainty.
    max_iterations : int, default=100000
        Cap on iterations of each run (reaching it fails the ``"iterations"`` check).
    max_move_length : float, default=1.0
        Largest factor by which the Markov chain moves per replacement
        (Galilean and slice steps alike) may grow, at least 1 (1: never).
        Between iterations the factor grows by 1.25 while the second half of
        the moves removes more than ``DECAY_HIGH`` (0.15) of the memory of their
        start that the first half removes (:func:`~._ns_moves.adapt_move_length`), and
        shrinks by it, down to ``MIN_MOVE_LENGTH`` (1/8), while it removes
        less than ``DECAY_LOW`` (0.05): moves much longer than the posterior's
        shape needs cost calls for nothing. Worth raising (e.g. to 4 or 8) for a
        curved or badly conditioned posterior with one mode in many
        dimensions, where the default moves remember their start and ``log Z``
        can read high (the ``"move_memory"`` check fails there, and the run is
        made again with it 4 times larger: ``retry_longer_moves``). Not the
        default, so that a run whose moves forget their start spends no more
        than the configured moves.
    retry_longer_moves : bool, default=True
        Where the ``"move_memory"`` check fails (the moves remember their
        start), run again once with ``max_move_length`` ``RETRY_LENGTH_FACTOR``
        (4) times larger and report that run: its estimate, its checks, and,
        where its own ``"move_memory"`` check still fails, its error widened
        by how far the estimate moved between the two (:func:`~._ns.with_longer_moves`),
        so that a flagged interval reaches about as far as the bias that remains.
        The first run's estimate is in ``info["shorter_moves"]``; the calls and
        seconds are both runs'. False: report the first run, flagged.
    ellipsoid : bool, default=True
        Before the Markov chain moves, an exact independent-proposal move
        (:mod:`evidence_select.kernels._ellipsoid`): candidates from the prior
        while the expected prior mass above the bound is at least
        ``PRIOR_PROPOSALS_VOLUME`` (0.1), and below it while a valid one costs
        fewer calls than the Markov chain moves spend on a replacement and the
        ellipsoids' candidates do not pay (:func:`~._ns_proposals.prior_pays`); otherwise
        uniform in the bounding ellipsoids of the live points other than the
        starts (one ellipsoid, split in two by 2-means while the parts'
        covariances take much less volume, so that a curved ridge or separate
        modes are bounded tightly:
        :func:`~evidence_select.kernels._ellipsoid.bounding_ellipsoids`; each
        ``ELLIPSOID_ENLARGE`` times its smallest volume), the first inside the
        constraint in a prior-weighted random order taken; where the model
        offers its prior transform, the same ellipsoids around the live
        points' unit-cube coordinates instead, if they hold less prior mass
        (:mod:`evidence_select.kernels._cube`: there the prior is uniform and
        the candidates need no weight). While a valid candidate costs fewer
        calls than the Markov chain moves spend on a replacement (at first
        ``n_slice_steps``), the candidates drawn leave at most 3% of the
        chains at their start, and at most 10% of the replacements' starts lie
        outside the ellipsoids (a running share: :func:`~._ns_proposals.ellipsoid_pays`), it
        replaces the Markov chain moves (chains outside the ellipsoids after
        it take those moves instead, kept outside them: a quarter of them
        outside one ellipsoid, all of them outside split ones); below,
        each chain tries one candidate (which keeps both shares measured) and
        the Markov chain moves follow. On a constrained prior that a few
        ellipsoids cover (one mode or a few, straight or curved) in up to ~16
        dimensions it makes each replacement an independent draw for a few
        likelihood calls; from ~32 dimensions a few hundred live points no
        longer bound where the next draw lands, and the Markov chain moves
        take over.
    """

    n_live: int = 250
    n_runs: int = 2
    dlogz: float = 0.5
    n_replace: int = None
    moves: str = "galilean"
    n_slice_steps: int = None
    n_galilean_steps: int = None
    trajectory_length: int = 3
    max_step_out: int = 10
    axis_fraction: float = 0.5
    n_simulations: int = 200
    max_iterations: int = 100_000
    max_move_length: float = 1.0
    retry_longer_moves: bool = True
    ellipsoid: bool = True

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen dataclass)
        set_("n_live", check_positive_int(self.n_live, "n_live", minimum=2))
        set_("n_runs", check_positive_int(self.n_runs, "n_runs"))
        set_("dlogz", check_fraction(self.dlogz, "dlogz", high=np.inf))
        if self.n_replace is not None:
            n_replace = check_positive_int(self.n_replace, "n_replace")
            if n_replace > self.n_live // 2:
                raise ValueError(f"n_replace must be at most n_live // 2 = {self.n_live // 2}, got {n_replace}")
            set_("n_replace", n_replace)
        if self.moves not in MOVES:
            raise ValueError(f"moves must be one of {MOVES}, got {self.moves!r}")
        if self.n_slice_steps is not None:
            set_("n_slice_steps", check_positive_int(self.n_slice_steps, "n_slice_steps"))
        if self.n_galilean_steps is not None:
            set_("n_galilean_steps", check_positive_int(self.n_galilean_steps, "n_galilean_steps"))
        set_("trajectory_length", check_positive_int(self.trajectory_length, "trajectory_length"))
        set_("max_step_out", check_positive_int(self.max_step_out, "max_step_out", minimum=0))
        set_("axis_fraction", check_fraction(self.axis_fraction, "axis_fraction", high=1.0 + 1e-12, closed_low=True))
        set_("n_simulations", check_positive_int(self.n_simulations, "n_simulations", minimum=2))
        set_("max_iterations", check_positive_int(self.max_iterations, "max_iterations"))
        for name in ("ellipsoid", "retry_longer_moves"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        set_("max_move_length", check_fraction(self.max_move_length, "max_move_length", low=1.0, high=np.inf,
                                               closed_low=True))

    def resolved(self, n_params):
        """A copy with the ``None`` defaults filled in for a model of ``n_params`` parameters."""
        n_slice_steps = self.n_slice_steps or max(10, 3 * n_params)
        return replace(self, n_replace=self.n_replace or max(1, self.n_live // 4), n_slice_steps=n_slice_steps,
                       n_galilean_steps=self.n_galilean_steps or 4 * n_slice_steps)
