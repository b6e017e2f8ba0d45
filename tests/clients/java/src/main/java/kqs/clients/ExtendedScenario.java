package kqs.clients;

import com.amazon.sqs.javamessaging.AmazonSQSExtendedClient;
import com.amazon.sqs.javamessaging.ExtendedClientConfiguration;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.S3Object;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.Message;

/**
 * The Amazon SQS Extended Client Library 2.x: a 2 MiB body goes to the S3 server, the queue
 * carries a pointer, the receiver gets the whole body back, and deleting the message removes
 * the S3 object.
 */
final class ExtendedScenario {
  static final int LARGE = 2 * 1024 * 1024;

  private ExtendedScenario() {}

  /** The 2 MiB body: the tests compute the same string in Python. */
  static String largeBody() {
    StringBuilder body = new StringBuilder(LARGE);
    for (int i = 0; body.length() < LARGE; i++) {
      body.append(String.format("%08d|", i));
    }
    body.setLength(LARGE);
    return body.toString();
  }

  static void run(
      URI endpoint, String prefix, URI s3Endpoint, String bucket, Map<String, Object> result)
      throws Exception {
    // README: begin java-extended-client
    S3Client s3 =
        S3Client.builder()
            .endpointOverride(s3Endpoint) // any S3-compatible server
            .region(Region.US_EAST_1)
            .credentialsProvider(SdkScenarios.CREDENTIALS) // your S3 credentials
            .forcePathStyle(true)
            .build();
    SqsClient plain = SdkScenarios.syncClient(endpoint); // the SqsClient built above
    SqsClient sqs =
        new AmazonSQSExtendedClient(
            plain, new ExtendedClientConfiguration().withPayloadSupportEnabled(s3, bucket));
    // README: end java-extended-client
    try (s3;
        plain;
        sqs) {
      String url = sqs.createQueue(b -> b.queueName(prefix + "-java-extended")).queueUrl();
      result.put("queue_url", url);
      String large = largeBody();
      result.put("sent_large_sha256", sha256(large));
      sqs.sendMessage(
          b ->
              b.queueUrl(url)
                  .messageBody(large)
                  .messageAttributes(Map.of("kind", SdkScenarios.stringAttr("large"))));
      sqs.sendMessage(
          b ->
              b.queueUrl(url)
                  .messageBody("small body")
                  .messageAttributes(Map.of("kind", SdkScenarios.stringAttr("small"))));
      result.put("s3_keys_after_send", keys(s3, bucket));

      // What the queue itself holds, peeked with a plain client (visibility 0: still visible).
      Map<String, Map<String, Object>> raw = new TreeMap<>();
      long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
      while (raw.size() < 2 && System.nanoTime() < deadline) {
        for (Message m :
            plain
                .receiveMessage(
                    b ->
                        b.queueUrl(url)
                            .maxNumberOfMessages(10)
                            .waitTimeSeconds(2)
                            .visibilityTimeout(0)
                            .messageAttributeNames("All"))
                .messages()) {
          Map<String, Object> d = new LinkedHashMap<>();
          d.put("body_length", m.body().length());
          d.put("body_head", m.body().substring(0, Math.min(200, m.body().length())));
          Map<String, String> attrs = new TreeMap<>();
          m.messageAttributes()
              .forEach((k, v) -> attrs.put(k, v.dataType() + ":" + v.stringValue()));
          d.put("attributes", attrs);
          raw.put(m.messageAttributes().get("kind").stringValue(), d);
        }
      }
      result.put("raw", raw);

      Map<String, Map<String, Object>> received = new TreeMap<>();
      List<String> handles = new ArrayList<>();
      deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
      while (received.size() < 2 && System.nanoTime() < deadline) {
        for (Message m :
            sqs.receiveMessage(
                    b ->
                        b.queueUrl(url)
                            .maxNumberOfMessages(10)
                            .waitTimeSeconds(5)
                            .messageAttributeNames("All"))
                .messages()) {
          Map<String, Object> d = new LinkedHashMap<>();
          d.put("body_length", m.body().length());
          d.put("body_sha256", sha256(m.body()));
          if (m.body().length() < 100) {
            d.put("body", m.body());
          }
          d.put("attribute_names", new ArrayList<>(new TreeMap<>(m.messageAttributes()).keySet()));
          received.put(m.messageAttributes().get("kind").stringValue(), d);
          handles.add(m.receiptHandle());
        }
      }
      result.put("received", received);
      for (String handle : handles) {
        sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(handle));
      }
      result.put("deleted", handles.size());
      result.put("s3_keys_after_delete", keys(s3, bucket));
      result.put("final_counts", SdkScenarios.counts(plain, url));
    }
  }

  static List<String> keys(S3Client s3, String bucket) {
    List<String> keys = new ArrayList<>();
    for (S3Object o : s3.listObjectsV2(b -> b.bucket(bucket)).contents()) {
      keys.add(o.key() + ":" + o.size());
    }
    return keys;
  }

  static String sha256(String s) throws Exception {
    return HexFormat.of()
        .formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
  }
}
