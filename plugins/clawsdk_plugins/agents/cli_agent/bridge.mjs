// Forwards 127.0.0.1:PORT inside the sandbox's own network namespace to the recording proxy's
// unix socket (bound in from the host), then runs the command and exits with its status.
// The sandbox keeps no network: only this one socket leads out, to a proxy that needs the token.
// usage: node bridge.mjs SOCKET PORT -- COMMAND ARGS...
import { spawn } from "node:child_process";
import net from "node:net";

const [socketPath, port, sep, ...command] = process.argv.slice(2);
if (!socketPath || !port || sep !== "--" || command.length === 0) {
  console.error("usage: node bridge.mjs SOCKET PORT -- COMMAND ARGS...");
  process.exit(64);
}
const server = net.createServer((client) => {
  const upstream = net.connect(socketPath);
  client.pipe(upstream);
  upstream.pipe(client);
  const end = () => { client.destroy(); upstream.destroy(); };
  client.on("error", end);
  upstream.on("error", end);
  client.on("close", end);
  upstream.on("close", end);
});
server.on("error", (e) => { console.error(`clawsdk bridge: ${e.message}`); process.exit(70); });
server.listen(Number(port), "127.0.0.1", () => {
  const child = spawn(command[0], command.slice(1), { stdio: "inherit" });
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(sig, () => child.kill(sig));
  child.on("error", (e) => { console.error(`clawsdk bridge: ${command[0]}: ${e.message}`); process.exit(127); });
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 + 1 : 1)));
});
