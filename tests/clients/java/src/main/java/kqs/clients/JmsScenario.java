package kqs.clients;

import com.amazon.sqs.javamessaging.AmazonSQSMessagingClientWrapper;
import com.amazon.sqs.javamessaging.ProviderConfiguration;
import com.amazon.sqs.javamessaging.SQSConnection;
import com.amazon.sqs.javamessaging.SQSConnectionFactory;
import com.amazon.sqs.javamessaging.SQSMessageConsumerPrefetch;
import com.amazon.sqs.javamessaging.SQSSession;
import jakarta.jms.BytesMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.ObjectMessage;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import java.net.URI;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import software.amazon.awssdk.services.sqs.SqsClient;

/**
 * The Amazon SQS Java Messaging Library (Jakarta Messaging): Text, Bytes and Object messages
 * with typed properties under CLIENT_ACKNOWLEDGE, per-message UNORDERED_ACKNOWLEDGE, and an
 * asynchronous MessageListener.
 */
final class JmsScenario {
  private JmsScenario() {}

  static void run(URI endpoint, String prefix, Map<String, Object> result) throws Exception {
    // Each consumer's prefetch thread long-polls for 20 s, and closing a consumer waits for
    // that receive to return: on an empty queue, 20 s per consumer (as on SQS). The library
    // has no setting for it; 2 s keeps the three consumers' closes short.
    java.lang.reflect.Field waitTime =
        SQSMessageConsumerPrefetch.class.getDeclaredField("WAIT_TIME_SECONDS");
    waitTime.setAccessible(true);
    waitTime.setInt(null, 2);
    try (SqsClient sqs = SdkScenarios.syncClient(endpoint)) {
      // README: begin jms
      // sqs: an SqsClient built as in "Connect from Java"
      SQSConnectionFactory factory = new SQSConnectionFactory(new ProviderConfiguration(), sqs);
      SQSConnection connection = factory.createConnection();
      AmazonSQSMessagingClientWrapper wrapper = connection.getWrappedAmazonSQSClient();
      // README: end jms
      try {
        String typed = prefix + "-jms-typed";
        String unordered = prefix + "-jms-unordered";
        String listened = prefix + "-jms-listener";
        List<String> urls = new ArrayList<>();
        for (String name : List.of(typed, unordered, listened)) {
          if (!wrapper.queueExists(name)) {
            wrapper.createQueue(name);
          }
          urls.add(wrapper.getQueueUrl(name).queueUrl());
        }
        result.put("queue_urls", urls);
        connection.start();
        result.put("client_acknowledge", clientAcknowledge(connection, typed, sqs, urls.get(0)));
        result.put("unordered_acknowledge", unordered(connection, unordered, sqs, urls.get(1)));
        result.put("listener", listener(connection, listened));
      } finally {
        connection.close();
      }
      List<Map<String, String>> finalCounts = new ArrayList<>();
      for (String url :
          List.of(
              wrapper(result).get(0), wrapper(result).get(1), wrapper(result).get(2))) {
        finalCounts.add(SdkScenarios.counts(sqs, url));
      }
      result.put("final_counts", finalCounts);
    }
  }

  @SuppressWarnings("unchecked")
  private static List<String> wrapper(Map<String, Object> result) {
    return (List<String>) result.get("queue_urls");
  }

  private static Map<String, Object> clientAcknowledge(
      SQSConnection connection, String name, SqsClient sqs, String url) throws Exception {
    Map<String, Object> out = new LinkedHashMap<>();
    Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
    Queue queue = session.createQueue(name);
    MessageProducer producer = session.createProducer(queue);

    TextMessage text = session.createTextMessage("jms text ✓");
    text.setStringProperty("strProp", "hello");
    text.setIntProperty("intProp", 42);
    text.setLongProperty("longProp", 9_000_000_000L);
    text.setBooleanProperty("boolProp", true);
    text.setDoubleProperty("doubleProp", 2.5);
    text.setFloatProperty("floatProp", 1.25f);
    text.setShortProperty("shortProp", (short) 7);
    text.setByteProperty("byteProp", (byte) -3);
    producer.send(text);

    BytesMessage bytes = session.createBytesMessage();
    byte[] payload = new byte[256];
    for (int i = 0; i < payload.length; i++) {
      payload[i] = (byte) i;
    }
    bytes.writeBytes(payload);
    bytes.setIntProperty("intProp", -1);
    producer.send(bytes);

    ObjectMessage object =
        session.createObjectMessage(new ArrayList<>(List.of("a", 1, 2.5, Map.of("k", "v"))));
    object.setStringProperty("strProp", "object");
    producer.send(object);

    MessageConsumer consumer = session.createConsumer(queue);
    List<Map<String, Object>> received = new ArrayList<>();
    Message last = null;
    for (int i = 0; i < 3; i++) {
      Message m = consumer.receive(20_000);
      if (m == null) {
        break;
      }
      last = m;
      Map<String, Object> d = new LinkedHashMap<>();
      d.put("jms_type", m.getClass().getSimpleName());
      d.put("properties", properties(m));
      d.put("redelivered", m.getJMSRedelivered());
      d.put("message_id_prefix", m.getJMSMessageID().startsWith("ID:"));
      if (m instanceof TextMessage t) {
        d.put("text", t.getText());
      } else if (m instanceof BytesMessage b) {
        byte[] read = new byte[(int) b.getBodyLength()];
        b.readBytes(read);
        List<Integer> values = new ArrayList<>();
        for (byte x : read) {
          values.add(x & 0xff);
        }
        d.put("bytes", values);
      } else if (m instanceof ObjectMessage o) {
        d.put("object", String.valueOf(o.getObject()));
        d.put("object_class", o.getObject().getClass().getName());
      }
      received.add(d);
    }
    out.put("received", received);
    // Before the acknowledgement all three are in flight on the queue.
    out.put("counts_before_ack", SdkScenarios.counts(sqs, url));
    if (last != null) {
      last.acknowledge(); // CLIENT_ACKNOWLEDGE: acknowledges every message the session received
    }
    out.put("counts_after_ack", SdkScenarios.counts(sqs, url));
    consumer.close();
    session.close();
    return out;
  }

