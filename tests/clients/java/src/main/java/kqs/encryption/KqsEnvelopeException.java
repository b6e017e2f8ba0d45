package kqs.encryption;

import org.apache.kafka.common.errors.SerializationException;

/**
 * An envelope that does not open: not an envelope, tampered with, or under a master key the
 * reader does not hold (Python's {@code EnvelopeError}). A consumer's {@code poll} raises it
 * inside a {@code RecordDeserializationException} naming the record.
 */
public final class KqsEnvelopeException extends SerializationException {
  private static final long serialVersionUID = 1L;

  public KqsEnvelopeException(String message) {
    super(message);
  }

  public KqsEnvelopeException(String message, Throwable cause) {
    super(message, cause);
  }
}
