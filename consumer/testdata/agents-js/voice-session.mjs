// A call through the real agents-js SDK's voice pipeline (npm @livekit/agents,
// pinned in package.json), with deterministic providers on the SDK's own
// base classes: a scripted STT (stt.STT / stt.SpeechStream: start of speech,
// a final transcript with confidence 0.92, end of speech), the SDK's FakeLLM
// (voice.testing.FakeLLM: scripted replies and a tool call), a TTS node that
// yields silent 24 kHz frames after a fixed first-byte delay, and an audio
// output that plays them out in real time. No room: the SDK's AgentSession
// runs its AudioRecognition, generation, tool execution and interruption
// code on these, and its own cloud tracer and pino log exporter send the
// spans and logs to lkscore, as a deployed agent's do. The call: a greeting,
// a failing lookup_order tool call, an answer the caller interrupts, a
// goodbye. The session report is made as JobContext.makeSessionReport makes
// it and posted with uploadSessionReport (transcript and audio off: the
// report and no recording; RECORD=on: the chat history is uploaded too).
// TTS_FAIL=Goodbye! makes the TTS refuse the goodbye (a 402, not retried):
// the caller hears nothing at the end.
// consumer/spans_test.go (TestAgentsJSVoicePipeline) runs it; LKSCORE_URL,
// ROOM_ID, JOB_ID, LIVEKIT_API_KEY and LIVEKIT_API_SECRET come from there.
import { AudioFrame } from '@livekit/rtc-node';
import { ReadableStream } from 'node:stream/web';
import { APIStatusError, initializeLogger, llm, stt, telemetry, tts, voice } from '@livekit/agents';

const url = process.env.LKSCORE_URL;
const roomId = process.env.ROOM_ID;
const jobId = process.env.JOB_ID;
const recordOn = process.env.RECORD === 'on';
const ttsFails = process.env.TTS_FAIL; // the text of a reply the TTS refuses
const agentName = 'js-voice-agent';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

initializeLogger({ pretty: false, level: process.env.LOG_LEVEL ?? 'info' });
await telemetry.setupCloudTracer({ roomId, jobId, agentName, observabilityUrl: url, enableTraces: true, enableLogs: true });

// The caller, as an STT provider hears it.
class ScriptedSTT extends stt.STT {
  label = 'scripted-stt';
  streams = [];
  constructor() {
    super({ streaming: true, interimResults: false });
  }
  async _recognize() {
    throw new Error('scripted-stt streams only');
  }
  stream() {
    const s = new ScriptedStream(this);
    this.streams.push(s);
    return s;
  }
}
class ScriptedStream extends stt.SpeechStream {
  label = 'scripted-stt.stream';
  async run() {
    for await (const _ of this.input) {
      // the audio is not listened to: the script says what was said
    }
  }
  async say(text, ms) {
    this.queue.put({ type: stt.SpeechEventType.START_OF_SPEECH });
    await sleep(ms);
    this.queue.put({
      type: stt.SpeechEventType.FINAL_TRANSCRIPT,
      alternatives: [{ text, language: 'en', startTime: 0, endTime: ms / 1000, confidence: 0.92 }],
    });
    this.queue.put({ type: stt.SpeechEventType.END_OF_SPEECH });
  }
}

