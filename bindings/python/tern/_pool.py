# SPDX-License-Identifier: MIT
"""A model's session slots, shared by everything in Python that runs on the model.

A model holds n_sessions slots (tern_model_params.n_sessions); each C session (tern_session)
takes one. The pool creates C sessions as they are needed, at most one per slot, and lends
them out: to a stateless call (Llama's completions, Model.embed) for the call's duration, and
to a stateful Session for as long as it stays open. When every slot is lent and one of them
belongs to a Session that is not running anything, that Session is swapped out: its state
(tern_session_state_save: KV cache, position, history, sampler) goes into bytes and the slot
serves the caller; the Session's next call takes a slot again and loads the bytes back. So a
thread never finds the model's slots taken by its own idle objects. Otherwise the caller waits
until a slot is given back, or fails after the pool's timeout.

A C session left by a stateless call keeps its tokens: the next call that starts with the
same tokens reuses them (tern_chat_complete's prefix reuse). A call goes to the free slot
whose last request shares the most with its own; one that matches none takes a slot not
created yet, else the one used longest ago.
"""

import threading
import time
import weakref
from ctypes import byref

from ._capi import Session_p, Status, TernError, api, check


class Slot:
    """One C session of the pool."""

    def __init__(self, handle):
        self.handle = handle
        self.owner = None  # weakref to the stateful Session resident here, or None
        self.busy = False  # a call runs on it
        self.last_used = 0
        # Settings a user left on the C session that the next one must replace ("grammar",
        # "bias"; a Session takes its hook and drafting off when it leaves).
        self.tainted = set()
        self.key = None  # what the last stateless call ran (Pool.acquire's affinity), None after a Session


