"""The command the relay tests run per alert: appends what it was given to a JSON-lines file.

argv[1] is the file; the line holds its other arguments and every INFERFLEET_ALERT_*
variable, so a test sees exactly what a user's command would get.
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
