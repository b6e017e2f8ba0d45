package kqs.encryption;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * A Kafka value deserializer for an encrypted KQS queue's topic: the body in clear (Python's
 * {@code DecryptingDeserializer}). A record without the {@code kqs.encrypted} header passes
 * through as it is. The attributes: {@code opener().attributesJson(record.headers())}.
 *
 * <pre>{@code
 * props.put("value.deserializer", KqsDecryptingDeserializer.class.getName());
 * props.put(KqsDecryptingDeserializer.MASTER_KEY_FILE_CONFIG, "data/master.key");
 * // or: new KafkaConsumer<>(props, new StringDeserializer(),
 * //          new KqsDecryptingDeserializer(Path.of("data/master.key")))
 * }</pre>
 */
public final class KqsDecryptingDeserializer implements Deserializer<byte[]> {
  /** The consumer property naming the master key file, when made by class name. */
  public static final String MASTER_KEY_FILE_CONFIG = "kqs.master.key.file";

  private KqsRecordOpener opener;

  /** Made by the consumer from its properties: {@link #configure} reads the key file. */
  public KqsDecryptingDeserializer() {}

  public KqsDecryptingDeserializer(Path masterKeyFile) throws IOException {
    this.opener = new KqsRecordOpener(masterKeyFile);
  }

  public KqsDecryptingDeserializer(KqsRecordOpener opener) {
    this.opener = opener;
  }

  @Override
  public void configure(Map<String, ?> configs, boolean isKey) {
    if (opener != null) {
      return;
    }
    Object file = configs.get(MASTER_KEY_FILE_CONFIG);
    if (file == null) {
      throw new ConfigException(MASTER_KEY_FILE_CONFIG + " names no master key file");
    }
    try {
      opener = new KqsRecordOpener(Path.of(file.toString()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public KqsRecordOpener opener() {
    return opener;
  }

  /** Without headers nothing says a record is sealed: the bytes as they are. */
  @Override
  public byte[] deserialize(String topic, byte[] data) {
    return data;
  }

  @Override
  public byte[] deserialize(String topic, Headers headers, byte[] data) {
    return opener.body(data, headers);
  }
}
