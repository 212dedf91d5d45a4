// The SDK against a live mesh with examples/coordinator-worker.yaml applied. The mesh's gateway
// address and a user's credentials come from AGENTMESH_ADDRESS, AGENTMESH_EMAIL and
// AGENTMESH_PASSWORD (tests/e2e/test_sdks.py sets them); without them every test skips.
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { AgentMesh, AgentMeshError, Code, type RunEvent } from "../src/index.js";

const address = process.env.AGENTMESH_ADDRESS;
const skip = address ? false : "AGENTMESH_ADDRESS is not set (no mesh to test against)";

describe("agentmesh SDK against a live mesh", { skip }, () => {
  let mesh: AgentMesh;
  let sessionId: string;

  before(async () => {
    mesh = await AgentMesh.signIn(address!, process.env.AGENTMESH_EMAIL!, process.env.AGENTMESH_PASSWORD!);
  });

  test("a delegating chat streams the worker's events and ends with the coordinator's answer", async () => {
    const events: RunEvent[] = [];
    for await (const event of mesh.streamChat("demo/coordinator", "Please process task 42")) {
      events.push(event);
    }
    sessionId = events[0].sessionId;
    assert.ok(sessionId);
    assert.equal(events[0].kind.case, "runStarted");

    const delegated = events.filter((event) => event.delegationPath.length > 0);
    assert.ok(delegated.length > 0, "no event of the worker arrived");
    assert.ok(delegated.some((event) => event.kind.case === "runCompleted"), "the worker's run_completed");

    const last = events.at(-1)!;
    assert.equal(last.kind.case, "runCompleted");
    assert.deepEqual(last.delegationPath, []);
    assert.equal(last.runId, events[0].runId);
    assert.match(last.kind.value.content, /worker processed task 42/);
  });

  test("chat returns the final answer", async () => {
    const answer = await mesh.chat("demo/coordinator", "Please process task 42");
    assert.match(answer.content, /task 42/);
    assert.ok(answer.sessionId);
  });

  test("an unknown agent is NOT_FOUND with its reason", async () => {
    await assert.rejects(
      async () => {
        for await (const _ of mesh.streamChat("demo/no-such-agent", "hello")) {
          // The call fails before any event.
        }
      },
      (error: unknown) => {
        assert.ok(error instanceof AgentMeshError);
        assert.equal(error.code, Code.NotFound);
        assert.equal(error.codeName, "NOT_FOUND");
        assert.equal(error.reason, "AGENT_NOT_FOUND");
        return true;
      },
    );
  });

  test("a session's events page by page add up to the whole session, in seq order", async () => {
    const pages = [];
    let pageToken = "";
    do {
      const page = await mesh.listEvents(sessionId, { pageSize: 2, pageToken });
      assert.ok(page.events.length <= 2);
      pages.push(page.events);
      pageToken = page.nextPageToken;
    } while (pageToken);
    assert.ok(pages.length > 1, "expected more than one page");

    const seqs = pages.flat().map((event) => event.seq);
    assert.deepEqual(seqs, seqs.map((_, i) => BigInt(i + 1)));
    const all = [];
    for await (const event of mesh.allEvents(sessionId, { pageSize: 3 })) {
      all.push(event.seq);
    }
    assert.deepEqual(all, seqs);
  });

  test("following a session from a seq replays the events after it", async () => {
    const { events } = await mesh.listEvents(sessionId, { pageSize: 1000 });
    const last = events.at(-1)!.seq;
    const abort = new AbortController();
    const followed: bigint[] = [];
    try {
      for await (const event of mesh.followSession(sessionId, 2n, abort.signal)) {
        followed.push(event.seq);
        if (event.seq === last) {
          abort.abort();
        }
      }
    } catch (error) {
      assert.ok(error instanceof AgentMeshError && error.code === Code.Canceled, String(error));
    }
    assert.deepEqual(followed, events.slice(2).map((event) => event.seq));
  });
});
