"""Running a test's function in several threads at once and collecting what they raised."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any


def errors_in_threads(
    target: Callable[..., Any], calls: Iterable[tuple[Any, ...]]
) -> list[BaseException]:
    """Run ``target(*args)`` for each ``args`` of ``calls``, one thread each, all started
    before any is joined; what the threads raised, in the order they raised it."""
    errors: list[BaseException] = []

    def guarded(*args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # surfaced to the test
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=args) for args in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors
