"""``python expire_job.py FAULT CONFIG AGE``: ``lakesink expire --execute`` of CONFIG (``AGE`` e.g. 400d) in its own
process, SIGKILLed at FAULT (see support.faults.KillAt: before_commit, during_commit:MS, after_commit, after_delete).
test_expire.py runs it as a subprocess."""
import sys

from support.faults import KillAt

from lakesink.config import load_config
from lakesink.driver.expire import expire, parse_age

if __name__ == "__main__":
    fault, config, age = sys.argv[1], sys.argv[2], sys.argv[3]
    expire(load_config(config), parse_age(age), age, execute=True, hooks=KillAt(fault))
    print("expire finished without being killed")
