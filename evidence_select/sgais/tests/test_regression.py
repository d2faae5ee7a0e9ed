"""The SGAIS engine reproduces pinned results on fixed seeds.

Each case is one code path of :mod:`evidence_select.sgais.tests._regression_cases`, run with single-threaded
BLAS, and pins a :class:`~evidence_select.sgais.tests._regression_cases.Fingerprint`:

- ``decisions``, a digest of every integer the run decided (per chunk: annealing steps, resamplings, reheat steps,
  accepted jumps, replayed rows; the state's counters), compared exactly: a change of schedule, resampling or
  restart decision fails here;
- ``floats``, the log evidence, its std and sums of ``|x|`` and ``x**2`` of the final particles, weights, group
  evidences and variances, per-chunk records and step scales, compared to a relative tolerance of ``RTOL`` in the
  environment that pinned them (``environment_key``: numpy, its SIMD extensions, the BLAS kernels and the maths
  library's last bits) and of ``OTHER_ENVIRONMENT_RTOL`` elsewhere. Another CPU changes the last bits of ``log``,
  ``exp`` and matrix products, and annealing amplifies them: log evidences moved by 2e-9 relative between two
  machines, the logistic run's particle sums by up to 5e-7, while any change of an algorithm's arithmetic moves the
  floats by several orders more.

The ``*_exact_moves`` cases run Metropolis-Hastings HMC whose long trajectories amplify a last-bit difference until
an accept decision flips, after which the run is another draw of the same estimator; they are compared only in
the environment that pinned them, and skipped elsewhere with the reason.

A deliberate change of an algorithm re-pins the values (``PYTHONPATH=. python
evidence_select/sgais/tests/_regression_cases.py`` from the repository's root, with an empty ``NUMBA_CACHE_DIR``
so that no kernel comes from a stale cache, in the environment whose key it prints) and says so in its commit
message, with the change's effect measured over many seeds.
"""

import numpy as np
import pytest

from evidence_select.sgais.tests._regression_cases import CASES, Fingerprint, environment_key
from evidence_select.utils._threads import single_threaded_blas

RTOL = 1e-9
#: Outside the pinning environment (see the module docstring): last-bit differences, amplified, stay far below.
OTHER_ENVIRONMENT_RTOL = 1e-5
#: The cases whose runs diverge after a last-bit difference (see the module docstring).
CHAOTIC = {"linear_exact_moves", "logistic_exact_moves", "mixture_exact_moves"}
PINNED_ENVIRONMENT = 'adb9a16638a21ce9'

