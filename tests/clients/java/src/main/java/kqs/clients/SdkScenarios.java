package kqs.clients;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicInteger;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.SdkBytes;
import software.amazon.awssdk.core.interceptor.Context;
import software.amazon.awssdk.core.interceptor.ExecutionAttributes;
import software.amazon.awssdk.core.interceptor.ExecutionInterceptor;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsAsyncClient;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.batchmanager.BatchOverrideConfiguration;
import software.amazon.awssdk.services.sqs.batchmanager.SqsAsyncBatchManager;
import software.amazon.awssdk.services.sqs.model.DeleteMessageBatchRequestEntry;
import software.amazon.awssdk.services.sqs.model.DeleteMessageBatchResponse;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeName;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeNameForSends;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeValue;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;
import software.amazon.awssdk.services.sqs.model.ReceiveMessageResponse;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchRequestEntry;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchResponse;
import software.amazon.awssdk.services.sqs.model.SendMessageResponse;

/** AWS SDK for Java v2: the sync client, and the async client with its batch manager. */
final class SdkScenarios {
  static final Region REGION = Region.US_EAST_1;
  static final StaticCredentialsProvider CREDENTIALS =
      StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test"));

  private SdkScenarios() {}

  // README: begin java-sync-client
  static SqsClient syncClient(URI endpoint) {
    return SqsClient.builder()
        .endpointOverride(endpoint) // e.g. URI.create("http://127.0.0.1:9324")
        .region(Region.US_EAST_1)
        .credentialsProvider(
            StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")))
        .checksumValidationEnabled(true) // verify MD5OfMessageBody / MD5OfMessageAttributes
        .build();
  }
  // README: end java-sync-client

  static void sync(URI endpoint, String prefix, Map<String, Object> result) throws Exception {
    try (SqsClient sqs = syncClient(endpoint)) {
      String url = sqs.createQueue(b -> b.queueName(prefix + "-java-sync")).queueUrl();
      result.put("queue_url", url);

      String body = "héllo from the Java SDK v2 ✓";
      Map<String, MessageAttributeValue> attributes = new LinkedHashMap<>();
      attributes.put("kind", stringAttr("order"));
      attributes.put("count", MessageAttributeValue.builder().dataType("Number").stringValue("42").build());
      attributes.put(
          "blob",
          MessageAttributeValue.builder()
              .dataType("Binary")
              .binaryValue(SdkBytes.fromByteArray(new byte[] {0, 1, 2, (byte) 255}))
              .build());
      attributes.put(
          "price", MessageAttributeValue.builder().dataType("Number.float").stringValue("9.99").build());
      SendMessageResponse sent =
          sqs.sendMessage(
              b ->
                  b.queueUrl(url)
                      .messageBody(body)
                      .messageAttributes(attributes)
                      .messageSystemAttributes(
                          Map.of(
                              MessageSystemAttributeNameForSends.AWS_TRACE_HEADER,
                              MessageSystemAttributeValue.builder()
                                  .dataType("String")
                                  .stringValue("Root=1-5759e988-bd862e3fe1be46a994272793")
                                  .build())));
      result.put("sent_id", sent.messageId());
      result.put("sent_md5_body", sent.md5OfMessageBody());
      result.put("expected_md5_body", md5Hex(body));
      result.put("sent_md5_attributes", sent.md5OfMessageAttributes());

      ReceiveMessageResponse first =
          sqs.receiveMessage(
              b ->
                  b.queueUrl(url)
                      .maxNumberOfMessages(10)
                      .waitTimeSeconds(10)
                      .messageAttributeNames("All")
                      .messageSystemAttributeNames(MessageSystemAttributeName.ALL));
      result.put("first_receive", describe(first.messages()));
      Message message = first.messages().get(0);
      // Back to visible at once, then received again: the receive count goes up.
      sqs.changeMessageVisibility(
          b -> b.queueUrl(url).receiptHandle(message.receiptHandle()).visibilityTimeout(0));
      ReceiveMessageResponse second =
          sqs.receiveMessage(
              b ->
                  b.queueUrl(url)
                      .waitTimeSeconds(10)
                      .messageAttributeNames("kind")
                      .messageSystemAttributeNames(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT));
      result.put("second_receive", describe(second.messages()));
      sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(second.messages().get(0).receiptHandle()));

      List<SendMessageBatchRequestEntry> entries = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        entries.add(
            SendMessageBatchRequestEntry.builder()
                .id("e" + i)
                .messageBody("batch-" + i)
                .messageAttributes(
                    Map.of(
                        "index",
                        MessageAttributeValue.builder().dataType("Number").stringValue(Integer.toString(i)).build()))
                .build());
      }
      SendMessageBatchResponse batch = sqs.sendMessageBatch(b -> b.queueUrl(url).entries(entries));
      result.put("batch_sent", batch.successful().size());
      result.put("batch_failed", batch.failed().size());

      Map<String, String> indexByBody = new TreeMap<>();
      List<DeleteMessageBatchRequestEntry> deletes = new ArrayList<>();
      long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
      int received = 0;
      while (indexByBody.size() < 10 && System.nanoTime() < deadline) {
        for (Message m :
            sqs.receiveMessage(
                    b -> b.queueUrl(url).maxNumberOfMessages(10).waitTimeSeconds(5).messageAttributeNames("index"))
                .messages()) {
          received++;
          indexByBody.put(m.body(), m.messageAttributes().get("index").stringValue());
          deletes.add(
              DeleteMessageBatchRequestEntry.builder()
                  .id("d" + deletes.size())
                  .receiptHandle(m.receiptHandle())
                  .build());
        }
      }
      result.put("batch_received", received);
      result.put("batch_index_by_body", indexByBody);
      DeleteMessageBatchResponse deleted =
          sqs.deleteMessageBatch(b -> b.queueUrl(url).entries(deletes));
      result.put("batch_deleted", deleted.successful().size());
      result.put("batch_delete_failed", deleted.failed().size());
      result.put("final_counts", counts(sqs, url));
      result.put(
          "final_receive",
          sqs.receiveMessage(b -> b.queueUrl(url).waitTimeSeconds(1)).messages().size());
    }
  }

  /** Counts each SDK operation the client sends, to see what the batch manager did. */
  static final class OperationCounter implements ExecutionInterceptor {
    final Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();

    @Override
    public void beforeExecution(Context.BeforeExecution context, ExecutionAttributes attributes) {
      String name = context.request().getClass().getSimpleName().replaceFirst("Request$", "");
      counts.computeIfAbsent(name, k -> new AtomicInteger()).incrementAndGet();
    }

    Map<String, Integer> snapshot() {
      Map<String, Integer> out = new TreeMap<>();
      counts.forEach((k, v) -> out.put(k, v.get()));
      return out;
    }
  }

  static void asyncBatch(URI endpoint, String prefix, Map<String, Object> result) throws Exception {
    int total = 300;
    OperationCounter counter = new OperationCounter();
    // README: begin java-async-batch
    ScheduledExecutorService scheduler = Executors.newScheduledThreadPool(2);
    SqsAsyncClient sqs =
        SqsAsyncClient.builder()
            .endpointOverride(endpoint)
            .region(Region.US_EAST_1)
            .credentialsProvider(
                StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")))
            .overrideConfiguration(o -> o.addExecutionInterceptor(counter)) // the test counts calls
            .build();
    SqsAsyncBatchManager batches =
        SqsAsyncBatchManager.builder()
            .client(sqs)
            .scheduledExecutor(scheduler)
            .overrideConfiguration(
                BatchOverrideConfiguration.builder()
                    .sendRequestFrequency(Duration.ofMillis(50))
                    .receiveMessageAttributeNames(List.of("n"))
                    .build())
            .build();
    // README: end java-async-batch
    try {
      String url = sqs.createQueue(b -> b.queueName(prefix + "-java-async")).join().queueUrl();
      result.put("queue_url", url);
      List<CompletableFuture<SendMessageResponse>> sends = new ArrayList<>();
      for (int i = 0; i < total; i++) {
        int n = i;
        sends.add(
            batches.sendMessage(
                b ->
                    b.queueUrl(url)
                        .messageBody("async-" + n)
                        .messageAttributes(
                            Map.of(
                                "n",
                                MessageAttributeValue.builder()
                                    .dataType("Number")
                                    .stringValue(Integer.toString(n))
                                    .build()))));
      }
      Set<String> ids = new HashSet<>();
      for (CompletableFuture<SendMessageResponse> f : sends) {
        ids.add(f.join().messageId());
      }
      result.put("sent_unique_ids", ids.size());

      Set<String> bodies = new HashSet<>();
      int received = 0;
      int mismatched = 0;
      List<CompletableFuture<?>> deletes = new ArrayList<>();
      long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
      while (bodies.size() < total && System.nanoTime() < deadline) {
        ReceiveMessageResponse response =
            batches
                .receiveMessage(
                    b -> b.queueUrl(url).maxNumberOfMessages(10).waitTimeSeconds(2).messageAttributeNames("n"))
                .join();
        for (Message m : response.messages()) {
          received++;
          bodies.add(m.body());
          MessageAttributeValue n = m.messageAttributes().get("n");
          if (n == null || !m.body().equals("async-" + n.stringValue())) {
            mismatched++;
          }
          deletes.add(batches.deleteMessage(b -> b.queueUrl(url).receiptHandle(m.receiptHandle())));
        }
      }
      int deleted = 0;
      for (CompletableFuture<?> f : deletes) {
        f.join();
        deleted++;
      }
      result.put("received", received);
      result.put("received_unique_bodies", bodies.size());
      result.put("attribute_mismatches", mismatched);
      result.put("deleted", deleted);
      Set<String> expected = new HashSet<>();
      for (int i = 0; i < total; i++) {
        expected.add("async-" + i);
      }
      result.put("bodies_equal_sent", bodies.equals(expected));
      batches.close();
      result.put("operations", counter.snapshot());
      try (SqsClient sync = syncClient(endpoint)) {
        result.put("final_counts", counts(sync, url));
      }
    } finally {
      batches.close();
      sqs.close();
      scheduler.shutdownNow();
    }
  }

  static MessageAttributeValue stringAttr(String value) {
    return MessageAttributeValue.builder().dataType("String").stringValue(value).build();
  }

  static Map<String, String> counts(SqsClient sqs, String url) {
    Map<String, String> out = new TreeMap<>();
    sqs.getQueueAttributes(
            b ->
                b.queueUrl(url)
                    .attributeNames(
                        QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES,
                        QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE,
                        QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_DELAYED))
        .attributesAsStrings()
        .forEach(out::put);
    return out;
  }

  static List<Map<String, Object>> describe(List<Message> messages) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Message m : messages) {
      Map<String, Object> d = new LinkedHashMap<>();
      d.put("id", m.messageId());
      d.put("body", m.body());
      d.put("md5_body", m.md5OfBody());
      d.put("md5_attributes", m.md5OfMessageAttributes());
      Map<String, Object> attrs = new TreeMap<>();
      m.messageAttributes()
          .forEach(
              (name, value) -> {
                Map<String, Object> a = new LinkedHashMap<>();
                a.put("type", value.dataType());
                a.put(
                    "value",
                    value.binaryValue() != null
                        ? Base64.getEncoder().encodeToString(value.binaryValue().asByteArray())
                        : value.stringValue());
                attrs.put(name, a);
              });
      d.put("attributes", attrs);
      d.put("system", new TreeMap<>(m.attributesAsStrings()));
      out.add(d);
    }
    return out;
  }

  static String md5Hex(String s) throws Exception {
    byte[] digest = MessageDigest.getInstance("MD5").digest(s.getBytes(StandardCharsets.UTF_8));
    StringBuilder hex = new StringBuilder();
    for (byte b : digest) {
      hex.append(String.format("%02x", b));
    }
    return hex.toString();
  }
}
