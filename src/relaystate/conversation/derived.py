"""What is derived from a template and read on every turn (its folded words), built once per
template object: a template is declared once and never changes, a turn only reads."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import TypeVar

from ..task.templates import TaskTemplate

T = TypeVar("T")


def once_per_template(build: Callable[[TaskTemplate], T]) -> Callable[[TaskTemplate], T]:
    """``build(template)`` computed the first time for each template, then remembered for
    as long as the template lives. What it returns is shared: read it, never change it."""
    known: weakref.WeakKeyDictionary[TaskTemplate, T] = weakref.WeakKeyDictionary()

    @functools.wraps(build)
    def cached(template: TaskTemplate) -> T:
        try:
            return known[template]
        except KeyError:
            value = known[template] = build(template)
            return value

    return cached
