"""Logging runs for retraining the controller, and reading them back."""

from dynakrag.training.trajectories import (
    Transition,
    close_trajectory_log,
    list_threads,
    open_trajectory_log,
    read_log_records,
    read_transitions,
    run_config,
    trajectory_log,
    write_log_records,
)

__all__ = [
    "Transition",
    "close_trajectory_log",
    "list_threads",
    "open_trajectory_log",
    "read_log_records",
    "read_transitions",
    "run_config",
    "trajectory_log",
    "write_log_records",
]
