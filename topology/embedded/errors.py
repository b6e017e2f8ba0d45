"""The embedded broker tooling's error."""


class BrokerError(RuntimeError):
    """A broker could not be fetched, started or stopped; the message says what to do."""
