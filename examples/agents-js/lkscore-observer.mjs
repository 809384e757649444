// lkscore observer for @livekit/agents (Node): one call before session.start().
//
// It logs, at INFO through the SDK's own logger, how the session closed and
// the facts lkscore scores by. With LiveKit observability on (the SDK exports
// its logs as OTLP to LIVEKIT_OBSERVABILITY_URL, or to LiveKit Cloud), the
// record travels with the SDK's other logs; lkscore reads:
//   lk.close_reason        the close event's reason (user_initiated, error, ...)
//   lk.close_error         the close event's error, if any
//   lk.agent_name          the agent's name
//   lkscore.agent_version  your agent's version: regression detection keys on it
// No dependency beyond @livekit/agents; nothing is sent anywhere the SDK does
// not already send its logs.
//
//   import { observeForLkscore } from './lkscore-observer.mjs';
//   observeForLkscore(session, { agentName: 'booking-agent', version: '1.4.2' });
//   await session.start({ agent, room: ctx.room });
import { log, voice } from '@livekit/agents';

export function observeForLkscore(session, { agentName, version } = {}) {
  session.on(voice.AgentSessionEventTypes.Close, (ev) => {
    const fields = { 'lk.close_reason': String(ev.reason) };
    if (ev.error) fields['lk.close_error'] = String(ev.error.message ?? ev.error);
    if (agentName) fields['lk.agent_name'] = agentName;
    if (version) fields['lkscore.agent_version'] = version;
    log().info(fields, 'lkscore session closed');
  });
}
