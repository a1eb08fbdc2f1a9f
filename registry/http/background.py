"""Work a server process does beside answering requests: the scheduled scrub, when set.

``background(ctx)`` gives the app's startup and shutdown hooks (``registry.app``).
"""

from __future__ import annotations

from collections.abc import Callable

from registry.services.context import RegistryContext


def background(ctx: RegistryContext) -> tuple[list[Callable[[], None]], list[Callable[[], None]]]:
    """(startup, shutdown) hooks: a ``Scrubber`` thread while ``REGISTRY_SCRUB_RATE`` > 0."""
    if ctx.settings.scrub_rate <= 0:
        return [], []
    from registry.services.scrub import Scrubber

    scrubber = Scrubber(ctx, ctx.settings.scrub_rate)
    return [scrubber.start], [scrubber.close]
