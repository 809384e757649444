// One agent session's end, sent by the real agents-js SDK (npm @livekit/agents,
// pinned in package.json) to lkscore: the chat history as OTLP/JSON logs and
// the multipart recording upload (telemetry.uploadSessionReport), then the
// SDK's own log record "AgentSession closed" through its pino OTLP exporter.
// lkscore's consumer/agentsjs_test.go runs it; LKSCORE_URL, ROOM_ID, JOB_ID,
// LIVEKIT_API_KEY and LIVEKIT_API_SECRET come from there.
// AGENTS_PKG picks another release of the SDK (package.json installs each
// under an npm alias: agents-1.8.0, agents-1.8.1) for the version matrix.
const { initializeLogger, llm, telemetry, voice } = await import(process.env.AGENTS_PKG || '@livekit/agents');
// The SDK's logger, as a worker sets it up: the upload's retry path logs
// through it ("recording upload failed; retrying").
initializeLogger({ pretty: false, level: 'info' });

const url = process.env.LKSCORE_URL;
const roomId = process.env.ROOM_ID;
const jobId = process.env.JOB_ID;
const agentName = 'js-agent';
// LOGS=off: the session's logs recording option off, and so no close log.
const logsOn = process.env.LOGS !== 'off';

const chat = llm.ChatContext.empty();
chat.addMessage({ role: 'assistant', content: 'Hi! How can I help?' });
chat.addMessage({ role: 'user', content: 'I need to move my booking to Friday.' });
chat.addMessage({ role: 'assistant', content: 'Done: Friday at ten.' });

const report = voice.createSessionReport({
  jobId,
  roomId,
  room: 'js-room',
  options: { recordingOptions: { audio: false, transcript: true, logs: logsOn, traces: true } },
  events: [],
  chatHistory: chat,
  enableRecording: true,
  startedAt: Date.now() - 60_000,
  timestamp: Date.now(),
});
await telemetry.uploadSessionReport({ observabilityUrl: url, agentName, report });

if (logsOn) {
  const logs = new telemetry.PinoCloudExporter({ observabilityUrl: url, roomId, jobId, metadata: { 'lk.agent_name': agentName } });
  logs.emit({ level: 30, time: Date.now(), msg: 'AgentSession closed', reason: 'user_initiated', error: null });
  await logs.flush();
}
console.log('session sent');
