package kqs.clients;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import kqs.encryption.KqsDecryptingDeserializer;
import kqs.encryption.KqsEnvelopeException;
import kqs.encryption.KqsRecordOpener;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A Kafka-native reader of KQS queue topics (tests/clients/test_clients_java_decrypt.py): the
 * Kafka Java consumer with {@link KqsDecryptingDeserializer} reads the topics from their start
 * and prints each record as {@code RECORD <json>}: its body in clear, its attributes as the
 * opener gives them (sealed) or its {@code sqs.attr.*} headers (in clear).
 *
 * <p>Arguments: {@code <bootstrap> <master key file> <another deployment's key file> <records
 * expected> <topic>...}; stops at that many records or after 30 s. The first sealed record's
 * attributes are also given to an opener of the other key file, and what it raised printed as
 * {@code REFUSED <json>}.
 */
public final class KafkaReader {
  private KafkaReader() {}

  public static void main(String[] args) throws Exception {
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    int expected = Integer.parseInt(args[3]);
    // The deserializer made by the consumer from its properties, as a user would name it.
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(
        ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, KqsDecryptingDeserializer.class.getName());
    props.put(KqsDecryptingDeserializer.MASTER_KEY_FILE_CONFIG, args[1]);
    KqsRecordOpener opener = new KqsRecordOpener(Path.of(args[1])); // for the attributes
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (int i = 4; i < args.length; i++) {
        for (PartitionInfo info : consumer.partitionsFor(args[i], Duration.ofSeconds(10))) {
          partitions.add(new TopicPartition(info.topic(), info.partition()));
        }
      }
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      KqsRecordOpener stranger = new KqsRecordOpener(Path.of(args[2]));
      boolean refusalShown = false;
      int seen = 0;
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (seen < expected && System.nanoTime() < deadline) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
          System.out.println("RECORD " + Json.write(describe(record, opener)));
          if (!refusalShown && KqsRecordOpener.isEncrypted(record.headers())) {
            System.out.println("REFUSED " + Json.write(refusal(record, stranger)));
            refusalShown = true;
          }
          seen++;
        }
      }
      System.out.flush();
    }
  }

  private static Map<String, Object> describe(
      ConsumerRecord<byte[], byte[]> record, KqsRecordOpener opener) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("topic", record.topic());
    out.put("encrypted", KqsRecordOpener.isEncrypted(record.headers()));
    out.put("body", record.value() == null ? null : utf8(record.value()));
    out.put("attributes_json", opener.attributesJson(record.headers()));
    Map<String, String> clear = new LinkedHashMap<>();
    for (Header header : record.headers()) {
      if (header.key().startsWith("sqs.attr.")) {
        clear.put(header.key().substring("sqs.attr.".length()), utf8(header.value()));
      }
    }
    out.put("clear_attributes", clear);
    return out;
  }

  private static Map<String, Object> refusal(
      ConsumerRecord<byte[], byte[]> record, KqsRecordOpener stranger) {
    Map<String, Object> out = new LinkedHashMap<>();
    try {
      // The value is in clear already (the consumer's deserializer opened it): the sealed
      // attributes header is the record's envelope still as stored.
      stranger.attributesJson(record.headers());
      out.put("error", null);
    } catch (KqsEnvelopeException e) {
      out.put("error", e.getClass().getSimpleName());
      out.put("message", e.getMessage());
    }
    return out;
  }

  private static String utf8(byte[] bytes) {
    return new String(bytes, StandardCharsets.UTF_8);
  }
}
