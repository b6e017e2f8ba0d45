"""SQS quotas, in one place (values from docs/SQS-BEHAVIOUR.md, "Limits and quotas")."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 1_048_576
# The largest request body the gateway reads: a 1 MiB message or batch whose form encoding is
# up to three times larger, with room to spare. A larger body is RequestEntityTooLarge (413).
MAX_REQUEST_BYTES = 16 * 1024 * 1024
MIN_MESSAGE_BYTES_SETTING = 1_024
MAX_DELAY_S = 900
MAX_VISIBILITY_TIMEOUT_S = 43_200
DEFAULT_VISIBILITY_TIMEOUT_S = 30
MAX_WAIT_TIME_S = 20
MAX_RECEIVE_MESSAGES = 10
MIN_RETENTION_S = 60
MAX_RETENTION_S = 1_209_600
DEFAULT_RETENTION_S = 345_600
MAX_BATCH_ENTRIES = 10
MAX_BATCH_ENTRY_ID_LENGTH = 80
MAX_MESSAGE_ATTRIBUTES = 10
MAX_ATTRIBUTE_NAME_LENGTH = 256
MAX_QUEUE_NAME_LENGTH = 80
MAX_LIST_RESULTS = 1000
MAX_TAGS = 50
MAX_TAG_KEY_LENGTH = 128
MAX_TAG_VALUE_LENGTH = 256
MAX_IN_FLIGHT = 120_000
# A FIFO queue created in high-throughput mode (FifoThroughputLimit perMessageGroupId) gets at
# least this many partitions, its groups spread over them (set at creation: a group must not
# move between partitions later).
HIGH_THROUGHPUT_FIFO_PARTITIONS = 4
MIN_MAX_RECEIVE_COUNT = 1
MAX_MAX_RECEIVE_COUNT = 1000
MAX_REDRIVE_SOURCE_QUEUES = 10  # RedriveAllowPolicy sourceQueueArns with byQueue
MAX_MOVE_MESSAGES_PER_SECOND = 500  # StartMessageMoveTask; also the rate when none is given
MAX_MOVE_TASK_RESULTS = 10  # ListMessageMoveTasks MaxResults (default 1)
QUEUE_RECREATE_COOLDOWN_S = 60
PURGE_COOLDOWN_S = 60
# Kafka keeps a queue topic's records this much longer than MessageRetentionPeriod: the
# lease store expires messages exactly, and the log must not drop one before it does.
RETENTION_MARGIN_MS = 3_600_000

# Queue policies (the seeds' "Special Information for Amazon SQS Policies").
MAX_POLICY_BYTES = 8192
MAX_POLICY_STATEMENTS = 20
