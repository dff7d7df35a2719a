"""A fleet of OpenAI-compatible servers behind one target: where it lives now.

The fleet is a property of the endpoint, not of one backend class: any
:class:`~models_inference.backends.openai_api.OpenAIEndpoint` (chat and completion text,
judge, vision, images) whose ``base_url`` names several URLs sends its requests through a
:class:`~models_inference.backends.openai_api.ServerFleet` (least outstanding requests,
failover, :meth:`~models_inference.backends.openai_api.OpenAIEndpoint.fleet_report`). This
module keeps the earlier names importable: :class:`ServerFleet` and :func:`fleet_urls` (from
:mod:`models_inference.backends.openai_api`) and :class:`FleetChatBackend`.
"""

from __future__ import annotations

from models_inference.backends.openai_api import ServerFleet, fleet_urls
from models_inference.backends.openai_chat import OpenAIChatBackend


class FleetChatBackend(OpenAIChatBackend):
    """:class:`OpenAIChatBackend` over the servers ``base_urls`` (a thin alias: the same as
    ``OpenAIChatBackend(base_url=[...])``; ``cooldown_s`` is ``fleet_cooldown_s``).

    Raises:
        ValueError: a URL that is not http(s).
    """

    def __init__(self, *args, base_urls=(), cooldown_s: float | None = None, **kwargs):
        if base_urls:
            kwargs["base_url"] = list(base_urls)
        if cooldown_s is not None:
            kwargs["fleet_cooldown_s"] = cooldown_s
        super().__init__(*args, **kwargs)


__all__ = ["FleetChatBackend", "ServerFleet", "fleet_urls"]