  private static Map<String, Object> unordered(
      SQSConnection connection, String name, SqsClient sqs, String url) throws Exception {
    Map<String, Object> out = new LinkedHashMap<>();
    Session session = connection.createSession(false, SQSSession.UNORDERED_ACKNOWLEDGE);
    Queue queue = session.createQueue(name);
    MessageProducer producer = session.createProducer(queue);
    for (int i = 0; i < 5; i++) {
      TextMessage t = session.createTextMessage("unordered-" + i);
      t.setIntProperty("seq", i);
      producer.send(t);
    }
    MessageConsumer consumer = session.createConsumer(queue);
    Map<Integer, Message> bySeq = new TreeMap<>();
    for (int i = 0; i < 5; i++) {
      Message m = consumer.receive(20_000);
      if (m == null) {
        break;
      }
      bySeq.put(m.getIntProperty("seq"), m);
    }
    out.put("received_seqs", new ArrayList<>(bySeq.keySet()));
    // Acknowledge only the even ones: each acknowledgement deletes just its own message.
    for (int seq : List.of(0, 2, 4)) {
      bySeq.get(seq).acknowledge();
    }
    out.put("counts_after_even_acks", SdkScenarios.counts(sqs, url));
    for (int seq : List.of(1, 3)) {
      bySeq.get(seq).acknowledge();
    }
    out.put("counts_after_all_acks", SdkScenarios.counts(sqs, url));
    consumer.close();
    session.close();
    return out;
  }

  private static Map<String, Object> listener(SQSConnection connection, String name)
      throws Exception {
    Map<String, Object> out = new LinkedHashMap<>();
    int total = 20;
    Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
    Queue queue = session.createQueue(name);
    MessageProducer producer = session.createProducer(queue);
    List<String> seen = Collections.synchronizedList(new ArrayList<>());
    CountDownLatch latch = new CountDownLatch(total);
    MessageConsumer consumer = session.createConsumer(queue);
    consumer.setMessageListener(
        message -> {
          try {
            seen.add(((TextMessage) message).getText() + "#" + message.getIntProperty("seq"));
          } catch (Exception e) {
            seen.add("error: " + e);
          }
          latch.countDown();
        });
    for (int i = 0; i < total; i++) {
      TextMessage t = session.createTextMessage("listened-" + i);
      t.setIntProperty("seq", i);
      producer.send(t);
    }
    out.put("all_arrived", latch.await(60, TimeUnit.SECONDS));
    // AUTO_ACKNOWLEDGE deletes after onMessage returns; closing waits for the listener.
    consumer.close();
    session.close();
    List<String> sorted = new ArrayList<>(seen);
    Collections.sort(sorted);
    out.put("received", sorted);
    return out;
  }

  private static Map<String, Object> properties(Message m) throws Exception {
    Map<String, Object> props = new TreeMap<>();
    Enumeration<?> names = m.getPropertyNames();
    while (names.hasMoreElements()) {
      String name = (String) names.nextElement();
      if (name.startsWith("JMS")) {
        continue; // the provider's own JMSX* properties
      }
      Object value = m.getObjectProperty(name);
      Map<String, Object> typed = new LinkedHashMap<>();
      typed.put("class", value.getClass().getSimpleName());
      typed.put("value", String.valueOf(value));
      props.put(name, typed);
    }
    return props;
  }
}
