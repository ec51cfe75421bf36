"""``python erase_job.py FAULT CONFIG WHERE``: ``lakesink erase --execute`` of CONFIG in its own process, SIGKILLed at
driver point FAULT (see support.faults.KillAt and lakesink.driver.erase.erase: after_stage, during_commit:MS,
after_intent, after_replace, after_commit, after_delete). test_erase.py runs it as a subprocess."""
import sys

from support.faults import KillAt

from lakesink.config import load_config
from lakesink.driver.erase import erase

if __name__ == "__main__":
    fault, config, where = sys.argv[1], sys.argv[2], sys.argv[3]
    erase(load_config(config), where, execute=True, hooks=KillAt(fault))
    print("erase finished without being killed")
