// fauxqs (SQS emulator) for junban's local stack: `node server.mjs PORT`.
// fauxqs's own CLI and startFauxqs() listen on every interface (0.0.0.0); this builds the
// same app and listens on 127.0.0.1 only, in memory (nothing persisted). The queues are
// created by `junbanctl queues create`, which scripts/stack.sh runs once this listens.
import { buildApp } from "fauxqs";

const port = Number(process.argv[2] || process.env.PORT || 4566);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error(`fauxqs: bad port ${process.argv[2]}`);
  process.exit(2);
}

const app = buildApp({ logger: process.env.FAUXQS_LOGGER === "true" });
await app.listen({ port, host: "127.0.0.1" });
console.log(`fauxqs listening on http://127.0.0.1:${port}`);

const stop = () => app.close().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
