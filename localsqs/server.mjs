// local-aws-sqs (SQS emulator), the stack's second SQS backend: `node server.mjs PORT`.
// Listens on 127.0.0.1 only, in memory. The queues are created by
// `junbanctl queues create`, which scripts/stack.sh runs once this listens.
import { createSqsServer } from "local-aws-sqs";

const port = Number(process.argv[2] || process.env.PORT || 9324);

const server = await createSqsServer({
  port,
  hostname: "127.0.0.1",
  emulateQueueCreationLifecycle: false,
});
console.log(`local-aws-sqs listening on http://127.0.0.1:${port}`);

const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
