// A FIFO queue through @aws-sdk/client-sqs (v3) against a KQS gateway
// (tests/clients/test_clients_node_go.py): group order, deduplication, a batch, a batch refused
// whole, and a group made available again by ending one message's visibility.
// Usage: node fifo.cjs <endpoint> <queue name without .fifo>; prints one JSON object.
"use strict";

const {
  SQSClient,
  CreateQueueCommand,
  SendMessageCommand,
  SendMessageBatchCommand,
  ReceiveMessageCommand,
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
} = require("@aws-sdk/client-sqs");

async function main() {
  const [endpoint, name] = process.argv.slice(2);
  const sqs = new SQSClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  const out = {};
  const { QueueUrl: queueUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: `${name}.fifo`, Attributes: { FifoQueue: "true" } }),
  );
  out.queue_url = queueUrl;

  const send = (body) =>
    sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: body,
        MessageGroupId: body.split("-")[0],
        MessageDeduplicationId: body,
      }),
    );
  const sent = {};
  for (const body of ["g1-m1", "g2-m1", "g1-m2"]) {
    const answer = await send(body);
    sent[body] = { id: answer.MessageId, sequence: answer.SequenceNumber };
  }
  out.sent = sent;
  out.duplicate = (await send("g1-m1")).MessageId;

  const batch = await sqs.send(
    new SendMessageBatchCommand({
      QueueUrl: queueUrl,
      Entries: ["g2-m2", "g3-m1"].map((body, i) => ({
        Id: `e${i}`,
        MessageBody: body,
        MessageGroupId: body.split("-")[0],
        MessageDeduplicationId: body,
      })),
    }),
  );
  out.batch_sent = (batch.Successful || []).map((e) => [e.Id, Boolean(e.SequenceNumber)]);
  out.batch_failed = (batch.Failed || []).length;

  try {
    await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: [
          { Id: "ok", MessageBody: "g4-m1", MessageGroupId: "g4", MessageDeduplicationId: "g4-m1" },
          { Id: "nogroup", MessageBody: "g4-m2", MessageDeduplicationId: "g4-m2" },
        ],
      }),
    );
    out.refused_batch = null;
  } catch (err) {
    out.refused_batch = { name: err.name, message: err.message };
  }

  const receive = async (visibilityTimeout) => {
    const answer = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: visibilityTimeout,
        MessageSystemAttributeNames: ["MessageGroupId", "SequenceNumber", "MessageDeduplicationId"],
      }),
    );
    return answer.Messages || [];
  };
  const first = await receive(60);
  out.first_receive = first.map((m) => ({
    body: m.Body,
    group: m.Attributes.MessageGroupId,
    sequence: m.Attributes.SequenceNumber,
    deduplication_id: m.Attributes.MessageDeduplicationId,
  }));
  out.while_in_flight = (await receive(60)).map((m) => m.Body);

  // Ending g1-m1's visibility makes it, and so its group, available; g1-m2 stays in flight.
  const handles = Object.fromEntries(first.map((m) => [m.Body, m.ReceiptHandle]));
  await sqs.send(
    new ChangeMessageVisibilityCommand({
      QueueUrl: queueUrl,
      ReceiptHandle: handles["g1-m1"],
      VisibilityTimeout: 0,
    }),
  );
  const again = await receive(60);
  out.after_visibility_ended = again.map((m) => m.Body);
  for (const m of again) handles[m.Body] = m.ReceiptHandle;
  for (const handle of Object.values(handles)) {
    await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: handle }));
  }
  const counts = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
      ],
    }),
  );
  out.final_counts = counts.Attributes;
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
