"""`__kqs_move_tasks` as a gateway reads it: the latest record of each task wins, a tombstone
forgets it, an older record read back late never replaces a newer one."""

from __future__ import annotations

from topology.move_task_log import LoggedTask, MoveTaskLog
from topology.standins import InstantProducer, Log, NullAdmin


def a_log() -> MoveTaskLog:
    log = Log()
    return MoveTaskLog("unused", NullAdmin(log), InstantProducer(log))


def task(task_id: str, source: str, moved: int) -> LoggedTask:
    return LoggedTask(task_id, source, {"status": "RUNNING", "moved": moved})


def test_the_latest_record_of_each_task_is_kept_per_source_queue() -> None:
    tasks = a_log()
    tasks._apply(
        [
            (0, b"t1", task("t1", "dlq-a", 0).encode()),
            (1, b"t2", task("t2", "dlq-b", 0).encode()),
            (2, b"t1", task("t1", "dlq-a", 7).encode()),
        ]
    )
    assert tasks.tasks_of("dlq-a") == [task("t1", "dlq-a", 7)]
    assert tasks.tasks_of("dlq-b") == [task("t2", "dlq-b", 0)]
    assert tasks.tasks_of("dlq-c") == []
    assert tasks.position == 3


def test_a_tombstone_forgets_and_a_late_older_record_is_ignored() -> None:
    tasks = a_log()
    tasks._apply([(4, b"t1", task("t1", "dlq-a", 3).encode()), (5, b"t2", None)])
    tasks._apply([(3, b"t1", task("t1", "dlq-a", 1).encode())])  # read back late
    assert tasks.tasks_of("dlq-a") == [task("t1", "dlq-a", 3)]
    tasks._apply([(6, b"t1", None)])
    assert tasks.tasks_of("dlq-a") == []


def test_an_unreadable_record_is_skipped() -> None:
    tasks = a_log()
    tasks._apply([(0, b"t1", b"not json"), (1, b"t2", task("t2", "dlq-a", 0).encode())])
    assert tasks.tasks_of("dlq-a") == [task("t2", "dlq-a", 0)]
    assert tasks.position == 2


async def test_a_write_is_read_back_at_once() -> None:
    tasks = a_log()
    await tasks.ensure_topic()
    await tasks.write(task("t1", "dlq-a", 2))
    assert tasks.tasks_of("dlq-a") == [task("t1", "dlq-a", 2)]
    await tasks.forget("t1")
    assert tasks.tasks_of("dlq-a") == []


def test_a_follower_hears_every_record_it_reads_even_one_a_newer_record_replaced() -> None:
    # Given a log read whole at start, then followed, with a listener
    tasks = a_log()
    heard: list[LoggedTask] = []
    tasks.listen(heard.append)
    tasks._apply([(0, b"t1", task("t1", "dlq-a", 0).encode())])  # `load`: not told
    tasks.follow()  # not started: records are handed in below

    # When the runner's newer record is in, and then another gateway's older one is read
    cancel = LoggedTask("t1", "dlq-a", {"status": "CANCELLING", "moved": 1})
    tasks._apply([(2, b"t1", task("t1", "dlq-a", 2).encode())])
    tasks._apply([(1, b"t1", cancel.encode()), (3, b"t2", None)])

    # Then the older record does not replace the newer, but the listener heard both
    assert tasks.tasks_of("dlq-a") == [task("t1", "dlq-a", 2)]
    assert heard == [task("t1", "dlq-a", 2), cancel]


async def test_caught_up_is_at_once_when_the_log_is_not_followed() -> None:
    tasks = a_log()
    await tasks.ensure_topic()
    await tasks.write(task("t1", "dlq-a", 2))
    assert await tasks.caught_up()
