"""The SGAIS engine reproduces pinned results bit for bit on fixed seeds.

The values below were produced by the engine before its restructuring into small pure steps
(``evidence_select/evidence/_sgais.py`` as of the commit that added this file), on this project's
build machine (x86-64, numpy's default BLAS, ``OMP_NUM_THREADS=1``). Each case is one code path of
:mod:`evidence_select.evidence._sgais_regression_cases`; a case pins ``repr`` of the final
``log_evidence`` and its std, a hash of the particles, weights, group evidences and per-chunk float
records, and a hash of the per-chunk integer records. Equality is exact: a refactoring that changes
the order of a single floating-point operation or random draw fails here. A deliberate change of the
algorithm must re-pin the values (run ``python evidence_select/evidence/tests/_sgais_regression_cases.py``)
and say so in its commit message.
"""

import pytest

from evidence_select.evidence.tests._sgais_regression_cases import CASES
from evidence_select.utils._threads import single_threaded_blas

PINNED = {
    'linear_beyond_reservoir': ('-1740.8892973303032', '1.3321016620368482', '9a1aae2ed06203d7', 'd72582a8f3526bd4'),
    'linear_estimator': ('-1742.402424748296', '0.6001526210321536', 'b5cc4c99fc90a181', '7243fdef041ae635'),
    'linear_no_control_variates': ('-1743.6097230583805', '0.5997694955322092', '22d991170435e1f4', 'c3e6d8b730ce4499'),
    'linear_no_resampling_sghmc_data_schedule': ('-2784.9173069287763', '138.38891571118484', '159b1f7bafde3227', '76a6b1dcfc2a6098'),
    'linear_paper_settings': ('-2591.2752938664676', '183.039732164229', '6f266b34b2c349cf', 'cd3036828ec47fb9'),
    'linear_reheat_cap_warns': ('-2454.926017665834', '120.9235999101511', '1f2a6104d632bbdb', 'a5e0ac465788476d'),
    'linear_restart_growth': ('-1741.0225320049906', '0.8291848874181276', '7af9632c930a9ae0', '0098d9b8461c4be4'),
    'linear_surprise_flag': ('-1742.0923209861894', '0.5628196759698518', 'b6ec77c87d5b12bd', '0df4384cbee79418'),
    'logistic_beyond_reservoir_reheat': ('-339.75509623453047', '1.115977885708773', '62a8aff519f57e77', '0c70f850238a6038'),
    'logistic_estimator': ('-346.7575192852199', '0.6069035178733486', 'd59fc90292f6d864', '2ef1d1b8942a7edf'),
    'mixture_beyond_reservoir': ('-1656.1135997499423', '5.079319538145796', 'c51bace0955eaef7', 'aeb3ff117a7752dd'),
    'mixture_beyond_reservoir_no_cv': ('-1659.737997279493', '1.2723189477182346', '466fd1d4bd9c7b87', 'f22714c14a479123'),
    'mixture_checkpoint_resume': ('-1693.6563732901584', '5.9783372992415025', 'e3fb1563a6bc2bd2', 'c149c464c17b19b2'),
    'mixture_no_restarts': ('-1723.3075217621786', '0.9820843227292545', '996d5692d5c1237a', 'dc122a1737e4e624'),
    'mixture_restarts': ('-1688.317008089062', '7.6634936598944705', '131cd2ef473d262b', '67c8995bd5f7b8c7'),
    'mixture_surprise_threshold': ('-1697.0067504444028', '6.584568180959309', '7d5f4080109533f9', '7b04da34d339d6ff'),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_engine_reproduces_pinned_results(name):
    with single_threaded_blas():
        assert CASES[name]() == PINNED[name]


def test_every_case_is_pinned():
    assert sorted(CASES) == sorted(PINNED)
