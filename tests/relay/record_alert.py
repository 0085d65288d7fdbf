"""The command the relay tests run per alert: appends what it was given to a JSON-lines file.

argv[1] is the file; the line holds its other arguments and every INFERFLEET_ALERT_*
variable, so a test sees exactly what a user's command would get. Labels make it
misbehave as a user's command might: ``exit`` exits with that status, ``bytes``
writes bytes that are not UTF-8 and fails, ``raise`` dies of an exception.
"""

from __future__ import annotations

import json
import os
import sys

out, *rest = sys.argv[1:]
alert = {k: v for k, v in os.environ.items() if k.startswith("INFERFLEET_ALERT_")}
with open(out, "a", encoding="utf-8") as handle:
    handle.write(json.dumps({"argv": rest, "env": alert}, sort_keys=True) + "\n")
if alert.get("INFERFLEET_ALERT_LABEL_EXIT"):
    sys.stderr.write("told to fail\n")
    sys.exit(int(alert["INFERFLEET_ALERT_LABEL_EXIT"]))
if alert.get("INFERFLEET_ALERT_LABEL_BYTES"):
    sys.stdout.buffer.write(b"\xff\xfe\x80 not utf-8 \xc3\x28\n")
    sys.stderr.buffer.write(b"bad bytes: \xff\x80\xfe\n")
    sys.exit(5)
if alert.get("INFERFLEET_ALERT_LABEL_RAISE"):
    raise RuntimeError("the command blew up")
