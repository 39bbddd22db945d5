// Local SQS emulator for junban's stack: `node server.mjs PORT`.
// Creates junban's queues (orders, results and their DLQs with a redrive policy,
// maxReceiveCount 5) at start, so the stack is usable as soon as it listens.
import { createSqsServer } from "local-aws-sqs";

const port = Number(process.argv[2] || process.env.PORT || 9324);
const maxReceiveCount = process.env.JUNBAN_MAX_RECEIVE_COUNT || "5";
const arn = (name) => `arn:aws:sqs:us-east-1:123456789012:${name}`;
const redrive = (dlq) =>
  JSON.stringify({ deadLetterTargetArn: arn(dlq), maxReceiveCount });

const queues = [
  { QueueName: "orders-dlq", Attributes: { MessageRetentionPeriod: "1209600" } },
  { QueueName: "results-dlq", Attributes: { MessageRetentionPeriod: "1209600" } },
  { QueueName: "orders", Attributes: { VisibilityTimeout: "60", RedrivePolicy: redrive("orders-dlq") } },
  { QueueName: "results", Attributes: { VisibilityTimeout: "60", RedrivePolicy: redrive("results-dlq") } },
];

const server = await createSqsServer({
  port,
  hostname: "127.0.0.1",
  emulateQueueCreationLifecycle: false,
  queues,
});
console.log(`local-aws-sqs listening on http://127.0.0.1:${port}`);

const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
