// @aws-sdk/client-sqs (v3) and sqs-consumer against a KQS gateway (tests/clients/test_clients_node_go.py).
// Usage: node roundtrip.cjs <endpoint> <queue name>; prints one JSON object of observations.
"use strict";

const crypto = require("node:crypto");
// README: begin node-client
const {
  SQSClient,
  CreateQueueCommand,
  SendMessageCommand,
  ReceiveMessageCommand,
  DeleteMessageCommand,
  SendMessageBatchCommand,
  GetQueueAttributesCommand,
} = require("@aws-sdk/client-sqs");
const { Consumer } = require("sqs-consumer");

function kqsClient(endpoint) {
  return new SQSClient({
    endpoint, // e.g. "http://127.0.0.1:9324"
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
}
// README: end node-client

async function main() {
  const [endpoint, queueName] = process.argv.slice(2);
  const sqs = kqsClient(endpoint);
  const out = {};
  const { QueueUrl: queueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: queueName }));
  out.queue_url = queueUrl;

  const body = "héllo from Node ✓";
  const sent = await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: body,
      MessageAttributes: {
        kind: { DataType: "String", StringValue: "order" },
        count: { DataType: "Number", StringValue: "42" },
        blob: { DataType: "Binary", BinaryValue: Uint8Array.from([0, 1, 2, 255]) },
      },
    }),
  );
  out.sent_id = sent.MessageId;
  out.sent_md5_body = sent.MD5OfMessageBody;
  out.expected_md5_body = crypto.createHash("md5").update(body, "utf8").digest("hex");
  out.sent_md5_attributes = sent.MD5OfMessageAttributes;

  const received = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      WaitTimeSeconds: 10,
      MaxNumberOfMessages: 10,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["ApproximateReceiveCount", "SentTimestamp"],
    }),
  );
  out.received = (received.Messages || []).map((m) => ({
    id: m.MessageId,
    body: m.Body,
    md5_body: m.MD5OfBody,
    md5_attributes: m.MD5OfMessageAttributes,
    attributes: Object.fromEntries(
      Object.entries(m.MessageAttributes || {}).map(([name, v]) => [
        name,
        {
          type: v.DataType,
          value: v.BinaryValue ? Buffer.from(v.BinaryValue).toString("base64") : v.StringValue,
        },
      ]),
    ),
    receive_count: m.Attributes.ApproximateReceiveCount,
    sent_timestamp: Number(m.Attributes.SentTimestamp),
  }));
  for (const m of received.Messages || []) {
    await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
  }

  const batch = await sqs.send(
    new SendMessageBatchCommand({
      QueueUrl: queueUrl,
      Entries: Array.from({ length: 10 }, (_, i) => ({
        Id: `e${i}`,
        MessageBody: `batch-${i}`,
        MessageAttributes: { index: { DataType: "Number", StringValue: String(i) } },
      })),
    }),
  );
  out.batch_sent = (batch.Successful || []).length;
  out.batch_failed = (batch.Failed || []).length;

  // sqs-consumer receives in batches, calls the handler per message and deletes each message
  // after the handler resolves.
  const handled = {};
  let duplicates = 0;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("sqs-consumer did not get 10 messages")), 60000);
    // README: begin node-consumer
    const consumer = Consumer.create({
      queueUrl,
      sqs, // the SQSClient above, pointed at KQS
      batchSize: 10,
      waitTimeSeconds: 1,
      messageAttributeNames: ["All"],
      handleMessage: async (message) => {
        if (message.Body in handled) duplicates += 1;
        handled[message.Body] = message.MessageAttributes.index.StringValue;
        if (Object.keys(handled).length === 10) setImmediate(() => consumer.stop({ abort: false }));
        return message;
      },
    });
    // README: end node-consumer
    consumer.on("error", (err) => reject(err));
    consumer.on("processing_error", (err) => reject(err));
    consumer.on("stopped", () => {
      clearTimeout(timer);
      resolve();
    });
    consumer.start();
  });
  out.consumed = handled;
  out.consumed_duplicates = duplicates;

  // The consumer deletes after each handler; wait until the last deletes landed.
  const deadline = Date.now() + 30000;
  let counts;
  for (;;) {
    const attrs = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: [
          "ApproximateNumberOfMessages",
          "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed",
        ],
      }),
    );
    counts = attrs.Attributes;
    const inQueue =
      Number(counts.ApproximateNumberOfMessages) + Number(counts.ApproximateNumberOfMessagesNotVisible);
    if (inQueue === 0 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  out.final_counts = counts;
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
