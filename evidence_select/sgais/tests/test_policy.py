"""The restart policy's decisions at a chunk's end (:func:`~evidence_select.sgais._policy.closing_action`): pure
functions of what the chunk measured, checked case by case."""

import pytest

from evidence_select.sgais._policy import (DEFERRAL_GROWTH, ActionKind, ChunkAction, ChunkMode, Degradation,
                                           SurpriseLimits, arrival_action, closing_action, periodic_restart_due,
                                           steps_action)
from evidence_select.sgais._state import SGAISConfig

CONFIG = SGAISConfig(batch_size=100, restart_on_surprise=True, restart_growth=2.0, reheat_after_steps=12)
DEFERRED = ChunkAction(kind=ActionKind.DEFER, surprised=True)
CALM = ChunkAction()


def _limits(n_seen, can_restart=True, can_defer=True, blocked=None):
    """What a chunk after ``n_seen`` rows may do: restart, and wait with the restart (the check covers the rows)."""
    return SurpriseLimits(n_seen=n_seen, capacity=10**6, has_past=True, past_exact=True, can_restart=can_restart,
                          can_defer=can_restart and can_defer, can_excurse=True, restart_on_shift=False,
                          watch_shifts=False, already_degraded=False, log_z_per_row=-1.0,
                          mode=ChunkMode(30, 0.9, True), degradation=None, restart_blocked=blocked)


@pytest.mark.parametrize("can_defer, kind", [(True, ActionKind.DEFER), (False, ActionKind.RESTART)])
def test_a_surprise_restarts_or_defers_its_restart_where_the_check_covers_the_rows(can_defer, kind):
    limits = _limits(500, can_defer=can_defer)
    assert steps_action(CONFIG, limits, CALM, 12, False) == ChunkAction(kind=kind, surprised=True)
    assert steps_action(CONFIG, limits, CALM, 11, False) is None
    assert arrival_action(limits, True, False) == ChunkAction(kind=kind, surprised=True)
    # Once deferred, later steps of the chunk leave it so (the chunk surprised once).
    assert steps_action(CONFIG, limits, DEFERRED, 40, True) is None


def test_a_deferred_restart_waits_while_chunks_surprise_and_runs_after_the_first_calm_one():
    waiting = closing_action(CONFIG, _limits(500), DEFERRED, 100)
    assert waiting.action.kind is ActionKind.CONTINUE and waiting.action.surprised and waiting.pending == 600
    still = closing_action(CONFIG, _limits(600), DEFERRED, 100, pending=waiting.pending)
    assert still.action.kind is ActionKind.CONTINUE and still.pending == 600  # since the first surprise
    ran = closing_action(CONFIG, _limits(700), CALM, 100, pending=still.pending)
    assert ran.action == ChunkAction(kind=ActionKind.RESTART, surprised=True) and ran.pending == 0


@pytest.mark.parametrize("n_seen, reported, can_defer", [(1100, False, True),  # the rows seen doubled
                                                         (800, True, True),  # the caller reports the chunk
                                                         (800, False, False)])  # the check no longer covers them
def test_a_deferred_restart_waits_no_longer_than_it_may(n_seen, reported, can_defer):
    assert n_seen + 100 >= DEFERRAL_GROWTH * 600 or reported or not can_defer
    closing = closing_action(CONFIG, _limits(n_seen, can_defer=can_defer), DEFERRED, 100, pending=600,
                             reported=reported)
    assert closing.action == ChunkAction(kind=ActionKind.RESTART, surprised=True) and closing.pending == 0
    # A chunk's own surprise whose evidence is reported restarts at once.
    assert closing_action(CONFIG, _limits(800), DEFERRED, 100, reported=True).action.kind is ActionKind.RESTART


def test_a_deferred_restart_that_can_no_longer_run_degrades_the_chunk():
    limits = _limits(900, can_restart=False, blocked=Degradation.BUDGET_SPENT)
    closing = closing_action(CONFIG, limits, CALM, 100, pending=600)
    assert closing.action.kind is ActionKind.DEGRADED and closing.action.reason is Degradation.BUDGET_SPENT
    assert closing.pending == 0


def test_the_periodic_restarts_wait_with_a_deferred_one():
    # 700 -> 800 crosses the checkpoint 100 * 2**3: due on a calm chunk, not while a surprise's restart waits.
    assert periodic_restart_due(CONFIG, _limits(700), CALM, 100)
    assert not periodic_restart_due(CONFIG, _limits(700), CALM, 100, pending=600)
    assert not periodic_restart_due(CONFIG, _limits(700), DEFERRED, 100)
    waiting = closing_action(CONFIG, _limits(700), DEFERRED, 100, pending=600)
    assert waiting.action.kind is ActionKind.CONTINUE and not waiting.skipped
    # Without a restart waiting, the checkpoint's gate decides as before.
    assert closing_action(CONFIG, _limits(700), CALM, 100).action.kind is ActionKind.RESTART
