"""Autotuning: tunable spaces, the tuning database and the tuner."""

from .database import Choice, UserDB, lookup, shipped_entries, user_tuning_dir
from .family import TunableKernel
from .space import Params, TuningCase, TuningSpace, pow2_bucket
from .tuner import TuneResult, tune

__all__ = [
    "Choice",
    "Params",
    "TunableKernel",
    "TuneResult",
    "TuningCase",
    "TuningSpace",
    "UserDB",
    "lookup",
    "pow2_bucket",
    "shipped_entries",
    "tune",
    "user_tuning_dir",
]
