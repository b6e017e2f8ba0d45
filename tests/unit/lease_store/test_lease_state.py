"""Pure lease transitions of `lease_store.state`: facts in, facts or typed errors out."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lease_store import state
from lease_store.errors import MessageNotAvailable, MessageNotInflight, VisibilityTooLong
from lease_store.state import MAX_LEASE_SPAN_MS, MessageState
from tests.support.builders import (
    DAY_MS,
    HOUR_MS,
    MINUTE_MS,
    SECOND_MS,
    T0,
    a_fact,
    an_in_flight_fact,
)

VISIBILITY_MS = 30 * SECOND_MS


# -- derived states -----------------------------------------------------------------------


def test_a_new_message_without_delay_is_visible_from_its_send_time() -> None:
    # Given
    fact = state.new_fact(sent_ms=T0, delay_ms=0)

    # When
    at_send = state.state_at(fact, T0)

    # Then
    assert at_send is MessageState.VISIBLE
    assert fact.receive_count == 0
    assert fact.first_receive_ms == 0
    assert fact.last_receive_ms == 0


def test_a_new_message_with_delay_is_delayed_until_its_delay_ends() -> None:
    # Given
    fact = state.new_fact(sent_ms=T0, delay_ms=10 * SECOND_MS)

    # When
    just_before = state.state_at(fact, T0 + 10 * SECOND_MS - 1)
    at_the_end = state.state_at(fact, T0 + 10 * SECOND_MS)

    # Then
    assert fact.visible_at_ms == T0 + 10 * SECOND_MS
    assert just_before is MessageState.DELAYED
    assert at_the_end is MessageState.VISIBLE


def test_a_received_message_is_in_flight_until_its_lease_ends() -> None:
    # Given
    fact = an_in_flight_fact(received_ms=T0, visibility_ms=VISIBILITY_MS)

    # When
    just_before = state.state_at(fact, T0 + VISIBILITY_MS - 1)
    at_the_end = state.state_at(fact, T0 + VISIBILITY_MS)

    # Then
    assert just_before is MessageState.IN_FLIGHT
    assert at_the_end is MessageState.VISIBLE


def test_a_message_whose_lease_ended_is_visible_not_in_flight() -> None:
    # Given a message received once, long ago
    fact = an_in_flight_fact(received_ms=T0, visibility_ms=VISIBILITY_MS)

    # When
    later = state.state_at(fact, T0 + DAY_MS)

    # Then
    assert later is MessageState.VISIBLE


# -- receive ------------------------------------------------------------------------------


def test_receive_leases_a_visible_message_for_the_visibility_timeout() -> None:
    # Given
    fact = state.new_fact(sent_ms=T0, delay_ms=0)

    # When
    leased = state.receive(fact, now_ms=T0 + 5, visibility_ms=VISIBILITY_MS)

    # Then
    assert leased.visible_at_ms == T0 + 5 + VISIBILITY_MS
    assert state.state_at(leased, T0 + 5) is MessageState.IN_FLIGHT


def test_receive_increments_the_count_and_sets_first_and_last_receive() -> None:
    # Given
    fact = state.new_fact(sent_ms=T0, delay_ms=0)

    # When
    leased = state.receive(fact, now_ms=T0 + 7, visibility_ms=VISIBILITY_MS)

    # Then
    assert leased.receive_count == 1
    assert leased.first_receive_ms == T0 + 7
    assert leased.last_receive_ms == T0 + 7
    assert leased.sent_ms == T0


def test_a_second_receive_keeps_the_first_receive_time_and_moves_the_last() -> None:
    # Given a message received at T0 whose lease has ended
    first = state.receive(state.new_fact(T0, 0), now_ms=T0, visibility_ms=VISIBILITY_MS)

    # When
    second = state.receive(first, now_ms=T0 + MINUTE_MS, visibility_ms=VISIBILITY_MS)

    # Then
    assert second.receive_count == 2
    assert second.first_receive_ms == T0
    assert second.last_receive_ms == T0 + MINUTE_MS
    assert second.visible_at_ms == T0 + MINUTE_MS + VISIBILITY_MS


def test_receive_does_not_change_the_fact_it_was_given() -> None:
    # Given
    fact = state.new_fact(sent_ms=T0, delay_ms=0)

    # When
    state.receive(fact, now_ms=T0, visibility_ms=VISIBILITY_MS)

    # Then
    assert fact == state.new_fact(sent_ms=T0, delay_ms=0)


def test_receive_of_an_in_flight_message_raises_message_not_available() -> None:
    # Given
    fact = an_in_flight_fact(received_ms=T0, visibility_ms=VISIBILITY_MS)

    # When / Then
    with pytest.raises(MessageNotAvailable):
        state.receive(fact, now_ms=T0 + VISIBILITY_MS - 1, visibility_ms=VISIBILITY_MS)


def test_receive_of_a_delayed_message_raises_message_not_available() -> None:
    # Given
    fact = state.new_fact(sent_ms=T0, delay_ms=10 * SECOND_MS)

    # When / Then
    with pytest.raises(MessageNotAvailable):
        state.receive(fact, now_ms=T0 + 10 * SECOND_MS - 1, visibility_ms=VISIBILITY_MS)


def test_receive_with_zero_visibility_leaves_the_message_visible() -> None:
    # Given
    fact = state.new_fact(sent_ms=T0, delay_ms=0)

    # When
    leased = state.receive(fact, now_ms=T0, visibility_ms=0)

    # Then
    assert state.state_at(leased, T0) is MessageState.VISIBLE
    assert leased.receive_count == 1


# -- change visibility --------------------------------------------------------------------


def test_change_visibility_restarts_the_lease_from_now() -> None:
    # Given a message received at T0 for 30 s
    fact = an_in_flight_fact(received_ms=T0, visibility_ms=VISIBILITY_MS)

    # When, 10 s later, its visibility is set to 60 s
    changed = state.change_visibility(
        fact, receipt_epoch=1, now_ms=T0 + 10 * SECOND_MS, visibility_ms=MINUTE_MS
    )

    # Then it becomes visible 60 s after the change, not after the receive
    assert changed.visible_at_ms == T0 + 10 * SECOND_MS + MINUTE_MS
    assert changed.receive_count == fact.receive_count
    assert changed.first_receive_ms == fact.first_receive_ms
    assert changed.last_receive_ms == fact.last_receive_ms


def test_change_visibility_with_the_handle_of_an_earlier_receive_succeeds() -> None:
    # Given a message received twice; the handle of the first receive is superseded
    fact = an_in_flight_fact(received_ms=T0, receive_count=2)

    # When its visibility is set to 0 with the first handle (AWS accepts it)
    changed = state.change_visibility(fact, receipt_epoch=1, now_ms=T0, visibility_ms=0)

    # Then it is visible, its receive count unchanged
    assert state.state_at(changed, T0) is MessageState.VISIBLE
    assert changed.receive_count == 2


def test_change_visibility_with_an_epoch_from_the_future_raises_message_not_available() -> None:
    # Given
    fact = an_in_flight_fact(received_ms=T0, receive_count=2)

    # When / Then
    with pytest.raises(MessageNotAvailable):
        state.change_visibility(fact, receipt_epoch=3, now_ms=T0, visibility_ms=VISIBILITY_MS)


def test_change_visibility_of_a_message_whose_lease_ended_hides_it_again() -> None:
    # Given a received message whose lease has ended, nobody having received it since
    fact = an_in_flight_fact(received_ms=T0, visibility_ms=VISIBILITY_MS)
    now = T0 + VISIBILITY_MS

    # When its visibility is changed with that receive's handle (AWS accepts it)
    changed = state.change_visibility(fact, receipt_epoch=1, now_ms=now, visibility_ms=MINUTE_MS)

    # Then it is in flight again for the new timeout
    assert state.state_at(changed, now) is MessageState.IN_FLIGHT
    assert changed.visible_at_ms == now + MINUTE_MS


def test_change_visibility_of_a_message_never_received_raises_message_not_inflight() -> None:
    # Given a message never received, still in its delay
    fact = state.new_fact(sent_ms=T0, delay_ms=10 * SECOND_MS)

    # When / Then
    with pytest.raises(MessageNotInflight):
        state.change_visibility(fact, receipt_epoch=0, now_ms=T0, visibility_ms=VISIBILITY_MS)


def test_a_lease_ending_past_12_hours_after_the_last_receive_raises_visibility_too_long() -> None:
    # Given a message received at T0 and extended so it is still in flight an hour later
    fact = an_in_flight_fact(received_ms=T0, visibility_ms=2 * HOUR_MS)
    now = T0 + HOUR_MS

    # When / Then the lease may not end even 1 ms past T0 + 12 h
    with pytest.raises(VisibilityTooLong):
        state.change_visibility(
            fact, receipt_epoch=1, now_ms=now, visibility_ms=12 * HOUR_MS - HOUR_MS + 1
        )


def test_a_lease_ending_exactly_12_hours_after_the_last_receive_is_allowed() -> None:
    # Given
    fact = an_in_flight_fact(received_ms=T0, visibility_ms=2 * HOUR_MS)
    now = T0 + HOUR_MS

    # When
    changed = state.change_visibility(
        fact, receipt_epoch=1, now_ms=now, visibility_ms=12 * HOUR_MS - HOUR_MS
    )

    # Then
    assert changed.visible_at_ms == T0 + MAX_LEASE_SPAN_MS
    assert MAX_LEASE_SPAN_MS == 12 * HOUR_MS


def test_the_12_hour_limit_counts_from_the_latest_receive_not_the_first() -> None:
    # Given a message first received a day ago and received again at T0
    fact = replace(an_in_flight_fact(received_ms=T0), first_receive_ms=T0 - DAY_MS, receive_count=2)

    # When
    changed = state.change_visibility(fact, receipt_epoch=2, now_ms=T0, visibility_ms=12 * HOUR_MS)

    # Then
    assert changed.visible_at_ms == T0 + 12 * HOUR_MS


def test_change_visibility_to_zero_makes_the_message_visible_at_once() -> None:
    # Given
    fact = an_in_flight_fact(received_ms=T0, visibility_ms=VISIBILITY_MS)

    # When
    changed = state.change_visibility(fact, receipt_epoch=1, now_ms=T0 + SECOND_MS, visibility_ms=0)

    # Then
    assert changed.visible_at_ms == T0 + SECOND_MS
    assert state.state_at(changed, T0 + SECOND_MS) is MessageState.VISIBLE
    assert state.receive(changed, T0 + SECOND_MS, VISIBILITY_MS).receive_count == 2


# -- retention and redrive ----------------------------------------------------------------

RETENTION_MS = 4 * DAY_MS


@pytest.mark.parametrize(
    ("age_ms", "expired"),
    [
        (0, False),
        (RETENTION_MS - 1, False),
        (RETENTION_MS, True),
        (RETENTION_MS + 1, True),
    ],
)
def test_a_message_expires_once_it_is_as_old_as_the_retention_period(
    age_ms: int, expired: bool
) -> None:
    # Given
    fact = a_fact(sent_ms=T0)

    # When
    result = state.is_expired(fact, now_ms=T0 + age_ms, retention_ms=RETENTION_MS)

    # Then
    assert result is expired


def test_expiry_counts_from_the_send_time_not_from_the_receives() -> None:
    # Given a message received recently but sent long ago
    fact = replace(an_in_flight_fact(received_ms=T0), sent_ms=T0 - RETENTION_MS)

    # When / Then
    assert state.is_expired(fact, now_ms=T0, retention_ms=RETENTION_MS)


@pytest.mark.parametrize(
    ("receive_count", "max_receive_count", "exceeds"),
    [
        (0, 1, False),
        (1, 1, True),
        (2, 3, False),
        (3, 3, True),
        (4, 3, True),
        (1_000, None, False),
    ],
)
def test_one_more_receive_exceeds_max_receives_only_once_the_count_reaches_the_maximum(
    receive_count: int, max_receive_count: int | None, exceeds: bool
) -> None:
    # Given
    fact = a_fact(receive_count=receive_count)

    # When
    result = state.exceeds_max_receives(fact, max_receive_count)

    # Then
    assert result is exceeds