class Mic extends voice.AudioInput {
  #controller;
  constructor() {
    super();
    this.multiStream.addInputStream(new ReadableStream({ start: (c) => { this.#controller = c; } }));
  }
  push() {
    const n = 16000 / 50;
    this.#controller.enqueue(new AudioFrame(new Int16Array(n), 16000, 1, n));
  }
}

// Plays frames out in real time: started at the first frame of a segment,
// finished when its audio has played, or at once, interrupted, when cleared.
class Speaker extends voice.AudioOutput {
  #queued = 0;
  #started = 0;
  #timer;
  constructor() {
    super(24000, undefined, { pause: false });
  }
  async captureFrame(f) {
    await super.captureFrame(f);
    if (this.#queued === 0) {
      this.#started = Date.now();
      this.onPlaybackStarted(this.#started);
    }
    this.#queued += f.samplesPerChannel / f.sampleRate;
  }
  flush() {
    super.flush();
    if (this.#queued === 0) return; // cleared before its end: already finished
    const total = this.#queued;
    const left = Math.max(0, this.#started + total * 1000 - Date.now());
    this.#timer = setTimeout(() => this.#finish(total, false), left);
  }
  clearBuffer() {
    clearTimeout(this.#timer);
    if (this.#queued > 0) this.#finish((Date.now() - this.#started) / 1000, true);
  }
  #finish(position, interrupted) {
    this.#queued = 0;
    this.onPlaybackFinished({ playbackPosition: position, interrupted });
  }
}

class CallAgent extends voice.Agent {
  constructor() {
    super({
      instructions: 'You help callers with their orders.',
      tools: {
        lookup_order: llm.tool({
          description: 'Look up an order',
          execute: async () => {
            throw new llm.ToolError('order service down');
          },
        }),
      },
    });
  }
}

// A streaming TTS provider (tts.TTS / tts.SynthesizeStream): for each
// flushed text, 100 ms to the first frame, then its audio, 60 ms per
// character, as silent 24 kHz frames.
class ScriptedTTS extends tts.TTS {
  label = 'scripted-tts';
  constructor() {
    super(24000, 1, { streaming: true });
  }
  synthesize() {
    throw new Error('scripted-tts streams only');
  }
  stream(options) {
    return new ScriptedSynthesis(this, options?.connOptions);
  }
}
class ScriptedSynthesis extends tts.SynthesizeStream {
  label = 'scripted-tts.stream';
  async run() {
    let text = '';
    for await (const t of this.input) {
      if (t !== tts.SynthesizeStream.FLUSH_SENTINEL) {
        text += t;
        continue;
      }
      if (text.trim()) await this.speak(text);
      text = '';
    }
    if (text.trim()) await this.speak(text);
    this.queue.put(tts.SynthesizeStream.END_OF_STREAM);
  }
  async speak(text) {
    await sleep(100);
    if (ttsFails && text.includes(ttsFails)) {
      // a provider refusal, not retried (4xx): the reply is never heard
      throw new APIStatusError({ message: 'scripted-tts: quota exceeded', options: { statusCode: 402 } });
    }
    const frames = Math.max(5, Math.round((text.length * 60) / 20));
    const n = 24000 / 50;
    for (let i = 0; i < frames; i++) {
      this.queue.put({ requestId: 'r', segmentId: 's', frame: new AudioFrame(new Int16Array(n), 24000, 1, n), final: i === frames - 1 });
    }
  }
}

const sttModel = new ScriptedSTT();
const session = new voice.AgentSession({
  stt: sttModel,
  tts: new ScriptedTTS(),
  llm: new voice.testing.FakeLLM([
    { input: 'Where is my order?', ttft: 180, toolCalls: [{ name: 'lookup_order', args: {} }] },
    { input: 'order service down', ttft: 180, content: 'Sorry, I cannot look it up right now.' },
    { input: 'Can you try again?', ttft: 180, content: 'Let me try that once more for you, it can take a little while to reach the order service.' },
    { input: 'Never mind.', ttft: 180, content: 'All right.' },
    { input: 'Bye.', ttft: 180, content: 'Goodbye!' },
  ]),
  turnHandling: { turnDetection: 'stt', endpointing: { minDelay: 300, maxDelay: 300 } },
});
session.sessionOptions.recordingOptions = { audio: false, transcript: recordOn, logs: true, traces: true };
const mic = new Mic();
session.input.audio = mic;
session.output.audio = new Speaker();
const pump = setInterval(() => mic.push(), 20);

// As an agent does: provider errors are logged; the session decides whether
// to go on (it does, up to maxUnrecoverableErrors).
session.on(voice.AgentSessionEventTypes.Error, (ev) => console.error('session error:', ev.error?.error?.message ?? ev.error?.message));
const agentStates = [];
session.on(voice.AgentSessionEventTypes.AgentStateChanged, (ev) => agentStates.push(ev.newState));
// Resolves with the index of the first `state` at or after `from`.
const waitState = async (state, from = 0) => {
  for (let i = 0; i < 500; i++) {
    const at = agentStates.indexOf(state, from);
    if (at >= 0) return at;
    await sleep(20);
  }
  throw new Error(`agent never reached ${state}; states: ${agentStates.join(',')}`);
};
// The agent speaks and then listens again, from state index `from` on.
const waitReply = async (from) => waitState('listening', (await waitState('speaking', from)) + 1);

await session.start({ agent: new CallAgent() });
for (let i = 0; i < 250 && sttModel.streams.length === 0; i++) await sleep(20);
const caller = sttModel.streams[0];
if (!caller) throw new Error('the STT stream never opened');

await session.say('Hi! How can I help?').waitForPlayout();
let from = agentStates.length;
await caller.say('Where is my order?', 600);
await waitReply(from); // the tool fails, then the apology
from = agentStates.length;
await caller.say('Can you try again?', 500);
from = (await waitState('speaking', from)) + 1;
await sleep(800); // the caller barges in 0.8 s into a 5 s answer
await caller.say('Never mind.', 400);
await waitReply(from);
from = agentStates.length;
await caller.say('Bye.', 300);
if (ttsFails === 'Goodbye!') {
  await waitState('listening', (await waitState('thinking', from)) + 1); // nothing is heard
  await sleep(500);
} else {
  await waitReply(from);
}
clearInterval(pump);
await session.close();

const report = voice.createSessionReport({
  jobId,
  roomId,
  room: 'js-voice-room',
  options: session.sessionOptions,
  events: session._recordedEvents,
  enableRecording: true,
  chatHistory: session.history.copy(),
  startedAt: session._startedAt,
});
await telemetry.tracer.getProvider().forceFlush();
await telemetry.uploadSessionReport({ observabilityUrl: url, agentName, report });
await telemetry.flushOtelLogs();
// What the SDK measured, from its own chat items, for the test to hold the
// scorecard against.
const said = session.history.items.filter((i) => i.type === 'message' && i.role === 'assistant');
const pick = (k) => said.map((i) => i.metrics?.[k]).filter((v) => v !== undefined);
console.log(JSON.stringify({
  sent: true,
  e2e: pick('e2eLatency'),
  ttft: pick('llmNodeTtft'),
  ttfb: pick('ttsNodeTtfb'),
  agentTurns: said.length,
  interrupted: said.filter((i) => i.interrupted).length,
  userTurns: session.history.items.filter((i) => i.type === 'message' && i.role === 'user').length,
}));
