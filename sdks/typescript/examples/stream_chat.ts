// Streams a delegating chat: `node dist/examples/stream_chat.js` after `npm run build`.
import { AgentMesh } from "../src/index.js";

const mesh = await AgentMesh.signIn(process.env.AGENTMESH_ADDRESS ?? "127.0.0.1:50050",
  process.env.AGENTMESH_EMAIL!, process.env.AGENTMESH_PASSWORD!);
for await (const event of mesh.streamChat("demo/coordinator", "Please process task 42")) {
  const who = [...event.delegationPath, event.agent].join(" > ");
  if (event.kind.case === "textDelta") process.stdout.write(event.kind.value.text);
  if (event.kind.case === "runCompleted") console.log(`\n[${who}] done`);
}
