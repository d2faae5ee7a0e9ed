"""Settings objects built from a config object and keyword overrides, validated by name."""

from dataclasses import asdict, fields

__all__ = ["merge_settings"]


def merge_settings(config_class, config, settings, what):
    """A ``config_class`` instance from ``config`` (an instance or None) and keyword ``settings`` (keywords win).

    ``what`` names the settings in error messages (e.g. ``"AIS"``). Raises TypeError for a
    ``config`` of another type or an unknown keyword, naming the valid settings.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Config:
    ...     steps: int = 10
    ...     rate: float = 0.5
    >>> merge_settings(Config, Config(steps=3), {"rate": 0.1}, "demo")
    Config(steps=3, rate=0.1)
    """
    if config is not None and not isinstance(config, config_class):
        raise TypeError(f"config must be an {config_class.__name__}, got {type(config).__name__}")
    names = {f.name for f in fields(config_class)}
    unknown = sorted(set(settings) - names)
    if unknown:
        raise TypeError(f"unknown {what} setting(s) {unknown}; the settings are {sorted(names)}")
    return config_class(**{**({} if config is None else asdict(config)), **settings})
