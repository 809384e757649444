// A real agents-js AgentSession with lkscore's observer (examples/agents-js,
// copied next to this file by consumer/agentsjs_test.go so that it resolves
// @livekit/agents from node_modules here). The SDK's own cloud telemetry
// (telemetry.setupCloudTracer) exports its logs as OTLP to lkscore at INFO;
// the session starts, closes with CLOSE_REASON, and the observer logs the
// close event through the SDK's logger. The recording goes up first, as
// uploadSessionReport sends it. LKSCORE_URL, ROOM_ID, JOB_ID,
// LIVEKIT_API_KEY and LIVEKIT_API_SECRET come from the test.
import { initializeLogger, llm, telemetry, voice } from '@livekit/agents';
import { observeForLkscore } from './lkscore-observer.gen.mjs';

const url = process.env.LKSCORE_URL;
const roomId = process.env.ROOM_ID;
const jobId = process.env.JOB_ID;

initializeLogger({ pretty: false, level: 'info' });
await telemetry.setupCloudTracer({ roomId, jobId, agentName: 'observer-agent', observabilityUrl: url });

const session = new voice.AgentSession({});
observeForLkscore(session, { agentName: 'observer-agent', version: '1.4.2' });
await session.start({ agent: new voice.Agent({ instructions: 'You book appointments.' }) });

const chat = llm.ChatContext.empty();
chat.addMessage({ role: 'assistant', content: 'Hi! How can I help?' });
chat.addMessage({ role: 'user', content: 'I need to move my booking to Friday.' });
chat.addMessage({ role: 'assistant', content: 'Done: Friday at ten.' });
const report = voice.createSessionReport({
  jobId, roomId, room: 'observer-room',
  options: { recordingOptions: { audio: false, transcript: true, logs: true, traces: true } },
  events: [], chatHistory: chat, enableRecording: true,
  startedAt: Date.now() - 60_000, timestamp: Date.now(),
});

session.shutdown({ reason: process.env.CLOSE_REASON });
await new Promise((resolve) => session.once(voice.AgentSessionEventTypes.Close, resolve));
await telemetry.uploadSessionReport({ observabilityUrl: url, agentName: 'observer-agent', report });
await telemetry.flushOtelLogs();
console.log('session sent');
