"""Logging runs for retraining the controller, and reading them back."""

from dynakrag.training.trajectories import (
    Transition,
    list_threads,
    open_trajectory_log,
    read_transitions,
)

__all__ = ["Transition", "list_threads", "open_trajectory_log", "read_transitions"]
