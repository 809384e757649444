// A metadata-only session (record: transcript and audio off) as the real
// agents-js SDK (npm @livekit/agents, pinned in package.json) sends it to
// lkscore: its own cloud tracer (setupCloudTracer: NodeTracerProvider, the
// SDK's metadata span processor, OTLP/protobuf with gzip) carries the voice
// pipeline's spans, named and attributed with the SDK's trace_types
// constants as its voice pipeline sets them (agent_activity.js,
// audio_recognition.js, generation.js; the user turn's delays in
// milliseconds, as Date.now() differences); uploadSessionReport posts the
// "session report" log and no recording; the SDK's pino OTLP exporter sends
// "AgentSession closed" and the tool's error log. The call: a greeting, a
// failing lookup_order tool call, an answer the caller interrupts, a goodbye.
// consumer/agentsjs_test.go (TestAgentsJSMetadataOnly) runs it; LKSCORE_URL,
// ROOM_ID, JOB_ID, LIVEKIT_API_KEY and LIVEKIT_API_SECRET come from there.
// RECORD=on turns the transcript on: the same call, and the SDK uploads its
// chat history as a recording too.
import { context, trace } from '@opentelemetry/api';
// AGENTS_PKG picks another release of the SDK (package.json installs each
// under an npm alias) for the version matrix.
const { telemetry, voice, llm } = await import(process.env.AGENTS_PKG || '@livekit/agents');

const url = process.env.LKSCORE_URL;
const roomId = process.env.ROOM_ID;
const jobId = process.env.JOB_ID;
const agentName = 'js-metadata-agent';
const recordOn = process.env.RECORD === 'on';
const T = telemetry.traceTypes;

await telemetry.setupCloudTracer({ roomId, jobId, agentName, observabilityUrl: url, enableTraces: true, enableLogs: false });
const tracer = telemetry.tracer;

const t0 = Date.now() - 28_000; // a 28 s call, ending now
const at = (s) => t0 + s * 1000;
const session = tracer.startSpan({ name: 'agent_session', startTime: at(0) });
const inSession = trace.setSpan(context.active(), session);

function span(name, start, end, attributes, parent = inSession) {
  const s = tracer.startSpan({ name, context: parent, startTime: at(start), attributes });
  return { s, ctx: trace.setSpan(parent, s), end: () => s.end(at(end)) };
}

function agentTurn(start, end, { e2e, interrupted = false, ttft = 0.18, ttfb = 0.1, tool } = {}) {
  const turn = span('agent_turn', start, end, {});
  const node = span('llm_node', start, start + 0.4, { [T.ATTR_RESPONSE_TTFT]: ttft }, turn.ctx);
  node.end();
  if (tool) {
    const ft = span('function_tool', start + 0.4, start + 0.9, { [T.ATTR_FUNCTION_TOOL_NAME]: tool }, turn.ctx);
    ft.s.setAttribute(T.ATTR_FUNCTION_TOOL_IS_ERROR, true);
    ft.s.setAttribute('error.type', 'tool_error');
    ft.end();
  } else {
    const tts = span('tts_node', start + 0.2, end, { [T.ATTR_RESPONSE_TTFB]: ttfb }, turn.ctx);
    tts.end();
  }
  if (e2e !== undefined) turn.s.setAttribute(T.ATTR_E2E_LATENCY, e2e);
  turn.s.setAttribute(T.ATTR_SPEECH_INTERRUPTED, interrupted);
  turn.end();
}

function userTurn(start, end, { confidence = 0.92, transcriptionDelayMs = 120, eotDelayMs = 502 } = {}) {
  const u = span('user_turn', start, end, {});
  u.s.setAttributes({
    [T.ATTR_TRANSCRIPT_CONFIDENCE]: confidence,
    [T.ATTR_TRANSCRIPTION_DELAY]: transcriptionDelayMs,
    [T.ATTR_END_OF_TURN_DELAY]: eotDelayMs,
  });
  u.end();
}

agentTurn(0.5, 3.0); // the greeting: no user turn before it, no e2e latency
userTurn(3.5, 6.0);
agentTurn(6.2, 7.2, { tool: 'lookup_order' }); // the tool-call turn: no e2e latency
agentTurn(7.3, 10.0, { e2e: 0.988 });
userTurn(10.5, 13.0);
agentTurn(13.8, 15.0, { e2e: 0.796, interrupted: true }); // the caller barges in
userTurn(15.0, 18.0);
agentTurn(18.8, 22.0, { e2e: 0.787 });
userTurn(22.5, 24.5, { eotDelayMs: 480 });
agentTurn(25.3, 27.5, { e2e: 0.781 }); // goodbye
session.end(at(28));

const chat = llm.ChatContext.empty();
if (recordOn) {
  chat.addMessage({ role: 'assistant', content: 'Hi! How can I help?' });
  chat.addMessage({ role: 'user', content: 'Where is my order?' });
  chat.addMessage({ role: 'assistant', content: 'Sorry, I cannot look it up right now.' });
  chat.addMessage({ role: 'user', content: 'Can you try again?' });
  chat.addMessage({ role: 'assistant', content: 'Let me', interrupted: true });
  chat.addMessage({ role: 'user', content: 'Never mind.' });
  chat.addMessage({ role: 'assistant', content: 'All right.' });
  chat.addMessage({ role: 'user', content: 'Bye.' });
  chat.addMessage({ role: 'assistant', content: 'Goodbye!' });
}
const report = voice.createSessionReport({
  jobId,
  roomId,
  room: 'js-metadata-room',
  options: { recordingOptions: { audio: false, transcript: recordOn, logs: true, traces: true } },
  events: [],
  chatHistory: chat,
  enableRecording: true,
  startedAt: t0,
  timestamp: Date.now(),
});
// The spans are exported when the session closes, before the report.
await telemetry.tracer.getProvider().forceFlush();
// transcript and audio off: the session report and no recording; on: the upload too.
await telemetry.uploadSessionReport({ observabilityUrl: url, agentName, report });

const logs = new telemetry.PinoCloudExporter({ observabilityUrl: url, roomId, jobId, metadata: { 'lk.agent_name': agentName } });
logs.emit({ level: 50, time: at(7), msg: 'exception occurred while executing tool', function: 'lookup_order', error: 'order service down' });
logs.emit({ level: 30, time: at(28), msg: 'AgentSession closed', reason: 'user_initiated', error: null });
await logs.flush();
console.log('session sent');
