# SPDX-License-Identifier: MIT OR Apache-2.0
"""Testing a 30 s idle timeout in microseconds with tickwheel's manual clock.

The code under test takes the Runtime it uses as a parameter. Production
passes a real one; the tests pass ``tickwheel.Runtime(manual_clock=True)``,
whose clock stands still until ``rt.advance(seconds)`` moves it -- the
callbacks that fall due run inside advance(), on the test's thread, so an
assertion right after it sees their effects. No sleep, no flakiness.

Run with pytest (``pytest examples/test_idle_timeout_example.py``) or with
unittest through the binding's suite (tests/test_examples.py runs every
``test_*`` function of this file). With pytest a fixture is the natural
home of the runtime::

    @pytest.fixture
    def rt():
        with tickwheel.Runtime(manual_clock=True) as rt:
            yield rt
"""

import time

import tickwheel


# ---- the code under test ------------------------------------------------------------
class Session:
    """A connection's session: closed after ``idle_timeout`` seconds without
    traffic. Every message re-arms the timer."""

    def __init__(self, rt: tickwheel.Runtime, idle_timeout: float = 30.0):
        self.idle_timeout = idle_timeout
        self.closed_at = None  # rt.now() when the idle timer closed it
        self._rt = rt
        self._timer = rt.start(idle_timeout, self._on_idle)

    def on_message(self) -> None:
        if self.closed_at is None:
            self._timer.reset(self.idle_timeout)

    def _on_idle(self) -> None:
        self.closed_at = self._rt.now()

    @property
    def closed(self) -> bool:
        return self.closed_at is not None


# ---- its tests ------------------------------------------------------------------------
def test_idle_session_closes_after_30_s():
    with tickwheel.Runtime(manual_clock=True) as rt:
        start = rt.now()
        s = Session(rt)
        rt.advance(29.999)
        assert not s.closed
        rt.advance(0.001)
        assert s.closed
        assert abs(s.closed_at - (start + 30)) < 1e-6  # the callback ran with the clock at its deadline


def test_traffic_keeps_the_session_open():
    with tickwheel.Runtime(manual_clock=True) as rt:
        s = Session(rt)
        for _ in range(10):  # a message every 20 s for 200 s
            rt.advance(20)
            s.on_message()
        assert not s.closed
        assert rt.advance(29.999) == 0
        assert rt.advance(0.001) == 1  # advance() returns the callbacks it ran
        assert s.closed


def test_an_hour_of_sessions_takes_no_real_time():
    begin = time.perf_counter()
    with tickwheel.Runtime(manual_clock=True) as rt:
        sessions = [Session(rt, idle_timeout=30 + i) for i in range(100)]
        for minute in range(60):
            sessions[minute].on_message()  # one of them talks once a minute
            rt.advance(60)
        assert sum(s.closed for s in sessions) == 100
    assert time.perf_counter() - begin < 2.0  # an hour of virtual time: milliseconds of real time
