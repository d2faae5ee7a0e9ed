"""Value fingerprint of an estimator's whole online state (shared by the state-equality tests)."""

import numpy as np


def _value(value):
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, np.ascontiguousarray(value).tobytes()
    if isinstance(value, np.random.Generator):
        return repr(value.bit_generator.state)
    return repr(value)


def fingerprint(est):
    """Every field of ``sgais_state_`` (arrays as bytes, the generator's state, the reservoir's stored
    rows and counters) and every history record except its wall time, compared by value and bit for bit
    (``repr`` of a float round-trips exactly; NaN equals NaN)."""
    state = est.sgais_state_
    parts = []
    for name, value in state._asdict().items():
        if name == "reservoir":
            stored = value.n_stored
            value = (value.X[:stored], None if value.y is None else value.y[:stored], stored, value.n_seen,
                     value.capacity)
            parts.append((name, [_value(v) for v in value]))
        else:
            parts.append((name, _value(value)))
    history = [repr(tuple(value for name, value in record._asdict().items() if name != "seconds"))
               for record in est.evidence_history_]  # all but the wall time, by name (fields may be appended)
    return parts, history