PINNED = {
    'linear_beyond_reservoir': Fingerprint(
        decisions='7f0c769a86f83408', floats=(
        -1740.8892973303011, 1.3321016620367345, 100.73791956285828, 179.47756300651074, 36.30882371102098,
        88.52643688605056, 3483.191175627172, 6066313.931973177, 0.9145749482054226, 0.4575608844609778,
        6200.3740191059205, 7753645.410944235, 5.943005730062299, 5.89184791621392)),
    'linear_estimator': Fingerprint(
        decisions='477d0d8f32ef3e3b', floats=(
        -1742.4024247482953, 0.6523970424669732, 100.5184764313322, 178.95684498481194, 35.998755890294625,
        86.63660476975662, 3485.0498589349827, 6072786.769983966, 1.0990164686021078, 0.6204096807083265,
        4423.26184459349, 5750514.879088439, 5.943005730062299, 5.89184791621392)),
    'linear_exact_moves': Fingerprint(
        decisions='84f414d86e4abd03', floats=(
        -1742.8950621883328, 1.1254120005344248, 100.07838102944416, 178.55886377451037, 33.9314173805205,
        73.31907633726439, 3486.8549100568803, 6079081.114998229, 1.0604712359005566, 0.5779438472115658,
        4431.504455625373, 5756836.78835425, 5.943005730062299, 5.89184791621392)),
    'linear_no_control_variates': Fingerprint(
        decisions='23bacaddee82aced', floats=(
        -1743.6097230583803, 0.47053648347365523, 100.17190063708838, 179.4779141407625, 39.84923137061189,
        113.57122569174686, 3487.2551018427203, 6080474.144400274, 0.8050651373846562, 0.3241952407663234,
        4427.246774409313, 5763035.18180636, 5.943005730062299, 5.89184791621392)),
    'linear_no_resampling_sghmc_data_schedule': Fingerprint(
        decisions='c5f406828ffccc26', floats=(
        -2784.917306928775, 138.38891571118597, 100.46472074909722, 179.02219123839467, 25533.594993760023,
        62626843.427754104, 5845.226150918801, 17121637.361675948, 1.2572173188447477, 0.7902976934015881,
        9007.263013735988, 19049972.04796208, 5.943005730062299, 5.89184791621392)),
    'linear_paper_settings': Fingerprint(
        decisions='52171c0c91d1ac07', floats=(
        -2591.275293866468, 183.03973216422878, 127.67001210402319, 225.9186412480301, 27956.23446667057,
        57203767.82478797, 5547.243757700273, 15452963.74077383, 1.2837077723447896, 0.8239528223892111,
        8427.105301903446, 16004166.60100139, 5.943005730062299, 5.89184791621392)),
    'linear_reheat_cap_warns': Fingerprint(
        decisions='ebb5315b21a7b7ad', floats=(
        -2454.926017665834, 120.93653117355845, 100.43540756487467, 179.7572874170433, 38.97617987600472,
        115.74555088011464, 5150.31294079085, 13292106.728069307, 1.5753361433868323, 1.2563125969396132,
        6026.093017133622, 11318728.751801863, 5.9430057300623, 5.891847916213921)),
    'linear_restart_growth': Fingerprint(
        decisions='8bb2fd8285f877f0', floats=(
        -1742.4389729538384, 1.9284602192574674, 100.3208096797278, 178.78165252909793, 36.0985799139636,
        87.12082222295307, 3484.8898629139962, 6072228.702201754, 1.3109964160788534, 0.8708003819258934,
        7992.015783362745, 9795656.820808997, 5.9430057300623, 5.89184791621392)),
    'linear_surprise_flag': Fingerprint(
        decisions='83fd7038f4a40938', floats=(
        -1742.0923209861887, 0.42408448158654793, 100.11794541128225, 178.70108985149955, 41.57133871608224,
        139.13549647667475, 3484.2078681992853, 6069852.281043455, 0.6642768810645877, 0.22098811460658865,
        4421.664890285558, 5749442.925781303, 5.943005730062299, 5.89184791621392)),
    'logistic_beyond_reservoir_reheat': Fingerprint(
        decisions='10cf07c86006a9a8', floats=(
        -344.1280655332045, 5.31771944472044, 184.13130073359974, 260.0425767472807, 35.21213557261092,
        81.94009390786076, 688.6039945946657, 237088.4676722951, 1.6197689752470965, 1.3211669366385417,
        1259.7810935791779, 302160.09603788087, 48.72625162102049, 197.9216673296678)),
    'logistic_estimator': Fingerprint(
        decisions='86bf55ab5995cca7', floats=(
        -346.64378941211265, 0.5953786012252127, 156.81689234818, 220.69334755976308, 39.92922946731486,
        118.91830050470341, 693.5175195522268, 240483.75273648865, 1.2278827010201674, 0.7607013406749049,
        717.8066979331966, 187576.57791379542, 48.72625162102049, 197.92166732966774)),
    'logistic_exact_moves': Fingerprint(
        decisions='e36d8ea99dffc189', floats=(
        -344.653531672202, 1.0252115449532735, 167.35711713416066, 245.55193876637574, 41.64199286444761,
        133.45117533509875, 689.7188513138819, 237856.92855498532, 1.1488039223362727, 0.6637997340085184,
        708.417367971709, 184838.05501149737, 48.72625162102049, 197.92166732966774)),
    'mixture_beyond_reservoir': Fingerprint(
        decisions='77ad96920752709f', floats=(
        -1661.6312310735486, 243.6767184006, 138.54115453732848, 639.0197676926018, 33.90387777440821,
        73.23363947276039, 3326.426925146252, 5532568.301431861, 4.390677543678159, 9.639163632439685,
        6049.604361373553, 6465612.933208378, 0.0, 0.0)),
    'mixture_beyond_reservoir_no_cv': Fingerprint(
        decisions='8c2a613239fc62de', floats=(
        -1861.5531757479732, 217.65306845567434, 135.1052753694055, 607.6449175080342, 38.7064514359306,
        114.6032511061675, 3752.47960655492, 7041024.6737455465, 5.898918275343892, 17.523741573716748,
        6450.927320404126, 7854920.4600449065, 0.0, 0.0)),
    'mixture_checkpoint_resume': Fingerprint(
        decisions='dc4f36dfb95669e9', floats=(
        -1689.5310795303092, 0.49924956371143236, 128.17736221569498, 601.3835258472877, 40.71738420077676,
        131.11388686603883, 3379.0621964645793, 5709030.663862823, 0.8962247309823813, 0.40358006092670584,
        5781.936542385732, 7111275.9955472145, 0.0, 0.0)),
    'mixture_exact_moves': Fingerprint(
        decisions='3bbb7793fc1e8d93', floats=(
        -1685.3318563490989, 1.6804715976240037, 126.08912993289047, 597.5732454155325, 35.642157060871924,
        84.90769089577032, 3373.1710246496204, 5689148.798018284, 0.8000512676575455, 0.33169566602867684,
        5769.8219146291285, 7095672.499885311, 0.0, 0.0)),
    'mixture_no_restarts': Fingerprint(
        decisions='a5593b461953ec70', floats=(
        -1723.307522278036, 39.76408738352913, 128.53980681333394, 600.5656474785121, 35.884412601622614,
        87.01593762773228, 3446.6432108474332, 5939674.768037878, 6.046816869379269, 18.28268134844024,
        6017.886306675403, 7439246.671990889, 0.0, 0.0)),
    'mixture_restarts': Fingerprint(
        decisions='6b9f5bc5d9413f58', floats=(
        -1683.6421392486293, 0.01896487029903207, 126.90886247919055, 600.9615241906371, 33.27106466687737,
        69.18523400422099, 3367.2844345503468, 5669302.231894638, 0.0014384059616142154, 1.0357729275485708e-06,
        5783.168200652446, 7103009.273934252, 0.0, 0.0)),
    'mixture_surprise_threshold': Fingerprint(
        decisions='34e8c2dcc04d8945', floats=(
        -1683.6593728056982, 0.019886161789659972, 126.6993687054497, 602.8021773385389, 33.27106466687737,
        69.18523400422099, 3367.318809564188, 5669417.982750297, 0.0015815249047005284, 1.250941536662236e-06,
        5779.919704166896, 7103456.754564534, 0.0, 0.0)),
}


# Several pinned cases run past their reservoir or budget on purpose, which the engine warns about.
@pytest.mark.filterwarnings("ignore::evidence_select.EvidenceConvergenceWarning")
@pytest.mark.parametrize("name", sorted(PINNED))
def test_engine_reproduces_pinned_results(name):
    pinning_environment = environment_key() == PINNED_ENVIRONMENT
    if name in CHAOTIC and not pinning_environment:
        pytest.skip(f"{name} was pinned in environment {PINNED_ENVIRONMENT}, this is {environment_key()}: its "
                    "Metropolis-Hastings decisions follow the maths library's last bits")
    with single_threaded_blas():
        got = CASES[name]()
    assert got.decisions == PINNED[name].decisions
    np.testing.assert_allclose(got.floats, PINNED[name].floats,
                               rtol=RTOL if pinning_environment else OTHER_ENVIRONMENT_RTOL)


def test_every_case_is_pinned():
    assert sorted(CASES) == sorted(PINNED)
