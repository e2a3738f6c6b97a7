"""An agent process for the concurrency test: recalls and writes in a loop while a pipeline ingests.

Usage: python -m tests.workers.agent_loop BANK ROUNDS OUT_JSON
Writes the ids it created and any errors to OUT_JSON.
"""

import json
import sys
import time
import traceback

from smb_core.model import Concept, stable_id
from smb_core.query import MemoryBank


def main(bank_dir: str, rounds: int, out: str) -> None:
    created, notes, errors, recalls = [], [], [], 0
    started = time.time()
    with MemoryBank.open(bank_dir, read_only=False, agent="looper") as bank:
        for i in range(rounds):
            try:
                bank.recall("Who founded the observatory?", k=3)
                recalls += 1
                concept = Concept(id=stable_id("con", "agent-loop", str(i)), title=f"agent concept {i}")
                created.append(bank.create(concept).id)
                if i % 5 == 0:
                    notes.append(bank.remember(f"Note {i}: the telescope number {i} was calibrated.",
                                               title=f"Calibration note {i}").id)
            except Exception:
                errors.append(traceback.format_exc())
            time.sleep(0.05)
    with open(out, "w") as handle:
        json.dump({"created": created, "notes": notes, "errors": errors, "recalls": recalls,
                   "started": started, "finished": time.time()}, handle)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
