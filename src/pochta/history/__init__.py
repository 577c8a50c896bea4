"""What happened over time, for the admin pages: storage samples (logical vs physical bytes),
hourly tallies (verdicts, phishing signs, complaints by shingle, failed logins) and the leak
audits' figures.

    store = SQLiteHistory(data / "history.sqlite3")     # or MemoryHistory(), or
                                                        # postgres.PostgresHistory(pool)
                                                        # (every loader's); app.py picks
    recorder = Recorder(store, sample=take_sample)      # an Activity the mailbox reports to
    recorder.start()                                    # flushes and samples in a thread
    recorder.delivered("phishing", ["PHISH_URGENCY"], copies=1)
    recorder.close()                                    # writes what is buffered

The mailbox reports to the recorder as things happen (``pochta.types.Activity``); the recorder
adds events up in memory by hour and writes them every ``flush_seconds``, so a delivery never
waits for a write. A crash loses at most that many seconds of tallies.
"""

from pochta.history.memory import MemoryHistory
from pochta.history.recorder import Recorder
from pochta.history.sqlite import SQLiteHistory

__all__ = ["MemoryHistory", "Recorder", "SQLiteHistory"]
