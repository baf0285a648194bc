"""ModelState changes only through its one transition: what it sets, what it keeps."""

from __future__ import annotations

from model_sync.agent.state import ModelState
from model_sync.records.codec import ReplicaState


def test_a_transition_sets_what_it_names_and_keeps_the_rest() -> None:
    st = ModelState(
        pin_etag="e1",
        pin_text="t1",
        pinned=(1,),
        serving=(1,),
        state=ReplicaState.READY,
        error=None,
        rejected_etag="e0",
    )
    st.transition(ReplicaState.LOADING, pin=("e2", "t2"), pinned=(2,), changed_at=5.0)
    assert (st.pin_etag, st.pin_text, st.pinned, st.serving, st.state, st.changed_at) == (
        "e2",
        "t2",
        (2,),
        (1,),
        ReplicaState.LOADING,
        5.0,
    )
    assert st.rejected_etag == "e0"  # left out: kept
    assert st.error is None


def test_none_is_a_value_for_the_nullable_fields() -> None:
    st = ModelState(error="boom", rejected_etag="e", rejected_text="t")
    st.transition(error=None, rejected_text=None)
    assert (st.error, st.rejected_etag, st.rejected_text) == (None, "e", None)
    assert st.state is ReplicaState.PENDING  # no state named: unchanged


def test_failed_reasons_accumulate_and_serving_may_become_empty() -> None:
    st = ModelState(serving=(3,))
    st.transition(ReplicaState.FAILED, failed={4: "bad"}, error="version 4 rejected: bad")
    st.transition(failed={5: "worse"}, serving=())
    assert st.failed == {4: "bad", 5: "worse"}
    assert st.serving == ()
    assert st.state is ReplicaState.FAILED


def test_a_state_given_as_its_string_is_stored_as_the_enum() -> None:
    st = ModelState()
    st.transition("READY")  # type: ignore[arg-type]
    assert st.state is ReplicaState.READY
