// Writes chat_history.json for a call plan (JSON on stdin, from
// scenarios/fieldgen_test.go) through the real agents-js SDK: its
// ChatContext items (ChatMessage, FunctionCall, FunctionCallOutput,
// AgentHandoffItem, AgentConfigUpdate) serialized by sessionReportToJSON,
// exactly as telemetry.uploadSessionReport writes the upload's
// chat_history.json. The numbers take the SDK's forms: item times are
// Date.now() milliseconds (the report makes them seconds), metric
// timestamps and user delays are milliseconds / 1000, e2e latency is the
// agent's start minus the user's stop as agent_activity computes it, and
// TTFT, TTFB and the turn-completed callback are performance.now()
// differences, at full precision.
import { llm, voice } from '@livekit/agents';

const plan = JSON.parse(await new Promise((resolve) => {
  let s = '';
  process.stdin.on('data', (d) => { s += d; });
  process.stdin.on('end', () => resolve(s));
}));
const ms = (s) => Math.round(s * 1000); // a Date.now() reading
const chat = llm.ChatContext.empty();
let userStopped; // the last user message's stoppedSpeakingAt, in seconds
let handoffs = 0;
for (const p of plan) {
  switch (p.kind) {
    case 'config':
      chat.insert(llm.AgentConfigUpdate.create({ id: p.id, instructions: p.text, toolsAdded: ['lookup_booking'], createdAt: ms(p.created) }));
      break;
    case 'user': {
      const metrics = {
        startedSpeakingAt: ms(p.start) / 1e3,
        stoppedSpeakingAt: ms(p.stop) / 1e3,
        transcriptionDelay: ms(p.stt_delay) / 1e3,
        endOfTurnDelay: ms(p.eou_delay) / 1e3,
        onUserTurnCompletedDelay: p.on_completed,
      };
      userStopped = metrics.stoppedSpeakingAt;
      // agents-js creates the user message when the turn is committed
      chat.insert(llm.ChatMessage.create({ id: p.id, role: 'user', content: p.text, transcriptConfidence: p.confidence,
        createdAt: ms(p.stop + p.eou_delay), metrics }));
      break;
    }
    case 'assistant': {
      const started = ms(p.start);
      const metrics = {};
      if (p.ttft) metrics.llmNodeTtft = p.ttft;
      metrics.ttsNodeTtfb = p.ttfb;
      metrics.startedSpeakingAt = started / 1e3;
      metrics.stoppedSpeakingAt = ms(p.stop) / 1e3;
      metrics.playbackLatency = (started - ms(p.start - p.playback)) / 1e3;
      if (p.e2e && userStopped !== undefined) metrics.e2eLatency = started / 1e3 - userStopped;
      if (p.req_id) metrics.providerRequestIds = [p.req_id];
      chat.insert(llm.ChatMessage.create({ id: p.id, role: 'assistant', content: p.text, interrupted: !!p.interrupted,
        createdAt: ms(p.created), metrics }));
      break;
    }
    case 'call':
      chat.insert(llm.FunctionCall.create({ id: p.id, callId: p.call_id, name: p.name, args: p.args, createdAt: ms(p.created) }));
      break;
    case 'output':
      chat.insert(llm.FunctionCallOutput.create({ id: p.id, callId: p.call_id, name: p.name, output: p.output,
        isError: !!p.is_error, createdAt: ms(p.created) }));
      break;
    case 'handoff':
      // the SDK's first handoff names no old agent
      chat.insert(llm.AgentHandoffItem.create({ id: p.id, oldAgentId: handoffs++ === 0 ? undefined : p.old_agent,
        newAgentId: p.new_agent, createdAt: ms(p.created) }));
      break;
    default:
      throw new Error(`unknown plan item ${p.kind}`);
  }
}
const report = voice.createSessionReport({
  jobId: 'AJ_fixture', roomId: 'RM_fixture', room: 'fixture', options: {}, events: [],
  chatHistory: chat, enableRecording: true, startedAt: ms(plan[0].created), timestamp: ms(plan[plan.length - 1].created),
});
process.stdout.write(JSON.stringify(voice.sessionReportToJSON(report).chat_history));
