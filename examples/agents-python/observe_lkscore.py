"""lkscore observer for livekit-agents (Python): one call before session.start().

It logs, at INFO on the SDK's own logger ("livekit.agents"), how the session
closed and the facts lkscore scores by. With LiveKit observability on, the
SDK's OTLP log handler (livekit/agents telemetry/traces.py, an OpenTelemetry
LoggingHandler on the root logger) exports the record with every key of
``extra`` as an attribute, next to room_id, job_id and lk.agent_name. The
Python SDK's own "session closed" record is DEBUG, so at the default INFO
level this is the only place the close reason travels. lkscore reads:

  lk.close_reason        the close event's reason (user_initiated, error, ...)
  lk.close_error         the close event's error, if any
  lk.agent_name          the agent's name
  lkscore.agent_version  your agent's version: regression detection keys on it

    from observe_lkscore import observe_for_lkscore
    observe_for_lkscore(session, agent_name="booking-agent", version="1.4.2")
    await session.start(agent=MyAgent(), room=ctx.room)
"""

from __future__ import annotations

import logging

from livekit.agents import AgentSession, CloseEvent

_logger = logging.getLogger("livekit.agents")


def observe_for_lkscore(session: AgentSession, *, agent_name: str | None = None, version: str | None = None) -> None:
    @session.on("close")
    def _on_close(ev: CloseEvent) -> None:
        extra: dict[str, str] = {"lk.close_reason": getattr(ev.reason, "value", str(ev.reason))}
        if ev.error is not None:
            extra["lk.close_error"] = str(getattr(ev.error, "error", ev.error))
        if agent_name:
            extra["lk.agent_name"] = agent_name
        if version:
            extra["lkscore.agent_version"] = version
        _logger.info("lkscore session closed", extra=extra)
