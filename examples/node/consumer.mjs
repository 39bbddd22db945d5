// A shop's consumer in Node.js: reads junban's outbound events from a queue subscribed to
// the outbound topic (docs/outbound.md), with or without SNS's raw delivery, or results
// from the results queue. It keeps what it knows of version 1 and ignores fields it does
// not know (fields are only added within a version); a message of another version is
// reported, not applied. Each message read is deleted.
// Usage: node consumer.mjs QUEUE_URL COUNT [WAIT_SECONDS]
// Prints one JSON line per message: {"kind", "version", "entity", "seq", "id"} for an
// outbound event, {"type", "outcome", "entity", "event_id"} for a result.
import { SQSClient, ReceiveMessageCommand, DeleteMessageCommand } from '@aws-sdk/client-sqs';

const VERSION = '1';

// unwrap returns the message's JSON: an SNS notification's Message, or the body itself.
export function unwrap(body) {
  const m = JSON.parse(body);
  if (m.Type === 'Notification' && typeof m.Message === 'string' && m.TopicArn) {
    return JSON.parse(m.Message);
  }
  return m;
}

// summary is what this consumer takes of a message, or {skipped, reason} when it cannot.
export function summary(m) {
  if (m.kind !== undefined) {
    if (m.version !== VERSION) return { skipped: true, reason: `version ${m.version}`, id: m.id };
    return { kind: m.kind, version: m.version, entity: m.entity, seq: m.seq, id: m.id };
  }
  if (m.outcome !== undefined) {
    return { type: m.type, outcome: m.outcome, entity: m.entity, event_id: m.event_id };
  }
  return { skipped: true, reason: 'neither an outbound event nor a result' };
}

const [queueUrl, countArg, waitArg] = process.argv.slice(2);
const count = Number(countArg);
if (!queueUrl || !(count > 0)) {
  console.error('usage: node consumer.mjs QUEUE_URL COUNT [WAIT_SECONDS]');
  process.exit(2);
}
const deadline = Date.now() + 1000 * Number(waitArg ?? 30);
// The queue's URL names the queue, not the endpoint: a local emulator's URL names a host
// that only the emulator knows.
const client = new SQSClient({ useQueueUrlAsEndpoint: false });
let read = 0;
try {
  while (read < count && Date.now() < deadline) {
    const out = await client.send(new ReceiveMessageCommand({
      QueueUrl: queueUrl, MaxNumberOfMessages: Math.min(10, count - read), WaitTimeSeconds: 1,
    }));
    for (const msg of out.Messages ?? []) {
      console.log(JSON.stringify(summary(unwrap(msg.Body))));
      await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: msg.ReceiptHandle }));
      read++;
    }
  }
} catch (err) {
  console.error(`consumer: ${err.name}: ${err.message}`);
  process.exit(1);
} finally {
  client.destroy();
}
if (read < count) {
  console.error(`consumer: read ${read} of ${count} messages`);
  process.exit(1);
}
