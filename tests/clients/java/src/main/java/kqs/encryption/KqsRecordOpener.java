package kqs.encryption;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * Opens the records of an encrypted KQS queue with the deployment's master key file: the Java
 * twin of {@code topology/encryption/reader.py}'s {@code RecordOpener} (the JDK's AES-GCM;
 * kafka-clients for its {@code Headers}). {@link KqsDecryptingDeserializer} wraps it as a
 * consumer's value deserializer.
 *
 * <p>The master key file is the one {@code kqs serve} writes as {@code <data-dir>/master.key}
 * (or a gateway's {@code KQS_MASTER_KEY_FILE}): lines of base64, 32 bytes each, {@code #}
 * comments; every key in it opens (the first wraps new data keys, the others are kept after a
 * rotation). The envelope layout is {@code docs/architecture/encryption.md}'s: "KQE1", a
 * purpose byte, the master key id, the wrapped data key, a 12-byte nonce, then AES-256-GCM
 * ciphertext and tag with everything before the nonce as associated data. Data keys wrapped by
 * AWS KMS ({@code kms:} ids) are not opened here: this reader holds file keys only.
 *
 * <p>Not thread-safe (its cache of unwrapped data keys); one per consumer thread, as Kafka
 * consumers are.
 */
public final class KqsRecordOpener {
  public static final String HEADER_ENCRYPTED = "kqs.encrypted";
  public static final String HEADER_ENCRYPTED_ATTRIBUTES = "kqs.encrypted-attributes";
  private static final byte[] MAGIC = "KQE1".getBytes(StandardCharsets.US_ASCII);
  private static final byte PURPOSE_BODY = 'B';
  private static final byte PURPOSE_ATTRIBUTES = 'A';
  private static final int NONCE_BYTES = 12;
  private static final int TAG_BITS = 128;
  private static final int MASTER_KEY_BYTES = 32;
  // Enough for every queue's current data key; opening is then one AES-GCM decrypt.
  private static final int DATA_KEY_CACHE = 4096;

  private final Map<String, SecretKeySpec> masterKeys = new HashMap<>(); // key id -> key
  private final Map<String, SecretKeySpec> dataKeys =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, SecretKeySpec> eldest) {
          return size() > DATA_KEY_CACHE;
        }
      };

  public KqsRecordOpener(Path masterKeyFile) throws IOException {
    for (String line : Files.readAllLines(masterKeyFile, StandardCharsets.US_ASCII)) {
      String text = line.strip();
      if (text.isEmpty() || text.startsWith("#")) {
        continue;
      }
      byte[] key = Base64.getDecoder().decode(text);
      if (key.length != MASTER_KEY_BYTES) {
        throw new IOException("a master key is 32 bytes, not " + key.length);
      }
      masterKeys.put(keyIdOf(key), new SecretKeySpec(key, "AES"));
    }
    if (masterKeys.isEmpty()) {
      throw new IOException("no master key in " + masterKeyFile);
    }
  }

  /** A master key's id as envelopes name it: {@code topology/encryption/keys.py key_id_of}. */
  public static String keyIdOf(byte[] masterKey) {
    try {
      MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
      sha256.update("kqs master key id:".getBytes(StandardCharsets.US_ASCII));
      return "file:" + HexFormat.of().formatHex(sha256.digest(masterKey)).substring(0, 16);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Whether a record was sealed by KQS (has the {@code kqs.encrypted} header). */
  public static boolean isEncrypted(Headers headers) {
    return headers != null && headers.lastHeader(HEADER_ENCRYPTED) != null;
  }

  /**
   * The record's body in clear: its value opened when the record has the {@code kqs.encrypted}
   * header, else the value as it is (a queue in clear, or a record written before encryption).
   */
  public byte[] body(byte[] value, Headers headers) {
    return value == null || !isEncrypted(headers) ? value : open(value, PURPOSE_BODY);
  }

  /**
   * The message attributes of an encrypted record as the JSON KQS sealed, {@code {name:
   * {"DataType": ..., "StringValue" | "BinaryValue" (base64): ...}}}; null for a record without
   * the {@code kqs.encrypted-attributes} header (a record in clear has its attributes as {@code
   * sqs.attr.<Name>} headers).
   */
  public String attributesJson(Headers headers) {
    Header sealed = headers == null ? null : headers.lastHeader(HEADER_ENCRYPTED_ATTRIBUTES);
    if (sealed == null || sealed.value() == null || sealed.value().length == 0) {
      return null;
    }
    return new String(open(sealed.value(), PURPOSE_ATTRIBUTES), StandardCharsets.UTF_8);
  }

  private byte[] open(byte[] envelope, byte purpose) {
    if (envelope.length < 8 || !Arrays.equals(envelope, 0, 4, MAGIC, 0, 4)) {
      throw new KqsEnvelopeException("not a KQS envelope");
    }
    if (envelope[4] != purpose) {
      throw new KqsEnvelopeException("an envelope of purpose " + (char) envelope[4]);
    }
    int idEnd = 6 + (envelope[5] & 0xff);
    if (envelope.length < idEnd + 2) {
      throw new KqsEnvelopeException("a truncated KQS envelope");
    }
    String keyId = new String(envelope, 6, idEnd - 6, StandardCharsets.US_ASCII);
    int wrappedLength = ((envelope[idEnd] & 0xff) << 8) | (envelope[idEnd + 1] & 0xff);
    int nonceAt = idEnd + 2 + wrappedLength;
    if (envelope.length < nonceAt + NONCE_BYTES + TAG_BITS / 8) {
      throw new KqsEnvelopeException("a truncated KQS envelope");
    }
    byte[] wrapped = Arrays.copyOfRange(envelope, idEnd + 2, nonceAt);
    SecretKeySpec dataKey = dataKey(keyId, wrapped);
    try {
      Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
      cipher.init(
          Cipher.DECRYPT_MODE, dataKey, new GCMParameterSpec(TAG_BITS, envelope, nonceAt, 12));
      cipher.updateAAD(envelope, 0, nonceAt);
      int start = nonceAt + NONCE_BYTES;
      return cipher.doFinal(envelope, start, envelope.length - start);
    } catch (GeneralSecurityException e) {
      throw new KqsEnvelopeException("a KQS envelope failed its authentication tag", e);
    }
  }

  /** The data key a master key wrapped: AES-GCM, nonce first, AAD "kqs data key:" + id. */
  private SecretKeySpec dataKey(String keyId, byte[] wrapped) {
    String cacheKey = keyId + "/" + Base64.getEncoder().encodeToString(wrapped);
    SecretKeySpec cached = dataKeys.get(cacheKey);
    if (cached != null) {
      return cached;
    }
    SecretKeySpec master = masterKeys.get(keyId);
    if (master == null) {
      throw new KqsEnvelopeException("no master key " + keyId + " to open this envelope");
    }
    if (wrapped.length < NONCE_BYTES + TAG_BITS / 8) {
      throw new KqsEnvelopeException("a truncated wrapped data key");
    }
    try {
      Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
      cipher.init(
          Cipher.DECRYPT_MODE, master, new GCMParameterSpec(TAG_BITS, wrapped, 0, NONCE_BYTES));
      cipher.updateAAD(("kqs data key:" + keyId).getBytes(StandardCharsets.US_ASCII));
      byte[] plain = cipher.doFinal(wrapped, NONCE_BYTES, wrapped.length - NONCE_BYTES);
      SecretKeySpec key = new SecretKeySpec(plain, "AES");
      dataKeys.put(cacheKey, key);
      return key;
    } catch (GeneralSecurityException e) {
      throw new KqsEnvelopeException("a data key wrapped by " + keyId + " does not open", e);
    }
  }
}
