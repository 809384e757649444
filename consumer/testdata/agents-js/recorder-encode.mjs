// Encodes a stereo call the way the agents-js SDK's RecorderIO writes
// recording.ogg: through RecorderIO's own writePCM (float to s16, clamped)
// and its own startFFmpeg (fluent-ffmpeg driving the ffmpeg the SDK bundles,
// @livekit/av, with libopus), on a real RecorderIO instance. Only its
// wall-clock placement of frames is left out, so the audio grid keeps its
// sample-exact truth (audio/grid_test.go).
//
// usage: node recorder-encode.mjs IN.f32 OUT.ogg
//   IN.f32: 48 kHz stereo interleaved float32 little-endian (user left, agent right)
import fs from "node:fs";
import { initializeLogger } from "./node_modules/@livekit/agents/dist/log.js";
import { RecorderIO } from "./node_modules/@livekit/agents/dist/voice/recorder_io/recorder_io.js";

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: node recorder-encode.mjs IN.f32 OUT.ogg");
  process.exit(2);
}

// The encode this script relies on, as the installed SDK spells it: a new
// SDK that encodes differently fails here instead of being trusted blindly.
const source = fs.readFileSync(
  new URL("./node_modules/@livekit/agents/dist/voice/recorder_io/recorder_io.js", import.meta.url),
  "utf8",
);
for (const want of [
  'ffmpeg(this.pcmStream).inputFormat("s16le").inputOptions([`-ar ${this.sampleRate}`, "-ac 2"])' +
    '.audioCodec("libopus").audioChannels(2).audioFrequency(this.sampleRate).format("ogg")',
  "const DEFAULT_SAMPLE_RATE = 48e3;",
]) {
  if (!source.includes(want)) {
    console.error(`recorder_io.js no longer contains: ${want}`);
    process.exit(3);
  }
}

initializeLogger({ pretty: false, level: "warn" });
const rec = new RecorderIO({ agentSession: {} });
if (rec.sampleRate !== 48000) {
  console.error(`RecorderIO samples at ${rec.sampleRate} Hz, the grid at 48000`);
  process.exit(3);
}
rec._outputPath = output;

const raw = fs.readFileSync(input);
const samples = new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4);
const frames = samples.length / 2;
const block = 4800; // 100 ms, RecorderIO's write interval
for (let at = 0; at < frames; at += block) {
  const n = Math.min(block, frames - at);
  const left = new Float32Array(n);
  const right = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    left[i] = samples[2 * (at + i)];
    right[i] = samples[2 * (at + i) + 1];
  }
  rec.writePCM(left, right);
}
rec.pcmStream.end();
await rec.ffmpegPromise;
