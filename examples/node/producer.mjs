// A shop's producer in Node.js: sends an order.placed to junban's orders queue as the
// order-worker takes it (docs/events.md): the envelope with its version, the data, and on
// a FIFO queue (a URL ending .fifo) the group and deduplication ids junban's own senders
// give. The endpoint and region come from the SDK's usual settings (AWS_REGION,
// AWS_ENDPOINT_URL_SQS for a local emulator).
// Usage: node producer.mjs QUEUE_URL LCID EVENT_ID
// Prints {"message_id": ..., "body": ...} on success.
import { createHash } from 'node:crypto';
import { SQSClient, SendMessageCommand } from '@aws-sdk/client-sqs';

// fifoId is an id as SQS takes it: as it is when it is 1..128 printable ASCII characters
// (not beginning "sha256:"), else "sha256:" and its hex SHA-256 (junban's queue.FIFOID).
export function fifoId(s) {
  const ascii = /^[!-~]{1,128}$/.test(s) && !s.startsWith('sha256:');
  return ascii ? s : 'sha256:' + createHash('sha256').update(s, 'utf8').digest('hex');
}

// orderPlaced is an order.placed event of version 1 (docs/contracts/inbound/order.placed.schema.json).
export function orderPlaced(lcid, eventId, now = new Date()) {
  return {
    event_id: eventId,
    type: 'order.placed',
    version: '1',
    lcid,
    occurred_at: now.toISOString(),
    data: {
      mode: 'ship',
      target_date: now.toISOString().slice(0, 10),
      lines: [
        { line_id: '1', sku: 'TEA-GREEN-100G', qty: 2 },
        { line_id: '2', sku: 'TEA-ROASTED-200G', qty: 1 },
      ],
    },
  };
}

// send sends ev to queueUrl; an order's turn (its lcid) is the FIFO group, and
// "{<lcid>}<event_id>" the deduplication id.
export async function send(client, queueUrl, ev) {
  const input = { QueueUrl: queueUrl, MessageBody: JSON.stringify(ev) };
  if (queueUrl.endsWith('.fifo')) {
    input.MessageGroupId = fifoId(ev.lcid);
    input.MessageDeduplicationId = fifoId(`{${ev.lcid}}${ev.event_id}`);
  }
  const out = await client.send(new SendMessageCommand(input));
  return { message_id: out.MessageId, body: input.MessageBody };
}

const [queueUrl, lcid, eventId] = process.argv.slice(2);
if (!queueUrl || !lcid || !eventId) {
  console.error('usage: node producer.mjs QUEUE_URL LCID EVENT_ID');
  process.exit(2);
}
// The queue's URL names the queue, not the endpoint: a local emulator's URL names a host
// that only the emulator knows.
const client = new SQSClient({ useQueueUrlAsEndpoint: false });
try {
  console.log(JSON.stringify(await send(client, queueUrl, orderPlaced(lcid, eventId))));
} catch (err) {
  console.error(`producer: ${err.name}: ${err.message}`);
  process.exit(1);
} finally {
  client.destroy();
}
