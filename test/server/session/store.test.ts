/**
 * The ACP session record saved mid-turn with the leader's message still streaming (src/server/session/store.ts
 * `save(s, streaming)`, 7a9e605): the streamed text is stored as the last message only while it is not a message of
 * the conversation yet. A save queued behind another one (session/set_mode during the turn) runs after the stream
 * may have ended, when the record in memory already holds the text.
 */
import { expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import type { RunStateAuthority } from "../../../src/core/ports.js";
import { SessionStore, type SessionRecord } from "../../../src/server/session/store.js";
import { FakeClock, Gate, RecordingLogger } from "../../support/fakes.js";

it("a save queued behind another one stores a streamed message that ended meanwhile once", async () => {
  const authority = new MemoryAuthority();
  const put = authority.put.bind(authority);
  const gate = new Gate();
  let held = false;
  (authority as RunStateAuthority).put = async (...args) => {
    if (!held) {
      held = true;
      await gate.promise; // the first save (a set_mode's) is in flight
    }
    return put(...args);
  };
  const store = new SessionStore(authority, new FakeClock(), new RecordingLogger());
  const record: SessionRecord = {
    v: 1,
    sessionId: "ses_1",
    cwd: "/tmp",
    projectId: "proj",
    createdAt: "2030-01-01T00:00:00.000Z",
    updatedAt: "2030-01-01T00:00:00.000Z",
    messages: [{ role: "user", text: "Write the parser" }],
  };
  const s = store.fresh(record);
  const first = store.save(s);
  let streaming = "Here is the plan.";
  const mid = store.save(s, () => streaming);
  // The leader's message ends (turn.ts endStream): it becomes a message of the conversation.
  s.record.messages.push({ role: "agent", text: streaming });
  streaming = "";
  gate.release();
  await first;
  await mid;
  const stored = await authority.get("_", "session", "ses_1");
  expect((stored?.value as SessionRecord).messages).toEqual([
    { role: "user", text: "Write the parser" },
    { role: "agent", text: "Here is the plan." },
  ]);
});
