"""What a result folder holds, told by its kind: the one reader that tells the formats apart.

Every folder names its kind in its record: a sweep's manifest.json ("sweep"; older sweeps name
none and are sweeps), a fan-out scenario's fanout.json ("fanout-scenario"), a fleet's fleet.json
(written by fleet/playbook.yml: "fleet"), and a study's results.json (the command that wrote it:
"valkey-evidence", "replication-knee", ...). scripts/recommend dispatches on it."""
import json
import os

# (the record's file, the kind a record that names none is): the order a folder is read in.
RECORDS = (("fleet.json", "fleet"), ("fanout.json", "fanout-scenario"),
           ("manifest.json", "sweep"), ("results.json", None))


class NotAResult(Exception):
    """A folder that holds no record, or one that cannot be read: the message is one line."""


def kind_of(folder):
    """The kind of result `folder` holds; NotAResult says why there is none."""
    if not os.path.isdir(folder):
        raise NotAResult(f"'{folder}' is not a result folder (no such directory)")
    for name, default in RECORDS:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise NotAResult(f"cannot read {path}: {e}") from None
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind or default:
            return kind or default
        raise NotAResult(f"{path} names no kind")
    raise NotAResult(f"'{folder}' is not a result folder (no "
                     f"{', '.join(n for n, _ in RECORDS)} in it)")