class Pool:
    """Session slots of one model. `timeout`: seconds a caller waits for a slot (None: as long
    as it takes); `describe`: the model's name for messages."""

    def __init__(self, model_handle, n_slots, timeout, describe):
        self._model = model_handle
        self._n = max(1, n_slots)
        self._reserved = 0  # slots taken in C by sessions of other models drafting on this one
        self._slots = []
        self._cond = threading.Condition()
        self._clock = 0
        self.timeout = timeout
        self._describe = describe
        self._closed = False

    # ---- lending ----
    def acquire(self, owner=None, timeout=None, affinity=None):
        """A slot marked busy, for `owner` (a Session: its own, swapped in when it was swapped
        out) or for a stateless call (owner None). Give it back with release(). affinity(key)
        scores a free slot by the `key` its last stateless user left on it (how much of the new
        prompt it may hold); the highest score wins, then the most recently used."""
        deadline = self._deadline(timeout)
        with self._cond:
            while True:
                self._check_open()
                if owner is not None and owner._slot is not None:
                    slot = owner._slot
                    if not slot.busy:
                        slot.busy = True
                        return slot
                else:
                    slot = self._free_slot_locked(affinity)
                    if slot is not None:
                        slot.busy = True
                        if owner is not None:
                            slot.owner = weakref.ref(owner)
                            slot.key = None
                            owner._slot = slot
                        break
                self._wait_locked(deadline)
        # Swapping in runs outside the lock: the slot is busy, nobody else takes it.
        try:
            if owner is not None:
                owner._swap_in(slot)
            else:
                check(api.tern_session_clear_abort(slot.handle))  # a request a Session's abort() left
        except BaseException:
            with self._cond:
                if owner is not None:
                    slot.owner = None
                    owner._slot = None
                slot.busy = False
                self._cond.notify_all()
            raise
        return slot

    def release(self, slot):
        with self._cond:
            slot.busy = False
            self._clock += 1
            slot.last_used = self._clock
            self._cond.notify_all()

    def lease(self, timeout=None):
        """`with pool.lease() as handle:` a stateless call's C session."""
        return _Lease(self, timeout)

    def disown(self, owner):
        """A closing Session gives its slot back (its tokens stay as a cache)."""
        with self._cond:
            slot = owner._slot
            if slot is None:
                return None
            slot.owner = None
            owner._slot = None
            self._cond.notify_all()
            return slot

    # ---- slots for another model's drafting sessions ----
    def reserve(self, timeout=None):
        """Frees one slot for tern_session_set_draft_model (which takes it in C), swapping out
        or freeing an idle C session when all are created."""
        deadline = self._deadline(timeout)
        with self._cond:
            while True:
                self._check_open()
                if len(self._slots) + self._reserved < self._n:
                    self._reserved += 1
                    return
                slot = self._idle_locked(swappable_only=False)
                if slot is not None:
                    victim = slot.owner() if slot.owner is not None else None
                    if victim is not None:
                        victim._swap_out(slot)
                    self._slots.remove(slot)
                    api.tern_session_free(slot.handle)
                    self._reserved += 1
                    return
                self._wait_locked(deadline)

    def unreserve(self):
        with self._cond:
            self._reserved -= 1
            self._cond.notify_all()

    # ---- inside the lock ----
    def _free_slot_locked(self, affinity):
        """A free slot whose cache holds part of the request (affinity), else a slot not created
        yet, else the free slot used longest ago, else the slot of an idle Session (swapped
        out): caches that may serve a later call stay as long as they can."""
        free = [s for s in self._slots if not s.busy and s.owner is None]
        if free and affinity is not None:
            scored = [(affinity(s.key) if s.key is not None else 0, s.last_used, i) for i, s in enumerate(free)]
            best = max(scored)
            if best[0] > 0:
                return free[best[2]]
        if len(self._slots) + self._reserved < self._n:
            handle = Session_p()
            status = api.tern_session_create(self._model, byref(api.tern_session_default_params()), byref(handle))
            if status == 0:
                slot = Slot(handle)
                self._slots.append(slot)
                return slot
            if status != Status.INVALID_STATE:  # INVALID_STATE: a slot taken outside the pool
                check(status)
        if free:
            return min(free, key=lambda s: s.last_used)
        slot = self._idle_locked(swappable_only=True)
        if slot is not None:
            slot.owner()._swap_out(slot)
            return slot
        return None

    def _idle_locked(self, swappable_only):
        """The least recently used slot nothing runs on whose Session (if any) may be swapped out."""
        idle = []
        for s in self._slots:
            if s.busy:
                continue
            session = s.owner() if s.owner is not None else None
            if s.owner is not None and session is None:
                s.owner = None  # a Session collected without close()
            if swappable_only and session is None:
                continue
            idle.append(s)
        return min(idle, key=lambda s: s.last_used) if idle else None

    def _deadline(self, timeout):
        timeout = self.timeout if timeout is None else timeout
        return None if timeout is None else time.monotonic() + timeout

    def _wait_locked(self, deadline):
        if deadline is None:
            self._cond.wait()
            return
        left = deadline - time.monotonic()
        if left <= 0 or not self._cond.wait(left) and time.monotonic() >= deadline:
            busy = sum(1 for s in self._slots if s.busy)
            raise TernError(Status.INVALID_STATE,
                            "all %d session slots of %s are busy (%d running a call%s); waited %.3g s for one "
                            "(the timeout: Llama(slot_timeout=...) or Model(slot_timeout=...); more slots: "
                            "n_sessions=...)" % (self._n, self._describe, busy,
                                                 ", %d lent for drafting" % self._reserved if self._reserved else "",
                                                 self.timeout if self.timeout is not None else 0))

    def _check_open(self):
        if self._closed:
            raise TernError(Status.INVALID_STATE, "the model is closed")

    # ---- the end ----
    def close(self):
        """Frees every C session (the model's sessions were closed before)."""
        with self._cond:
            self._closed = True
            slots, self._slots = self._slots, []
            self._cond.notify_all()
        for s in slots:
            api.tern_session_free(s.handle)

    def stats(self):
        with self._cond:
            return {"slots": self._n, "created": len(self._slots), "busy": sum(1 for s in self._slots if s.busy),
                    "resident_sessions": sum(1 for s in self._slots if s.owner is not None and s.owner() is not None),
                    "reserved": self._reserved}


class _Lease:
    def __init__(self, pool, timeout):
        self._pool = pool
        self._timeout = timeout
        self._slot = None

    def __enter__(self):
        self._slot = self._pool.acquire(None, self._timeout)
        return self._slot.handle

    def __exit__(self, *exc):
        self._pool.release(self._slot)
